// Typed calls into OpenBLAS's BLAS and LAPACK for the linalg files: LU (getrf/getrs) with the
// batch helper BatchLu, Cholesky (potrf), triangular solves (trsm), the symmetric eigensolver
// (syevd), the SVD (gesdd) and QR (geqrf/orgqr). Each returns LAPACK's info.
//
// LAPACK is column-major and tapegrad row-major: a row-major m x n buffer read column-major is
// the n x m transpose. Each caller says how it undoes that.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <cblas.h>
#include <f77blas.h>

#include "kernels/blas_call_guard.hpp"
#include "ops/linalg/linalg_support.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/tensor.hpp"

// OpenBLAS's f77blas.h declares only part of LAPACK. The rest, with the gfortran ABI: every
// CHARACTER argument adds a hidden length after the last argument (passed, as LAPACKE does,
// so that no callee reads a length from an unset register or stack slot).
extern "C" {
void ssyevd_(const char* jobz, const char* uplo, const blasint* n, float* a, const blasint* lda,
             float* w, float* work, const blasint* lwork, blasint* iwork, const blasint* liwork,
             blasint* info, std::size_t jobz_length, std::size_t uplo_length);
void dsyevd_(const char* jobz, const char* uplo, const blasint* n, double* a, const blasint* lda,
             double* w, double* work, const blasint* lwork, blasint* iwork, const blasint* liwork,
             blasint* info, std::size_t jobz_length, std::size_t uplo_length);
void sgesdd_(const char* jobz, const blasint* m, const blasint* n, float* a, const blasint* lda,
             float* s, float* u, const blasint* ldu, float* vt, const blasint* ldvt, float* work,
             const blasint* lwork, blasint* iwork, blasint* info, std::size_t jobz_length);
void dgesdd_(const char* jobz, const blasint* m, const blasint* n, double* a, const blasint* lda,
             double* s, double* u, const blasint* ldu, double* vt, const blasint* ldvt,
             double* work, const blasint* lwork, blasint* iwork, blasint* info,
             std::size_t jobz_length);
void sgeqrf_(const blasint* m, const blasint* n, float* a, const blasint* lda, float* tau,
             float* work, const blasint* lwork, blasint* info);
void dgeqrf_(const blasint* m, const blasint* n, double* a, const blasint* lda, double* tau,
             double* work, const blasint* lwork, blasint* info);
void sorgqr_(const blasint* m, const blasint* n, const blasint* k, float* a, const blasint* lda,
             const float* tau, float* work, const blasint* lwork, blasint* info);
void dorgqr_(const blasint* m, const blasint* n, const blasint* k, double* a, const blasint* lda,
             const double* tau, double* work, const blasint* lwork, blasint* info);
}

namespace tapegrad::detail {

// ---- LU -----------------------------------------------------------------------------------

inline blasint lu_factor(blasint n, float* a, blasint* pivots) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  BLASFUNC(sgetrf)(&n, &n, a, &n, pivots, &info);
  return info;
}
inline blasint lu_factor(blasint n, double* a, blasint* pivots) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  BLASFUNC(dgetrf)(&n, &n, a, &n, pivots, &info);
  return info;
}
inline blasint lu_solve(char trans, blasint n, blasint k, float* lu, blasint* pivots, float* b) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  BLASFUNC(sgetrs)(&trans, &n, &k, lu, &n, pivots, b, &n, &info);
  return info;
}
inline blasint lu_solve(char trans, blasint n, blasint k, double* lu, blasint* pivots, double* b) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  BLASFUNC(dgetrs)(&trans, &n, &k, lu, &n, pivots, b, &n, &info);
  return info;
}

// The LU factors of a batch of n x n matrices [..., n, n], one matrix at a time in one
// reused workspace (LAPACK getrf on the matrix read column-major, i.e. on its transpose).
template <class T>
class BatchLu {
 public:
  BatchLu(const Tensor& a, std::size_t n)
      : matrices_(detail::kernel_data<T>(a)),
        n_(n),
        count_(matrix_count(a.shape())),
        // An empty batch needs no workspace (its matrices may be nominally huge).
        lu_(count_ == 0 ? 0 : n * n),
        pivots_(count_ == 0 ? 0 : n) {}

  std::size_t count() const { return count_; }

  // Factors batch matrix i; false when a pivot is exactly zero (the matrix is singular; the
  // factorisation is still complete).
  bool factor(std::size_t i) {
    const T* src = matrices_ + i * n_ * n_;
    std::copy(src, src + n_ * n_, lu_.begin());
    return n_ == 0 || lu_factor(static_cast<blasint>(n_), lu_.data(), pivots_.data()) == 0;
  }

  // Solves with the last factored matrix for the k columns of `columns` (n x k column-major),
  // in place; trans 'N' solves with the matrix read column-major, 'T' with its transpose.
  void solve(char trans, std::size_t k, T* columns) {
    if (n_ == 0 || k == 0) return;
    lu_solve(trans, static_cast<blasint>(n_), static_cast<blasint>(k), lu_.data(), pivots_.data(),
             columns);
  }

