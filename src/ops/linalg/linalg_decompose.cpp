// Decompositions through LAPACK: slogdet (getrf), logdet (a composition over cholesky), eigh
// (syevd) and qr (geqrf + orgqr); svd lives in linalg_svd.cpp. Each op reads top to bottom:
// definition, forward, forward rule, gradient. Everything but the public functions has
// internal linkage.
#include <algorithm>
#include <string>
#include <utility>
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

using detail::halved_lower_mask;
using detail::transpose_matrices;

// x [...] -> [..., 1, 1], to scale each matrix of a batch.
static Tensor per_matrix(const Tensor& x) { return expand_dims(expand_dims(x, -1), -1); }

// ---- LogMatrixDeterminant (slogdet) --------------------------------------------------------

static Grads slogdet_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents slogdet_tangent(const ForwardContext& op, const Tangents& tangents);
// The decompositions run over leading axes: each batching rule is one call on the batch.
static std::vector<Tensor> slogdet_outputs(const Tensor& a) {
  const SlogdetResult r = slogdet(a);
  return {r.sign, r.log_abs_det};
}
TAPEGRAD_BUILTIN_OP(slogdet_op) = detail::differentiable_op("LogMatrixDeterminant",
                                                            slogdet_gradient, KeepSet::all(),
                                                            KeepSet::none(), slogdet_tangent,
                                                            detail::batch_unary<&slogdet_outputs>);

SlogdetResult slogdet(const Tensor& a) {
  const std::size_t n = detail::require_square("slogdet", "a", a);
  detail::require_finite("slogdet", "a", a, {{"a", a}});
  std::vector<Tensor> outputs = detail::dispatch_floating("slogdet", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    detail::BatchLu<T> lu(a, n);
    const Shape batch = detail::matrix_batch_shape(a.shape());
    xt::xarray<T> sign = xt::empty<T>(batch);
    xt::xarray<T> log_abs = xt::empty<T>(batch);
    for (std::size_t i = 0; i < lu.count(); ++i) {
      // A zero pivot is a singular matrix: sign 0, log|det| -inf (TF's values).
      lu.factor(i);
      lu.log_abs_determinant(sign.data()[i], log_abs.data()[i]);
    }
    return std::vector<Tensor>{Tensor(std::move(sign)), Tensor(std::move(log_abs))};
  });
  detail::record(slogdet_op, {&a}, outputs);
  return {outputs[0], outputs[1]};
}

// d log|det A| = tr(A^-1 dA); the sign is piecewise constant (tangent 0).
static Tangents slogdet_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& da = tangents[0];
  if (!da.defined()) return {Tensor(), Tensor()};
  const Tensor inverse_transposed = transpose_matrices(matrix_inverse(op.inputs[0]));
  return {zeros(op.outputs[0].shape(), op.outputs[0].dtype()),
          reduce_sum(multiply(inverse_transposed, da), {-2, -1})};
}

// TF _LogMatrixDeterminantGrad: g_log_abs_det inv(A)^T; the sign contributes nothing.
static Grads slogdet_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& a = op.inputs()[0];
  return {multiply(per_matrix(g[1]), transpose_matrices(matrix_inverse(a)))};
}

// ---- logdet (a composition, as TF's) --------------------------------------------------------

Tensor logdet(const Tensor& a) {
  detail::require_square("logdet", "a", a);
  detail::require_finite("logdet", "a", a, {{"a", a}});
  Tensor chol;
  try {
    chol = cholesky(a);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe("logdet", {{"a", a}}) +
                          ": the matrix is not symmetric positive definite [" + e.what() + "]");
  }
  return multiply(scalar(2.0, a.dtype()), reduce_sum(log(diag_part(chol)), {-1}));
}

// ---- SelfAdjointEigV2 (eigh) ----------------------------------------------------------------

static Grads eigh_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents eigh_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> eigh_outputs(const Tensor& a) {
  const EighResult r = eigh(a);
  return {r.eigenvalues, r.eigenvectors};
}
TAPEGRAD_BUILTIN_OP(eigh_op) = detail::differentiable_op("SelfAdjointEigV2", eigh_gradient,
                                                         KeepSet::none(), KeepSet::all(),
                                                         eigh_tangent,
                                                         detail::batch_unary<&eigh_outputs>);

