// Random graphs through one Function called from several threads at once: each graph's
// value and gradient (alone, or mapped over 1,024 points so that the Function's loops run over
// many blocks), traced on the threads' first calls (which race) and replayed on the rest, from
// four threads alternating two points, must be the eager bits on every call. The replays
// share the trace's arena when they find it free and use their own when not, and each thread
// has its own loop workspaces: a race between them shows here as wrong bits (and under
// ThreadSanitizer, which CI runs on every test_thread* executable, as a report).
//
// Random recurrent programs (fuzz/recurrent_program.hpp), whose joins a Function writes in place
// in its arena, go through the same from four threads.
//
// TAPEGRAD_FUZZ_SEED=<seed> and TAPEGRAD_FUZZ_GRAPHS=<n> as in test_random_graphs.cpp
// (TAPEGRAD_FUZZ_PROGRAMS=<n> for the recurrences).
#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fuzz/fuzz_env.hpp"
#include "fuzz/graph_calls.hpp"
#include "fuzz/recurrent_program.hpp"
#include "identical_support.hpp"

using tapegrad::fuzz::env_or;

namespace {

using tapegrad::DType;
using tapegrad::Tensor;
using TensorsFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<std::string> bytes_of(const std::vector<Tensor>& tensors) {
  std::vector<std::string> bytes;
  for (const Tensor& t : tensors) bytes.push_back(tapegrad::testing::element_bytes(t));
  return bytes;
}

// Six calls of f from each of four threads at once, alternating the two points; `matches`
// judges each call's results (for the point it was given).
struct ThreadedCalls {
  int mismatches = 0;
  int exceptions = 0;
};
ThreadedCalls call_from_threads(
    const tapegrad::Function& f, const std::vector<std::vector<Tensor>>& points,
    const std::function<bool(const std::vector<Tensor>&, std::size_t)>& matches) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 6;
  std::atomic<int> mismatches{0}, exceptions{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kCalls; ++k) {
        const std::size_t point = static_cast<std::size_t>((t + k) % 2);
        try {
          if (!matches(f(points[point]), point)) ++mismatches;
        } catch (const std::exception&) {
          ++exceptions;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return {mismatches.load(), exceptions.load()};
}

// For each of `graphs` graphs from the fuzz seed on (float64 and float32 in turn, every third
// op by op): one Function of fn_for(graph), called six times from each of four threads at once
// on two points. Empty when every call gave fn's eager bits, else the first failing graph.
std::string threaded_failures(
    std::uint64_t graphs,
    const std::function<TensorsFn(const tapegrad::fuzz::RandomGraph&)>& fn_for) {
  using namespace tapegrad;
  using namespace tapegrad::fuzz;
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", 20260901);
  for (std::uint64_t n = 0; n < graphs; ++n) {
    const std::uint64_t seed = first_seed + n;
    const DType dtype = n % 2 == 0 ? DType::Float64 : DType::Float32;
    const bool optimize = n % 3 != 2;
    const RandomGraph graph = RandomGraph::generate(seed, dtype);
    const TensorsFn fn = fn_for(graph);
    std::vector<std::vector<Tensor>> points{graph.inputs(), {}};
    for (const Tensor& x : graph.inputs()) points[1].push_back(multiply(x, scalar(1.01, dtype)));
    const std::vector<std::vector<std::string>> expected{bytes_of(fn(points[0])),
                                                         bytes_of(fn(points[1]))};
    const Function f = function(fn, FunctionOptions{16, optimize});
    const ThreadedCalls calls =
        call_from_threads(f, points, [&](const std::vector<Tensor>& got, std::size_t point) {
          return bytes_of(got) == expected[point];
        });
    if (calls.mismatches != 0 || calls.exceptions != 0) {
      return "seed " + std::to_string(seed) + " " + dtype_name(dtype) +
             (optimize ? " (optimize)" : " (op by op)") + ": " + std::to_string(calls.mismatches) +
             " calls differ, " + std::to_string(calls.exceptions) + " threw\n" + graph.describe();
    }
  }
  return {};
}

}  // namespace

TEST_CASE(
    "random graphs: a Function called from four threads at once gives the eager bits on every "
    "call",
    "[function][threads]") {
  const std::string failure =
      threaded_failures(env_or("TAPEGRAD_FUZZ_GRAPHS", 60), [](const auto& graph) -> TensorsFn {
        return [&graph](const std::vector<Tensor>& args) {
          return tapegrad::fuzz::value_and_gradient(graph, args);
        };
      });
  INFO(failure);
  REQUIRE(failure.empty());
}

TEST_CASE(
    "random graphs: a Function of vectorized_map over 1,024 points called from four threads at "
    "once gives the eager bits on every call",
    "[function][threads]") {
  // Its loops run over many blocks, each thread in its own workspace.
  const std::string failure =
      threaded_failures(env_or("TAPEGRAD_FUZZ_GRAPHS", 10), [](const auto& graph) -> TensorsFn {
        return [&graph](const std::vector<Tensor>& args) {
          return tapegrad::fuzz::mapped_value_and_gradient(graph, args, 1024);
        };
      });
  INFO(failure);
  REQUIRE(failure.empty());
}

TEST_CASE(
    "random recurrences: a Function called from four threads at once gives the eager answers on "
    "every call",
    "[function][threads]") {
  using namespace tapegrad;
  using namespace tapegrad::fuzz;
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", 20261130);
  const std::uint64_t programs = env_or("TAPEGRAD_FUZZ_PROGRAMS", 40);
  std::string failure;
  for (std::uint64_t n = 0; n < programs && failure.empty(); ++n) {
    const std::uint64_t seed = first_seed + n;
    const auto fn = [seed](const std::vector<Tensor>& args) {
      return run_recurrent_program(seed, args);
    };
    const std::vector<std::vector<Tensor>> points{recurrent_arguments(seed, 1.0),
                                                  recurrent_arguments(seed, -0.7)};
    const std::vector<std::vector<Tensor>> expected{fn(points[0]), fn(points[1])};
    const Function f = function(fn);
    const ThreadedCalls calls =
        call_from_threads(f, points, [&](const std::vector<Tensor>& got, std::size_t point) {
          return testing::first_difference(got, expected[point]).empty();
        });
    if (calls.mismatches != 0 || calls.exceptions != 0) {
      failure = "seed " + std::to_string(seed) + " (" + describe_recurrent_program(seed) +
                "): " + std::to_string(calls.mismatches) + " calls differ, " +
                std::to_string(calls.exceptions) + " threw";
    }
  }
  INFO(failure);
  REQUIRE(failure.empty());
}
