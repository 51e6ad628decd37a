// Matrix products (2-D, and batched with broadcast batch dimensions) through OpenBLAS gemm.
// MatMul and BatchMatMulV2 share one forward and one gradient; the LAPACK ops live in
// linalg_lapack.cpp. Everything but the public function has internal linkage.
#include "tapegrad/ops/linalg.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <cblas.h>

#include "kernels/blas_call_guard.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/linalg/blas_kernel_advice.hpp"
#include "ops/linalg/linalg_support.hpp"
#include "ops/op_support.hpp"
#include "ops/structure_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

// ---- MatMul, BatchMatMulV2 --------------------------------------------------------------

// Batching rule. One operand batched on a 2-D product becomes one larger product (one gemm
// instead of B): batched rows [B, m, k] are stacked into [B m, k]; batched columns [B, k, n]
// are laid side by side into [k, B n]. Otherwise a batched matmul, the batch axes broadcast.
static std::vector<Tensor> matmul_batched(const detail::BatchingContext& op,
                                          const std::vector<Tensor>& in) {
  const bool ta = op.attrs().get_bool("transpose_a");
  const bool tb = op.attrs().get_bool("transpose_b");
  Tensor a = in[0];
  Tensor b = in[1];
  const std::size_t ra = detail::example_rank(op, in, 0);
  const std::size_t rb = detail::example_rank(op, in, 1);
  const auto batch = static_cast<std::int64_t>(op.batch_size);
  const Shape out = op.batched_output_shape(0);
  const auto out_dims = std::vector<std::int64_t>(out.begin(), out.end());
  const std::size_t k_inner = in[0].shape()[in[0].rank() - (ta ? 2 : 1)];
  if (ra == 2 && rb == 2 && k_inner == 1) {
    // Outer products (a gradient of a matrix times one example's vector): one broadcast
    // multiply, column times row, instead of B products with an inner dimension of 1.
    const auto as_matrix = [&](const Tensor& t, std::size_t i, std::int64_t rows,
                               std::int64_t cols) {
      std::vector<std::int64_t> shape{rows, cols};
      if (op.is_batched(i)) shape.insert(shape.begin(), batch);
      return reshape(t, shape);
    };
    const auto m = static_cast<std::int64_t>(out[1]);
    const auto n = static_cast<std::int64_t>(out[2]);
    const Tensor column = ta ? as_matrix(a, 0, m, 1) : a;
    const Tensor row = tb ? as_matrix(b, 1, 1, n) : b;
    return {multiply(column, row)};
  }
  if (ra == 2 && rb == 2 && op.is_batched(0) != op.is_batched(1)) {
    const auto m = static_cast<std::int64_t>(out[1]);
    const auto n = static_cast<std::int64_t>(out[2]);
    // A batch of row blocks times one matrix: matmul's kernel makes it one gemm, with no
    // reshape copies of the operand or the product.
    if (op.is_batched(0) && !ta) return {matmul(a, b, false, tb)};
    if (op.is_batched(1)) {
      // [B, k, n] -> [k, B, n] (from [B, n, k] when transposed) -> [k, B n]
      const Tensor columns =
          transpose(b, tb ? std::vector<int>{2, 0, 1} : std::vector<int>{1, 0, 2});
      const auto k = static_cast<std::int64_t>(columns.shape()[0]);
      const Tensor product = matmul(a, reshape(columns, {k, batch * n}), ta, false);
      return {transpose(reshape(product, {m, batch, n}), {1, 0, 2})};
    }
  }
  const std::size_t rank = std::max(ra, rb);
  if (op.is_batched(0)) a = detail::align_batched(a, ra, rank);
  if (op.is_batched(1)) b = detail::align_batched(b, rb, rank);
  Tensor product = matmul(a, b, ta, tb);
  // Aligned batch axes of 1 (an example of lower rank) leave the batch shape as the example's.
  return {product.shape() == out ? product : reshape(product, out_dims)};
}

static detail::ReplayOutputs matmul_replay(const detail::ReplayContext& op,
                                           const std::vector<Tensor>& in) {
  const Attrs& attrs = op.attrs();
  return {matmul(in[0], in[1], attrs.get_bool("transpose_a"), attrs.get_bool("transpose_b"))};
}

