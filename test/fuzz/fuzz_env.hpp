// The fuzz tests' settings from the environment (TAPEGRAD_FUZZ_SEED, TAPEGRAD_FUZZ_GRAPHS, ...).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace tapegrad::fuzz {

// The variable's value as a number, or `fallback` when it is unset or empty.
inline std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::stoull(text) : fallback;
}

// A fuzz test's default number of programs: fewer under ASan+UBSan, whose -O1 runs about 10x
// slower.
constexpr std::uint64_t fuzz_count(std::uint64_t normally, std::uint64_t under_asan) {
#ifdef TAPEGRAD_TEST_UNDER_ASAN
  (void)normally;
  return under_asan;
#else
  (void)under_asan;
  return normally;
#endif
}

}  // namespace tapegrad::fuzz
