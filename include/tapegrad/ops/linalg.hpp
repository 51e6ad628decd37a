// Linear algebra through OpenBLAS / LAPACK. Float32 and float64 only (InvalidArgument naming
// the op, the shapes and the dtypes otherwise). Matrices are the last two axes; any leading
// axes are a batch. Every op that factorises, inverts or solves with a matrix
// (matrix_inverse, matrix_determinant, solve, cholesky, triangular_solve, cholesky_solve,
// lstsq, slogdet, logdet, eigh, svd, qr) throws InvalidArgument naming the op, the shapes and
// dtypes when that matrix (a, or chol) holds a NaN or an infinity; right-hand sides are not
// checked (a NaN there comes out as NaN). matmul and the structure ops propagate NaN and inf.
#pragma once

#include <cstdint>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Matrix product (TF: tf.linalg.matmul). a [..., m, k], b [..., k, n] -> [..., m, n]
/// (each operand read transposed per matrix when its flag is set). Rank 2, or rank > 2 with
/// broadcast batch dimensions (TF BatchMatMulV2): a [2, 1, m, k] x b [3, k, n] ->
/// [2, 3, m, n]. Transposes go to BLAS as flags, never materialised.
/// InvalidArgument when an operand has rank < 2, the inner dimensions or the dtypes differ,
/// the batch dimensions do not broadcast, or the dtype is not floating.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

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

// ---- Added in 0.2 ------------------------------------------------------------------------
// Batched over leading dims like the ops above. Float32 and float64 (diag, diag_part,
// band_part, trace and cross also int32 and int64, without gradients). Every error is an
// InvalidArgument naming the op, the operands' shapes and dtypes, and the bad value.

/// The matrices with v on their diagonals: v [..., n] -> [..., n, n] (TF: tf.linalg.diag).
/// Gradient: diag_part of the output gradient.
Tensor diag(const Tensor& v);
/// The main diagonal of each matrix: a [..., m, n] -> [..., min(m, n)]
/// (TF: tf.linalg.diag_part). Gradient: the output gradient placed on an m x n diagonal.
Tensor diag_part(const Tensor& a);
/// The sum of each matrix's diagonal: a [..., m, n] -> [...] (TF: tf.linalg.trace);
/// reduce_sum(diag_part(a), -1).
Tensor trace(const Tensor& a);
/// Each matrix a [..., m, n] with the entries outside a band set to 0: entry (i, j) is kept
/// when (lower < 0 or i - j <= lower) and (upper < 0 or j - i <= upper)
/// (TF: tf.linalg.band_part; band_part(a, -1, 0) is the lower triangle). lower must be
/// <= m and upper <= n (TF). Gradient: band_part of the output gradient.
Tensor band_part(const Tensor& a, std::int64_t lower, std::int64_t upper);
/// The cross product of 3-vectors along the last axis: a, b [..., 3] of the same shape and
/// dtype -> [..., 3] (TF: tf.linalg.cross).
Tensor cross(const Tensor& a, const Tensor& b);

/// x with op(a) x = b for triangular a [..., n, n] and b [..., n, k] -> [..., n, k], op(a) = a
/// or, with `adjoint`, a^T (TF: tf.linalg.triangular_solve). Only a's lower (or, with
/// lower = false, upper) triangle is read; its gradient is in that triangle. The batch
/// dimensions must be equal. InvalidArgument also when a diagonal entry is exactly 0.
Tensor triangular_solve(const Tensor& a, const Tensor& b, bool lower = true, bool adjoint = false);
/// x with (L L^T) x = b from the lower Cholesky factor L = chol [..., n, n] of a, b [..., n, k]
/// (TF: tf.linalg.cholesky_solve): two triangular solves.
Tensor cholesky_solve(const Tensor& chol, const Tensor& b);
/// Regularised least squares (TF: tf.linalg.lstsq with fast = true): a [..., m, n],
/// b [..., m, k] -> x [..., n, k]. m >= n: x minimises |a x - b|^2 + l2 |x|^2, from the normal
/// equations (a^T a + l2 I) x = a^T b by Cholesky. m < n: the minimum-norm solution
/// x = a^T (a a^T + l2 I)^-1 b. Composed of differentiable ops (any order of derivative); as
/// in TF the normal equations square a's condition number. InvalidArgument when l2 < 0 or the
/// Gram matrix is not positive definite (a rank-deficient a with l2 = 0).
Tensor lstsq(const Tensor& a, const Tensor& b, double l2 = 0.0);

