// Random op graphs: the tape's first and second derivatives against central differences,
// forward mode (and forward over reverse) against reverse mode, and vectorized_map of the
// gradient and the vectorized Jacobian against their loops on points whose patterns differ in
// a middle slice (fuzz/random_graph.hpp builds the graphs, fuzz/graph_check.hpp compares);
// vectorized_map's fused loops over 8,192 points against its op-by-op replay; and a Function
// of each graph against the eager calls: alone (float64 and float32), under two tapes and a
// forward accumulator, taking Jacobians and JVPs, and mapping the graph with vectorized_map
// over 3 and over 8,192 points.
//
// TAPEGRAD_FUZZ_SEED=<seed> sets the first graph's seed (graph i uses seed + i) and
// TAPEGRAD_FUZZ_GRAPHS=<n> the number of graphs; a failure prints the seed that reproduces it:
//   TAPEGRAD_FUZZ_SEED=<seed> TAPEGRAD_FUZZ_GRAPHS=1 build/test/test_random_graphs
// TAPEGRAD_FUZZ_VERBOSE=1 prints every graph; TAPEGRAD_FUZZ_OPS=<min>-<max> makes every test's
// graphs that long (40-150 for a search of the Function tests; the central differences of
// long graphs may need their Richardson steps).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

#include "fuzz/fuzz_env.hpp"
#include "fuzz/graph_calls.hpp"
#include "fuzz/graph_check.hpp"
#include "identical_support.hpp"
#include "support.hpp"

using tapegrad::fuzz::env_or;