EighResult eigh(const Tensor& a) {
  const std::size_t n = detail::require_square("eigh", "a", a);
  detail::require_finite("eigh", "a", a, {{"a", a}});
  const std::size_t count = detail::matrix_count(a.shape());
  std::vector<Tensor> outputs = detail::dispatch_floating("eigh", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    Shape values_shape = detail::matrix_batch_shape(a.shape());
    values_shape.push_back(n);
    xt::xarray<T> values = detail::allocate_array<T>("eigh", values_shape);
    xt::xarray<T> vectors = detail::allocate_array<T>("eigh", a.shape());
    if (n == 0 || count == 0) {
      return std::vector<Tensor>{Tensor(std::move(values)), Tensor(std::move(vectors))};
    }
    // Row-major a read column-major is a^T, whose upper triangle is a's lower one: 'U'.
    const auto size = static_cast<blasint>(n);
    T work_query = T(0);
    blasint iwork_query = 0;
    detail::symmetric_eigen('U', size, vectors.data(), values.data(), &work_query, -1, &iwork_query,
                            -1);
    std::vector<T> work(static_cast<std::size_t>(detail::workspace_size(work_query)));
    std::vector<blasint> iwork(static_cast<std::size_t>(std::max<blasint>(1, iwork_query)));
    for (std::size_t i = 0; i < count; ++i) {
      T* matrix = vectors.data() + i * n * n;
      std::copy(detail::kernel_data<T>(a) + i * n * n, detail::kernel_data<T>(a) + (i + 1) * n * n,
                matrix);
      const blasint info = detail::symmetric_eigen(
          'U', size, matrix, values.data() + i * n, work.data(), static_cast<blasint>(work.size()),
          iwork.data(), static_cast<blasint>(iwork.size()));
      if (info != 0) {
        throw InvalidArgument(detail::describe("eigh", {{"a", a}}) +
                              ": the eigensolver did not converge (LAPACK syevd info " +
                              std::to_string(info) + ")" + detail::batch_position(i, count));
      }
      // LAPACK's eigenvectors are its columns; read row-major they are rows: transpose.
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = r + 1; c < n; ++c) std::swap(matrix[r * n + c], matrix[c * n + r]);
      }
    }
    return std::vector<Tensor>{Tensor(std::move(values)), Tensor(std::move(vectors))};
  });
  detail::record(eigh_op, {&a}, outputs);
  return {outputs[0], outputs[1]};
}

// F[i, j] = 1 / (e_j - e_i) off the diagonal, 0 on it and between equal values (TF's f).
static Tensor eigen_gap_reciprocals(const Tensor& e) {
  const Tensor gaps = subtract(expand_dims(e, -2), expand_dims(e, -1));
  return multiply(detail::safe_reciprocal(gaps),
                  detail::off_diagonal_mask(e.shape().back(), e.dtype()));
}

// With dS the symmetric matrix eigh reads from dA's lower triangle and P = V^T dS V:
// de = diag(P), dV = V (F o P).
static Tangents eigh_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& da = tangents[0];
  if (!da.defined()) return {Tensor(), Tensor()};
  const Tensor& e = op.outputs[0];
  const Tensor& v = op.outputs[1];
  const Tensor half = multiply(da, halved_lower_mask(e.shape().back(), e.dtype()));
  const Tensor symmetric = add(half, transpose_matrices(half));
  const Tensor p = matmul(v, matmul(symmetric, v), true, false);
  return {diag_part(p), matmul(v, multiply(eigen_gap_reciprocals(e), p))};
}

// TF _SelfAdjointEigV2Grad: G = V (diag(g_e) + F o (V^T g_V)) V^T, then G + G^T on the lower
// triangle with the diagonal halved (the forward reads only the lower triangle).
static Grads eigh_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& e = op.outputs()[0];
  const Tensor& v = op.outputs()[1];
  const Tensor inner =
      add(diag(g[0]), multiply(eigen_gap_reciprocals(e), matmul(v, g[1], true, false)));
  const Tensor grad = matmul(v, matmul(inner, v, false, true));
  return {multiply(add(grad, transpose_matrices(grad)),
                   halved_lower_mask(e.shape().back(), e.dtype()))};
}