// Structure rule. A constant matrix times a diagonal batch whose effective operand (after its
// transpose flag) is a column [k, 1] (right) or a row [1, k] (left): row b of the product is
// d[b] times column b of op(a) (right), or row b of op(b) (left), laid out as the output: a
// scaled copy of the matrix, dense, instead of a product.
static detail::StructuredOutputs matmul_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants) {
  if (op.recorded_attrs == nullptr) return std::nullopt;
  const bool ta = op.attrs().get_bool("transpose_a");
  const bool tb = op.attrs().get_bool("transpose_b");
  const Shape& out_example = op.output_shapes[0];
  std::vector<std::int64_t> out{0};
  out.insert(out.end(), out_example.begin(), out_example.end());
  if (values[1].is_diagonal() && constants[0].defined() && constants[0].rank() == 2) {
    const Tensor& d = values[1].diagonal;
    const Shape& s = d.shape();
    const bool column = s.size() == 2 && (tb ? s[0] == 1 : s[1] == 1);
    if (!column) return std::nullopt;
    const auto k = static_cast<std::int64_t>(d.size());
    out[0] = k;
    // out[b, i] = op(a)[i, b] d[b]: the rows of op(a)^T scaled.
    const Tensor a_t = ta ? constants[0] : transpose(constants[0]);
    return detail::dense_output(reshape(multiply(a_t, reshape(d, {k, 1})), out));
  }
  if (values[0].is_diagonal() && constants[1].defined() && constants[1].rank() == 2) {
    const Tensor& d = values[0].diagonal;
    const Shape& s = d.shape();
    const bool row = s.size() == 2 && (ta ? s[1] == 1 : s[0] == 1);
    if (!row) return std::nullopt;
    const auto k = static_cast<std::int64_t>(d.size());
    out[0] = k;
    // out[b, j] = d[b] op(b)[b, j]: the rows of op(b) scaled.
    const Tensor b_op = tb ? transpose(constants[1]) : constants[1];
    return detail::dense_output(reshape(multiply(b_op, reshape(d, {k, 1})), out));
  }
  return std::nullopt;
}

static Grads matmul_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents matmul_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(matmul_op) = detail::with_structure(
    detail::with_replay(detail::differentiable_op("MatMul", matmul_gradient, KeepSet::all(),
                                                  KeepSet::none(), matmul_tangent, matmul_batched),
                        matmul_replay),
    matmul_structured);
TAPEGRAD_BUILTIN_OP(batch_matmul_op) =
    detail::with_replay(detail::differentiable_op("BatchMatMulV2", matmul_gradient, KeepSet::all(),
                                                  KeepSet::none(), matmul_tangent, matmul_batched),
                        matmul_replay);

// y = op(M) x with M stored row-major as rows x cols.
static void gemv(bool trans, std::size_t rows, std::size_t cols, const float* m, const float* x,
                 float* y) {
  const detail::BlasCallGuard one_caller;
  cblas_sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(cols), 1.0f, m, static_cast<int>(cols), x, 1, 0.0f, y, 1);
}
static void gemv(bool trans, std::size_t rows, std::size_t cols, const double* m, const double* x,
                 double* y) {
  const detail::BlasCallGuard one_caller;
  cblas_dgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(cols), 1.0, m, static_cast<int>(cols), x, 1, 0.0, y, 1);
}

static void blas_gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                      const float* b, int ldb, float* c) {
  const detail::BlasCallGuard one_caller;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
}
static void blas_gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda,
                      const double* b, int ldb, double* c) {
  const detail::BlasCallGuard one_caller;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0, a, lda, b, ldb, 0.0, c, n);
}

// C[m,n] = op(A) op(B) on contiguous row-major storage; transposes are BLAS flags. A product
// with one row or one column goes to gemv: OpenBLAS's gemm repacks the whole matrix for it
// (a 256x256 matrix-vector product costs ~4x more as gemm), and a Jacobian or a gradient of a
// matrix-vector product is made of exactly those.
template <class T>
static void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const T* a,
                 const T* b, T* c) {
  detail::check_blas_kernels();
  if (n == 1) {  // op(B) is a k-vector, contiguous either way
    gemv(ta, ta ? k : m, ta ? m : k, a, b, c);
  } else if (m == 1) {  // c^T = op(B)^T op(A)^T, and op(A) is a contiguous k-vector
    gemv(!tb, tb ? n : k, tb ? k : n, b, a, c);
  } else {
    blas_gemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), c);
  }
}

static std::string matmul_message(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return detail::describe("matmul", {{"a", a}, {"b", b}}) +
         " (transpose_a=" + (ta ? "true" : "false") + ", transpose_b=" + (tb ? "true" : "false") +
         ")";
}

