// log(sum(exp(x))) over one group of a tensor, for the softmax family: shifted by the group's
// maximum so exp never overflows, the exponentials summed pairwise (kernels/pairwise_sum.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/pairwise_sum.hpp"
#include "kernels/vector_math.hpp"

namespace tapegrad::detail {

// The shift of a group x[k * stride], k < n: its maximum, or NaN when it holds one. A
// contiguous group is scanned in four 16-byte vectors of running maxima and NaN flags (a
// scalar running maximum is one dependent instruction per element: 60 % of a long row's
// log_softmax).
template <class T>
T log_sum_exp_shift(const T* x, std::size_t n, std::size_t stride) {
  T m = -std::numeric_limits<T>::infinity();
  bool nan = false;
  std::size_t k = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using Vector = typename SixteenBytes<T>::type;
    constexpr std::size_t kPerVector = 16 / sizeof(T);
    constexpr std::size_t kVectors = 4;
    if (stride == 1 && n >= kVectors * kPerVector) {
      Vector terms;
      using Flags = decltype(terms != terms);
      const Vector lowest = Vector{} + m;  // every lane -inf
      Vector maxima[kVectors] = {lowest, lowest, lowest, lowest};
      Flags seen[kVectors] = {};
      for (; k + kVectors * kPerVector <= n; k += kVectors * kPerVector) {
#pragma GCC unroll 4
        for (std::size_t v = 0; v < kVectors; ++v) {
          std::memcpy(&terms, x + k + v * kPerVector, sizeof terms);
          maxima[v] = terms > maxima[v] ? terms : maxima[v];
          seen[v] |= terms != terms;
        }
      }
      for (std::size_t v = 0; v < kVectors; ++v) {
        for (std::size_t i = 0; i < kPerVector; ++i) {
          m = std::max(m, T(maxima[v][i]));
          nan |= seen[v][i] != 0;
        }
      }
    }
  }
  for (; k < n; ++k) {
    const T v = x[k * stride];
    m = std::max(m, v);
    nan |= v != v;
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

// log(sum(exp(x[k * stride]))) for k < n, one exponential at a time. An empty group gives
// -inf; a group whose maximum is +inf gives +inf, and one holding a NaN NaN (no usable shift).
template <class T>
T log_sum_exp(const T* x, std::size_t n, std::size_t stride) {
  const T m = log_sum_exp_shift(x, n, stride);
  if (!std::isfinite(m)) return m;
  const T sum = pairwise_sum_of<T>(n, [&](std::size_t k) { return std::exp(x[k * stride] - m); });
  return m + std::log(sum);
}

// The same over a contiguous row x[0..n), the exponentials of more than kVectorMathAbove
// elements computed by vector_math (SIMD) a leaf at a time into `scratch` (min(n,
// kPairwiseRunLeaf) elements) and summed from there.
template <class T>
T log_sum_exp_row(const T* x, std::size_t n, T* scratch) {
  if (n <= kVectorMathAbove) return log_sum_exp(x, n, 1);
  const T m = log_sum_exp_shift(x, n, 1);
  if (!std::isfinite(m)) return m;
  const auto exponentials = [&](std::size_t first, std::size_t count, T* out) {
    for (std::size_t k = 0; k < count; ++k) out[k] = x[first + k] - m;
    vector_math(VectorFunction::Exp, out, out, count);
  };
  return m + std::log(pairwise_sum_of_blocks<T>(n, exponentials, scratch));
}

// The scratch log_sum_exp_row needs for rows of n elements.
inline std::size_t log_sum_exp_scratch(std::size_t n) {
  return n > kVectorMathAbove ? std::min(n, kPairwiseRunLeaf) : 0;
}

}  // namespace tapegrad::detail