// ---- Qr ---------------------------------------------------------------------------------------

static Grads qr_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents qr_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> qr_outputs(const Tensor& a) {
  const QrResult r = qr(a);
  return {r.q, r.r};
}
TAPEGRAD_BUILTIN_OP(qr_op) = detail::differentiable_op("Qr", qr_gradient, KeepSet::all(),
                                                       KeepSet::all(), qr_tangent,
                                                       detail::batch_unary<&qr_outputs>);

QrResult qr(const Tensor& a) {
  detail::require_matrices("qr", "a", a);
  detail::require_finite("qr", "a", a, {{"a", a}});
  const std::size_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const std::size_t k = std::min(m, n);
  const std::size_t count = detail::matrix_count(a.shape());
  std::vector<Tensor> outputs = detail::dispatch_floating("qr", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    Shape q_shape = detail::matrix_batch_shape(a.shape());
    Shape r_shape = q_shape;
    q_shape.push_back(m);
    q_shape.push_back(k);
    r_shape.push_back(k);
    r_shape.push_back(n);
    xt::xarray<T> q = detail::allocate_array<T>("qr", q_shape);
    xt::xarray<T> r = detail::allocate_array<T>("qr", r_shape);
    std::fill(r.begin(), r.end(), T(0));
    std::fill(q.begin(), q.end(), T(0));
    if (k == 0 || count == 0) {
      return std::vector<Tensor>{Tensor(std::move(q)), Tensor(std::move(r))};
    }
    const auto rows = static_cast<blasint>(m), cols = static_cast<blasint>(n);
    const auto reflectors = static_cast<blasint>(k);
    // One column-major m x n matrix at a time (LAPACK's layout: a, not a^T, is factored).
    std::vector<T> columns(m * n), tau(k);
    T query_factor = T(0), query_q = T(0);
    detail::qr_factor(rows, cols, columns.data(), tau.data(), &query_factor, -1);
    detail::qr_form_q(rows, reflectors, reflectors, columns.data(), tau.data(), &query_q, -1);
    std::vector<T> work(static_cast<std::size_t>(
        std::max(detail::workspace_size(query_factor), detail::workspace_size(query_q))));
    const auto lwork = static_cast<blasint>(work.size());
    for (std::size_t i = 0; i < count; ++i) {
      const T* src = detail::kernel_data<T>(a) + i * m * n;
      for (std::size_t row = 0; row < m; ++row) {
        for (std::size_t col = 0; col < n; ++col) columns[col * m + row] = src[row * n + col];
      }
      detail::qr_factor(rows, cols, columns.data(), tau.data(), work.data(), lwork);
      // r: the upper trapezoid of the first k rows.
      T* r_dst = r.data() + i * k * n;
      for (std::size_t row = 0; row < k; ++row) {
        for (std::size_t col = row; col < n; ++col) r_dst[row * n + col] = columns[col * m + row];
      }
      // q: from the k reflectors in the first k columns.
      detail::qr_form_q(rows, reflectors, reflectors, columns.data(), tau.data(), work.data(),
                        lwork);
      T* q_dst = q.data() + i * m * k;
      for (std::size_t row = 0; row < m; ++row) {
        for (std::size_t col = 0; col < k; ++col) q_dst[row * k + col] = columns[col * m + row];
      }
    }
    return std::vector<Tensor>{Tensor(std::move(q)), Tensor(std::move(r))};
  });
  detail::record(qr_op, {&a}, outputs);
  return {outputs[0], outputs[1]};
}

// x R^-1 for upper-triangular R: (R^-T x^T)^T.
static Tensor times_inverse_of_upper(const Tensor& x, const Tensor& r) {
  return transpose_matrices(triangular_solve(r, transpose_matrices(x), false, true));
}
// x R^-T (TF's _TriangularSolve in _QrGrad): (R^-1 x^T)^T.
static Tensor times_inverse_transpose_of_upper(const Tensor& x, const Tensor& r) {
  return transpose_matrices(triangular_solve(r, transpose_matrices(x), false, false));
}

