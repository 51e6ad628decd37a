// Square-matrix linear algebra through OpenBLAS's LAPACK (getrf/getrs/potrf): matrix_inverse,
// matrix_determinant, solve and cholesky. Each op reads top to bottom: its definition, its
// forward, its gradient. Everything but the public functions has internal linkage.
//
// LAPACK is column-major and tapegrad is row-major. A row-major n x n buffer read as
// column-major is the transpose, so each kernel works on A^T and undoes it where it matters:
// inv(A^T) read back row-major is inv(A); det(A^T) = det(A); solve uses getrs with 'T' on the
// LU of A^T; potrf 'U' on A^T = A gives U = L^T, which read back row-major is L.
#include <algorithm>
#include <numeric>
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
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

// What the ops share (ops/linalg/linalg_support.hpp, ops/linalg/linalg_lapack_calls.hpp).
using detail::batch_position;
using detail::BatchLu;
using detail::cholesky_factor;
using detail::halved_lower_mask;
using detail::require_square;
using detail::transpose_matrices;

// ---- MatrixInverse ----------------------------------------------------------------------

static Grads inverse_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents inverse_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(inverse_op) =
    detail::differentiable_op("MatrixInverse", inverse_gradient, KeepSet::none(), KeepSet::all(),
                              inverse_tangent, detail::batch_unary<&tapegrad::matrix_inverse>);

Tensor matrix_inverse(const Tensor& a) {
  const std::size_t n = require_square("matrix_inverse", "a", a);
  detail::require_finite("matrix_inverse", "a", a, {{"a", a}});
  Tensor out = detail::dispatch_floating("matrix_inverse", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    BatchLu<T> lu(a, n);
    xt::xarray<T> result = xt::empty<T>(a.shape());
    for (std::size_t i = 0; i < lu.count(); ++i) {
      if (!lu.factor(i) && !detail::computing_on_placeholders()) {
        throw InvalidArgument(detail::describe("matrix_inverse", {{"a", a}}) +
                              ": the matrix is singular" + batch_position(i, lu.count()));
      }
      // Solving against the identity gives the inverse in place.
      T* dst = result.data() + i * n * n;
      std::fill(dst, dst + n * n, T(0));
      for (std::size_t d = 0; d < n; ++d) dst[d * n + d] = T(1);
      lu.solve('N', n, dst);
    }
    return Tensor(std::move(result));
  });
  detail::record(inverse_op, {&a}, out);
  return out;
}

// d(A^-1) = -A^-1 dA A^-1.
static Tangents inverse_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& inverse = op.outputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& da) {
    return negative(matmul(inverse, matmul(da, inverse)));
  });
}

// TF _MatrixInverseGrad: d inv(A) = -inv(A)^T g inv(A)^T, from the kept output.
static Grads inverse_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& inverse = op.outputs()[0];
  return {negative(matmul(inverse, matmul(g[0], inverse, false, true), true, false))};
}

// ---- MatrixDeterminant ------------------------------------------------------------------

static Grads determinant_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents determinant_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(determinant_op) = detail::differentiable_op(
    "MatrixDeterminant", determinant_gradient, KeepSet::all(), KeepSet::all(), determinant_tangent,
    detail::batch_unary<&tapegrad::matrix_determinant>);

Tensor matrix_determinant(const Tensor& a) {
  const std::size_t n = require_square("matrix_determinant", "a", a);
  detail::require_finite("matrix_determinant", "a", a, {{"a", a}});
  Tensor out = detail::dispatch_floating("matrix_determinant", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    BatchLu<T> lu(a, n);
    xt::xarray<T> result = xt::empty<T>(detail::matrix_batch_shape(a.shape()));
    for (std::size_t i = 0; i < lu.count(); ++i) {
      // A singular matrix has an exactly zero pivot: its determinant is then the correct 0.
      lu.factor(i);
      result.data()[i] = lu.determinant();
    }
    return Tensor(std::move(result));
  });
  detail::record(determinant_op, {&a}, out);
  return out;
}

// Jacobi's formula: d det(A) = det(A) tr(A^-1 dA) = det(A) sum(A^-T * dA) per matrix.
static Tangents determinant_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& da) {
    const Tensor inverse_transposed = transpose_matrices(matrix_inverse(op.inputs[0]));
    return multiply(op.outputs[0], reduce_sum(multiply(inverse_transposed, da), {-2, -1}));
  });
}

// TF _MatrixDeterminantGrad: g * det(A) * inv(A)^T, the scalar factor broadcast over each matrix.
static Grads determinant_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& a = op.inputs()[0];
  const Tensor& det = op.outputs()[0];
  std::vector<std::int64_t> factor_shape;
  for (auto d : detail::matrix_batch_shape(op.input_shape(0))) {
    factor_shape.push_back(static_cast<std::int64_t>(d));
  }
  factor_shape.push_back(1);
  factor_shape.push_back(1);
  const Tensor factor = reshape(multiply(g[0], det), factor_shape);
  return {multiply(factor, transpose_matrices(matrix_inverse(a)))};
}

// ---- MatrixSolve ------------------------------------------------------------------------

static Grads solve_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents solve_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(solve_op) =
    detail::differentiable_op("MatrixSolve", solve_gradient, KeepSet::only({0}), KeepSet::all(),
                              solve_tangent, detail::batch_all_batched<&tapegrad::solve>);