  // The determinant of the last factored matrix: the product of U's diagonal, its sign
  // flipped by each row swap.
  T determinant() const {
    T det = T(1);
    for (std::size_t d = 0; d < n_; ++d) {
      det *= lu_[d * n_ + d];
      if (pivots_[d] != static_cast<blasint>(d + 1)) det = -det;
    }
    return det;
  }

  // The same as a sign (-1, 0 or 1) and the log of its absolute value (-inf when singular),
  // summed in logs so that it never overflows where the determinant itself would.
  void log_abs_determinant(T& sign, T& log_abs) const {
    sign = T(1);
    log_abs = T(0);
    for (std::size_t d = 0; d < n_; ++d) {
      const T pivot = lu_[d * n_ + d];
      if (pivot < T(0)) sign = -sign;
      if (pivots_[d] != static_cast<blasint>(d + 1)) sign = -sign;
      log_abs += std::log(std::abs(pivot));
    }
    if (std::isinf(log_abs) && log_abs < T(0)) sign = T(0);
  }

 private:
  const T* matrices_;
  std::size_t n_;
  std::size_t count_;
  std::vector<T> lu_;
  std::vector<blasint> pivots_;
};

// ---- Cholesky, triangular solves -----------------------------------------------------------

inline blasint cholesky_factor(blasint n, float* a) {
  char upper = 'U';
  blasint info = 0;
  const BlasCallGuard one_caller;
  BLASFUNC(spotrf)(&upper, &n, a, &n, &info);
  return info;
}
inline blasint cholesky_factor(blasint n, double* a) {
  char upper = 'U';
  blasint info = 0;
  const BlasCallGuard one_caller;
  BLASFUNC(dpotrf)(&upper, &n, a, &n, &info);
  return info;
}

// b := op(A)^-1 b in place for a row-major n x n triangular A and a row-major n x k b; only
// A's `lower` (or upper) triangle is read, op(A) = A^T when `transpose`.
inline void triangular_solve_in_place(bool lower, bool transpose, std::size_t n, std::size_t k,
                                      const float* a, float* b) {
  const BlasCallGuard one_caller;
  cblas_strsm(CblasRowMajor, CblasLeft, lower ? CblasLower : CblasUpper,
              transpose ? CblasTrans : CblasNoTrans, CblasNonUnit, static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(n), b,
              static_cast<blasint>(k));
}
inline void triangular_solve_in_place(bool lower, bool transpose, std::size_t n, std::size_t k,
                                      const double* a, double* b) {
  const BlasCallGuard one_caller;
  cblas_dtrsm(CblasRowMajor, CblasLeft, lower ? CblasLower : CblasUpper,
              transpose ? CblasTrans : CblasNoTrans, CblasNonUnit, static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0, a, static_cast<blasint>(n), b, static_cast<blasint>(k));
}

// ---- Symmetric eigensolver, SVD, QR ----------------------------------------------------------
// A `lwork` of -1 asks for the optimal workspace size, returned in work[0] (and iwork[0]).

inline blasint symmetric_eigen(char uplo, blasint n, float* a, float* w, float* work, blasint lwork,
                               blasint* iwork, blasint liwork) {
  const char jobz = 'V';
  blasint info = 0;
  const BlasCallGuard one_caller;
  ssyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
  return info;
}
inline blasint symmetric_eigen(char uplo, blasint n, double* a, double* w, double* work,
                               blasint lwork, blasint* iwork, blasint liwork) {
  const char jobz = 'V';
  blasint info = 0;
  const BlasCallGuard one_caller;
  dsyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
  return info;
}

inline blasint singular_values(char jobz, blasint m, blasint n, float* a, float* s, float* u,
                               blasint ldu, float* vt, blasint ldvt, float* work, blasint lwork,
                               blasint* iwork) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  sgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
  return info;
}
inline blasint singular_values(char jobz, blasint m, blasint n, double* a, double* s, double* u,
                               blasint ldu, double* vt, blasint ldvt, double* work, blasint lwork,
                               blasint* iwork) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  dgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
  return info;
}

inline blasint qr_factor(blasint m, blasint n, float* a, float* tau, float* work, blasint lwork) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  sgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
  return info;
}
inline blasint qr_factor(blasint m, blasint n, double* a, double* tau, double* work,
                         blasint lwork) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
  return info;
}
inline blasint qr_form_q(blasint m, blasint n, blasint k, float* a, const float* tau, float* work,
                         blasint lwork) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  sorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
  return info;
}
inline blasint qr_form_q(blasint m, blasint n, blasint k, double* a, const double* tau,
                         double* work, blasint lwork) {
  blasint info = 0;
  const BlasCallGuard one_caller;
  dorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
  return info;
}

// The workspace size LAPACK reported in work[0] by a query (at least 1).
template <class T>
blasint workspace_size(T reported) {
  return std::max<blasint>(1, static_cast<blasint>(reported));
}

}  // namespace tapegrad::detail
