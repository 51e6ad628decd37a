// Square-matrix linear algebra through OpenBLAS's LAPACK (getrf/getrs/potrf): matrix_inverse,
// matrix_determinant, solve and cholesky, forward kernels and gradients side by side.
//
// LAPACK is column-major and tapegrad is row-major. A row-major n x n buffer read as
// column-major is the transpose, so each kernel works on A^T and undoes it where it matters:
// inv(A^T) read back row-major is inv(A); det(A^T) = det(A); solve uses getrs with 'T' on the
// LU of A^T; potrf 'U' on A^T = A gives U = L^T, which read back row-major is L.
#include <algorithm>
#include <numeric>

#include <f77blas.h>

#include "kernels/dispatch.hpp"
#include "runtime/recording.hpp"
#include "kernels/shape_util.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

using detail::KeepSet;
using detail::OpDefinition;
using Grads = std::vector<GradientValue>;

namespace {

// ---- typed LAPACK wrappers (each returns LAPACK's info) ----------------------------------

blasint lu_factor(blasint n, float* a, blasint* pivots) {
  blasint info = 0;
  BLASFUNC(sgetrf)(&n, &n, a, &n, pivots, &info);
  return info;
}
blasint lu_factor(blasint n, double* a, blasint* pivots) {
  blasint info = 0;
  BLASFUNC(dgetrf)(&n, &n, a, &n, pivots, &info);
  return info;
}
blasint lu_solve(char trans, blasint n, blasint k, float* lu, blasint* pivots, float* b) {
  blasint info = 0;
  BLASFUNC(sgetrs)(&trans, &n, &k, lu, &n, pivots, b, &n, &info);
  return info;
}
blasint lu_solve(char trans, blasint n, blasint k, double* lu, blasint* pivots, double* b) {
  blasint info = 0;
  BLASFUNC(dgetrs)(&trans, &n, &k, lu, &n, pivots, b, &n, &info);
  return info;
}
blasint cholesky_factor(blasint n, float* a) {
  char upper = 'U';
  blasint info = 0;
  BLASFUNC(spotrf)(&upper, &n, a, &n, &info);
  return info;
}
blasint cholesky_factor(blasint n, double* a) {
  char upper = 'U';
  blasint info = 0;
  BLASFUNC(dpotrf)(&upper, &n, a, &n, &info);
  return info;
}

// ---- validation --------------------------------------------------------------------------

std::string describe_operand(const char* op, const char* name, const Tensor& t) {
  return detail::describe(op, {{name, t}});
}

// Where in a batch a failure happened, for messages: "" for a single matrix.
std::string batch_position(std::size_t index, std::size_t count) {
  return count > 1 ? " (batch matrix " + std::to_string(index) + ")" : "";
}

// A floating tensor of shape [..., n, n]; returns n.
std::size_t require_square(const char* op, const char* name, const Tensor& t) {
  detail::require_defined(op, t);
  if (!is_floating(t.dtype())) {
    throw InvalidArgument(describe_operand(op, name, t) + ": only float32 and float64 are supported");
  }
  const Shape& s = t.shape();
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]) {
    throw InvalidArgument(describe_operand(op, name, t) +
                          ": expected a square matrix or a batch of square matrices [..., n, n]");
  }
  return s.back();
}

// x with its last two axes swapped (the matrix transpose of every batch matrix).
Tensor transpose_matrices(const Tensor& x) {
  std::vector<int> perm(x.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

Shape batch_shape_of(const Shape& shape) { return Shape(shape.begin(), shape.end() - 2); }

// ---- gradients ---------------------------------------------------------------------------

// TF _MatrixInverseGrad: d inv(A) = -inv(A)^T g inv(A)^T, from the kept output.
Grads inverse_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& inverse = ctx.outputs()[0];
  return {negative(matmul(inverse, matmul(g[0], inverse, false, true), true, false))};
}

// TF _MatrixDeterminantGrad: g * det(A) * inv(A)^T, the scalar factor broadcast over each matrix.
Grads determinant_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& a = ctx.inputs()[0];
  const Tensor& det = ctx.outputs()[0];
  std::vector<std::int64_t> factor_shape;
  for (auto d : batch_shape_of(ctx.input_shape(0))) factor_shape.push_back(static_cast<std::int64_t>(d));
  factor_shape.push_back(1);
  factor_shape.push_back(1);
  const Tensor factor = reshape(multiply(g[0], det), factor_shape);
  return {multiply(factor, transpose_matrices(matrix_inverse(a)))};
}

