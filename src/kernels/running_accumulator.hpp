// The type a running value (a sum or product taken in order, which cannot be split pairwise)
// is kept in: float64 for float32 elements, each result rounded once. A running float32 sum's
// error grows with its number of terms (2^23 copies of 0.1f ended 5.7 % off); a float64 one's
// stays far below float32's rounding. Used by the scans (cumsum, cumprod) and
// unsorted_segment_sum (kernels/segment_sum.hpp).
#pragma once

#include <type_traits>

namespace tapegrad::detail {

template <class T>
using RunningAccumulator = std::conditional_t<std::is_same_v<T, float>, double, T>;

}  // namespace tapegrad::detail
