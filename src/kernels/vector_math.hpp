// exp, log, tanh, the logistic sigmoid, both GELUs and their slopes, SiLU, ELU, SELU, softplus,
// log sigmoid, erf and erfc over contiguous arrays, with the widest SIMD instructions the CPU
// has.
//
// The library is built for baseline x86-64 (SSE2), so that its binaries run on any x86-64
// CPU and its ABI does not depend on -march (docs/performance.md, "xsimd"). These
// functions are where that costs most: xsimd's tanh on float64 runs about 6x faster with
// AVX-512 than with SSE2 here. So they are also compiled for AVX2+FMA and for AVX-512
// (kernels/simd/, each file with its own -m flags) and the widest set the CPU and the OS
// support is chosen when first needed. TAPEGRAD_SIMD=baseline|avx2|avx512 in the environment
// caps the choice (for results that do not depend on the machine).
//
// Every element goes through the same SIMD code, the last partial batch included, so an
// element's result does not depend on its position in the array. The instruction sets differ
// in the last bit on some elements (FMA rounds once where SSE2 rounds twice). The GELUs, their
// slopes, erf and erfc run in double for float32 too (kernels/simd/erfc_batch.hpp,
// sigmoid_batches.hpp), each result rounded once, as their scalar functions below; SiLU, ELU,
// SELU, softplus and log sigmoid in the element type (within 3 float32 ulps of their scalar
// functions, some of which compute in double).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tapegrad::detail {

enum class VectorFunction {
  Exp,
  Log,
  Tanh,
  Sigmoid,
  Gelu,
  GeluSlope,
  GeluTanh,
  GeluTanhSlope,
  Silu,
  Elu,
  Selu,
  Softplus,
  LogSigmoid,
  Erf,
  Erfc
};
constexpr int kVectorFunctions = static_cast<int>(VectorFunction::Erfc) + 1;  // the last + 1

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

// e^(-u^2), with u^2 = p + e split exactly (Veltkamp: u's high 26 bits and the rest), so that
// the rounding of u^2 (up to 740 near erfc's underflow) does not become 100s of ulps of the
// result: e^(-p) (1 - e). kernels/simd/erfc_batch.hpp computes it so too.
inline double exp_of_minus_square(double u) {
  if (!(std::fabs(u) <= 27.5)) return std::exp(-u * u);  // 0 (NaN for NaN): no split
  const double scaled = 134217729.0 * u;                 // 2^27 + 1
  const double high = scaled - (scaled - u);
  const double low = u - high;
  const double p = u * u;
  const double e = ((high * high - p) + 2.0 * high * low) + low * low;
  return std::exp(-p) * (1.0 - e);
}

// The exact GELU, 0.5 x erfc(u) with u = -x / sqrt 2 (erfc keeps the tail: 1 + erf(x / sqrt 2)
// would cancel to 0 for x << 0), and its slope 0.5 erfc(u) + x e^(-u^2) / sqrt(2 pi), both
// computed in double and rounded once to T.
inline double gelu_in_double(double v) { return 0.5 * v * std::erfc(-v * kSqrtHalf); }
inline double gelu_slope_in_double(double v) {
  const double u = -v * kSqrtHalf;
  return 0.5 * std::erfc(u) + v * kInvSqrt2Pi * exp_of_minus_square(u);
}

// 1 / (1 + e^-v), never exponentiating a positive number, so that it neither overflows nor
// loses 1 - tiny.
template <class T>
T stable_sigmoid(T v) {
  if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
  const T e = std::exp(v);
  return e / (T(1) + e);
}

// The tanh-approximated GELU 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x sigmoid(2u) (the same function): 1 + tanh u would cancel for x << 0 (at x = -6, to 4e-6 of
// its value). Its slope sigmoid(2u) + 2 x u' sigmoid(2u) sigmoid(-2u), u' = sqrt(2/pi)
// (1 + 3 * 0.044715 x^2), with sigmoid(2u) sigmoid(-2u) = e / (1 + e)^2, e = e^(-2|u|).
inline double gelu_tanh_inner(double v) { return kSqrt2OverPi * (v + kGeluCubic * v * v * v); }
inline double gelu_tanh_in_double(double v) { return v * stable_sigmoid(2 * gelu_tanh_inner(v)); }
inline double gelu_tanh_slope_in_double(double v) {
  const double u = gelu_tanh_inner(v);
  const double e = std::exp(-std::fabs(2 * u));
  const double one_plus_e = 1 + e;
  const double s = u >= 0 ? 1 / one_plus_e : e / one_plus_e;
  const double du = kSqrt2OverPi * (1 + 3 * kGeluCubic * v * v);
  return s + 2 * v * du * (e / (one_plus_e * one_plus_e));
}
// SiLU (swish) x sigmoid(x).
inline double silu_in_double(double v) { return v * stable_sigmoid(v); }