// TF _MatrixSolveGrad: grad_b = solve(A^T, g), grad_a = -grad_b x^T with x the kept output.
Grads solve_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& a = ctx.inputs()[0];
  const Tensor& x = ctx.outputs()[0];
  const Tensor grad_b = solve(transpose_matrices(a), g[0]);
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = negative(matmul(grad_b, x, false, true));
  r[1] = grad_b;
  return r;
}

// n x n constant: 1 below the diagonal, 0.5 on it, 0 above. Multiplying by it takes the lower
// triangle with a halved diagonal (TF's band_part(set_diag(m, 0.5 diag(m)), -1, 0)) and keeps
// the gradient differentiable, since the mask is a constant.
Tensor halved_lower_mask(std::size_t n, DType dtype) {
  std::vector<double> mask(n * n, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < r; ++c) mask[r * n + c] = 1.0;
    mask[r * n + r] = 0.5;
  }
  return from_values(mask, {n, n}, dtype);
}

// TF _CholeskyGrad, from the kept factor L:
//   middle = Phi(L^T g), grad = L^{-T} middle L^{-1}, symmetrised.
Grads cholesky_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& lower = ctx.outputs()[0];
  const Tensor lower_inverse = matrix_inverse(lower);
  Tensor middle = matmul(lower, g[0], true, false);
  middle = multiply(middle, halved_lower_mask(lower.shape().back(), lower.dtype()));
  const Tensor grad = matmul(matmul(lower_inverse, middle, true, false), lower_inverse);
  return {multiply(add(grad, transpose_matrices(grad)), scalar(0.5, grad.dtype()))};
}

constexpr OpDefinition inverse_op =
    detail::differentiable_op("MatrixInverse", inverse_grad, KeepSet::none(), KeepSet::all());
constexpr OpDefinition determinant_op =
    detail::differentiable_op("MatrixDeterminant", determinant_grad, KeepSet::all(), KeepSet::all());
constexpr OpDefinition solve_op =
    detail::differentiable_op("MatrixSolve", solve_grad, KeepSet::only({0}), KeepSet::all());
constexpr OpDefinition cholesky_op =
    detail::differentiable_op("Cholesky", cholesky_grad, KeepSet::none(), KeepSet::all());

}  // namespace

Tensor matrix_inverse(const Tensor& a) {
  const std::size_t n = require_square("matrix_inverse", "a", a);
  const std::size_t count = num_elements(batch_shape_of(a.shape()));
  Tensor out = detail::dispatch_floating("matrix_inverse", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = xt::empty<T>(a.shape());
    const std::size_t size = n * n;
    // An empty batch needs no workspace (its matrices may be nominally huge).
    std::vector<T> lu(count == 0 ? 0 : size);
    std::vector<blasint> pivots(count == 0 ? 0 : n);
    for (std::size_t i = 0; i < count; ++i) {
      const T* src = a.array<T>().data() + i * size;
      T* dst = result.data() + i * size;
      std::copy(src, src + size, lu.begin());
      if (n != 0 && lu_factor(static_cast<blasint>(n), lu.data(), pivots.data()) > 0) {
        throw InvalidArgument(describe_operand("matrix_inverse", "a", a) +
                              ": the matrix is singular" + batch_position(i, count));
      }
      std::fill(dst, dst + size, T(0));
      for (std::size_t d = 0; d < n; ++d) dst[d * n + d] = T(1);
      if (n != 0) {
        lu_solve('N', static_cast<blasint>(n), static_cast<blasint>(n), lu.data(), pivots.data(), dst);
      }
    }
    return Tensor(std::move(result));
  });
  detail::record(inverse_op, {&a}, out);
  return out;
}

