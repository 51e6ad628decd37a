// The built-in ops that are not public API, defined in src/ops/ like every other op:
// JacobianPack and JacobianUnpack and JacobianDiagonal, JacobianDiagonalPart (array_rows.cpp),
// which the Jacobians of src/derivatives/ record, and the fused activation gradients, which
// the activations' rules call. Others call only these functions (the vectorized Jacobian's
// dense batch of a diagonal: derivatives/identity_rows.cpp); the ops' definitions and rules
// stay in their files. (ReadVariableOp, which the runtime records, is found by name in the
// registry: runtime/variable_read.cpp.)
#pragma once

#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// `rows` (one shape, one floating dtype) as one tensor of `shape`, recorded as JacobianPack,
// whose gradient splits the output gradient back into rows (JacobianUnpack, whose gradient
// packs again), so a stack of Jacobian rows stays differentiable. With `outer` = 1 the rows lie
// end to end ([R] ++ row shape); otherwise each row is read as [outer, inner] and the output as
// [outer, R, inner]: out[o, r, :] = rows[r][o, :] (batch_jacobian's [b, R, x] written at once,
// without stacking [R, b, x] and transposing). InvalidArgument when `outer` does not divide the
// rows.
Tensor pack_rows(const std::vector<Tensor>& rows, const Shape& shape, std::size_t outer = 1);

// The dense batch of diagonal blocks: `d` (one floating dtype, k * n elements: k blocks of n)
// laid on the diagonals of k n x n blocks, zeros elsewhere, as one tensor of `shape`
// (k * n * n elements): out.flat[r n^2 + b n + b] = d.flat[r n + b]. Written once, in its
// final shape (the vectorized Jacobian's diagonal rows: jacobian.cpp). Recorded as
// JacobianDiagonal, whose gradient reads the diagonals back (diagonal_blocks_part, recorded
// as JacobianDiagonalPart, whose gradient is this op). InvalidArgument when the counts
// disagree.
Tensor diagonal_blocks(const Tensor& d, std::size_t n, const Shape& shape);

// The inverse: the k blocks' diagonals of `dense` (k * n * n elements) as a tensor of `shape`
// (k * n elements).
Tensor diagonal_blocks_part(const Tensor& dense, std::size_t n, const Shape& shape);

// The fused activation gradients (TF's TanhGrad, SigmoidGrad, ReluGrad, ...): F(y, g) =
// g s(y), an activation's gradient as one kernel writing one buffer instead of a chain of
// elementwise ops, for y and g of one shape and one floating dtype. y is what the activation
// keeps, its output or (SoftplusGrad, GeluGrad, GeluTanhGrad) its input x, and s its slope
// written in it. Each is itself differentiable (linear in g), with a forward and a batching
// rule, so higher orders, forward mode and vectorized_map see an ordinary op.
Tensor tanh_grad_op(const Tensor& y, const Tensor& g);        // g (1 - y^2)
Tensor sigmoid_grad_op(const Tensor& y, const Tensor& g);     // g y (1 - y)
Tensor relu_grad_op(const Tensor& y, const Tensor& g);        // y > 0 ? g : 0
Tensor softplus_grad_op(const Tensor& x, const Tensor& g);    // g sigmoid(x)
Tensor elu_grad_op(const Tensor& y, const Tensor& g);         // y < 0 ? g (y + 1) : g
Tensor gelu_grad_op(const Tensor& x, const Tensor& g);        // g (Phi(x) + x phi(x))
Tensor gelu_tanh_grad_op(const Tensor& x, const Tensor& g);   // gelu(x, true)'s slope times g
Tensor reciprocal_grad_op(const Tensor& y, const Tensor& g);  // -g y^2
Tensor sqrt_grad_op(const Tensor& y, const Tensor& g);        // g / (2 y)
Tensor rsqrt_grad_op(const Tensor& y, const Tensor& g);       // -g y^3 / 2

}  // namespace tapegrad::detail
