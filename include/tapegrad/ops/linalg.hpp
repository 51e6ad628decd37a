// Linear algebra through OpenBLAS / LAPACK. Float32 and float64 only (InvalidArgument naming
// the op, the shapes and the dtypes otherwise). Matrices are the last two axes; any leading
// axes are a batch.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Matrix product (TF: tf.linalg.matmul). a [..., m, k], b [..., k, n] -> [..., m, n]
/// (each operand read transposed per matrix when its flag is set). Rank 2, or rank > 2 with
/// broadcast batch dimensions (TF BatchMatMulV2): a [2, 1, m, k] x b [3, k, n] ->
/// [2, 3, m, n]. Transposes go to BLAS as flags, never materialised.
/// InvalidArgument when an operand has rank < 2, the inner dimensions or the dtypes differ,
/// the batch dimensions do not broadcast, or the dtype is not floating.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
              bool transpose_b = false);

/// Inverse of each square matrix a [..., n, n] (TF: tf.linalg.inv), by LU factorisation.
/// InvalidArgument when a is not [..., n, n] or a matrix is singular (an exact zero pivot).
Tensor matrix_inverse(const Tensor& a);
/// Determinant of each square matrix a [..., n, n] -> [...] (TF: tf.linalg.det), from the LU
/// factorisation. A singular matrix gives 0 (its gradient then throws, as it needs inv(a)).
Tensor matrix_determinant(const Tensor& a);
/// x with a x = b for a [..., n, n], b [..., n, k] -> [..., n, k] (TF: tf.linalg.solve).
/// The batch dimensions must be equal (no broadcasting, as TF MatrixSolve). InvalidArgument
/// on mismatched shapes or dtypes, or a singular a.
Tensor solve(const Tensor& a, const Tensor& b);
/// Lower-triangular L with L L^T = a for symmetric positive definite a [..., n, n]
/// (TF: tf.linalg.cholesky). Only the lower triangle of a is read; the gradient assumes a
/// is symmetric and is itself symmetric. InvalidArgument when a matrix is not positive
/// definite.
Tensor cholesky(const Tensor& a);

}  // namespace tapegrad
