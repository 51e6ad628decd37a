// Keeps OpenBLAS's thread server to one caller at a time.
//
// OpenBLAS's pthread build hands a large enough BLAS or LAPACK call (gemm, getrf, getrs, ...)
// to its own worker threads, and its thread server can hang when several application threads
// do so at once: every caller spins in exec_blas_async for good (OpenBLAS issues #660, #937,
// #1497 report the same stacks). Four threads replaying a Function whose solve ran on 1,024
// right-hand sides hung this way here. While OpenBLAS may use more than one thread, each of
// tapegrad's BLAS and LAPACK calls holds one process-wide lock; with one OpenBLAS thread
// (OPENBLAS_NUM_THREADS=1, or openblas_set_num_threads(1)) every call runs on its caller's
// thread, nothing is shared, and no lock is taken.
#pragma once

#include <mutex>

namespace tapegrad::detail {

class BlasCallGuard {
 public:
  BlasCallGuard();
  BlasCallGuard(const BlasCallGuard&) = delete;
  BlasCallGuard& operator=(const BlasCallGuard&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace tapegrad::detail