namespace {

// Each test's default number of graphs is fewer under ASan+UBSan (still every op family).
using tapegrad::fuzz::fuzz_count;
constexpr std::uint64_t kDefaultGraphs = fuzz_count(1000, 250);
constexpr std::uint64_t kDefaultSeed = 20260901;

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

namespace {

using TensorsFn =
    std::function<std::vector<tapegrad::Tensor>(const std::vector<tapegrad::Tensor>&)>;

// Runs `graphs` graphs from the fuzz seed on, each in float64 and in float32, as a Function of
// fn_for(graph), fused and op by op, called at the base point twice (the trace, then a replay)
// and at a second point (the inputs scaled by 1.01): every call's results must be fn's eager
// bits. `what` names the test in its summary line; a failure prints its seed and graph.
void require_function_equals_eager(
    const char* what, std::uint64_t default_graphs,
    const std::function<TensorsFn(const tapegrad::fuzz::RandomGraph&)>& fn_for, int min_ops = 3,
    int max_ops = 12) {
  using namespace tapegrad;
  using namespace tapegrad::fuzz;
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", kDefaultSeed);
  const std::uint64_t graphs = env_or("TAPEGRAD_FUZZ_GRAPHS", default_graphs);
  std::uint64_t failures = 0, calls = 0, ops = 0;
  std::string first_failure;
  for (std::uint64_t n = 0; n < 2 * graphs; ++n) {
    const std::uint64_t seed = first_seed + n / 2;
    const DType dtype = n % 2 == 0 ? DType::Float64 : DType::Float32;
    const RandomGraph graph = RandomGraph::generate(seed, dtype, min_ops, max_ops);
    ops += graph.op_count();
    const TensorsFn fn = fn_for(graph);
    std::vector<Tensor> second_point;
    for (const Tensor& x : graph.inputs()) second_point.push_back(multiply(x, scalar(1.01, dtype)));
    for (bool optimize : {true, false}) {
      const Function f = function(fn, FunctionOptions{16, optimize});
      for (const std::vector<Tensor>* point : std::vector<const std::vector<Tensor>*>{
               &graph.inputs(), &graph.inputs(), &second_point}) {
        std::string failure;
        try {
          const std::string difference = tapegrad::testing::first_difference(f(*point), fn(*point));
          ++calls;
          if (!difference.empty()) failure = difference + " from the eager bits";
        } catch (const std::exception& e) {
          failure = std::string("exception: ") + e.what();
        }
        if (!failure.empty()) {
          ++failures;
          const std::string report = "seed " + std::to_string(seed) + " " + dtype_name(dtype) +
                                     (optimize ? " (optimize)" : " (op by op)") + ": " + failure +
                                     "\n" + graph.describe();
          std::cerr << report;
          if (first_failure.empty()) first_failure = report;
        }
      }
    }
  }
  std::cout << what << ": " << graphs << " graphs in each dtype (" << ops << " ops), " << calls
            << " calls compared, " << failures << " failed\n";
  INFO(first_failure);
  REQUIRE(failures == 0);
}

}  // namespace

TEST_CASE(
    "random graphs: a Function's replays of the value and gradient equal the eager call bit "
    "for bit, fused and op by op, float64 and float32") {
  // Every graph as fn: its value and the gradient of a weighted sum of it with respect to
  // every input. The fused replay plans runs across broadcasts, interleaved shapes and
  // gathers; each call must give the eager bits, in both floating dtypes (their loops differ in
  // vector width).
  constexpr std::uint64_t kGraphs = fuzz_count(300, 100);
  require_function_equals_eager("random graphs through function", kGraphs, [](const auto& graph) {
    return TensorsFn([&graph](const std::vector<tapegrad::Tensor>& args) {
      return tapegrad::fuzz::value_and_gradient(graph, args);
    });
  });
}

TEST_CASE(
    "random graphs: long graphs (40 to 150 ops) as a Function, value and gradient, the eager "
    "bits on every call") {
  // Many values alive at once, read again at random distances: the memory plan reuses arena
  // places and buffers across interleaved lifetimes, and long runs of loops fuse.
  constexpr std::uint64_t kGraphs = fuzz_count(60, 15);
  require_function_equals_eager(
      "long random graphs through function", kGraphs,
      [](const auto& graph) {
        return TensorsFn([&graph](const std::vector<tapegrad::Tensor>& args) {
          return tapegrad::fuzz::value_and_gradient(graph, args);
        });
      },
      40, 150);
}

namespace {

// What a Function must give under tapes and an accumulator, with `evaluate` computing the
// graph's output y at `at`: y; the gradients g_k of sum(w * y) (w = 1 + 0.01 i) from an inner
// tape; the JVP of y along t_k = 0.3 x_k + 0.7 from a ForwardAccumulator; and the gradients of
// sum_k sum((x_k + 0.5) * g_k) from an outer tape (second order). Unconnected ones are zeros.
std::vector<tapegrad::Tensor> nested_derivatives(
    const std::function<tapegrad::Tensor(const std::vector<tapegrad::Tensor>&)>& evaluate,
    const std::vector<tapegrad::Tensor>& at) {
  using namespace tapegrad;
  const auto number = [](double v) { return scalar(v, DType::Float64); };
  GradientTape outer;
  GradientTape inner;
  outer.watch(at);
  inner.watch(at);
  const Tensor y = evaluate(at);
  const Tensor w =
      add(multiply(range(0.0, static_cast<double>(y.size())), number(0.01)), number(1.0));
  const std::vector<Tensor> g =
      inner.gradient(reduce_sum(multiply(y, w)), at, UnconnectedGradients::Zero);
  Tensor second = number(0.0);
  for (std::size_t k = 0; k < at.size(); ++k) {
    second = add(second, reduce_sum(multiply(g[k], add(at[k], number(0.5)))));
  }
  const std::vector<Tensor> h = outer.gradient(second, at, UnconnectedGradients::Zero);
  std::vector<Tensor> tangents;
  for (const Tensor& x : at) tangents.push_back(add(multiply(x, number(0.3)), number(0.7)));
  Tensor jvp;
  {
    ForwardAccumulator accumulator(at, tangents);
    jvp = accumulator.jvp(evaluate(at), UnconnectedGradients::Zero);
  }
  std::vector<Tensor> results{y};
  results.insert(results.end(), g.begin(), g.end());
  results.push_back(jvp);
  results.insert(results.end(), h.begin(), h.end());
  return results;
}

// Empty when got equals want to rounding (|got - want| <= 1e-10 (1 + |want|), NaN where want
// is NaN), else the first element that differs.
std::string rounding_difference(const tapegrad::Tensor& got, const tapegrad::Tensor& want) {
  if (got.shape() != want.shape()) return "shapes differ";
  const auto& a = got.array<double>();
  const auto& b = want.array<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a.data()[i], expected = b.data()[i];
    if ((std::isnan(x) && std::isnan(expected)) ||
        std::abs(x - expected) <= 1e-10 * (1.0 + std::abs(expected))) {
      continue;
    }
    return "element " + std::to_string(i) + ": " + std::to_string(x) + ", expected " +
           std::to_string(expected);
  }
  return {};
}

}  // namespace