/// sign(det(a)) and log|det(a)| of each square matrix a [..., n, n] -> two [...] tensors
/// (TF: tf.linalg.slogdet), from the LU factors, summed in logs: finite where det(a)
/// overflows. A singular matrix gives sign 0 and log_abs_det -inf. sign has no gradient;
/// log_abs_det's gradient is g inv(a)^T.
struct SlogdetResult {
  Tensor sign;
  Tensor log_abs_det;
};
SlogdetResult slogdet(const Tensor& a);
/// log(det(a)) of each symmetric positive definite a [..., n, n] -> [...] (TF:
/// tf.linalg.logdet): 2 sum(log(diag(cholesky(a)))), finite where det(a) overflows.
/// InvalidArgument when a is not positive definite.
Tensor logdet(const Tensor& a);

/// Eigen-decomposition of each symmetric a [..., n, n] (TF: tf.linalg.eigh, LAPACK syevd):
/// eigenvalues [..., n] ascending, eigenvectors [..., n, n] with one unit eigenvector per
/// column (a v = v diag(eigenvalues)); each eigenvector's sign is LAPACK's. Only a's lower
/// triangle is read and the gradient lies in it. The gradient is TF's, exact for distinct
/// eigenvalues; where two eigenvalues are equal TF's safe reciprocal drops that pair's
/// eigenvector term (finite, no NaN): the first derivative of a function of the eigenvalues
/// only is exact there; second derivatives and every function of the eigenvectors, even one
/// smooth there (V diag(f(eigenvalues)) V^T), are silently wrong (docs/ops.md, "Degenerate
/// spectra").
struct EighResult {
  Tensor eigenvalues;
  Tensor eigenvectors;
};
EighResult eigh(const Tensor& a);

/// Singular value decomposition a = u diag(s) v^T of each a [..., m, n] (TF: tf.linalg.svd,
/// LAPACK gesdd), k = min(m, n): s [..., k] descending and non-negative; u [..., m, k] and
/// v [..., n, k] ([..., m, m] and [..., n, n] with full_matrices), orthonormal columns, each
/// pair's sign LAPACK's. Gradient: TF's, exact for distinct non-zero singular values; at
/// repeated (or zero) singular values TF's safe reciprocal drops the ill-defined terms
/// (finite, no NaN): only the first derivative of a function of s is exact there; second
/// derivatives and functions of u or v, even u diag(s) v^T = a, are silently wrong
/// (docs/ops.md, "Degenerate spectra"). With full_matrices the gradient exists
/// only when |m - n| <= 1 (TF's restriction): InvalidArgument otherwise, when it is asked for.
struct SvdResult {
  Tensor s;
  Tensor u;
  Tensor v;
};
SvdResult svd(const Tensor& a, bool full_matrices = false);

/// Reduced QR decomposition a = q r of each a [..., m, n] (TF: tf.linalg.qr with
/// full_matrices = false, LAPACK geqrf + orgqr), k = min(m, n): q [..., m, k] with orthonormal
/// columns, r [..., k, n] upper triangular (trapezoidal when m < n; diagonal signs LAPACK's).
/// Gradient: TF's, for m >= n and m < n (needs the leading k x k block of r invertible).
struct QrResult {
  Tensor q;
  Tensor r;
};
QrResult qr(const Tensor& a);

}  // namespace tapegrad
