// Random op graphs: the tape's first and second derivatives against central differences, and
// vectorized_map of the gradient and the vectorized Jacobian against their loops on points
// whose patterns differ in a middle slice (fuzz/random_graph.hpp builds the graphs,
// fuzz/graph_check.hpp compares).
//
// TAPEGRAD_FUZZ_SEED=<seed> sets the first graph's seed (graph i uses seed + i) and
// TAPEGRAD_FUZZ_GRAPHS=<n> the number of graphs; a failure prints the seed that reproduces it:
//   TAPEGRAD_FUZZ_SEED=<seed> TAPEGRAD_FUZZ_GRAPHS=1 build/test/test_random_graphs
// TAPEGRAD_FUZZ_VERBOSE=1 prints every graph.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "fuzz/graph_check.hpp"
#include "support.hpp"

namespace {

#ifdef TAPEGRAD_TEST_UNDER_ASAN
// ASan+UBSan at -O1 runs ~10x slower: fewer graphs, still every op family.
constexpr std::uint64_t kDefaultGraphs = 250;
#else
constexpr std::uint64_t kDefaultGraphs = 1000;
#endif
constexpr std::uint64_t kDefaultSeed = 20260901;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::stoull(text) : fallback;
}

// The first op that fails on its own, checked at its arguments' values in the failing graph.
std::string culprit(const tapegrad::fuzz::RandomGraph& graph) {
  for (std::size_t k = 0; k < graph.op_count(); ++k) {
    const tapegrad::fuzz::RandomGraph alone = graph.isolate(k);
    const auto result = tapegrad::fuzz::check_graph(alone);
    if (!result.passed)
      return "  op " + std::to_string(k) + " alone fails: " + result.failure + "\n" +
             alone.describe();
  }
  return "  no op fails alone\n";
}

}  // namespace

TEST_CASE("random graphs: first and second derivatives match central differences") {
  using namespace tapegrad::fuzz;
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", kDefaultSeed);
  const std::uint64_t graphs = env_or("TAPEGRAD_FUZZ_GRAPHS", kDefaultGraphs);
  const bool verbose = env_or("TAPEGRAD_FUZZ_VERBOSE", 0) != 0;  // print every graph
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t failures = 0, ops = 0, values = 0;
  std::string first_failure;
  for (std::uint64_t n = 0; n < graphs; ++n) {
    const std::uint64_t seed = first_seed + n;
    std::string failure, graph_text;
    try {
      const RandomGraph graph = RandomGraph::generate(seed);
      ops += graph.op_count();
      if (verbose) std::cout << "seed " << seed << ":\n" << graph.describe();
      const GraphCheckResult result = check_graph(graph);
      values += result.values_compared;
      if (!result.passed) {
        failure = result.failure;
        graph_text = graph.describe() + culprit(graph);
      }
    } catch (const std::exception& e) {  // the library threw while the graph was built
      failure = std::string("exception while building the graph: ") + e.what();
    }
    if (!failure.empty()) {
      ++failures;
      const std::string report = "seed " + std::to_string(seed) + ": " + failure + "\n" +
                                 graph_text +
                                 "  reproduce: TAPEGRAD_FUZZ_SEED=" + std::to_string(seed) +
                                 " TAPEGRAD_FUZZ_GRAPHS=1 test_random_graphs\n";
      std::cerr << report;
      if (first_failure.empty()) first_failure = report;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "random graphs: " << graphs << " graphs (seeds " << first_seed << ".."
            << first_seed + graphs - 1 << "), " << ops << " ops, " << values
            << " derivatives compared, " << failures << " failed, " << seconds << " s\n";
  INFO(first_failure);
  REQUIRE(failures == 0);
}

TEST_CASE("random graphs: the same seed builds the same graph") {
  using namespace tapegrad::fuzz;
  for (std::uint64_t seed : {1u, 2u, 77u}) {
    const RandomGraph a = RandomGraph::generate(seed), b = RandomGraph::generate(seed);
    REQUIRE(a.describe() == b.describe());
    REQUIRE(a.op_count() >= 3);
    const auto va = tapegrad::testing::values(a.evaluate(a.inputs()));
    const auto vb = tapegrad::testing::values(b.evaluate(b.inputs()));
    REQUIRE(va == vb);
  }
}

TEST_CASE("random graphs: the first 1000 default seeds draw every op, size-0 inputs included") {
  using namespace tapegrad::fuzz;
  const std::vector<std::string> ops = {"exp(",
                                        "log(",
                                        "log1p(",
                                        "sin(",
                                        "cos(",
                                        "tanh(",
                                        "sigmoid(",
                                        "softplus(",
                                        "sqrt(",
                                        "square(",
                                        "abs(",
                                        "relu(",
                                        "sign(",
                                        "negative(",
                                        "identity(",
                                        "reciprocal(",
                                        "pow(",
                                        "c / ",
                                        "x * c",
                                        "add(",
                                        "subtract(",
                                        "multiply(",
                                        "divide(",
                                        "maximum(",
                                        "minimum(",
                                        "where(",
                                        "reduce_sum(",
                                        "reduce_mean(",
                                        "reduce_max(",
                                        "reduce_min(",
                                        "reduce_prod(",
                                        "reduce_logsumexp(",
                                        "reshape(",
                                        "transpose(",
                                        "expand_dims(",
                                        "squeeze(",
                                        "concat(",
                                        "stack(",
                                        "split(",
                                        "slice(",
                                        "gather(",
                                        "tile(",
                                        "broadcast_to(",
                                        "unbroadcast(",
                                        "unsorted_segment_sum(",
                                        "softmax(",
                                        "log_softmax(",
                                        "softmax_cross_entropy_with_logits(",
                                        "sigmoid_cross_entropy_with_logits(",
                                        "matmul(",
                                        "matrix_inverse(",
                                        "matrix_determinant(",
                                        "solve(",
                                        "cholesky("};
  std::vector<std::string> seen;
  bool empty_input = false;
  for (std::uint64_t seed = kDefaultSeed; seed < kDefaultSeed + 1000; ++seed) {  // built only
    const RandomGraph graph = RandomGraph::generate(seed);
    for (const auto& d : graph.op_descriptions()) seen.push_back(d);
    for (const auto& x : graph.inputs()) empty_input = empty_input || x.size() == 0;
  }
  for (const auto& op : ops) {
    INFO(op);
    CHECK(std::any_of(seen.begin(), seen.end(),
                      [&](const std::string& d) { return d.rfind(op, 0) == 0; }));
  }
  CHECK(empty_input);
}
