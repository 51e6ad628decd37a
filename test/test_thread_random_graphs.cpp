// Random graphs through one Function called from several threads at once: each graph's
// value and gradient, traced on the threads' first calls (which race) and replayed on the
// rest, from four threads alternating two points, must be the eager bits on every call. The
// replays share the trace's arena when they find it free and use their own when not, and each
// thread has its own loop workspaces: a race between them shows here as wrong bits (and under
// ThreadSanitizer, which CI runs on every test_thread* executable, as a report).
//
// TAPEGRAD_FUZZ_SEED=<seed> and TAPEGRAD_FUZZ_GRAPHS=<n> as in test_random_graphs.cpp.
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fuzz/random_graph.hpp"
#include "identical_support.hpp"

namespace {

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::stoull(text) : fallback;
}

// The graph's value and the gradient of sum(w * value) w.r.t. every input (zeros where
// unconnected), w = 1 + 0.01 i: what each call returns.
std::vector<tapegrad::Tensor> value_and_gradient(const tapegrad::fuzz::RandomGraph& graph,
                                                 const std::vector<tapegrad::Tensor>& args) {
  using namespace tapegrad;
  GradientTape tape;
  tape.watch(args);
  const Tensor y = graph.evaluate(args);
  const Tensor w =
      cast(add(multiply(range(0.0, static_cast<double>(y.size())), scalar(0.01, DType::Float64)),
               scalar(1.0, DType::Float64)),
           y.dtype());
  std::vector<Tensor> results{y};
  for (const Tensor& g :
       tape.gradient(reduce_sum(multiply(y, w)), args, UnconnectedGradients::Zero)) {
    results.push_back(g);
  }
  return results;
}

std::vector<std::string> bytes_of(const std::vector<tapegrad::Tensor>& tensors) {
  std::vector<std::string> bytes;
  for (const tapegrad::Tensor& t : tensors) bytes.push_back(tapegrad::testing::element_bytes(t));
  return bytes;
}

}  // namespace

TEST_CASE(
    "random graphs: a Function called from four threads at once gives the eager bits on every "
    "call",
    "[function][threads]") {
  using namespace tapegrad;
  using namespace tapegrad::fuzz;
  constexpr int kThreads = 4;
  constexpr int kCalls = 6;
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", 20260901);
  const std::uint64_t graphs = env_or("TAPEGRAD_FUZZ_GRAPHS", 60);
  std::uint64_t failures = 0;
  std::string first_failure;
  for (std::uint64_t n = 0; n < graphs; ++n) {
    const std::uint64_t seed = first_seed + n;
    const DType dtype = n % 2 == 0 ? DType::Float64 : DType::Float32;
    const bool optimize = n % 3 != 2;
    const RandomGraph graph = RandomGraph::generate(seed, dtype);
    std::vector<std::vector<Tensor>> points{graph.inputs(), {}};
    for (const Tensor& x : graph.inputs()) points[1].push_back(multiply(x, scalar(1.01, dtype)));
    const std::vector<std::vector<std::string>> expected{
        bytes_of(value_and_gradient(graph, points[0])),
        bytes_of(value_and_gradient(graph, points[1]))};
    const Function f = function(
        [&graph](const std::vector<Tensor>& args) { return value_and_gradient(graph, args); },
        FunctionOptions{16, optimize});
    std::atomic<int> mismatches{0}, exceptions{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int k = 0; k < kCalls; ++k) {
          const std::size_t point = static_cast<std::size_t>((t + k) % 2);
          try {
            if (bytes_of(f(points[point])) != expected[point]) ++mismatches;
          } catch (const std::exception&) {
            ++exceptions;
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (mismatches != 0 || exceptions != 0) {
      ++failures;
      const std::string report = "seed " + std::to_string(seed) + " " + dtype_name(dtype) +
                                 (optimize ? " (optimize)" : " (op by op)") + ": " +
                                 std::to_string(mismatches.load()) + " calls differ, " +
                                 std::to_string(exceptions.load()) + " threw\n" + graph.describe();
      if (first_failure.empty()) first_failure = report;
    }
  }
  INFO(first_failure);
  REQUIRE(failures == 0);
}
