// A unit that turns xsimd on itself, as a consumer that never saw the target's definitions
// might (built without them by test/consumer/CMakeLists.txt).
#ifndef XTENSOR_USE_XSIMD
#define XTENSOR_USE_XSIMD
#endif

#include "checks.hpp"
#include "units.hpp"

int checks_with_own_xsimd(const tapegrad::Tensor& from_main) {
  return run_consumer_checks("own XTENSOR_USE_XSIMD", from_main);
}
