// What the linalg files (linalg*.cpp) share: batch shapes, the validation of matrix operands,
// the matrix transpose of a batch, and small constant matrices used inside gradient rules.
#pragma once

#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/shape_util.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/operand_checks.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The batch dimensions of a [..., rows, cols] shape (rank >= 2).
inline Shape matrix_batch_shape(const Shape& shape) {
  return Shape(shape.begin(), shape.end() - 2);
}

// The number of matrices of a [..., rows, cols] shape.
inline std::size_t matrix_count(const Shape& shape) {
  return num_elements(matrix_batch_shape(shape));
}

// Where in a batch a failure happened, for messages: "" for a single matrix.
inline std::string batch_position(std::size_t index, std::size_t count) {
  return count > 1 ? " (batch matrix " + std::to_string(index) + ")" : "";
}

// A defined floating tensor of rank >= 2 (a matrix or a batch of matrices [..., m, n]).
inline void require_matrices(const char* op, const char* name, const Tensor& t) {
  require_defined(op, t);
  if (!is_floating(t.dtype())) {
    throw InvalidArgument(describe(op, {{name, t}}) + ": only float32 and float64 are supported");
  }
  if (t.rank() < 2) {
    throw InvalidArgument(describe(op, {{name, t}}) +
                          ": expected a matrix or a batch of matrices [..., m, n] (rank >= 2)");
  }
}

// A floating tensor of shape [..., n, n]; returns n.
inline std::size_t require_square(const char* op, const char* name, const Tensor& t) {
  require_defined(op, t);
  if (!is_floating(t.dtype())) {
    throw InvalidArgument(describe(op, {{name, t}}) + ": only float32 and float64 are supported");
  }
  const Shape& s = t.shape();
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]) {
    throw InvalidArgument(describe(op, {{name, t}}) +
                          ": expected a square matrix or a batch of square matrices [..., n, n]");
  }
  return s.back();
}

// The one rule of the ops that factorise, invert or solve with a matrix (docs/ops.md, linalg):
// a NaN or an infinity in that matrix throws. LAPACK has no single answer for one (an
// iterative eigen or SVD solver may loop or return garbage, an LU or Cholesky gives NaN or a
// misleading "singular"), so no op hands one to it. Right-hand sides are not checked: a solve
// is arithmetic on them, and a NaN there comes out as NaN. `operands` describe the call.
inline void require_finite(const char* op, const char* name, const Tensor& t,
                           const std::vector<Operand>& operands) {
  if (computing_on_placeholders()) return;
  const auto finite = [](const auto& values) {
    for (const auto v : values) {
      if (!std::isfinite(v)) return false;
    }
    return true;
  };
  const bool ok = t.dtype() == DType::Float32 ? finite(kernel_array<float>(t))
                                              : finite(kernel_array<double>(t));
  if (!ok) {
    throw InvalidArgument(describe(op, operands) + ": " + name +
                          " has a NaN or infinite entry (its matrices must be finite)");
  }
}

// x with its last two axes swapped (the matrix transpose of every batch matrix).
inline Tensor transpose_matrices(const Tensor& x) {
  std::vector<int> perm(x.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

// The n x n identity (a constant).
inline Tensor identity_matrix(std::size_t n, DType dtype) {
  std::vector<double> values(n * n, 0.0);
  for (std::size_t d = 0; d < n; ++d) values[d * n + d] = 1.0;
  return from_values(values, {n, n}, dtype);
}

// The n x n constant with 0 on the diagonal and 1 elsewhere: multiplying by it sets a batch of
// matrices' diagonals to zero (TF's matrix_set_diag(x, 0)) and stays differentiable.
inline Tensor off_diagonal_mask(std::size_t n, DType dtype) {
  std::vector<double> values(n * n, 1.0);
  for (std::size_t d = 0; d < n; ++d) values[d * n + d] = 0.0;
  return from_values(values, {n, n}, dtype);
}

// n x n constant: 1 below the diagonal, 0.5 on it, 0 above. Multiplying by it takes the lower
// triangle with a halved diagonal (TF's band_part(set_diag(m, 0.5 diag(m)), -1, 0)) and keeps
// the gradient differentiable, since the mask is a constant.
inline Tensor halved_lower_mask(std::size_t n, DType dtype) {
  std::vector<double> mask(n * n, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < r; ++c) mask[r * n + c] = 1.0;
    mask[r * n + r] = 0.5;
  }
  return from_values(mask, {n, n}, dtype);
}

// TF's _SafeReciprocal: x / (x^2 + 1e-20), which is 1/x away from 0 and 0 at 0 (the gradients
// of eigh and svd use it where equal eigen/singular values would divide by zero).
inline Tensor safe_reciprocal(const Tensor& x) {
  return multiply(x, reciprocal(add(multiply(x, x), scalar(1e-20, x.dtype()))));
}

}  // namespace tapegrad::detail
