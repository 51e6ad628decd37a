// The advice the first GEMM gives when OpenBLAS runs kernels older than the CPU
// (ops/linalg/blas_kernel_advice.hpp): only for pre-AVX2 kernels on an AVX2 CPU, never when
// OPENBLAS_CORETYPE is set, naming the core type to set.
#include <string>

#include <catch2/catch.hpp>

#include "ops/linalg/blas_kernel_advice.hpp"

using tapegrad::detail::blas_kernel_advice;

namespace {
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("blas advice: Prescott kernels on an AVX-512 CPU name SkylakeX", "[blas]") {
  const std::string advice = blas_kernel_advice("Prescott", true, true, nullptr);
  INFO(advice);
  CHECK(contains(advice, "OpenBLAS runs its Prescott kernels"));
  CHECK(contains(advice, "AVX-512"));
  CHECK(contains(advice, "OPENBLAS_CORETYPE=SkylakeX"));
}

TEST_CASE("blas advice: pre-AVX2 kernels on an AVX2 CPU name Haswell", "[blas]") {
  for (const char* core : {"Core2", "Nehalem", "sandybridge", "Barcelona"}) {
    const std::string advice = blas_kernel_advice(core, true, false, nullptr);
    INFO(core << ": " << advice);
    CHECK(contains(advice, "OPENBLAS_CORETYPE=Haswell"));
    CHECK(contains(advice, "AVX2 and FMA"));
  }
}

TEST_CASE("blas advice: nothing to say for matching kernels, an old CPU or a set core type",
          "[blas]") {
  CHECK(blas_kernel_advice("Haswell", true, false, nullptr).empty());
  CHECK(blas_kernel_advice("SkylakeX", true, true, nullptr).empty());
  CHECK(blas_kernel_advice("Zen", true, false, nullptr).empty());
  CHECK(blas_kernel_advice("Prescott", false, false, nullptr).empty());   // no AVX2: right
  CHECK(blas_kernel_advice("Prescott", true, true, "Prescott").empty());  // the user chose it
  CHECK(blas_kernel_advice("", true, true, nullptr).empty());
}