// For every matrix of the broadcast batch `out_batch` (row-major order), the index of the
// matrix of an operand whose batch shape is `in_batch` (NumPy broadcasting, leading 1s implied).
static std::vector<std::size_t> broadcast_matrix_indices(const Shape& in_batch,
                                                         const Shape& out_batch) {
  std::vector<std::size_t> indices;
  indices.reserve(num_elements(out_batch));
  detail::StridedCursor(out_batch, out_batch.size(), detail::broadcast_strides(in_batch, out_batch))
      .for_each([&](std::size_t offset) { indices.push_back(offset); });
  return indices;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  detail::require_defined("matmul", a);
  detail::require_defined("matmul", b);
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(matmul_message(a, b, transpose_a, transpose_b) + ": " + why);
  };
  if (a.dtype() != b.dtype()) fail("the dtypes differ");
  if (!is_floating(a.dtype())) fail("only float32 and float64 are supported");
  if (a.rank() < 2 || b.rank() < 2) {
    fail("both operands must have rank >= 2 (a matrix or a batch of matrices)");
  }
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const std::size_t a_rows = sa[sa.size() - 2], a_cols = sa[sa.size() - 1];
  const std::size_t b_rows = sb[sb.size() - 2], b_cols = sb[sb.size() - 1];
  const std::size_t m = transpose_a ? a_cols : a_rows;
  const std::size_t k = transpose_a ? a_rows : a_cols;
  const std::size_t kb = transpose_b ? b_cols : b_rows;
  const std::size_t n = transpose_b ? b_rows : b_cols;
  if (k != kb) {
    fail("the inner dimensions differ (" + std::to_string(k) + " vs " + std::to_string(kb) + ")");
  }
  const Shape batch_a = detail::matrix_batch_shape(sa);
  const Shape batch_b = detail::matrix_batch_shape(sb);
  Shape batch;
  try {
    batch = detail::broadcast_shapes("matmul", batch_a, batch_b);
  } catch (const InvalidArgument&) {
    fail("the batch dimensions " + shape_to_string(batch_a) + " and " + shape_to_string(batch_b) +
         " cannot be broadcast together");
  }
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  try {
    detail::check_new_shape("matmul", out_shape, a.dtype());
  } catch (const InvalidArgument& e) {
    fail(std::string("the product's shape is too large (") + e.what() + ")");
  }
  const std::size_t count = num_elements(batch);
  const bool batched = !batch.empty();

  Tensor out = detail::dispatch_floating("matmul", a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> c = detail::allocate_array<T>("matmul", out_shape);
    if (k == 0) {
      std::fill(c.begin(), c.end(), T(0));
    } else if (m != 0 && n != 0 && count != 0) {
      const T* pa = detail::kernel_data<T>(a);
      const T* pb = detail::kernel_data<T>(b);
      T* pc = c.data();
      if (!batched) {
        gemm(transpose_a, transpose_b, m, n, k, pa, pb, pc);
      } else if (!transpose_a && batch_b.empty() && batch_a == batch) {
        // A batch of row blocks times one matrix: the blocks are consecutive rows of one
        // [count m, k] matrix, so one gemm writes the whole [..., m, n] result.
        gemm(false, transpose_b, count * m, n, k, pa, pb, pc);
      } else {
        const auto ia = broadcast_matrix_indices(batch_a, batch);
        const auto ib = broadcast_matrix_indices(batch_b, batch);
        const std::size_t a_size = m * k, b_size = k * n, c_size = m * n;
        for (std::size_t i = 0; i < count; ++i) {
          gemm(transpose_a, transpose_b, m, n, k, pa + ia[i] * a_size, pb + ib[i] * b_size,
               pc + i * c_size);
        }
      }
    }
    return Tensor(std::move(c));
  });
  detail::record(
      (a.rank() == 2 && b.rank() == 2) ? matmul_op : batch_matmul_op, {&a, &b}, out,
      [&] { return Attrs().set("transpose_a", transpose_a).set("transpose_b", transpose_b); });
  return out;
}

// Bilinear: d(op(A) op(B)) = op(dA) op(B) + op(A) op(dB), with the op's own transposes (and
// batch broadcasting: each product has the output's batch shape).
static Tangents matmul_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& a = op.inputs[0];
  const Tensor& b = op.inputs[1];
  const bool ta = op.attrs().get_bool("transpose_a");
  const bool tb = op.attrs().get_bool("transpose_b");
  const Tensor from_a =
      detail::if_defined(tangents[0], [&](const Tensor& da) { return matmul(da, b, ta, tb); });
  const Tensor from_b =
      detail::if_defined(tangents[1], [&](const Tensor& db) { return matmul(a, db, ta, tb); });
  return {detail::output_tangent(op, 0, {from_a, from_b})};
}

// The gradient rules of TF's _MatMulGrad / _BatchMatMulV2Grad: the 2-D rule applied per batch
// matrix, then summed back over the batch dimensions each operand was broadcast along.
static Grads matmul_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& a = op.inputs()[0];
  const Tensor& b = op.inputs()[1];
  const bool ta = op.attrs().get_bool("transpose_a");
  const bool tb = op.attrs().get_bool("transpose_b");
  const Tensor& dy = g[0];
  Grads r(2);
  const bool need_a = op.needs_gradient(0);
  const bool need_b = op.needs_gradient(1);
  Tensor grad_a, grad_b;
  if (!ta && !tb) {
    if (need_a) grad_a = matmul(dy, b, false, true);
    if (need_b) grad_b = matmul(a, dy, true, false);
  } else if (!ta && tb) {
    if (need_a) grad_a = matmul(dy, b, false, false);
    if (need_b) grad_b = matmul(dy, a, true, false);
  } else if (ta && !tb) {
    if (need_a) grad_a = matmul(b, dy, false, true);
    if (need_b) grad_b = matmul(a, dy, false, false);
  } else {
    if (need_a) grad_a = matmul(b, dy, true, true);
    if (need_b) grad_b = matmul(dy, a, true, true);
  }
  if (need_a) r[0] = detail::sum_to_input(op, 0, grad_a);
  if (need_b) r[1] = detail::sum_to_input(op, 1, grad_b);
  return r;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(linalg)