TEST_CASE(
    "random graphs: a Function under two tapes and an accumulator, value and gradients bit for "
    "bit, second derivatives and JVP to rounding") {
  // The Function is one recorded op whose gradient and forward rule are traced Functions, so
  // its value and first-order gradients run the eager kernels in the eager order: the same
  // bits. The second order differentiates the traced gradient (its sums of contributions come
  // in another order) and the JVP comes from the traced forward rule: equal to rounding.
  using namespace tapegrad;
  using namespace tapegrad::fuzz;
  constexpr std::uint64_t kGraphs = fuzz_count(150, 40);
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", kDefaultSeed);
  const std::uint64_t graphs = env_or("TAPEGRAD_FUZZ_GRAPHS", kGraphs);
  std::uint64_t failures = 0, compared = 0;
  std::string first_failure;
  for (std::uint64_t n = 0; n < graphs; ++n) {
    const std::uint64_t seed = first_seed + n;
    const RandomGraph graph = RandomGraph::generate(seed);
    const std::vector<Tensor>& base_point = graph.inputs();
    std::vector<Tensor> second_point;
    for (const Tensor& x : base_point) {
      second_point.push_back(multiply(x, scalar(1.01, DType::Float64)));
    }
    const std::size_t first_order_results = 1 + base_point.size();
    for (bool optimize : {true, false}) {
      const Function f = function(
          [&](const std::vector<Tensor>& args) {
            return std::vector<Tensor>{graph.evaluate(args)};
          },
          FunctionOptions{16, optimize});
      for (const std::vector<Tensor>* point :
           std::vector<const std::vector<Tensor>*>{&base_point, &base_point, &second_point}) {
        std::string failure;
        try {
          const std::vector<Tensor> got = nested_derivatives(
              [&](const std::vector<Tensor>& args) { return f(args)[0]; }, *point);
          const std::vector<Tensor> expected = nested_derivatives(
              [&](const std::vector<Tensor>& args) { return graph.evaluate(args); }, *point);
          for (std::size_t i = 0; failure.empty() && i < got.size(); ++i) {
            ++compared;
            if (i < first_order_results) {
              if (got[i].shape() != expected[i].shape() ||
                  tapegrad::testing::element_bytes(got[i]) !=
                      tapegrad::testing::element_bytes(expected[i])) {
                failure = "result " + std::to_string(i) + " is not the eager bits";
              }
            } else if (const std::string d = rounding_difference(got[i], expected[i]); !d.empty()) {
              failure = "result " + std::to_string(i) + ", " + d;
            }
          }
        } catch (const std::exception& e) {
          failure = std::string("exception: ") + e.what();
        }
        if (!failure.empty()) {
          ++failures;
          const std::string report = "seed " + std::to_string(seed) +
                                     (optimize ? " (optimize)" : " (op by op)") + ": " + failure +
                                     "\n" + graph.describe();
          std::cerr << report;
          if (first_failure.empty()) first_failure = report;
        }
      }
    }
  }
  std::cout << "random graphs through a Function under tapes: " << graphs << " graphs, " << compared
            << " results compared, " << failures << " failed\n";
  INFO(first_failure);
  REQUIRE(failures == 0);
}

TEST_CASE(
    "random graphs: a Function whose fn takes Jacobians and JVPs replays them bit for bit, "
    "float64 and float32") {
  // fn's tape.jacobian is vectorized (one batched backward pass over the rows' output
  // gradients) and its ForwardAccumulator runs every op's forward rule: the trace captures
  // both.
  constexpr std::uint64_t kGraphs = fuzz_count(150, 40);
  require_function_equals_eager(
      "random graphs' Jacobians and JVPs through a Function", kGraphs, [](const auto& graph) {
        return TensorsFn([&graph](const std::vector<tapegrad::Tensor>& args) {
          using namespace tapegrad;
          std::vector<Tensor> results;
          {
            GradientTape tape;
            tape.watch(args);
            JacobianOptions options;
            options.unconnected = UnconnectedGradients::Zero;
            results = tape.jacobian(graph.evaluate(args), args, options);
          }
          std::vector<Tensor> tangents;
          for (const Tensor& a : args) {
            tangents.push_back(add(multiply(a, scalar(0.3, a.dtype())), scalar(0.7, a.dtype())));
          }
          ForwardAccumulator accumulator(args, tangents);
          results.push_back(accumulator.jvp(graph.evaluate(args), UnconnectedGradients::Zero));
          return results;
        });
      });
}

