// Linear algebra through OpenBLAS / LAPACK.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Matrix product (TF: tf.linalg.matmul). Rank 2, or rank > 2 with broadcast batch
/// dimensions (TF BatchMatMulV2). Transposes go to BLAS as flags, never materialised.
/// InvalidArgument when the inner dimensions or the dtypes differ.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
              bool transpose_b = false);
/// TF: tf.linalg.inv, tf.linalg.det, tf.linalg.solve, tf.linalg.cholesky. Square matrices
/// [..., n, n]; InvalidArgument otherwise.
Tensor matrix_inverse(const Tensor& a);
Tensor matrix_determinant(const Tensor& a);
Tensor solve(const Tensor& a, const Tensor& b);
Tensor cholesky(const Tensor& a);

}  // namespace tapegrad
