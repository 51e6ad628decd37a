// kernels/vector_math.hpp's and kernels/direct_conv.hpp's kernels for AVX2 with FMA (CMakeLists.txt
// compiles this file with -mavx2 -mfma -O2; it is run only where the CPU has both).
#include "kernels/simd/direct_conv_loops.hpp"
#include "kernels/simd/vector_math_loops.hpp"

#if !defined(__AVX2__) || !defined(__FMA__)
#error "vector_math_avx2.cpp must be compiled with -mavx2 -mfma"
#endif

namespace tapegrad::detail {

const VectorMathKernels& avx2_vector_math_kernels() {
  static constexpr VectorMathKernels kernels = kernels_for<xsimd::fma3<xsimd::avx2>>();
  return kernels;
}

const DirectConvKernels& avx2_direct_conv_kernels() {
  static constexpr DirectConvKernels kernels = direct_conv_kernels_for<xsimd::fma3<xsimd::avx2>>();
  return kernels;
}

}  // namespace tapegrad::detail
