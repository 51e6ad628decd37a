// The loops of kernels/vector_math.hpp for one xsimd architecture. Each instruction set's file
// (kernels/simd/*.cpp, compiled with its own -m flags and at least -O2) includes this and
// instantiates it for its architecture only.
//
// Nothing here may reach the linker as a shared (weak) symbol: such a copy, compiled with
// AVX-512 instructions, could be the one the linker keeps for every caller, and a CPU without
// them would fault. So the kernels are flattened (every call inlined into them) and live in an
// anonymous namespace; the test vector_math_objects_share_no_symbols checks the objects.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "kernels/simd/erfc_batch.hpp"
#include "kernels/simd/sigmoid_batches.hpp"
#include "kernels/vector_math.hpp"

namespace tapegrad::detail {
namespace {

// Where xsimd 8.1's results are wrong, the C library's are taken (test_vector_math sweeps
// both edges). exp builds 2^k from exponent bits, so it overflows to inf while e^x is still
// finite (from x = 709.44 in float64, where e^x reaches 1.8e308 only at 709.78; from 88.38 in
// float32); log of a subnormal is off by up to 40 (log(1e-310) = -746.5, not -713.8). The
// window starts a little inside the range where xsimd is right and ends where e^x is inf.
//
// Left as xsimd gives them: results below the smallest normal number are 0 (e^x below
// x = -708.39 in float64, -88.38 in float32; the sigmoid's e^-|x| alike), the C library's
// are subnormal. Subnormal operands slow the products that read them many times over (a
// likelihood's softmax weights made GradBench's gmm 2.6x slower), and flushing them is what
// TensorFlow's CPU kernels do.
template <class T>
struct ExpOverflowWindow {
  static constexpr T from = std::is_same_v<T, float> ? T(88) : T(709);
  static constexpr T to = std::is_same_v<T, float> ? T(88.75) : T(709.8);
  // Above `to` the C library's inf is xsimd's too: one comparison per batch tests `from` only.
  static bool contains(T x) { return x > from && x < to; }
};

// SiLU's x e^x for x below this: the kernel's e^-|x| is flushed to 0 there (below -87.33 in
// float32, -708.39 in float64) while x e^x is still a normal number (down to -91.9 and
// -715.1): those lanes take the scalar form's value, not 0.
template <class T>
struct SiluFlushBelow {
  static constexpr T value = std::is_same_v<T, float> ? T(-87) : T(-708);
};

template <class Arch, class T, VectorFunction function>
[[gnu::flatten]] void vector_loop(const T* in, T* out, std::size_t n) {
  using Batch = xsimd::batch<T, Arch>;
  constexpr std::size_t width = Batch::size;
  using Lanes = xsimd::batch_bool<T, Arch>;
  // f(x) for one batch written to `to`; the lanes left for the C library (`fix`).
  auto apply = [](const Batch& x, T* to) {
    if constexpr (function == VectorFunction::Exp) {
      xsimd::exp(x).store_unaligned(to);
      return Lanes(x > Batch(ExpOverflowWindow<T>::from));
    } else if constexpr (function == VectorFunction::Log) {
      xsimd::log(x).store_unaligned(to);
      return Lanes(x < Batch(std::numeric_limits<T>::min()));
    } else if constexpr (function == VectorFunction::Tanh) {
      xsimd::tanh(x).store_unaligned(to);
      return Lanes(false);
    } else if constexpr (function == VectorFunction::Elu) {
      // expm1 of the negative lanes only matters; a NaN lane keeps x.
      xsimd::select(x < Batch(T(0)), xsimd::expm1(x), x).store_unaligned(to);
      return Lanes(false);
    } else if constexpr (function == VectorFunction::Selu) {
      xsimd::select(x < Batch(T(0)), Batch(T(kSeluScale * kSeluAlpha)) * xsimd::expm1(x),
                    Batch(T(kSeluScale)) * x)
          .store_unaligned(to);
      return Lanes(false);
    } else if constexpr (function == VectorFunction::Softplus ||
                         function == VectorFunction::LogSigmoid) {
      // max(x, 0) + log1p(e^-|x|) and min(x, 0) - log1p(e^-|x|): a NaN gives NaN.
      const Batch zero(T(0));
      const Batch tail = xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
      if constexpr (function == VectorFunction::Softplus) {
        (xsimd::select(x < zero, zero, x) + tail).store_unaligned(to);
      } else {
        (xsimd::select(x > zero, zero, x) - tail).store_unaligned(to);
      }
      return Lanes(false);
    } else {
      // stable_sigmoid's two branches, with e = e^-|x| for both.
      const Batch minus_abs = -xsimd::abs(x);
      const Batch e = xsimd::exp(minus_abs);
      const Batch one(T(1));
      const Batch sigmoid = xsimd::select(x >= Batch(T(0)), one / (one + e), e / (one + e));
      if constexpr (function == VectorFunction::Silu) {
        (x * sigmoid).store_unaligned(to);
        return Lanes(x < Batch(SiluFlushBelow<T>::value));
      } else {
        sigmoid.store_unaligned(to);
        return Lanes(false);
      }
    }
  };
  auto fix = [](const T* x, T* to, std::size_t lanes) {
    for (std::size_t k = 0; k < lanes; ++k) {
      bool outside = false;
      if constexpr (function == VectorFunction::Exp) {
        outside = ExpOverflowWindow<T>::contains(x[k]);
      } else if constexpr (function == VectorFunction::Log) {
        outside = x[k] < std::numeric_limits<T>::min();
      } else if constexpr (function == VectorFunction::Silu) {
        outside = x[k] < SiluFlushBelow<T>::value;
      }
      if (outside) to[k] = scalar_function<function>(x[k]);
    }
  };
  std::size_t i = 0;
  if (in != out) {
    // Chunks of batches, their lanes to fix gathered and tested once per chunk: a test and a
    // branch per batch cost exp 15 %. The chunk's inputs are still there to fix it from.
    constexpr std::size_t chunk = 32 * width;
    for (; i + chunk <= n; i += chunk) {
      Lanes suspect(false);
      for (std::size_t b = 0; b < chunk; b += width) {
        suspect = suspect | apply(Batch::load_unaligned(in + i + b), out + i + b);
      }
      if (xsimd::any(suspect)) fix(in + i, out + i, chunk);
    }
  }
  for (; i + width <= n; i += width) {
    // Loaded before anything is stored: out may be in.
    const Batch x = Batch::load_unaligned(in + i);
    if (xsimd::any(apply(x, out + i))) {
      alignas(64) T saved[width];
      x.store_aligned(saved);
      fix(saved, out + i, width);
    }
  }
  if (i == n) return;
  // The last partial batch through the same code, padded with its first element.
  alignas(64) T block[width];
  alignas(64) T result[width];
  for (std::size_t k = 0; k < width; ++k) block[k] = in[i + (i + k < n ? k : 0)];
  if (xsimd::any(apply(Batch::load_aligned(block), result))) fix(block, result, width);
  for (std::size_t k = 0; i + k < n; ++k) out[i + k] = result[k];
}

// The GELUs, their slopes, erf and erfc, in double for float32 as for float64 (as
// scalar_function computes them):
// groups of four batches of doubles, converted in and out through a block, the last partial
// group padded with its first element (so an element's result does not depend on its
// position). out may be in: a group is read whole before it is written.
template <class Arch, class T, VectorFunction function>
[[gnu::flatten]] void double_precision_loop(const T* in, T* out, std::size_t n) {
  using Batch = xsimd::batch<double, Arch>;
  constexpr std::size_t kBatches = 4;
  constexpr std::size_t group = kBatches * Batch::size;
  alignas(64) double block[group];
  Batches<Batch, kBatches> x;
  Batches<Batch, kBatches> y;
  for (std::size_t i = 0; i < n; i += group) {
    const std::size_t count = n - i < group ? n - i : group;
    if (count == group) {
      for (std::size_t k = 0; k < group; ++k) block[k] = static_cast<double>(in[i + k]);
    } else {
      for (std::size_t k = 0; k < group; ++k)
        block[k] = static_cast<double>(in[i + (k < count ? k : 0)]);
    }
#pragma GCC unroll 8
    for (std::size_t j = 0; j < kBatches; ++j) x[j] = Batch::load_aligned(block + j * Batch::size);
    if constexpr (function == VectorFunction::Gelu) {
      gelu_batches(x, y);
    } else if constexpr (function == VectorFunction::GeluSlope) {
      gelu_slope_batches(x, y);
    } else if constexpr (function == VectorFunction::GeluTanh) {
      gelu_tanh_batches(x, y);
    } else if constexpr (function == VectorFunction::GeluTanhSlope) {
      gelu_tanh_slope_batches(x, y);
    } else if constexpr (function == VectorFunction::Erf) {
      erf_batches(x, y);
    } else {
      erfc_batches(x, y);
    }
#pragma GCC unroll 8
    for (std::size_t j = 0; j < kBatches; ++j) y[j].store_aligned(block + j * Batch::size);
    for (std::size_t k = 0; k < count; ++k) out[i + k] = static_cast<T>(block[k]);
  }
}

// The GELUs, their slopes, erf and erfc run in double (double_precision_loop); the others in
// the element type (vector_loop).
template <VectorFunction function>
constexpr bool runs_in_double =
    function == VectorFunction::Gelu || function == VectorFunction::GeluSlope ||
    function == VectorFunction::GeluTanh || function == VectorFunction::GeluTanhSlope ||
    function == VectorFunction::Erf || function == VectorFunction::Erfc;

template <class Arch, class T, VectorFunction function>
constexpr VectorKernel<T> loop_for() {
  if constexpr (runs_in_double<function>) {
    return &double_precision_loop<Arch, T, function>;
  } else {
    return &vector_loop<Arch, T, function>;
  }
}

// One kernel per VectorFunction, in the enum's order (the tables are indexed by it).
template <class Arch, std::size_t... function>
constexpr VectorMathKernels kernels_for(std::index_sequence<function...>) {
  return {{loop_for<Arch, float, static_cast<VectorFunction>(function)>()...},
          {loop_for<Arch, double, static_cast<VectorFunction>(function)>()...}};
}
template <class Arch>
constexpr VectorMathKernels kernels_for() {
  return kernels_for<Arch>(std::make_index_sequence<kVectorFunctions>{});
}

}  // namespace
}  // namespace tapegrad::detail
