// Small helpers shared by the array and reduce op files: error formatting and recording.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace tapegrad::detail
