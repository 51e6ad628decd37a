// The vectorized Jacobian's seed is the identity, and its linear descendants stay diagonal
// (row b is e_b scaled by d[b]) through the ops' structure rules (runtime/batching_context.hpp).
// This builds the dense batch of such a diagonal when an op, or the result, needs it.
// Differentiable: every step is a tapegrad op.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The dense batch of the diagonal d (n elements) as a tensor of `shape` (n * n elements;
// by default [n] ++ d.shape), written once (detail::diagonal_blocks, differentiable).
Tensor dense_of_diagonal(const Tensor& d, const Shape& shape);
Tensor dense_of_diagonal(const Tensor& d);

}  // namespace tapegrad::detail
