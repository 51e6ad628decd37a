// Solves with structure: triangular_solve (BLAS trsm), and two compositions of it and of
// cholesky that need no gradient of their own: cholesky_solve and lstsq (TF's fast
// matrix_solve_ls). Everything but the public functions has internal linkage.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/shape_util.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/linalg/linalg_lapack_calls.hpp"
#include "ops/linalg/linalg_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

using detail::transpose_matrices;

// a [..., n, n] (checked by the caller) and b [..., n, k] with a's dtype and batch; returns k.
static std::size_t require_right_hand_side(const char* op, const char* a_name, const Tensor& a,
                                           const Tensor& b, const std::string& flags = "") {
  detail::require_defined(op, b);
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe(op, {{a_name, a}, {"b", b}}) + flags + ": " + why);
  };
  if (a.dtype() != b.dtype()) fail("the dtypes differ");
  const std::size_t rows = a.shape()[a.rank() - 2];
  if (b.rank() != a.rank() || b.shape()[b.rank() - 2] != rows) {
    fail("expected b of shape [..., " + std::to_string(rows) + ", k] with the rank of " + a_name);
  }
  if (detail::matrix_batch_shape(a.shape()) != detail::matrix_batch_shape(b.shape())) {
    fail("the batch dimensions differ (they are not broadcast)");
  }
  return b.shape().back();
}

// ---- MatrixTriangularSolve ----------------------------------------------------------------

static Grads triangular_solve_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents triangular_solve_tangent(const ForwardContext& op, const Tangents& tangents);
// Over leading axes: both operands given the batch axis (an unbatched one broadcast), one
// call with the recorded flags.
static std::vector<Tensor> triangular_solve_batched(const detail::BatchingContext& op,
                                                    const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {triangular_solve(detail::with_batch_axis(op, inputs, 0),
                           detail::with_batch_axis(op, inputs, 1), attrs.get_bool("lower"),
                           attrs.get_bool("adjoint"))};
}
static detail::ReplayOutputs triangular_solve_replay(const detail::ReplayContext& op,
                                                     const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {
      triangular_solve(inputs[0], inputs[1], attrs.get_bool("lower"), attrs.get_bool("adjoint"))};
}
TAPEGRAD_BUILTIN_OP(triangular_solve_op) = detail::with_replay(
    detail::differentiable_op("MatrixTriangularSolve", triangular_solve_gradient,
                              KeepSet::only({0}), KeepSet::all(), triangular_solve_tangent,
                              triangular_solve_batched),
    triangular_solve_replay);

Tensor triangular_solve(const Tensor& a, const Tensor& b, bool lower, bool adjoint) {
  const std::size_t n = detail::require_square("triangular_solve", "a", a);
  const std::string flags = std::string(" (lower=") + (lower ? "true" : "false") +
                            ", adjoint=" + (adjoint ? "true" : "false") + ")";
  const std::size_t k = require_right_hand_side("triangular_solve", "a", a, b, flags);
  detail::require_finite("triangular_solve", "a", a, {{"a", a}, {"b", b}});
  const std::size_t count = detail::matrix_count(a.shape());
  Tensor out = detail::dispatch_floating("triangular_solve", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // Solved in place, in the result.
    xt::xarray<T> result = detail::allocate_array<T>("triangular_solve", b.shape());
    const T* b_src = detail::kernel_data<T>(b);
    std::copy(b_src, b_src + b.size(), result.data());
    for (std::size_t i = 0; i < count && n != 0; ++i) {
      const T* matrix = detail::kernel_data<T>(a) + i * n * n;
      for (std::size_t d = 0; d < n; ++d) {
        if (matrix[d * n + d] == T(0) && !detail::computing_on_placeholders()) {
          throw InvalidArgument(detail::describe("triangular_solve", {{"a", a}, {"b", b}}) + flags +
                                ": the matrix a is singular (diagonal entry " + std::to_string(d) +
                                " is 0)" + detail::batch_position(i, count));
        }
      }
      if (k != 0) {
        detail::triangular_solve_in_place(lower, adjoint, n, k, matrix, result.data() + i * n * k);
      }
    }
    return Tensor(std::move(result));
  });
  detail::record(triangular_solve_op, {&a, &b}, out,
                 [&] { return Attrs().set("lower", lower).set("adjoint", adjoint); });
  return out;
}

