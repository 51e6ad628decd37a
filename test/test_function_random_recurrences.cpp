// Random recurrent programs (fuzz/recurrent_program.hpp) as Functions: each call's results bit
// for bit as the eager call's.
//
// A Function's plan writes a recurrence's step outputs into the arena, in place of the join
// (concat) that collects them, and keeps the join's bytes until its parts' last reads; a wrong
// offset or a lifetime cut short gives wrong numbers only at some shapes and reading orders
// (a fault of that kind showed only at GradBench's lstm size). These programs vary what the
// planner decides on: 1-3 layers of 2-30 steps, four kinds of cell (a tanh RNN, an LSTM cell
// whose gates are one split product, a GRU-like mix, a cell whose step output an op makes),
// joins along either axis, joins of chosen steps with an op's output among them, parts read
// by other ops before and after their join, the layer above reading the join's split or the
// step outputs themselves, gradients of every parameter on a tape (which read the step outputs
// again after the joins die), float64 and float32, and states from 1 element to joins over
// 1 MiB (the largest a join is written in place).
//
// TAPEGRAD_FUZZ_SEED=<seed> sets the first program's seed (program i uses seed + i) and
// TAPEGRAD_FUZZ_PROGRAMS=<n> the number of programs; a failure prints the seed that reproduces
// it:
//   TAPEGRAD_FUZZ_SEED=<seed> TAPEGRAD_FUZZ_PROGRAMS=1 build/test/test_function_random_recurrences
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fuzz/fuzz_env.hpp"
#include "fuzz/fuzz_failures.hpp"
#include "fuzz/recurrent_program.hpp"
#include "identical_support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::fuzz;
using namespace tapegrad::testing;

using tapegrad::fuzz::env_or;

namespace {

constexpr std::uint64_t kDefaultPrograms = fuzz_count(1000, 150);
constexpr std::uint64_t kDefaultSeed = 20261130;

}  // namespace

TEST_CASE(
    "function, random recurrences: every call of a Function of a recurrent program, joins "
    "written in place, equals the eager call bit for bit",
    "[function][fused][fuzz]") {
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", kDefaultSeed);
  const std::uint64_t programs = env_or("TAPEGRAD_FUZZ_PROGRAMS", kDefaultPrograms);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t compared = 0;
  FuzzFailures failures;
  for (std::uint64_t n = 0; n < programs; ++n) {
    const std::uint64_t seed = first_seed + n;
    const auto fn = [seed](const std::vector<Tensor>& args) {
      return run_recurrent_program(seed, args);
    };
    const std::string failure = failure_of([&]() -> std::string {
      const Function f = function(fn);
      // The trace, then replays at other values.
      for (double scale : {1.0, -0.7, 1.9}) {
        const std::vector<Tensor> args = recurrent_arguments(seed, scale);
        const std::string difference = first_difference(f(args), fn(args));
        ++compared;
        if (!difference.empty())
          return "call at scale " + std::to_string(scale) + ": " + difference;
      }
      return f.trace_count() == 1 ? "" : std::to_string(f.trace_count()) + " traces";
    });
    if (!failure.empty()) {
      failures.add("seed " + std::to_string(seed) + " (" + describe_recurrent_program(seed) +
                   "): " + failure + "\n  reproduce: TAPEGRAD_FUZZ_SEED=" + std::to_string(seed) +
                   " TAPEGRAD_FUZZ_PROGRAMS=1 test_function_random_recurrences\n");
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "random recurrences: " << programs << " programs (seeds " << first_seed << ".."
            << first_seed + programs - 1 << "), " << compared << " calls compared, "
            << failures.count << " failed, " << seconds << " s\n";
  INFO(failures.first);
  REQUIRE(failures.count == 0);
}