// ELU (alpha 1) and softplus in the element type; SELU and log sigmoid in double.
template <class T>
T elu_in(T v) {
  return v < 0 ? static_cast<T>(std::expm1(v)) : v;
}
inline double selu_in_double(double v) {
  return v < 0 ? kSeluScale * kSeluAlpha * std::expm1(v) : kSeluScale * v;
}
template <class T>
T stable_softplus(T v) {  // max(v, 0) + log(1 + e^-|v|): never exponentiates a positive number
  return std::max(v, T(0)) + std::log1p(std::exp(-std::fabs(v)));
}
inline double log_sigmoid_in_double(double v) {
  return std::fmin(v, 0.0) - std::log1p(std::exp(-std::fabs(v)));
}

// f(v) one element at a time, with the C library: the ops' scalar path (tensors of up to
// kVectorMathAbove elements, and a Function's fused loops for them) and vector_math's lanes
// where xsimd is wrong. One definition, so that both give the same values.
template <VectorFunction function, class T>
T scalar_function(T v) {
  if constexpr (function == VectorFunction::Exp) {
    return std::exp(v);
  } else if constexpr (function == VectorFunction::Log) {
    return std::log(v);
  } else if constexpr (function == VectorFunction::Tanh) {
    return std::tanh(v);
  } else if constexpr (function == VectorFunction::Sigmoid) {
    return stable_sigmoid(v);
  } else if constexpr (function == VectorFunction::Gelu) {
    return static_cast<T>(gelu_in_double(v));
  } else if constexpr (function == VectorFunction::GeluSlope) {
    return static_cast<T>(gelu_slope_in_double(v));
  } else if constexpr (function == VectorFunction::GeluTanh) {
    return static_cast<T>(gelu_tanh_in_double(v));
  } else if constexpr (function == VectorFunction::GeluTanhSlope) {
    return static_cast<T>(gelu_tanh_slope_in_double(v));
  } else if constexpr (function == VectorFunction::Silu) {
    return static_cast<T>(silu_in_double(v));
  } else if constexpr (function == VectorFunction::Elu) {
    return elu_in(v);
  } else if constexpr (function == VectorFunction::Selu) {
    return static_cast<T>(selu_in_double(v));
  } else if constexpr (function == VectorFunction::Softplus) {
    return stable_softplus(v);
  } else if constexpr (function == VectorFunction::LogSigmoid) {
    return static_cast<T>(log_sigmoid_in_double(v));
  } else if constexpr (function == VectorFunction::Erf) {
    return static_cast<T>(std::erf(static_cast<double>(v)));
  } else {
    return static_cast<T>(std::erfc(static_cast<double>(v)));
  }
}

// The ops exp, log, tanh, sigmoid, gelu, silu, elu, selu, softplus, log_sigmoid, erf and erfc
// (and the gradients of gelu and softplus) use vector_math on arrays above this many elements, the
// C library's functions on smaller ones (as a Function's fused loops do for the same sizes).
constexpr std::size_t kVectorMathAbove = 32;

// out[i] = f(in[i]) for i < n; out may be in.
void vector_math(VectorFunction function, const float* in, float* out, std::size_t n);
void vector_math(VectorFunction function, const double* in, double* out, std::size_t n);

enum class InstructionSet { Baseline, Avx2, Avx512 };

// The set vector_math runs with in this process.
InstructionSet vector_math_instruction_set();
// "baseline" (what the library is compiled for), "avx2" or "avx512".
const char* instruction_set_name(InstructionSet set);
// Whether this build has kernels for `set` and this CPU and OS can run them.
bool instruction_set_available(InstructionSet set);

// The kernels of one instruction set (for tests: each available set against the others).
template <class T>
using VectorKernel = void (*)(const T* in, T* out, std::size_t n);
struct VectorMathKernels {
  VectorKernel<float> f32[kVectorFunctions];  // indexed by VectorFunction
  VectorKernel<double> f64[kVectorFunctions];
};
// Throws InvalidArgument when !instruction_set_available(set).
const VectorMathKernels& vector_math_kernels(InstructionSet set);

}  // namespace tapegrad::detail
