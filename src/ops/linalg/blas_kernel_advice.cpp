#include "ops/linalg/blas_kernel_advice.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include <cblas.h>

#include "runtime/op_definition.hpp"
#include "runtime/warn.hpp"

namespace tapegrad::detail {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// OpenBLAS's x86-64 cores whose kernels predate AVX2.
bool older_than_avx2(const std::string& core) {
  static const char* const kOlder[] = {
      "prescott",  "core2",  "penryn",    "dunnington", "nehalem", "atom",        "sandybridge",
      "barcelona", "bobcat", "bulldozer", "piledriver", "opteron", "opteron_sse3"};
  const std::string name = lower(core);
  return std::any_of(std::begin(kOlder), std::end(kOlder),
                     [&](const char* older) { return name == older; });
}

}  // namespace

std::string blas_kernel_advice(const std::string& core, bool avx2_and_fma, bool avx512,
                               const char* coretype_setting) {
  if (coretype_setting != nullptr || !avx2_and_fma || !older_than_avx2(core)) return {};
  const std::string suggested = avx512 ? "SkylakeX" : "Haswell";
  return "OpenBLAS runs its " + core + " kernels on this CPU, which has " +
         (avx512 ? "AVX-512" : "AVX2 and FMA") +
         " (OpenBLAS did not recognise the CPU model): matmul and conv2d run several times "
         "slower than they could. Set OPENBLAS_CORETYPE=" +
         suggested + " in the environment before the program starts (docs/performance.md)";
}

void check_blas_kernels() {
  static const bool checked = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    const bool avx2_and_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    const char* core = openblas_get_corename();
    const std::string advice = blas_kernel_advice(core != nullptr ? core : "", avx2_and_fma, avx512,
                                                  std::getenv("OPENBLAS_CORETYPE"));
    if (!advice.empty()) warn_once("blas-kernels", advice);
#endif
    return true;
  }();
  (void)checked;
}

}  // namespace tapegrad::detail

TAPEGRAD_OP_SOURCE(blas_kernel_advice)
