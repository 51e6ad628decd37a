// The tanh-approximated GELU x sigmoid(2u) and its slope over xsimd batches of doubles, for
// kernels/simd/vector_math_loops.hpp: the same operations as their scalar functions in
// kernels/vector_math.hpp (gelu_tanh_in_double, gelu_tanh_slope_in_double), with xsimd's exp
// (within 1 ulp of the C library's). (SiLU, x sigmoid(x), is vector_loop's sigmoid times x.)
#pragma once

#include <array>
#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd/erfc_batch.hpp"
#include "kernels/vector_math.hpp"

namespace tapegrad::detail {
namespace {

// sigmoid(v) from e = e^(-|v|), as stable_sigmoid: 1 / (1 + e) for v >= 0, e / (1 + e) below;
// e and 1 + e kept for GELU's slope.
template <class B>
struct Sigmoid {
  B value;
  B e;
  B one_plus_e;
};
template <class B>
Sigmoid<B> sigmoid_parts(const B& v) {
  const B e = xsimd::exp(-xsimd::abs(v));
  const B one_plus_e = B(1.0) + e;
  return {xsimd::select(v >= B(0.0), B(1.0) / one_plus_e, e / one_plus_e), e, one_plus_e};
}

template <class B>
B gelu_tanh_inner_batch(const B& v) {
  return B(kSqrt2OverPi) * (v + B(kGeluCubic) * v * v * v);
}

template <class B, std::size_t N>
void gelu_tanh_batches(const Batches<B, N>& x, Batches<B, N>& out) {
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) {
    out[j] = x[j] * sigmoid_parts(B(2.0) * gelu_tanh_inner_batch(x[j])).value;
  }
}

template <class B, std::size_t N>
void gelu_tanh_slope_batches(const Batches<B, N>& x, Batches<B, N>& out) {
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) {
    const B v = x[j];
    const Sigmoid<B> s = sigmoid_parts(B(2.0) * gelu_tanh_inner_batch(v));
    const B du = B(kSqrt2OverPi) * (B(1.0) + B(3 * kGeluCubic) * v * v);
    out[j] = s.value + B(2.0) * v * du * (s.e / (s.one_plus_e * s.one_plus_e));
  }
}

}  // namespace
}  // namespace tapegrad::detail
