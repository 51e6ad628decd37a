// kernels/vector_math.hpp's and kernels/direct_conv.hpp's kernels for AVX-512 (F, CD, DQ, BW, VL:
// Skylake-X and later; CMakeLists.txt compiles this file with those -m flags and -O2; it is run
// only where the CPU has them all and the OS saves their registers).
#include "kernels/simd/direct_conv_loops.hpp"
#include "kernels/simd/vector_math_loops.hpp"

#if !defined(__AVX512F__) || !defined(__AVX512DQ__) || !defined(__AVX512BW__)
#error "vector_math_avx512.cpp must be compiled with -mavx512f -mavx512dq -mavx512bw"
#endif

namespace tapegrad::detail {

const VectorMathKernels& avx512_vector_math_kernels() {
  static constexpr VectorMathKernels kernels = kernels_for<xsimd::avx512bw>();
  return kernels;
}

const DirectConvKernels& avx512_direct_conv_kernels() {
  static constexpr DirectConvKernels kernels = direct_conv_kernels_for<xsimd::avx512bw>();
  return kernels;
}

}  // namespace tapegrad::detail
