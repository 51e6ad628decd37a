// The rule by which a running maximum or minimum takes a new value: reduce_max, reduce_min
// and max pooling's windows share it.
#pragma once

#include <type_traits>

namespace tapegrad::detail {

// Whether `value` replaces `current` as the running maximum (IsMax) or minimum. Strictly
// better: the first extremum in order wins a tie. A NaN compares false both ways, so it is
// taken explicitly (as TF's Max, Min and MaxPool do), and once `current` is a NaN nothing
// replaces it: the first NaN wins. Bitwise, not short-circuit, so that a loop over channels
// or lanes computes one mask and vectorizes its selects.
template <bool IsMax, class T>
inline bool replaces_extremum(T value, T current) {
  const bool better = IsMax ? value > current : value < current;
  if constexpr (std::is_floating_point_v<T>) {
    return (better | (value != value)) & (current == current);
  } else {
    return better;
  }
}

}  // namespace tapegrad::detail