TEST_CASE(
    "random graphs: a Function of vectorized_map replays the batched values and gradients bit "
    "for bit, float64 and float32") {
  // fn maps value and gradient over three points near its arguments (scaled by 1, 1.01 and
  // 0.98: the graph keeps its base point's conditioning there), with no loop fallback: the
  // trace holds vectorized_map's batched replay, whose ops a Function fuses again.
  constexpr std::uint64_t kGraphs = fuzz_count(150, 40);
  require_function_equals_eager(
      "random graphs' vectorized_map through a Function", kGraphs, [](const auto& graph) {
        return TensorsFn([&graph](const std::vector<tapegrad::Tensor>& args) {
          using namespace tapegrad;
          std::vector<Tensor> batches;
          for (const Tensor& a : args) {
            batches.push_back(stack(
                {a, multiply(a, scalar(1.01, a.dtype())), multiply(a, scalar(0.98, a.dtype()))},
                0));
          }
          return vectorized_map(
              [&graph](const std::vector<Tensor>& point) {
                return fuzz::value_and_gradient(graph, point);
              },
              batches, /*fallback_to_loop=*/false);
        });
      });
}

TEST_CASE(
    "random graphs: vectorized_map's fused loops over a batch of 8,192 give the bits of its "
    "op-by-op replay, float64 and float32") {
  // vectorized_map fuses runs of elementwise ops into loops only from 8,192 batched elements
  // on, and only when nothing observes the thread; the checks above use batches of three. Here
  // each graph's value and gradient are mapped over 8,192 points near the base point, once as
  // it is and once under a tape, which makes the replay run op by op: the same bits.
  using namespace tapegrad;
  using namespace tapegrad::fuzz;
  constexpr std::uint64_t kGraphs = fuzz_count(60, 15);
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", kDefaultSeed);
  const std::uint64_t graphs = env_or("TAPEGRAD_FUZZ_GRAPHS", kGraphs);
  std::uint64_t failures = 0, compared = 0;
  std::string first_failure;
  for (std::uint64_t n = 0; n < 2 * graphs; ++n) {
    const std::uint64_t seed = first_seed + n / 2;
    const DType dtype = n % 2 == 0 ? DType::Float64 : DType::Float32;
    const RandomGraph graph = RandomGraph::generate(seed, dtype);
    std::string failure;
    try {
      const std::vector<Tensor> fused = mapped_value_and_gradient(graph, graph.inputs(), 8192);
      std::vector<Tensor> op_by_op;
      {
        const Tensor unrelated = scalar(1.0, DType::Float64);
        GradientTape observer;
        observer.watch(unrelated);
        op_by_op = mapped_value_and_gradient(graph, graph.inputs(), 8192);
      }
      for (std::size_t i = 0; failure.empty() && i < fused.size(); ++i) {
        ++compared;
        if (fused[i].shape() != op_by_op[i].shape() ||
            tapegrad::testing::element_bytes(fused[i]) !=
                tapegrad::testing::element_bytes(op_by_op[i])) {
          failure = "result " + std::to_string(i) + " differs";
        }
      }
    } catch (const std::exception& e) {
      failure = std::string("exception: ") + e.what();
    }
    if (!failure.empty()) {
      ++failures;
      const std::string report = "seed " + std::to_string(seed) + " " + dtype_name(dtype) + ": " +
                                 failure + "\n" + graph.describe();
      std::cerr << report;
      if (first_failure.empty()) first_failure = report;
    }
  }
  std::cout << "random graphs' vectorized_map over 8,192 points, fused against op by op: " << graphs
            << " graphs in each dtype, " << compared << " results compared, " << failures
            << " failed\n";
  INFO(first_failure);
  REQUIRE(failures == 0);
}

TEST_CASE(
    "random graphs: a Function of vectorized_map over 8,192 points replays its loops of many "
    "blocks bit for bit, float64 and float32") {
  // The graphs have at most 48 elements a tensor, so the Function tests above run every loop
  // in one block. Mapped over 8,192 points (inside fn) they make tensors of many blocks, read
  // whole, broadcast (a pattern repeated across blocks) or gathered.
  constexpr std::uint64_t kGraphs = fuzz_count(20, 5);
  require_function_equals_eager(
      "random graphs' vectorized_map over 8,192 points through a Function", kGraphs,
      [](const auto& graph) {
        return TensorsFn([&graph](const std::vector<tapegrad::Tensor>& args) {
          return tapegrad::fuzz::mapped_value_and_gradient(graph, args, 8192);
        });
      });
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
