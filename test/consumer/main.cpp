// A consumer of an installed (or add_subdirectory'd) tapegrad, compiled with the target's own
// definitions; the other two units decide XTENSOR_USE_XSIMD themselves. Exits non-zero when any
// check of any unit fails.
#include "checks.hpp"
#include "units.hpp"

int main() {
  const tg::Tensor from_main(xt::xarray<double>{0.25, -8.0});
  int failures = run_consumer_checks("target definitions", from_main);
  failures += checks_with_own_xsimd(from_main);
  failures += checks_without_xsimd(from_main);
  // And the other way round: tensors made in those units, read here.
  failures += run_consumer_checks("target definitions, tensor from the unit without xsimd",
                                  tensor_from_unit_without_xsimd());
  std::cout << "consumer: " << (failures == 0 ? "all checks passed" : "FAILED") << '\n';
  return failures == 0 ? 0 : 1;
}