Tensor matrix_determinant(const Tensor& a) {
  const std::size_t n = require_square("matrix_determinant", "a", a);
  const Shape batch = batch_shape_of(a.shape());
  const std::size_t count = num_elements(batch);
  Tensor out = detail::dispatch_floating("matrix_determinant", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = xt::empty<T>(batch);
    const std::size_t size = n * n;
    // An empty batch needs no workspace (its matrices may be nominally huge).
    std::vector<T> lu(count == 0 ? 0 : size);
    std::vector<blasint> pivots(count == 0 ? 0 : n);
    for (std::size_t i = 0; i < count; ++i) {
      const T* src = a.array<T>().data() + i * size;
      std::copy(src, src + size, lu.begin());
      // A positive info only reports an exact zero pivot; the factorisation is complete and
      // the product of the diagonal is then the correct 0.
      if (n != 0) lu_factor(static_cast<blasint>(n), lu.data(), pivots.data());
      T det = T(1);
      for (std::size_t d = 0; d < n; ++d) {
        det *= lu[d * n + d];
        if (pivots[d] != static_cast<blasint>(d + 1)) det = -det;  // each row swap flips the sign
      }
      result.data()[i] = det;
    }
    return Tensor(std::move(result));
  });
  detail::record(determinant_op, {&a}, out);
  return out;
}

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
  if (batch_shape_of(a.shape()) != batch_shape_of(b.shape())) {
    fail("the batch dimensions differ (solve does not broadcast them)");
  }
  const std::size_t k = b.shape().back();
  const std::size_t count = num_elements(batch_shape_of(a.shape()));
  Tensor out = detail::dispatch_floating("solve", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = xt::empty<T>(b.shape());
    const std::size_t a_size = n * n, b_size = n * k;
    std::vector<T> lu(count == 0 ? 0 : a_size);
    // b's batch matrix in column-major order, then the solution.
    std::vector<T> columns(count == 0 ? 0 : b_size);
    std::vector<blasint> pivots(count == 0 ? 0 : n);
    for (std::size_t i = 0; i < count; ++i) {
      const T* a_src = a.array<T>().data() + i * a_size;
      std::copy(a_src, a_src + a_size, lu.begin());
      if (n != 0 && lu_factor(static_cast<blasint>(n), lu.data(), pivots.data()) > 0) {
        fail("the matrix a is singular" + batch_position(i, count));
      }
      if (n == 0 || k == 0) continue;
      const T* b_src = b.array<T>().data() + i * b_size;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < k; ++c) columns[c * n + r] = b_src[r * k + c];
      }
      lu_solve('T', static_cast<blasint>(n), static_cast<blasint>(k), lu.data(), pivots.data(),
               columns.data());
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

Tensor cholesky(const Tensor& a) {
  const std::size_t n = require_square("cholesky", "a", a);
  const std::size_t count = num_elements(batch_shape_of(a.shape()));
  Tensor out = detail::dispatch_floating("cholesky", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = xt::empty<T>(a.shape());
    const std::size_t size = n * n;
    for (std::size_t i = 0; i < count; ++i) {
      const T* src = a.array<T>().data() + i * size;
      T* dst = result.data() + i * size;
      std::copy(src, src + size, dst);
      if (n != 0 && cholesky_factor(static_cast<blasint>(n), dst) > 0) {
        throw InvalidArgument(describe_operand("cholesky", "a", a) +
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

namespace detail {

void register_linalg_lapack_ops(OpRegistrar& registry) { registry.add({&inverse_op, &determinant_op, &solve_op, &cholesky_op}); }

}  // namespace detail

}  // namespace tapegrad
