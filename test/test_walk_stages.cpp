// The backward walk's stages and invariants (src/runtime/imperative_grad.cpp), driven on small
// graphs recorded straight onto a TapeImpl with ops defined here, through a fake VSpace that
// logs what the walk asks of it. Then, through the public API: an op with 10,000 outputs, and
// a gradient that comes back as the walk's own seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "runtime/imperative_grad.hpp"
#include "runtime/op_definition.hpp"
#include "runtime/tape.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using detail::KeepSet;
using detail::OpDefinition;
using detail::TapeImpl;
using detail::TensorMeta;
using tapegrad::testing::require_close;

namespace {

// ---- What the test ops' rules and the fake VSpace log ------------------------------------

double scalar(const Tensor& t) { return t.array<double>()(0); }
Tensor scalar_tensor(double v) { return Tensor(xt::xarray<double>{v}); }

struct WalkLog {
  TapeImpl* tape = nullptr;
  std::map<std::string, std::int64_t> op_id;  // test op name -> entry index on `tape`
  std::vector<std::string> calls;             // rules called, in order
  // Per call: the ops called before it whose entries still held kept tensors or extras.
  std::vector<std::string> unreleased_before_call;
  std::vector<std::string> calls_without_saved_input;  // a kept input that did not arrive
};
WalkLog* g_log = nullptr;

// Every test op is linear: output j = sum_i weight(i, j) * input i, on [1] float64 tensors,
// with weight(i, j) = 1 + i + 10 j (so each input's gradient is a distinct number).
double weight(std::size_t i, std::size_t j) { return 1.0 + static_cast<double>(i) + 10.0 * j; }

std::vector<GradientValue> linear_rule(const OpContext& op, const std::vector<Tensor>& grads) {
  WalkLog& log = *g_log;
  for (const std::string& earlier : log.calls) {
    if (log.tape->entry(log.op_id.at(earlier)).holds_kept()) {
      log.unreleased_before_call.push_back(op.op_type() + " after " + earlier);
    }
  }
  for (std::size_t i = 0; i < op.num_inputs(); ++i) {
    if (!op.inputs()[i].defined()) log.calls_without_saved_input.push_back(op.op_type());
  }
  log.calls.push_back(op.op_type());
  std::vector<GradientValue> result;
  for (std::size_t i = 0; i < op.num_inputs(); ++i) {
    double g = 0.0;
    for (std::size_t j = 0; j < grads.size(); ++j) g += weight(i, j) * scalar(grads[j]);
    result.emplace_back(scalar_tensor(g));
  }
  return result;
}

// Row-sparse: the gradient of "pick row 1 of a [4] input", as an IndexedSlices.
std::vector<GradientValue> pick_rule(const OpContext& op, const std::vector<Tensor>& grads) {
  g_log->calls.push_back(op.op_type());
  return {IndexedSlices{grads[0], Tensor(xt::xarray<std::int64_t>{1}), Shape{4}}};
}

// The test ops: each name is recorded once per graph, so a call names its entry.
#define LINEAR_OP(name)         \
  constexpr OpDefinition name = \
      detail::differentiable_op(#name, linear_rule, KeepSet::all(), KeepSet::none())
LINEAR_OP(A);
LINEAR_OP(B);
LINEAR_OP(C);
LINEAR_OP(D);
LINEAR_OP(E);
LINEAR_OP(S);
LINEAR_OP(U);
LINEAR_OP(W);
#undef LINEAR_OP
constexpr OpDefinition N = detail::not_differentiable_op("N");
constexpr OpDefinition P1 =
    detail::differentiable_op("P1", pick_rule, KeepSet::none(), KeepSet::none());
constexpr OpDefinition P2 =
    detail::differentiable_op("P2", pick_rule, KeepSet::none(), KeepSet::none());

// A VSpace that logs every request and computes as the real one does.
struct FakeVSpace final : detail::VSpace {
  mutable std::vector<Shape> ones_asked;
  mutable std::vector<Shape> zeros_asked;
  mutable std::vector<std::pair<double, double>> adds;  // (running sum, arriving gradient)
  mutable std::vector<std::vector<bool>> aggregates;    // per call: is_sparse of each element

  Tensor ones(const Shape& shape, DType dtype) const override {
    ones_asked.push_back(shape);
    return fill(shape, 1.0, dtype);
  }
  Tensor zeros(const Shape& shape, DType dtype) const override {
    zeros_asked.push_back(shape);
    return fill(shape, 0.0, dtype);
  }
  Tensor add(const Tensor& sum, const Tensor& gradient) const override {
    adds.emplace_back(scalar(sum), scalar(gradient));
    return tapegrad::add(sum, gradient);
  }
  GradientValue aggregate(std::vector<GradientValue>& gradients) const override {
    std::vector<bool> kinds;
    for (const auto& g : gradients) kinds.push_back(g.is_sparse());
    aggregates.push_back(kinds);
    return detail::default_vspace().aggregate(gradients);
  }
};

// A tape with the ops of one graph recorded on it, and the log its rules write.
struct Graph {
  explicit Graph(bool persistent) : tape(persistent, true) {
    log.tape = &tape;
    g_log = &log;
  }
  ~Graph() { g_log = nullptr; }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Tensor leaf(double v) {
    Tensor t = scalar_tensor(v);
    tape.watch(t);
    return t;
  }
  // Records `op` on inputs and returns its n outputs (values irrelevant to the walk).
  // `gaps`: a tensor is made between outputs, so that their ids are not consecutive (as when
  // another thread takes an id block in between).
  std::vector<Tensor> record(const OpDefinition& op, std::vector<Tensor> inputs,
                             std::size_t n_outputs = 1, bool gaps = false) {
    std::vector<Tensor> outputs;
    for (std::size_t j = 0; j < n_outputs; ++j) {
      outputs.push_back(scalar_tensor(0.0));
      if (gaps) scalar_tensor(0.0);
    }
    log.op_id[op.name] = static_cast<std::int64_t>(tape.num_entries());
    tape.record(op, inputs, outputs, nullptr, nullptr);
    return outputs;
  }
  std::vector<GradientValue> gradient(const std::vector<Tensor>& targets,
                                      const std::vector<Tensor>& sources,
                                      UnconnectedGradients unconnected = UnconnectedGradients::None,
                                      const std::vector<Tensor>& output_gradients = {}) {
    std::vector<TensorMeta> metas;
    for (const auto& s : sources) metas.push_back(TensorMeta{s.id(), s.dtype(), s.shape()});
    return detail::imperative_grad(tape, targets, metas, output_gradients, unconnected, vspace);
  }
  std::size_t position(const std::string& op) const {
    const auto it = std::find(log.calls.begin(), log.calls.end(), op);
    REQUIRE(it != log.calls.end());
    return static_cast<std::size_t>(it - log.calls.begin());
  }
  std::size_t count(const std::string& op) const {
    return static_cast<std::size_t>(std::count(log.calls.begin(), log.calls.end(), op));
  }

  TapeImpl tape;
  WalkLog log;
  FakeVSpace vspace;
};

}  // namespace

TEST_CASE("walk: each rule runs once, after all of its users, and a fan-in is added pairwise") {
  // x -A-> a; a -B-> b; a -C-> c; (b, c) -D-> y. D: y = 1 b + 2 c.
  Graph g(/*persistent=*/false);
  const Tensor x = g.leaf(0.5);
  const Tensor a = g.record(A, {x})[0];
  const Tensor b = g.record(B, {a})[0];
  const Tensor c = g.record(C, {a})[0];
  const Tensor y = g.record(D, {b, c})[0];

  const std::vector<GradientValue> grads = g.gradient({y}, {x});
  // dy/db = 1, dy/dc = 2; da = 1 * 1 + 2 * 1 = 3; dx = 3.
  REQUIRE(scalar(grads[0].dense()) == 3.0);
  REQUIRE(g.log.calls.size() == 4);
  for (const char* op : {"A", "B", "C", "D"}) REQUIRE(g.count(op) == 1);
  REQUIRE(g.position("D") < g.position("B"));
  REQUIRE(g.position("D") < g.position("C"));
  REQUIRE(g.position("B") < g.position("A"));
  REQUIRE(g.position("C") < g.position("A"));
  // The seed: ones of y's shape, once; no zeros (every output received a gradient).
  REQUIRE(g.vspace.ones_asked == std::vector<Shape>{Shape{1}});
  REQUIRE(g.vspace.zeros_asked.empty());
  // Two gradients reach a (1 from B, 2 from C): one addition, of exactly those two.
  REQUIRE(g.vspace.adds.size() == 1);
  const auto [sum, arriving] = g.vspace.adds[0];
  REQUIRE(std::min(sum, arriving) == 1.0);
  REQUIRE(std::max(sum, arriving) == 2.0);
  REQUIRE(g.vspace.aggregates.empty());
  // Non-persistent: every entry called before a rule had been released by then.
  REQUIRE(g.log.unreleased_before_call.empty());
  REQUIRE(g.log.calls_without_saved_input.empty());
  for (const char* op : {"A", "B", "C", "D"}) {
    REQUIRE_FALSE(g.tape.entry(g.log.op_id.at(op)).holds_kept());
  }
}

TEST_CASE("walk: a fan-in of n dense gradients costs n - 1 additions with each one once") {
  // x feeds E's three inputs: E's rule returns 1, 2, 3 for them (weights 1 + i).
  Graph g(/*persistent=*/false);
  const Tensor x = g.leaf(1.0);
  const Tensor y = g.record(E, {x, x, x})[0];
  const std::vector<GradientValue> grads = g.gradient({y}, {x});
  REQUIRE(scalar(grads[0].dense()) == 6.0);
  REQUIRE(g.vspace.adds.size() == 2);
  // The first addition takes two of {1, 2, 3}; the second adds the third to their sum.
  const auto [s0, g0] = g.vspace.adds[0];
  const auto [s1, g1] = g.vspace.adds[1];
  REQUIRE(s1 == s0 + g0);
  REQUIRE(s0 + g0 + g1 == 6.0);
  std::vector<double> arrived{s0, g0, g1};
  std::sort(arrived.begin(), arrived.end());
  REQUIRE(arrived == std::vector<double>{1.0, 2.0, 3.0});
}

TEST_CASE("walk: zeros only for the outputs without a gradient of an op whose rule runs") {
  // x -S-> (s0, s1, s2): s1 unused. x -U-> (u0, u1): unused, so U is not on the path.
  // x -W-> w -N-> n: N is not differentiable, so W's output gets no gradient and W's rule
  // does not run. (s0, s2, n) -E-> y.
  Graph g(/*persistent=*/true);
  const Tensor x = g.leaf(2.0);
  const std::vector<Tensor> s = g.record(S, {x}, 3);
  g.record(U, {x}, 2);
  const Tensor w = g.record(W, {x})[0];
  const Tensor n = g.record(N, {w})[0];
  const Tensor y = g.record(E, {s[0], s[2], n})[0];

  const std::vector<GradientValue> grads = g.gradient({y}, {x});
  // dy/ds0 = 1, dy/ds2 = 2, s1 gets zeros; dx = 1 * 1 + 11 * 0 + 21 * 2 = 43.
  REQUIRE(scalar(grads[0].dense()) == 43.0);
  REQUIRE(g.vspace.zeros_asked == std::vector<Shape>{Shape{1}});
  REQUIRE(g.count("S") == 1);
  REQUIRE(g.count("E") == 1);
  REQUIRE(g.count("U") == 0);
  REQUIRE(g.count("W") == 0);
  REQUIRE(g.log.calls.size() == 2);
  // Persistent: nothing released; the rules saw their kept inputs.
  REQUIRE(g.tape.entry(g.log.op_id.at("S")).holds_kept());
  REQUIRE(g.tape.entry(g.log.op_id.at("E")).holds_kept());
  REQUIRE(g.log.calls_without_saved_input.empty());

  SECTION("a second walk of the persistent tape runs the same calls again") {
    g.log.calls.clear();
    const std::vector<GradientValue> again = g.gradient({y}, {x});
    REQUIRE(scalar(again[0].dense()) == 43.0);
    REQUIRE(g.log.calls == std::vector<std::string>{"E", "S"});
    REQUIRE(g.vspace.zeros_asked.size() == 2);
  }
}

TEST_CASE("walk: outputs found by id whatever the order of their ids and of their users") {
  // x -S-> (s0, s1, s2, s3) with non-consecutive ids; E uses them out of order and twice.
  // E's input i has weight 1 + i: (s2, s0, s3, s0, s1) get 1, 2, 3, 4, 5.
  Graph g(/*persistent=*/false);
  const Tensor x = g.leaf(1.0);
  const std::vector<Tensor> s = g.record(S, {x}, 4, /*gaps=*/true);
  const Tensor y = g.record(E, {s[2], s[0], s[3], s[0], s[1]})[0];
  const std::vector<GradientValue> grads = g.gradient({y}, {x});
  // ds0 = 2 + 4, ds1 = 5, ds2 = 1, ds3 = 3; dx = 1 * 6 + 11 * 5 + 21 * 1 + 31 * 3 = 175.
  REQUIRE(scalar(grads[0].dense()) == 175.0);
  REQUIRE(g.log.calls == std::vector<std::string>{"E", "S"});
  REQUIRE(g.vspace.zeros_asked.empty());
  REQUIRE(g.vspace.adds == std::vector<std::pair<double, double>>{{2.0, 4.0}});
}

TEST_CASE("walk: sources' sums, intermediate and repeated sources, unconnected sources") {
  // x -A-> a; (a, x) -B-> y = 1 a + 2 x: x receives 2 directly and 1 through a.
  Graph g(/*persistent=*/true);
  const Tensor x = g.leaf(1.0);
  const Tensor z = g.leaf(3.0);  // watched, unused
  const Tensor a = g.record(A, {x})[0];
  const Tensor y = g.record(B, {a, x})[0];

  // dy/da = 1, dy/dx directly = 2, through a = 1 * 1: dx = 3.
  const std::vector<GradientValue> grads = g.gradient({y}, {x, a, x, z});
  REQUIRE(scalar(grads[0].dense()) == 3.0);
  REQUIRE(scalar(grads[1].dense()) == 1.0);
  REQUIRE(scalar(grads[2].dense()) == 3.0);
  REQUIRE_FALSE(grads[3].defined());
  REQUIRE(g.vspace.adds.size() == 1);  // x's two contributions

  const std::vector<GradientValue> zero = g.gradient({y}, {z}, UnconnectedGradients::Zero);
  REQUIRE(zero[0].dense().shape() == Shape{1});
  REQUIRE(scalar(zero[0].dense()) == 0.0);
  REQUIRE(g.vspace.zeros_asked.empty());  // the caller's zeros, not an output's

  SECTION("the target is a source: its seed is its gradient") {
    const std::vector<GradientValue> self = g.gradient({y}, {y});
    REQUIRE(scalar(self[0].dense()) == 1.0);
  }
  SECTION("given output gradients replace the seeds") {
    g.vspace.ones_asked.clear();
    const std::vector<GradientValue> weighted =
        g.gradient({y}, {x}, UnconnectedGradients::None, {scalar_tensor(5.0)});
    REQUIRE(scalar(weighted[0].dense()) == 15.0);
    REQUIRE(g.vspace.ones_asked.empty());
  }
  SECTION("two targets: both seeded, their gradients summed") {
    g.vspace.ones_asked.clear();
    g.log.calls.clear();
    const std::vector<GradientValue> both = g.gradient({y, a}, {x});
    REQUIRE(scalar(both[0].dense()) == 4.0);
    REQUIRE(g.vspace.ones_asked.size() == 2);
    REQUIRE(g.log.calls == std::vector<std::string>{"B", "A"});
  }
}

TEST_CASE("walk: sparse gradients are aggregated once, with exactly the contributions") {
  // x: [4]; P1 and P2 each pick row 1 of x; (p1, p2) -D-> y. x receives two IndexedSlices.
  Graph g(/*persistent=*/false);
  Tensor x = Tensor(xt::xarray<double>{1.0, 2.0, 3.0, 4.0});
  g.tape.watch(x);
  const Tensor p1 = g.record(P1, {x})[0];
  const Tensor p2 = g.record(P2, {x})[0];
  const Tensor y = g.record(D, {p1, p2})[0];

  const std::vector<GradientValue> grads = g.gradient({y}, {x});
  REQUIRE(g.vspace.aggregates == std::vector<std::vector<bool>>{{true, true}});
  REQUIRE(g.vspace.adds.empty());
  REQUIRE(grads[0].is_sparse());
  // Row 1 gets 1 (from p1) + 2 (from p2).
  require_close(grads[0].to_dense(), Shape{4}, {0.0, 3.0, 0.0, 0.0});
}

TEST_CASE("walk: split into 10,000 outputs, every output used and every other output used") {
  const std::size_t n = 10000;
  xt::xarray<double> xs = xt::arange<double>(0.0, static_cast<double>(n));
  xt::xarray<double> ws = 0.5 * xt::arange<double>(0.0, static_cast<double>(n)) + 1.0;
  const Tensor x(xs);
  const Tensor w(ws);

  SECTION("all outputs feed one concat: the gradient is w") {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = reduce_sum(multiply(concat(split(x, static_cast<int>(n)), 0), w));
    const Tensor dx = tape.gradient(y, x);
    REQUIRE(dx.shape() == Shape{n});
    REQUIRE(dx.array<double>() == ws);
  }
  SECTION("even outputs only, each through its own op: odd rows get zeros") {
    GradientTape tape;
    tape.watch(x);
    const std::vector<Tensor> parts = split(x, static_cast<int>(n));
    std::vector<Tensor> used;
    for (std::size_t i = 0; i < n; i += 2) {
      used.push_back(multiply(parts[i], Tensor(xt::xarray<double>{ws(i)})));
    }
    const Tensor y = reduce_sum(concat(used, 0));
    const Tensor dx = tape.gradient(y, x);
    xt::xarray<double> expected = xt::zeros<double>({n});
    for (std::size_t i = 0; i < n; i += 2) expected(i) = ws(i);
    REQUIRE(dx.array<double>() == expected);
  }
}

TEST_CASE("walk: a gradient returned as the walk's seed can be watched without side effects") {
  GradientTape outer;
  const Tensor x(xt::xarray<double>{1.5});
  Tensor seed_returned;
  {
    GradientTape tape;
    tape.watch(x);
    seed_returned = tape.gradient(x, x);  // the target is the source: the seed comes back
  }
  REQUIRE(seed_returned.array<double>() == xt::xarray<double>{1.0});
  outer.watch(seed_returned);
  const std::size_t held = outer.bytes_held();

  // An unrelated gradient of the same shape and dtype, while `outer` records: nothing it
  // computes may involve the watched tensor.
  GradientTape tape;
  tape.watch(x);
  const Tensor y = multiply(x, x);
  const Tensor dy = tape.gradient(y, x);
  REQUIRE(dy.array<double>() == xt::xarray<double>{3.0});
  REQUIRE(outer.bytes_held() == held);
  REQUIRE_FALSE(outer.gradient(dy, seed_returned).defined());
}

TEST_CASE("walk: running sums added in place never change a tensor the caller holds") {
  // `a` is used three times: its sum starts as the caller's own seed (add passes the output
  // gradient through), so the first addition must make a new array; the next may go in place.
  const Tensor x = from_values({1.0, 2.0, 3.0}, {3}, DType::Float64);
  const Tensor seed = from_values({1.0, -1.0, 0.5}, {3}, DType::Float64);
  Tensor first;
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor a = identity(x);
    const Tensor y = a + a * 2.0 + a * 3.0;
    first = tape.gradient({y}, {x}, {seed})[0];
  }
  require_close(first, {3}, {6.0, -6.0, 3.0}, 0.0);
  require_close(seed, {3}, {1.0, -1.0, 0.5}, 0.0);
  // A second walk with the same seed: neither the seed nor the first result changes.
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor a = identity(x);
    const Tensor y = a + a * 4.0 + a;
    require_close(tape.gradient({y}, {x}, {seed})[0], {3}, {6.0, -6.0, 3.0}, 0.0);
  }
  require_close(seed, {3}, {1.0, -1.0, 0.5}, 0.0);
  require_close(first, {3}, {6.0, -6.0, 3.0}, 0.0);
}