// The triangle of x that a triangular a of this orientation reads.
static Tensor triangle(const Tensor& x, bool lower) {
  return lower ? band_part(x, -1, 0) : band_part(x, 0, -1);
}

// X = op(A)^-1 B: dX = op(A)^-1 (dB - op(dA) X), dA restricted to the triangle A reads.
static Tangents triangular_solve_tangent(const ForwardContext& op, const Tangents& tangents) {
  const bool lower = op.attrs().get_bool("lower");
  const bool adjoint = op.attrs().get_bool("adjoint");
  const Tensor& x = op.outputs[0];
  const Tensor from_a = detail::if_defined(tangents[0], [&](const Tensor& da) {
    return negative(matmul(triangle(da, lower), x, adjoint, false));
  });
  return {triangular_solve(op.inputs[0], detail::output_tangent(op, 0, {tangents[1], from_a}),
                           lower, adjoint)};
}

// TF _MatrixTriangularSolveGrad: grad_b = op(A)^-T g; grad_a = -grad_b x^T (or -x grad_b^T
// when adjoint), restricted to A's triangle.
static Grads triangular_solve_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const bool lower = op.attrs().get_bool("lower");
  const bool adjoint = op.attrs().get_bool("adjoint");
  const Tensor& a = op.inputs()[0];
  const Tensor& x = op.outputs()[0];
  const Tensor grad_b = triangular_solve(a, g[0], lower, !adjoint);
  Grads r(2);
  if (op.needs_gradient(0)) {
    const Tensor grad_a = adjoint ? matmul(x, grad_b, false, true) : matmul(grad_b, x, false, true);
    r[0] = negative(triangle(grad_a, lower));
  }
  r[1] = grad_b;
  return r;
}

// ---- cholesky_solve (a composition, as TF's) ------------------------------------------------

Tensor cholesky_solve(const Tensor& chol, const Tensor& b) {
  detail::require_square("cholesky_solve", "chol", chol);
  require_right_hand_side("cholesky_solve", "chol", chol, b);
  detail::require_finite("cholesky_solve", "chol", chol, {{"chol", chol}, {"b", b}});
  // L L^T x = b: L y = b, then L^T x = y. A singular chol is reported as this op's (the
  // solves' own message names triangular_solve and flags the caller never passed).
  try {
    return triangular_solve(chol, triangular_solve(chol, b, true, false), true, true);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe("cholesky_solve", {{"chol", chol}, {"b", b}}) +
                          ": chol is not an invertible Cholesky factor [" + e.what() + "]");
  }
}

// ---- lstsq (a composition: TF's fast matrix_solve_ls) ---------------------------------------

Tensor lstsq(const Tensor& a, const Tensor& b, double l2) {
  detail::require_matrices("lstsq", "a", a);
  const std::string with_l2 = " (l2=" + std::to_string(l2) + ")";
  require_right_hand_side("lstsq", "a", a, b, with_l2);
  detail::require_finite("lstsq", "a", a, {{"a", a}, {"b", b}});
  if (!(l2 >= 0.0) || !std::isfinite(l2)) {
    throw InvalidArgument(detail::describe("lstsq", {{"a", a}, {"b", b}}) + with_l2 +
                          ": l2 must be finite and >= 0");
  }
  const std::size_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const bool tall = m >= n;
  // Tall: the Gram matrix a^T a [n, n]; wide: a a^T [m, m]. Then + l2 I.
  Tensor gram = tall ? matmul(a, a, true, false) : matmul(a, a, false, true);
  if (l2 != 0.0) {
    gram = add(gram,
               multiply(detail::identity_matrix(tall ? n : m, a.dtype()), scalar(l2, a.dtype())));
  }
  Tensor chol;
  try {
    chol = cholesky(gram);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe("lstsq", {{"a", a}, {"b", b}}) + with_l2 +
                          ": the regularised Gram matrix is not positive definite (a is rank-"
                          "deficient; use l2 > 0) [" +
                          e.what() + "]");
  }
  if (tall) return cholesky_solve(chol, matmul(a, b, true, false));
  return matmul(a, cholesky_solve(chol, b), true, false);
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(linalg_solve)
