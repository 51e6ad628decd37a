// The singular value decomposition through LAPACK gesdd: its forward, its forward rule and TF's
// gradient. Everything but the public function has internal linkage.
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

namespace tapegrad {

using detail::transpose_matrices;

static Grads svd_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents svd_tangent(const ForwardContext& op, const Tangents& tangents);
// svd runs over leading axes: one call on the batch with the recorded full_matrices.
static std::vector<Tensor> svd_batched(const detail::BatchingContext& op,
                                       const std::vector<Tensor>& inputs) {
  const SvdResult r = svd(inputs[0], op.attrs().get_bool("full_matrices"));
  return {r.s, r.u, r.v};
}
static detail::ReplayOutputs svd_replay(const detail::ReplayContext& op,
                                        const std::vector<Tensor>& inputs) {
  const SvdResult r = svd(inputs[0], op.attrs().get_bool("full_matrices"));
  return {r.s, r.u, r.v};
}
TAPEGRAD_BUILTIN_OP(svd_op) =
    detail::with_replay(detail::differentiable_op("Svd", svd_gradient, KeepSet::none(),
                                                  KeepSet::all(), svd_tangent, svd_batched),
                        svd_replay);

// Sets every [rows, cols] matrix of `x` to the first columns of the identity (the orthonormal
// factor of an empty SVD).
template <class T>
static void fill_identity_columns(xt::xarray<T>& x, std::size_t rows, std::size_t cols) {
  std::fill(x.begin(), x.end(), T(0));
  const std::size_t size = rows * cols;
  for (std::size_t start = 0; size != 0 && start < x.size(); start += size) {
    for (std::size_t d = 0; d < std::min(rows, cols); ++d) x.data()[start + d * cols + d] = T(1);
  }
}

SvdResult svd(const Tensor& a, bool full_matrices) {
  detail::require_matrices("svd", "a", a);
  detail::require_finite("svd", "a", a, {{"a", a}});
  const std::size_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const std::size_t k = std::min(m, n);
  const std::size_t u_cols = full_matrices ? m : k, v_cols = full_matrices ? n : k;
  const std::size_t count = detail::matrix_count(a.shape());
  const Shape batch = detail::matrix_batch_shape(a.shape());
  const auto with = [&](std::size_t rows, std::size_t cols) {
    Shape shape = batch;
    shape.push_back(rows);
    shape.push_back(cols);
    return shape;
  };
  std::vector<Tensor> outputs = detail::dispatch_floating("svd", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    Shape s_shape = batch;
    s_shape.push_back(k);
    xt::xarray<T> s = detail::allocate_array<T>("svd", s_shape);
    xt::xarray<T> u = detail::allocate_array<T>("svd", with(m, u_cols));
    xt::xarray<T> v = detail::allocate_array<T>("svd", with(n, v_cols));
    if (k == 0 || count == 0) {
      fill_identity_columns(u, m, u_cols);
      fill_identity_columns(v, n, v_cols);
      return std::vector<Tensor>{Tensor(std::move(s)), Tensor(std::move(u)), Tensor(std::move(v))};
    }
    // Row-major a read column-major is a^T (n x m) = U' S V'^T, so a = V' S U'^T: LAPACK's
    // V'^T (u_cols x m, column-major) read row-major is a's u as it stands, and its U'
    // (n x v_cols, column-major) is a's v transposed.
    const char jobz = full_matrices ? 'A' : 'S';
    const auto rows = static_cast<blasint>(n), cols = static_cast<blasint>(m);
    std::vector<T> matrix(m * n), left(n * v_cols);
    std::vector<blasint> iwork(8 * k);
    T query = T(0);
    detail::singular_values(jobz, rows, cols, matrix.data(), s.data(), left.data(), rows, u.data(),
                            static_cast<blasint>(u_cols), &query, -1, iwork.data());
    std::vector<T> work(static_cast<std::size_t>(detail::workspace_size(query)));
    for (std::size_t i = 0; i < count; ++i) {
      std::copy(detail::kernel_data<T>(a) + i * m * n, detail::kernel_data<T>(a) + (i + 1) * m * n,
                matrix.begin());
      const blasint info =
          detail::singular_values(jobz, rows, cols, matrix.data(), s.data() + i * k, left.data(),
                                  rows, u.data() + i * m * u_cols, static_cast<blasint>(u_cols),
                                  work.data(), static_cast<blasint>(work.size()), iwork.data());
      if (info != 0) {
        throw InvalidArgument(detail::describe("svd", {{"a", a}}) +
                              ": the SVD did not converge (LAPACK gesdd info " +
                              std::to_string(info) + ")" + detail::batch_position(i, count));
      }
      T* v_dst = v.data() + i * n * v_cols;
      for (std::size_t row = 0; row < n; ++row) {
        for (std::size_t col = 0; col < v_cols; ++col)
          v_dst[row * v_cols + col] = left[col * n + row];
      }
    }
    return std::vector<Tensor>{Tensor(std::move(s)), Tensor(std::move(u)), Tensor(std::move(v))};
  });
  detail::record(svd_op, {&a}, outputs,
                 [&] { return Attrs().set("full_matrices", full_matrices); });
  return {outputs[0], outputs[1], outputs[2]};
}

