#include "kernels/blas_call_guard.hpp"

#include <cblas.h>

namespace tapegrad::detail {

namespace {
std::mutex& blas_server_mutex() {
  static std::mutex mutex;
  return mutex;
}
}  // namespace

// openblas_get_num_threads reads one integer: cheap next to any call worth guarding. It is
// read at every call, since a program may change the count while it runs.
BlasCallGuard::BlasCallGuard() {
  if (openblas_get_num_threads() > 1) lock_ = std::unique_lock<std::mutex>(blas_server_mutex());
}

}  // namespace tapegrad::detail
