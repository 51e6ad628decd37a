// A unit without XTENSOR_USE_XSIMD, even when the build passes it: its xt::xarray<T> uses
// std::allocator, so every Tensor it builds or reads goes through a conversion.
#undef XTENSOR_USE_XSIMD

#include "checks.hpp"
#include "units.hpp"

int checks_without_xsimd(const tapegrad::Tensor& from_main) {
  return run_consumer_checks("no XTENSOR_USE_XSIMD", from_main);
}

tapegrad::Tensor tensor_from_unit_without_xsimd() {
  return tapegrad::Tensor(xt::xarray<double>{0.25, -8.0});
}
