// What the linalg files (linalg.cpp, linalg_lapack.cpp) share.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The batch dimensions of a [..., rows, cols] shape (rank >= 2).
inline Shape matrix_batch_shape(const Shape& shape) {
  return Shape(shape.begin(), shape.end() - 2);
}

}  // namespace tapegrad::detail
