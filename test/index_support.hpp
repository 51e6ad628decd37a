// Row-major index arithmetic for tests that check a kernel element by element against the
// position it should read.
#pragma once

#include <cstddef>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad::testing {

// Row-major multi-index of flat position `flat` in `shape`.
inline std::vector<std::size_t> unravel(std::size_t flat, const Shape& shape) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// Flat row-major position of `index` in `shape`.
inline std::size_t ravel(const std::vector<std::size_t>& index, const Shape& shape) {
  std::size_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

}  // namespace tapegrad::testing