Tensor solve(const Tensor& a, const Tensor& b) {
  const std::size_t n = require_square("solve", "a", a);
  detail::require_defined("solve", b);
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("solve", {{"a", a}, {"b", b}}) + ": " + why);
  };
  if (a.dtype() != b.dtype()) fail("the dtypes differ");
  if (b.rank() != a.rank() || b.shape()[b.rank() - 2] != n) {
    fail("expected b of shape [..., n, k] with the same batch dimensions as a [..., n, n]");
  }
  if (detail::matrix_batch_shape(a.shape()) != detail::matrix_batch_shape(b.shape())) {
    fail("the batch dimensions differ (solve does not broadcast them)");
  }
  detail::require_finite("solve", "a", a, {{"a", a}, {"b", b}});
  const std::size_t k = b.shape().back();
  Tensor out = detail::dispatch_floating("solve", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    BatchLu<T> lu(a, n);
    xt::xarray<T> result = xt::empty<T>(b.shape());
    const std::size_t b_size = n * k;
    // b's batch matrix in column-major order, then the solution.
    std::vector<T> columns(lu.count() == 0 ? 0 : b_size);
    for (std::size_t i = 0; i < lu.count(); ++i) {
      if (!lu.factor(i) && !detail::computing_on_placeholders()) {
        fail("the matrix a is singular" + batch_position(i, lu.count()));
      }
      const T* b_src = detail::kernel_data<T>(b) + i * b_size;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < k; ++c) columns[c * n + r] = b_src[r * k + c];
      }
      lu.solve('T', k, columns.data());
      T* dst = result.data() + i * b_size;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < k; ++c) dst[r * k + c] = columns[c * n + r];
      }
    }
    return Tensor(std::move(result));
  });
  detail::record(solve_op, {&a, &b}, out);
  return out;
}

// X = A^-1 B: dX = A^-1 (dB - dA X).
static Tangents solve_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.outputs[0];
  const Tensor from_a =
      detail::if_defined(tangents[0], [&](const Tensor& da) { return negative(matmul(da, x)); });
  // dB - dA X has X's shape (B's), which output_tangent gives the sum.
  return {solve(op.inputs[0], detail::output_tangent(op, 0, {tangents[1], from_a}))};
}

// TF _MatrixSolveGrad: grad_b = solve(A^T, g), grad_a = -grad_b x^T with x the kept output.
static Grads solve_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& a = op.inputs()[0];
  const Tensor& x = op.outputs()[0];
  const Tensor grad_b = solve(transpose_matrices(a), g[0]);
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = negative(matmul(grad_b, x, false, true));
  r[1] = grad_b;
  return r;
}

// ---- Cholesky ---------------------------------------------------------------------------

static Grads cholesky_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents cholesky_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(cholesky_op) =
    detail::differentiable_op("Cholesky", cholesky_gradient, KeepSet::none(), KeepSet::all(),
                              cholesky_tangent, detail::batch_unary<&tapegrad::cholesky>);

Tensor cholesky(const Tensor& a) {
  const std::size_t n = require_square("cholesky", "a", a);
  detail::require_finite("cholesky", "a", a, {{"a", a}});
  const std::size_t count = num_elements(detail::matrix_batch_shape(a.shape()));
  Tensor out = detail::dispatch_floating("cholesky", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // Factored in place, in the result.
    xt::xarray<T> result = xt::empty<T>(a.shape());
    const T* matrices = detail::kernel_data<T>(a);
    for (std::size_t i = 0; i < count; ++i) {
      T* dst = result.data() + i * n * n;
      std::copy(matrices + i * n * n, matrices + (i + 1) * n * n, dst);
      if (n != 0 && cholesky_factor(static_cast<blasint>(n), dst) > 0 &&
          !detail::computing_on_placeholders()) {
        throw InvalidArgument(detail::describe("cholesky", {{"a", a}}) +
                              ": the matrix is not symmetric positive definite" +
                              batch_position(i, count));
      }
      // potrf leaves the other triangle untouched: clear it.
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = r + 1; c < n; ++c) dst[r * n + c] = T(0);
      }
    }
    return Tensor(std::move(result));
  });
  detail::record(cholesky_op, {&a}, out);
  return out;
}

// A = L L^T: dL = L Phi(L^-1 dA L^-T), Phi the lower triangle with its diagonal halved. Only
// the symmetric part of dA moves L (the gradient is symmetrised the same way).
static Tangents cholesky_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& lower = op.outputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& da) {
    const Tensor symmetric = multiply(add(da, transpose_matrices(da)), scalar(0.5, da.dtype()));
    // L^-1 S L^-T by two triangular solves (never forming L^-1).
    const Tensor left = triangular_solve(lower, symmetric, true, false);
    const Tensor middle =
        transpose_matrices(triangular_solve(lower, transpose_matrices(left), true, false));
    return matmul(lower, multiply(middle, halved_lower_mask(lower.shape().back(), lower.dtype())));
  });
}

// TF _CholeskyGrad, from the kept factor L:
//   middle = Phi(L^T g), grad = L^{-T} middle L^{-1}, symmetrised. L^{-T} middle L^{-1} by
//   two triangular solves (TF forms L^{-1} with one; an LU inverse costs ~3x more).
static Grads cholesky_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& lower = op.outputs()[0];
  Tensor middle = matmul(lower, g[0], true, false);
  middle = multiply(middle, halved_lower_mask(lower.shape().back(), lower.dtype()));
  const Tensor left = triangular_solve(lower, middle, true, true);
  const Tensor grad =
      transpose_matrices(triangular_solve(lower, transpose_matrices(left), true, true));
  return {multiply(add(grad, transpose_matrices(grad)), scalar(0.5, grad.dtype()))};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(linalg_lapack)