// The columns [begin, begin + size) of a batch of matrices (size -1: to the end).
static Tensor columns_of(const Tensor& x, std::int64_t begin, std::int64_t size) {
  std::vector<std::int64_t> begins(x.rank(), 0), sizes(x.rank(), -1);
  begins.back() = begin;
  sizes.back() = size;
  return slice(x, begins, sizes);
}

// For m >= n, A = QR: C = Q^T dA R^-1, X = tril(C, -1) - tril(C, -1)^T (Q^T dQ, skew),
// dR = (C - X) R, dQ = dA R^-1 - Q (C - X).
static std::pair<Tensor, Tensor> deep_qr_tangent(const Tensor& q, const Tensor& r,
                                                 const Tensor& da) {
  const Tensor da_rinv = times_inverse_of_upper(da, r);
  const Tensor c = matmul(q, da_rinv, true, false);
  const Tensor strictly_lower = subtract(band_part(c, -1, 0), band_part(c, 0, 0));
  const Tensor upper = subtract(c, subtract(strictly_lower, transpose_matrices(strictly_lower)));
  return {subtract(da_rinv, matmul(q, upper)), matmul(upper, r)};
}

// m < n: a = [x | y] with x = q u square and y = q v: (dq, du) from x's square QR, and
// dv = dq^T y + q^T dy.
static Tangents qr_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& da = tangents[0];
  if (!da.defined()) return {Tensor(), Tensor()};
  const Tensor& q = op.outputs[0];
  const Tensor& r = op.outputs[1];
  const std::size_t m = q.shape()[q.rank() - 2];
  const std::size_t n = r.shape().back();
  if (m >= n) {
    const auto [dq, dr] = deep_qr_tangent(q, r, da);
    return {dq, dr};
  }
  const auto wide = static_cast<std::int64_t>(m);
  const auto [dq, du] = deep_qr_tangent(q, columns_of(r, 0, wide), columns_of(da, 0, wide));
  const Tensor y = columns_of(op.inputs[0], wide, -1);
  const Tensor dv =
      add(matmul(dq, y, true, false), matmul(q, columns_of(da, wide, -1), true, false));
  return {dq, concat({du, dv}, -1)};
}

// TF _QrGrad for m >= n (reduced).
static Tensor deep_qr_gradient(const Tensor& q, const Tensor& r, const Tensor& dq,
                               const Tensor& dr) {
  const Tensor qdq = matmul(q, dq, true, false);
  const Tensor rdr = matmul(r, dr, false, true);
  const Tensor tril = band_part(
      add(subtract(qdq, transpose_matrices(qdq)), subtract(rdr, transpose_matrices(rdr))), -1, 0);
  const Tensor grad_a = matmul(q, add(dr, times_inverse_transpose_of_upper(tril, r)));
  const Tensor grad_b = times_inverse_transpose_of_upper(subtract(dq, matmul(q, qdq)), r);
  return add(grad_a, grad_b);
}

// TF _QrGrad; for m < n, a = [x | y]: x's square rule with dq + y dv^T, and dy = q dv.
static Grads qr_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& q = op.outputs()[0];
  const Tensor& r = op.outputs()[1];
  const Shape& a_shape = op.input_shape(0);
  const std::size_t m = a_shape[a_shape.size() - 2], n = a_shape.back();
  if (m >= n) return {deep_qr_gradient(q, r, g[0], g[1])};
  const auto wide = static_cast<std::int64_t>(m);
  const Tensor y = columns_of(op.inputs()[0], wide, -1);
  const Tensor dv = columns_of(g[1], wide, -1);
  const Tensor dx = deep_qr_gradient(
      q, columns_of(r, 0, wide), add(g[0], matmul(y, dv, false, true)), columns_of(g[1], 0, wide));
  return {concat({dx, matmul(q, dv)}, -1)};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(linalg_decompose)
