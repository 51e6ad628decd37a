// The consumer's translation units with their own view of XTENSOR_USE_XSIMD.
#pragma once

#include <tapegrad/tensor.hpp>

// own_xsimd.cpp: defines XTENSOR_USE_XSIMD itself before including xtensor.
int checks_with_own_xsimd(const tapegrad::Tensor& from_main);
// no_xsimd.cpp: XTENSOR_USE_XSIMD undefined, whatever the build says.
int checks_without_xsimd(const tapegrad::Tensor& from_main);
// A float64 [0.25, -8] built from no_xsimd.cpp's own std::allocator xt::xarray.
tapegrad::Tensor tensor_from_unit_without_xsimd();
