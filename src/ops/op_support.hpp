// What the op families share: the forward of a one-input elementwise op, and small formatting helpers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/math_kernels.hpp"
#include "runtime/recording.hpp"
#include "kernels/shape_util.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// "[1, -1, 3]" for any list of integers (axes, begins, sizes, multiples).
template <class Int>
std::string ints_to_string(const std::vector<Int>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(values[i]);
  }
  return out + "]";
}

inline std::vector<std::int64_t> signed_shape(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

// The forward of a one-input elementwise op, recorded as `op`: `function` is its public name
// (for errors), `kernel` maps one element. Floating dtypes only, or every numeric dtype.
template <class Kernel>
Tensor floating_unary_op(const OpDefinition& op, const char* function, const Tensor& x,
                         Kernel kernel) {
  Tensor out = floating_unary(function, x, kernel);
  record(op, {&x}, out);
  return out;
}
template <class Kernel>
Tensor numeric_unary_op(const OpDefinition& op, const char* function, const Tensor& x,
                        Kernel kernel) {
  Tensor out = numeric_unary(function, x, kernel);
  record(op, {&x}, out);
  return out;
}

}  // namespace tapegrad::detail
