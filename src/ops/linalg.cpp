// Linear algebra: forward kernels (OpenBLAS / LAPACK) and gradients side by side.
#include "tapegrad/ops/linalg.hpp"

#include <cblas.h>

#include "detail/dispatch.hpp"
#include "detail/recording.hpp"
#include "detail/shape_util.hpp"

namespace tapegrad {

using detail::OpSlot;
using Grads = std::vector<GradientValue>;

namespace {

// C[m,n] = op(A) op(B) on contiguous row-major storage; transposes are BLAS flags.
void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* a,
          const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), 0.0f, c,
              static_cast<int>(n));
}
void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const double* a,
          const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), 0.0, c,
              static_cast<int>(n));
}

std::string matmul_message(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return "matmul: a has shape " + shape_to_string(a.shape()) + " and dtype " +
         dtype_name(a.dtype()) + ", b has shape " + shape_to_string(b.shape()) + " and dtype " +
         dtype_name(b.dtype()) + " (transpose_a=" + (ta ? "true" : "false") +
         ", transpose_b=" + (tb ? "true" : "false") + ")";
}

Grads matmul_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& a = ctx.inputs()[0];
  const Tensor& b = ctx.inputs()[1];
  const bool ta = ctx.attrs().get_bool("transpose_a");
  const bool tb = ctx.attrs().get_bool("transpose_b");
  const Tensor& dy = g[0];
  Grads r(2);
  const bool need_a = ctx.needs_gradient(0);
  const bool need_b = ctx.needs_gradient(1);
  if (!ta && !tb) {
    if (need_a) r[0] = matmul(dy, b, false, true);
    if (need_b) r[1] = matmul(a, dy, true, false);
  } else if (!ta && tb) {
    if (need_a) r[0] = matmul(dy, b, false, false);
    if (need_b) r[1] = matmul(dy, a, true, false);
  } else if (ta && !tb) {
    if (need_a) r[0] = matmul(b, dy, false, true);
    if (need_b) r[1] = matmul(a, dy, false, false);
  } else {
    if (need_a) r[0] = matmul(b, dy, true, true);
    if (need_b) r[1] = matmul(dy, a, true, true);
  }
  return r;
}

const OpSlot& matmul_op() {
  static const OpSlot& op = detail::define_op("MatMul", matmul_grad, Keep::all(), Keep::none());
  return op;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  detail::require_defined("matmul", a);
  detail::require_defined("matmul", b);
  if (a.dtype() != b.dtype()) {
    throw InvalidArgument(matmul_message(a, b, transpose_a, transpose_b) + ": the dtypes differ");
  }
  if (a.rank() != 2 || b.rank() != 2) {
    throw InvalidArgument(matmul_message(a, b, transpose_a, transpose_b) +
                          ": both operands must be matrices (rank 2)");
  }
  const std::size_t m = transpose_a ? a.shape()[1] : a.shape()[0];
  const std::size_t k = transpose_a ? a.shape()[0] : a.shape()[1];
  const std::size_t kb = transpose_b ? b.shape()[1] : b.shape()[0];
  const std::size_t n = transpose_b ? b.shape()[0] : b.shape()[1];
  if (k != kb) {
    throw InvalidArgument(matmul_message(a, b, transpose_a, transpose_b) +
                          ": the inner dimensions differ (" + std::to_string(k) + " vs " +
                          std::to_string(kb) + ")");
  }
  Tensor out = detail::dispatch_floating("matmul", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> c = xt::empty<T>(Shape{m, n});
    if (k == 0) {
      std::fill(c.begin(), c.end(), T(0));
    } else if (m != 0 && n != 0) {
      gemm(transpose_a, transpose_b, m, n, k, a.array<T>().data(), b.array<T>().data(), c.data());
    }
    return Tensor(std::move(c));
  });
  if (detail::any_tape_active()) {
    Attrs attrs;
    attrs.set("transpose_a", transpose_a).set("transpose_b", transpose_b);
    const Tensor* in[] = {&a, &b};
    detail::record_on_tapes(matmul_op(), in, 2, &out, 1, attrs);
  }
  return out;
}

}  // namespace tapegrad
