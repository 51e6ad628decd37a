#include "kernels/vector_math.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "tapegrad/errors.hpp"

#if defined(XTENSOR_USE_XSIMD)
#include "kernels/simd/vector_math_loops.hpp"
#endif

namespace tapegrad::detail {

#if TAPEGRAD_VECTOR_MATH_DISPATCH
// Defined in kernels/simd/ (built only for x86-64 with GCC or Clang: CMakeLists.txt).
const VectorMathKernels& avx2_vector_math_kernels();
const VectorMathKernels& avx512_vector_math_kernels();
#endif

namespace {

#if !defined(XTENSOR_USE_XSIMD)
// Without xsimd (TAPEGRAD_USE_XSIMD=OFF) the baseline is the C library's functions.
template <class T, VectorFunction function>
void scalar_loop(const T* in, T* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = scalar_function<function>(in[i]);
}
template <std::size_t... function>
constexpr VectorMathKernels scalar_kernels(std::index_sequence<function...>) {
  return {{&scalar_loop<float, static_cast<VectorFunction>(function)>...},
          {&scalar_loop<double, static_cast<VectorFunction>(function)>...}};
}
#endif

const VectorMathKernels& baseline_kernels() {
#if defined(XTENSOR_USE_XSIMD)
  static constexpr VectorMathKernels kernels = kernels_for<xsimd::default_arch>();
#else
  static constexpr VectorMathKernels kernels =
      scalar_kernels(std::make_index_sequence<kVectorFunctions>{});
#endif
  return kernels;
}

#if TAPEGRAD_VECTOR_MATH_DISPATCH
// What the CPU and the OS can run (GCC's and Clang's __builtin_cpu_supports check that the
// OS saves the AVX and AVX-512 registers too).
bool cpu_runs(InstructionSet set) {
  __builtin_cpu_init();
  switch (set) {
    case InstructionSet::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case InstructionSet::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    default:
      return true;
  }
}
#endif

constexpr InstructionSet kWidestFirst[] = {InstructionSet::Avx512, InstructionSet::Avx2,
                                           InstructionSet::Baseline};

// The widest available set, at most TAPEGRAD_SIMD's when it names one. The kernels' layer
// cannot reach the runtime's warnings, so a bad value is reported here, once (the choice is
// made once per process).
InstructionSet choose_instruction_set() {
  InstructionSet cap = InstructionSet::Avx512;
  if (const char* requested = std::getenv("TAPEGRAD_SIMD"); requested != nullptr) {
    bool known = false;
    for (InstructionSet set : kWidestFirst) {
      if (std::strcmp(requested, instruction_set_name(set)) == 0) {
        cap = set;
        known = true;
      }
    }
    if (!known) {
      std::fprintf(stderr,
                   "tapegrad warning: TAPEGRAD_SIMD=%s is not one of baseline, avx2, avx512: "
                   "ignored\n",
                   requested);
    } else if (!instruction_set_available(cap)) {
      std::fprintf(stderr,
                   "tapegrad warning: TAPEGRAD_SIMD=%s: this CPU or this build of tapegrad "
                   "cannot run it; exp, log, tanh, sigmoid, erf and the activations use the widest "
                   "set below it\n",
                   requested);
    }
  }
  for (InstructionSet set : kWidestFirst) {
    if (static_cast<int>(set) <= static_cast<int>(cap) && instruction_set_available(set)) {
      return set;
    }
  }
  return InstructionSet::Baseline;
}

const VectorMathKernels& chosen_kernels() {
  static const VectorMathKernels& kernels = vector_math_kernels(vector_math_instruction_set());
  return kernels;
}

}  // namespace

const char* instruction_set_name(InstructionSet set) {
  switch (set) {
    case InstructionSet::Avx2:
      return "avx2";
    case InstructionSet::Avx512:
      return "avx512";
    default:
      return "baseline";
  }
}

bool instruction_set_available(InstructionSet set) {
#if TAPEGRAD_VECTOR_MATH_DISPATCH
  return cpu_runs(set);
#else
  return set == InstructionSet::Baseline;
#endif
}

InstructionSet vector_math_instruction_set() {
  static const InstructionSet chosen = choose_instruction_set();
  return chosen;
}

const VectorMathKernels& vector_math_kernels(InstructionSet set) {
  if (!instruction_set_available(set)) {
    throw InvalidArgument(std::string("vector_math_kernels: instruction set ") +
                          instruction_set_name(set) + " is not available on this CPU or build");
  }
  switch (set) {
#if TAPEGRAD_VECTOR_MATH_DISPATCH
    case InstructionSet::Avx2:
      return avx2_vector_math_kernels();
    case InstructionSet::Avx512:
      return avx512_vector_math_kernels();
#endif
    default:
      return baseline_kernels();
  }
}

void vector_math(VectorFunction function, const float* in, float* out, std::size_t n) {
  chosen_kernels().f32[static_cast<int>(function)](in, out, n);
}

void vector_math(VectorFunction function, const double* in, double* out, std::size_t n) {
  chosen_kernels().f64[static_cast<int>(function)](in, out, n);
}

}  // namespace tapegrad::detail
