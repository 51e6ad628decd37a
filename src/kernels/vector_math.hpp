// exp, log, tanh and the logistic sigmoid over contiguous arrays, with the widest SIMD
// instructions the CPU has.
//
// The library is built for baseline x86-64 (SSE2), so that its binaries run on any x86-64
// CPU and its ABI does not depend on -march (docs/performance.md, "xsimd"). These three
// functions are where that costs most: xsimd's tanh on float64 runs about 6x faster with
// AVX-512 than with SSE2 here. So they are also compiled for AVX2+FMA and for AVX-512
// (kernels/simd/, each file with its own -m flags) and the widest set the CPU and the OS
// support is chosen when first needed. TAPEGRAD_SIMD=baseline|avx2|avx512 in the environment
// caps the choice (for results that do not depend on the machine).
//
// Every element goes through the same SIMD code, the last partial batch included, so an
// element's result does not depend on its position in the array. The instruction sets differ
// in the last bit on some elements (FMA rounds once where SSE2 rounds twice).
#pragma once

#include <cmath>
#include <cstddef>

namespace tapegrad::detail {

enum class VectorFunction { Exp, Log, Tanh, Sigmoid };
constexpr int kVectorFunctions = 4;

// 1 / (1 + e^-v), never exponentiating a positive number, so that it neither overflows nor
// loses 1 - tiny.
template <class T>
T stable_sigmoid(T v) {
  if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
  const T e = std::exp(v);
  return e / (T(1) + e);
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
  } else {
    return stable_sigmoid(v);
  }
}

// The ops exp, log, tanh and sigmoid use vector_math on arrays above this many elements, the C
// library's functions on smaller ones (as a Function's fused loops do for the same sizes).
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