// F[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it and between equal values (TF's f).
static Tensor squared_gap_reciprocals(const Tensor& s) {
  const Tensor s2 = multiply(s, s);
  return multiply(detail::safe_reciprocal(subtract(expand_dims(s2, -2), expand_dims(s2, -1))),
                  detail::off_diagonal_mask(s.shape().back(), s.dtype()));
}

// The first `columns` columns of a batch of matrices x [..., r, c], or the rest after them.
static Tensor leading_columns(const Tensor& x, std::size_t columns) {
  std::vector<std::int64_t> begin(x.rank(), 0), size(x.rank(), -1);
  size.back() = static_cast<std::int64_t>(columns);
  return slice(x, begin, size);
}
static Tensor trailing_columns(const Tensor& x, std::size_t after) {
  std::vector<std::int64_t> begin(x.rank(), 0), size(x.rank(), -1);
  begin.back() = static_cast<std::int64_t>(after);
  return slice(x, begin, size);
}

// The restriction TF puts on the full_matrices derivatives (|m - n| > 1), or for the forward
// rule any m != n.
[[noreturn]] static void unsupported_full_matrices(const Shape& a_shape, DType dtype,
                                                   const char* what) {
  throw InvalidArgument("svd: a has shape " + shape_to_string(a_shape) + " and dtype " +
                        dtype_name(dtype) + ": the " + what +
                        " of svd with full_matrices=true is not implemented for these m and n "
                        "(TF's restriction; use full_matrices=false)");
}

// Reduced SVD (Townsend, "Differentiating the singular value decomposition"), P = U^T dA V:
// ds = diag(P), dU = U (F o (P S + S P^T)) + (I - U U^T) dA V S^-1,
// dV = V (F o (S P + P^T S)) + (I - V V^T) dA^T U S^-1.
static Tangents svd_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& da = tangents[0];
  if (!da.defined()) return {Tensor(), Tensor(), Tensor()};
  const Tensor& s = op.outputs[0];
  const Tensor& u = op.outputs[1];
  const Tensor& v = op.outputs[2];
  const Shape& a_shape = op.inputs[0].shape();
  const std::size_t m = a_shape[a_shape.size() - 2], n = a_shape.back();
  if (op.attrs().get_bool("full_matrices") && m != n) {
    unsupported_full_matrices(a_shape, op.inputs[0].dtype(), "forward-mode derivative");
  }
  const Tensor s_mat = diag(s);
  const Tensor s_inv = diag(detail::safe_reciprocal(s));
  const Tensor f = squared_gap_reciprocals(s);
  const Tensor p = matmul(u, matmul(da, v), true, false);
  const Tensor ps = matmul(p, s_mat);
  const Tensor sp = matmul(s_mat, p);
  const Tensor da_v = matmul(da, v);
  const Tensor dat_u = matmul(da, u, true, false);
  const Tensor du = add(matmul(u, multiply(f, add(ps, transpose_matrices(ps)))),
                        matmul(subtract(da_v, matmul(u, matmul(u, da_v, true, false))), s_inv));
  const Tensor dv = add(matmul(v, multiply(f, add(sp, transpose_matrices(sp)))),
                        matmul(subtract(dat_u, matmul(v, matmul(v, dat_u, true, false))), s_inv));
  return {diag_part(p), du, dv};
}

// TF _SvdGrad (real), written for m <= n; a tall a is handled as its transpose.
static Grads svd_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const bool full_matrices = op.attrs().get_bool("full_matrices");
  const Shape& a_shape = op.input_shape(0);
  std::size_t m = a_shape[a_shape.size() - 2], n = a_shape.back();
  const Tensor& s = op.outputs()[0];  // a's dtype
  if (full_matrices && (m > n ? m - n : n - m) > 1) {
    unsupported_full_matrices(a_shape, s.dtype(), "gradient");
  }
  Tensor u = op.outputs()[1], v = op.outputs()[2];
  Tensor grad_u = g[1], grad_v = g[2];
  const bool transposed = m > n;
  if (transposed) {
    std::swap(m, n);
    std::swap(u, v);
    std::swap(grad_u, grad_v);
  }
  const Tensor s_mat = diag(s);
  const Tensor f = squared_gap_reciprocals(s);
  const Tensor v1 = full_matrices && m != n ? leading_columns(v, m) : v;
  const Tensor grad_v1 = full_matrices && m != n ? leading_columns(grad_v, m) : grad_v;
  const Tensor f_u = multiply(f, matmul(u, grad_u, true, false));
  const Tensor f_v = multiply(f, matmul(v1, grad_v1, true, false));
  const Tensor middle = add(add(diag(g[0]), matmul(add(f_u, transpose_matrices(f_u)), s_mat)),
                            matmul(s_mat, add(f_v, transpose_matrices(f_v))));
  Tensor grad = matmul(u, matmul(middle, v1, false, true));
  if (m != n) {
    const Tensor grad_v1_t = transpose_matrices(grad_v1);
    Tensor rest = subtract(grad_v1_t, matmul(matmul(grad_v1_t, v1), v1, false, true));
    if (full_matrices) {
      const Tensor v2 = trailing_columns(v, m);
      const Tensor grad_v2 = trailing_columns(grad_v, m);
      rest = subtract(rest, matmul(matmul(v1, grad_v2, true, false), v2, false, true));
    }
    const Tensor s_inv = diag(detail::safe_reciprocal(s));
    grad = add(grad, matmul(matmul(u, s_inv), rest));
  }
  return {transposed ? transpose_matrices(grad) : grad};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(linalg_svd)
