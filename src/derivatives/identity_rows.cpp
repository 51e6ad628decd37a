#include "derivatives/identity_rows.hpp"

#include "ops/internal_ops.hpp"

namespace tapegrad::detail {

Tensor dense_of_diagonal(const Tensor& d, const Shape& shape) {
  return diagonal_blocks(d, d.size(), shape);
}

Tensor dense_of_diagonal(const Tensor& d) {
  Shape shape{d.size()};
  shape.insert(shape.end(), d.shape().begin(), d.shape().end());
  return dense_of_diagonal(d, shape);
}

}  // namespace tapegrad::detail
