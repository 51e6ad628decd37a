// What the optimizers' steps share.
#pragma once

#include <cstddef>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The elements of one row (axis 0) of `shape`: a sparse update's rows are this wide.
inline std::size_t elements_per_row(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

}  // namespace tapegrad::detail
