// Every generic check on every op sample (test/samples/: one file per family of src/ops/): the
// gradient against central differences to first and second order, every supported dtype
// against float64 (the integer ones exactly, on integer-valued inputs; an op that declares no
// integer dtype must reject integers), the forward rule against the transpose of the gradient, the
// batching rule against a loop (values, per-example gradients, empty batches, strided views, a
// Function's replay), the structure rule against the op's forward on one-hot rows, and the op's
// misuse cases. The coverage tests fail when a registered op has no sample, or an op's rule no
// sample that checks it. Each check names the sample it fails on.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "misuse_support.hpp"
#include "ops/internal_ops.hpp"
#include "runtime/batching_context.hpp"
#include "runtime/forward_context.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/replay_context.hpp"
#include "samples/batch_checks.hpp"
#include "samples/op_sample.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::samples;
using tapegrad::testing::random_tensor;
using tapegrad::testing::require_close;
using tapegrad::testing::values;

namespace {

// Registered ops no sample runs, each with why.
const std::map<std::string, std::string>& ops_without_samples() {
  static const std::map<std::string, std::string> none_yet{};
  return none_yet;
}

// Ops whose batching rule no batch case can reach through vectorized_map, each with where it
// is tested instead.
const std::map<std::string, std::string> kBatchingTestedElsewhere = {
    {"ReadVariableOp",
     "recorded on tapes only (a variable's value is never a traced value): test_vectorized_map "
     "calls its rule directly"},
    {"Where",
     "boolean_mask's positions refuse to batch on purpose: test_vectorized_map checks the "
     "refusal and the loop"},
};

// "Tan" or "Tan (variant)", for INFO.
std::string label(const OpSample& s) {
  return s.variant.empty() ? s.op : s.op + " (" + s.variant + ")";
}

const detail::OpDefinition& definition_of(const OpSample& s) { return detail::op_named(s.op); }

// Tolerances by dtype: float64 results are compared to 1e-6 (first order against central
// differences with step 1e-6, as require_gradient_matches) and 1e-5 (second order, as
// require_second_order_matches); a float32 run against the float64 one to 1e-4 in its values
// and 1e-3 in its gradients (float32 rounds at 6e-8 relative; the samples' inputs are of order
// 1, away from the ops' singularities).
constexpr double kFirstOrderTolerance = 1e-6;
constexpr double kSecondOrderTolerance = 1e-5;
constexpr double kForwardRuleTolerance = 1e-10;
double value_tolerance(DType dtype) { return dtype == DType::Float32 ? 1e-4 : 1e-12; }
double gradient_tolerance(DType dtype) { return dtype == DType::Float32 ? 1e-3 : 1e-12; }

std::vector<std::size_t> floating_inputs(const OpSample& s) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    if (is_floating(s.inputs[i].dtype())) out.push_back(i);
  }
  return out;
}

// A scalar of the sample's floating outputs, each weighted by fixed random weights (so that
// the gradient check sees every output element with its own weight), in float64.
Fn weighted_loss(const OpSample& s) {
  return [run = s.run](const std::vector<Tensor>& inputs) {
    Tensor loss = scalar(0.0, DType::Float64);
    const Outputs outputs = run(inputs);
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      const Tensor& y = outputs[j];
      if (!y.defined() || !is_floating(y.dtype())) continue;
      const Tensor w = random_tensor(y.shape(), 500 + static_cast<unsigned>(j));
      loss = add(loss, reduce_sum(multiply(cast(y, DType::Float64), w)));
    }
    return loss;
  };
}

// d loss / d inputs[i] at the sample's inputs (zeros where unconnected).
Fn gradient_of(const Fn& loss, std::size_t i) {
  return [loss, i](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> args = inputs;
    GradientTape tape;
    tape.watch(args[i]);
    return tape.gradient(loss(args), args[i], UnconnectedGradients::Zero);
  };
}

void require_matches_central_differences(const Fn& f, const std::vector<Tensor>& inputs,
                                         std::size_t i, double tolerance) {
  const GradientCheck check = check_gradient(f, inputs, i);
  INFO("input " << i << ": theoretical " << check.theoretical << "\nnumerical " << check.numerical);
  CHECK(check.max_error < tolerance);
}

}  // namespace

// ---- coverage -------------------------------------------------------------------------------

TEST_CASE("every registered op has a sample, or is listed with why it has none", "[samples]") {
  std::set<std::string> sampled;
  for (const OpSample& s : all_samples()) sampled.insert(s.op);
  std::set<std::string> registered;
  for (const RegisteredOpInfo& op : registered_ops()) {
    INFO("registered op " << op.name);
    registered.insert(op.name);
    CHECK((sampled.count(op.name) + ops_without_samples().count(op.name)) == 1);
  }
  for (const std::string& op : sampled) {
    INFO("a sample names " << op << ", which is not a registered op");
    CHECK(registered.count(op) == 1);
  }
}

TEST_CASE("every sample declares its checks: not-differentiable ops opt out of the gradients",
          "[samples]") {
  for (const OpSample& s : all_samples()) {
    INFO(label(s));
    CHECK(s.run);
    CHECK(!s.inputs.empty());
    CHECK((s.other_dtypes.empty() == !s.no_other_dtypes.empty()));
    if (definition_of(s).kind == detail::GradientKind::NotDifferentiable) {
      CHECK(!s.no_gradient.empty());
    }
    if (!s.no_gradient.empty()) CHECK(!s.no_second_order.empty());
    for (const Tensor& x : s.inputs) {
      if (is_floating(x.dtype())) CHECK(x.dtype() == DType::Float64);
    }
    // Other dtypes cast the floating inputs: without one, nothing would change.
    if (floating_inputs(s).empty()) CHECK(s.other_dtypes.empty());
  }
}

TEST_CASE("every op with a forward, batching or structure rule has a sample that checks it",
          "[samples]") {
  std::set<std::string> sampled, batched, structured;
  for (const OpSample& s : all_samples()) {
    sampled.insert(s.op);
    for (const BatchCase& c : s.batching) batched.insert(c.ops.begin(), c.ops.end());
    for (const StructureCase& c : s.structure) {
      if (!c.expected.empty()) structured.insert(s.op);
    }
  }
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    INFO("built-in op " << op->name);
    if (op->forward_rule != nullptr) CHECK(sampled.count(op->name) == 1);
    if (op->batching_rule != nullptr) {
      CHECK((batched.count(op->name) + kBatchingTestedElsewhere.count(op->name)) == 1);
    }
    if (op->structure_rule != nullptr) CHECK(structured.count(op->name) == 1);
  }
}

// ---- gradients ------------------------------------------------------------------------------

TEST_CASE("each op's gradient matches central differences", "[samples][gradient]") {
  std::size_t checked = 0;
  for (const OpSample& s : all_samples()) {
    if (!s.no_gradient.empty()) continue;
    INFO(label(s));
    const Fn loss = weighted_loss(s);
    for (std::size_t i : floating_inputs(s)) {
      require_matches_central_differences(loss, s.inputs, i, kFirstOrderTolerance);
      ++checked;
    }
  }
  CHECK(checked >= 165);
}

// The gradient of the gradient: each floating input's gradient differentiated again with
// respect to every floating input (the mixed second derivatives too).
TEST_CASE("each op's second-order gradient matches central differences of its gradient",
          "[samples][gradient]") {
  std::size_t checked = 0;
  for (const OpSample& s : all_samples()) {
    if (!s.no_second_order.empty()) continue;
    INFO(label(s));
    const Fn loss = weighted_loss(s);
    for (std::size_t i : floating_inputs(s)) {
      for (std::size_t j : floating_inputs(s)) {
        INFO("d/d input " << j << " of the gradient for input " << i);
        const Fn gradient = gradient_of(loss, i);
        require_matches_central_differences(
            [gradient](const std::vector<Tensor>& in) { return gradient(in); }, s.inputs, j,
            kSecondOrderTolerance);
        ++checked;
      }
    }
  }
  CHECK(checked >= 156);
}

// ---- dtypes ---------------------------------------------------------------------------------

namespace {

// The inputs with each floating one cast to `dtype` (index inputs as they are).
std::vector<Tensor> cast_floating(const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& x : inputs) out.push_back(is_floating(x.dtype()) ? cast(x, dtype) : x);
  return out;
}

}  // namespace

// Each dtype a sample supports besides float64: the op on its floating inputs cast to it gives
// that dtype where float64 gives float64, the float64 values to the dtype's tolerance, and
// (when differentiable) the float64 gradient to the dtype's tolerance.
TEST_CASE("each op in every supported dtype agrees with float64", "[samples][dtypes]") {
  std::size_t checked = 0;
  for (const OpSample& s : all_samples()) {
    const Outputs reference = s.run(s.inputs);
    for (DType dtype : s.other_dtypes) {
      INFO(label(s) << " in " << dtype_name(dtype));
      const std::vector<Tensor> inputs = cast_floating(s.inputs, dtype);
      const Outputs got = s.run(inputs);
      REQUIRE(got.size() == reference.size());
      for (std::size_t j = 0; j < got.size(); ++j) {
        INFO("output " << j);
        const DType expected =
            reference[j].dtype() == DType::Float64 ? dtype : reference[j].dtype();
        CHECK(got[j].dtype() == expected);
        require_close(got[j], reference[j].shape(), values(reference[j]), value_tolerance(dtype));
      }
      if (s.no_gradient.empty()) {
        const Fn loss = weighted_loss(s);
        for (std::size_t i : floating_inputs(s)) {
          INFO("gradient for input " << i);
          const Tensor g = gradient_of(loss, i)(inputs);
          const Tensor g64 = gradient_of(loss, i)(s.inputs);
          CHECK(g.dtype() == dtype);
          require_close(g, g64.shape(), values(g64), gradient_tolerance(dtype));
        }
      }
      ++checked;
    }
  }
  CHECK(checked >= 139);
}

namespace {

// The sample's inputs with each floating one made integer-valued, round(8 x), in float64; an
// x that is not zero stays nonzero of its sign (so that divisors stay nonzero and positive
// inputs positive); index inputs stay as they are.
std::vector<Tensor> integer_valued_inputs(const OpSample& s) {
  std::vector<Tensor> out;
  for (const Tensor& x : s.inputs) {
    if (!is_floating(x.dtype())) {
      out.push_back(x);
      continue;
    }
    std::vector<double> v = values(x);
    for (double& e : v) {
      const double r = std::round(8.0 * e);
      e = (r == 0.0 && e != 0.0) ? (e > 0.0 ? 1.0 : -1.0) : r;
    }
    out.push_back(from_values(v, x.shape(), DType::Float64));
  }
  return out;
}

}  // namespace

// Each integer dtype a sample declares (with_integers): the op on its integer-valued floating
// inputs cast to it gives that dtype where float64 gives float64 (bool stays bool) and exactly
// the float64 values on the same inputs, which must themselves be integers. Where the op's
// integer result differs from the real one on purpose (integer division and means truncate
// toward zero), the sample's integer_reference gives that documented result instead.
TEST_CASE("each op in every supported integer dtype agrees exactly with float64",
          "[samples][dtypes]") {
  std::size_t checked = 0;
  for (const OpSample& s : all_samples()) {
    if (s.integer_dtypes.empty()) continue;
    const std::vector<Tensor> integral = integer_valued_inputs(s);
    const Outputs reference = s.integer_reference ? s.integer_reference(integral) : s.run(integral);
    for (DType dtype : s.integer_dtypes) {
      INFO(label(s) << " in " << dtype_name(dtype));
      const Outputs got = s.run(cast_floating(integral, dtype));
      REQUIRE(got.size() == reference.size());
      for (std::size_t j = 0; j < got.size(); ++j) {
        INFO("output " << j);
        const DType expected =
            reference[j].dtype() == DType::Float64 ? dtype : reference[j].dtype();
        CHECK(got[j].dtype() == expected);
        REQUIRE(got[j].shape() == reference[j].shape());
        const std::vector<double> want = values(reference[j]);
        for (double v : want) CHECK(v == std::round(v));
        CHECK(values(got[j]) == want);
      }
      ++checked;
    }
  }
  CHECK(checked >= 110);
}

// The converse, so that the declarations cannot rot: a sample without integer dtypes whose op
// takes floating inputs rejects them cast to int32 with InvalidArgument naming the dtype; one
// whose integer run reaches no op (integers_unreached: a tape gives integers no gradient)
// gives an undefined output instead.
TEST_CASE("each op without integer dtypes rejects integer inputs", "[samples][dtypes]") {
  std::size_t rejected = 0;
  std::size_t unreached = 0;
  for (const OpSample& s : all_samples()) {
    if (!s.integer_dtypes.empty() || floating_inputs(s).empty()) continue;
    const std::vector<Tensor> inputs = cast_floating(integer_valued_inputs(s), DType::Int32);
    if (!s.integers_unreached.empty()) {
      INFO(label(s) << " on int32 inputs: " << s.integers_unreached);
      const Outputs got = s.run(inputs);
      CHECK(std::any_of(got.begin(), got.end(), [](const Tensor& y) { return !y.defined(); }));
      ++unreached;
      continue;
    }
    testing::expect_misuse<InvalidArgument>(label(s) + " on int32 inputs",
                                            [&s, &inputs] { s.run(inputs); }, {"dtype int32"});
    ++rejected;
  }
  CHECK(rejected >= 82);
  CHECK(unreached >= 4);
}

// ---- forward rules ----------------------------------------------------------------------------

namespace {

// The outputs' tangents along `directions` (one per floating input), from the ops' forward
// rules or, with `fallback`, from the transpose of their gradients; zeros where unconnected.
Outputs output_tangents(const OpSample& s, const std::vector<Tensor>& directions, bool fallback) {
  std::vector<Tensor> primals;
  std::vector<Tensor> tangents;
  for (std::size_t i : floating_inputs(s)) {
    primals.push_back(s.inputs[i]);
    tangents.push_back(directions[i]);
  }
  ForwardAccumulator accumulator(primals, tangents);
  std::optional<detail::ForceGenericForwardFallback> force;
  if (fallback) force.emplace();
  const Outputs outputs = s.run(s.inputs);
  Outputs result;
  for (const Tensor& y : outputs) result.push_back(accumulator.jvp(y, UnconnectedGradients::Zero));
  return result;
}

}  // namespace

// TF's generic fallback for an op without a forward rule is the transpose of its gradient; an
// op's own rule must give the same tangents, along two random directions.
TEST_CASE("each forward rule equals the transpose of the op's gradient", "[samples][forward]") {
  std::set<std::string> checked;
  for (const OpSample& s : all_samples()) {
    if (definition_of(s).forward_rule == nullptr) continue;
    for (unsigned direction = 0; direction < 2; ++direction) {
      INFO(label(s) << ", direction " << direction);
      std::vector<Tensor> directions;
      for (std::size_t i = 0; i < s.inputs.size(); ++i) {
        directions.push_back(random_tensor(s.inputs[i].shape(), 100 + 10 * direction + i));
      }
      const Outputs by_rule = output_tangents(s, directions, /*fallback=*/false);
      const Outputs by_fallback = output_tangents(s, directions, /*fallback=*/true);
      REQUIRE(by_rule.size() == by_fallback.size());
      for (std::size_t j = 0; j < by_rule.size(); ++j) {
        INFO("output " << j);
        REQUIRE(by_rule[j].dtype() == by_fallback[j].dtype());
        require_close(by_rule[j], by_fallback[j].shape(), values(by_fallback[j]),
                      kForwardRuleTolerance);
      }
    }
    checked.insert(s.op);
  }
  CHECK(checked.size() >= 126);  // test_forward_rules.cpp had 126 examples
}

// ---- batching rules ---------------------------------------------------------------------------

namespace {

// Every batch case of every sample, with the sample's label.
std::vector<std::pair<std::string, const BatchCase*>> batch_cases() {
  std::vector<std::pair<std::string, const BatchCase*>> out;
  for (const OpSample& s : all_samples()) {
    for (const BatchCase& c : s.batching) out.emplace_back(label(s), &c);
  }
  return out;
}

// elems with their first 0 rows: a zero-size batch of the same examples.
std::vector<Tensor> no_rows(const std::vector<Tensor>& elems) {
  std::vector<Tensor> empty;
  for (const Tensor& e : elems) {
    std::vector<std::int64_t> begin(e.rank(), 0), size(e.shape().begin(), e.shape().end());
    size[0] = 0;
    empty.push_back(slice(e, begin, size));
  }
  return empty;
}

// vectorized_map of the empty batch, with and without fallback, gives results shaped [0] ++
// what the loop gives for one slice, in the loop's dtypes.
void require_empty_batch_like_loop(const RunFn& fn, const std::vector<Tensor>& elems) {
  const std::vector<Tensor> expected = loop_reference(fn, elems);
  for (const bool fallback : {false, true}) {
    INFO("fallback_to_loop " << fallback);
    const std::vector<Tensor> got = vectorized_map(fn, no_rows(elems), fallback);
    REQUIRE(got.size() == expected.size());
    for (std::size_t j = 0; j < got.size(); ++j) {
      INFO("output " << j);
      REQUIRE(got[j].defined() == expected[j].defined());
      if (!got[j].defined()) continue;
      Shape shape = expected[j].shape();
      shape[0] = 0;
      CHECK(got[j].shape() == shape);
      CHECK(got[j].dtype() == expected[j].dtype());
    }
  }
}

}  // namespace

TEST_CASE("each batching rule equals a loop of the op over the slices",
          "[samples][vectorized_map]") {
  std::size_t checked = 0;
  for (const auto& [op, c] : batch_cases()) {
    INFO(op << ", batch case: " << c->name);
    const std::set<std::string> ran = traced_ops(c->fn, c->elems);
    for (const std::string& name : c->ops) {
      INFO("op " << name << " should be traced");
      CHECK(ran.count(name) == 1);
    }
    require_vectorizes(c->fn, c->elems);
    ++checked;
  }
  CHECK(checked >= 219);  // the cases of test_vectorized_map.cpp's former table
}

// The gradient rules run inside the trace on slices whose values (signs, maxima, ties, zeros,
// orders) differ from one slice to the next, and no rule may read one into a constant.
TEST_CASE("each op's per-example gradient under vectorized_map equals the loop",
          "[samples][vectorized_map][gradient]") {
  std::size_t checked = 0;
  for (const auto& [op, c] : batch_cases()) {
    if (!has_floating(c->elems)) continue;  // integer-only inputs have no gradient
    INFO(op << ", batch case: " << c->name);
    require_vectorizes(per_example_gradient(c->fn), c->elems, 1e-9);
    ++checked;
  }
  CHECK(checked >= 217);
}

// The shapes of an empty batch come from the batching rules, not from fn run on invented
// values.
TEST_CASE("each op and its gradient under vectorized_map of an empty batch",
          "[samples][vectorized_map]") {
  std::size_t checked = 0;
  for (const auto& [op, c] : batch_cases()) {
    INFO(op << ", batch case: " << c->name);
    require_empty_batch_like_loop(c->fn, c->elems);
    if (has_floating(c->elems))
      require_empty_batch_like_loop(per_example_gradient(c->fn), c->elems);
    ++checked;
  }
  CHECK(checked >= 219);
}

TEST_CASE("each op takes strided views: the same values and gradients", "[samples][views]") {
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>> kinds = {
      {"offset", offset_view},
      {"transposed", transposed_view},
      {"boxed", boxed_view},
      {"reversed", reversed_view}};
  std::size_t checked = 0;
  for (const auto& [op, c] : batch_cases()) {
    INFO(op << ", batch case: " << c->name);
    std::vector<Tensor> inputs;
    for (const Tensor& e : c->elems) inputs.push_back(example(e, 1));
    const std::vector<Tensor> expected = c->fn(inputs);
    const bool differentiable = has_floating(inputs);
    const std::vector<Tensor> expected_gradient =
        differentiable ? per_example_gradient(c->fn)(inputs) : std::vector<Tensor>{};
    for (const auto& [kind, make_view] : kinds) {
      INFO("inputs: " << kind << " views");
      std::vector<Tensor> strided;
      for (const Tensor& t : inputs) {
        strided.push_back(make_view(t));
        REQUIRE(same_values(strided.back(), t));
      }
      const std::vector<Tensor> got = c->fn(strided);
      REQUIRE(got.size() == expected.size());
      for (std::size_t k = 0; k < got.size(); ++k) {
        INFO("output " << k);
        CHECK(same_values(got[k], expected[k]));
      }
      if (differentiable) {
        const std::vector<Tensor> gradient = per_example_gradient(c->fn)(strided);
        REQUIRE(gradient.size() == expected_gradient.size());
        for (std::size_t k = 0; k < gradient.size(); ++k) {
          INFO("gradient " << k);
          CHECK(same_values(gradient[k], expected_gradient[k]));
        }
      }
    }
    ++checked;
  }
  CHECK(checked >= 219);
}

// A replay rule re-runs the op's own kernel, so a replay equals the eager call exactly, value
// and per-example gradient (the gradient rules' ops replayed too), with and without dropping
// dead ops.
TEST_CASE("each op through function: a replay equals the eager call", "[samples][function]") {
  std::set<std::string> replayed;
  std::size_t checked = 0;
  for (const bool optimize : {false, true}) {
    for (const auto& [op, c] : batch_cases()) {
      INFO(op << ", batch case: " << c->name << (optimize ? ", optimized" : ", not optimized"));
      const auto ran = check_function_replay(c->fn, c->elems, optimize);
      replayed.insert(ran.begin(), ran.end());
      if (has_floating(c->elems)) {
        INFO("its per-example gradient");
        const auto ran_gradient =
            check_function_replay(per_example_gradient(c->fn), c->elems, optimize);
        replayed.insert(ran_gradient.begin(), ran_gradient.end());
      }
      ++checked;
    }
  }
  CHECK(checked >= 438);
  // ReadVariableOp is recorded on tapes only: a Function's trace reads the variable itself
  // (test_function.cpp).
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    if (op->replay_rule == nullptr || std::string(op->name) == "ReadVariableOp") continue;
    INFO("built-in op " << op->name << " has a replay rule: a case must replay it");
    CHECK(replayed.count(op->name) == 1);
  }
}

// ---- structure rules --------------------------------------------------------------------------

namespace {

// Row b of the batch: the one-hot e_b d[b] for a diagonal input, the constant as it is.
std::vector<Tensor> row_inputs(const StructureCase& sc, std::size_t b) {
  std::vector<Tensor> row;
  for (std::size_t i = 0; i < sc.inputs.size(); ++i) {
    if (!sc.diagonal[i]) {
      row.push_back(sc.inputs[i]);
      continue;
    }
    std::vector<double> one_hot(sc.inputs[i].size(), 0.0);
    one_hot[b] = values(sc.inputs[i])[b];
    row.push_back(from_values(one_hot, sc.inputs[i].shape(), DType::Float64));
  }
  return row;
}

Shape with_batch(std::size_t n, const Shape& example) {
  Shape shape{n};
  shape.insert(shape.end(), example.begin(), example.end());
  return shape;
}

}  // namespace

// What the vectorized Jacobian does with a diagonal batch (row b is e_b d[b]): the rule's
// result equals the op's forward on each one-hot row exactly (dyadic operands), and the
// expected values; or the rule declines where the dense batch is needed.
TEST_CASE("each structure rule equals its op's forward on the one-hot rows, exactly",
          "[samples][structure]") {
  std::size_t checked = 0;
  for (const OpSample& s : all_samples()) {
    for (const StructureCase& sc : s.structure) {
      INFO(s.op << " on " << sc.inputs.size() << " inputs, output " << shape_to_string(sc.output));
      const detail::OpDefinition& op = definition_of(s);
      REQUIRE(op.structure_rule != nullptr);
      std::vector<detail::StructuredValue> structured(sc.inputs.size());
      std::vector<Tensor> constants(sc.inputs.size());
      std::size_t n = 0;
      for (std::size_t i = 0; i < sc.inputs.size(); ++i) {
        if (sc.diagonal[i]) {
          structured[i].diagonal = sc.inputs[i];
          n = sc.inputs[i].size();
        } else {
          constants[i] = sc.inputs[i];
        }
      }
      const std::vector<Shape> output_shapes{sc.output};
      const std::vector<DType> output_dtypes{DType::Float64};
      const Attrs* attrs = sc.attrs ? &*sc.attrs : nullptr;
      const detail::StructureContext context{{{op, attrs}, output_shapes, output_dtypes}};
      const auto result = op.structure_rule(context, structured, constants);
      ++checked;
      if (sc.expected.empty()) {
        CHECK_FALSE(result.has_value());
        continue;
      }
      REQUIRE(result.has_value());
      REQUIRE(result->size() == 1);
      const detail::StructuredValue& out = result->front();
      // MatMul's result is the dense batch; every other rule keeps the output diagonal.
      CHECK(out.is_diagonal() == (s.op != "MatMul"));
      const Tensor dense = out.is_diagonal()
                               ? detail::diagonal_blocks(out.diagonal, n, with_batch(n, sc.output))
                               : out.dense;
      // The op's forward on each one-hot row (its replay rule calls it as the eager call did).
      std::vector<Tensor> rows;
      for (std::size_t b = 0; b < n; ++b) {
        const detail::ReplayContext replay{{op, attrs}, output_shapes, output_dtypes};
        rows.push_back(op.replay_rule(replay, row_inputs(sc, b))[0]);
      }
      const Tensor by_rows = stack(rows, 0);
      REQUIRE(dense.shape() == with_batch(n, sc.output));
      REQUIRE(by_rows.shape() == dense.shape());
      CHECK(values(dense) == values(by_rows));
      CHECK(values(dense) == sc.expected);
    }
  }
  CHECK(checked >= 29);  // test_structure_rules.cpp had 29 cases
}

// ---- misuse -----------------------------------------------------------------------------------

// Each case: the documented exception naming the op and the offending shapes, dtypes or
// values, or the defined result; then the thread is clean (misuse_support.hpp).
TEST_CASE("each op's misuse cases throw their documented error or give their defined result",
          "[samples][misuse]") {
  const int before = testing::misuse_cases_run();
  std::size_t listed = 0;
  for (const OpSample& s : all_samples()) {
    for (const MisuseCase& c : s.misuse) {
      INFO(label(s) << ", expecting " << (c.exception.empty() ? "a defined result" : c.exception));
      c.expect(c.name, c.body, c.fragments);
      ++listed;
    }
  }
  const int run = testing::misuse_cases_run() - before;
  REQUIRE(static_cast<std::size_t>(run) == listed);
  std::cout << "op samples: " << all_samples().size() << " samples, " << run
            << " misuse cases run\n";
  CHECK(run >= 320);  // test_misuse_ops.cpp's former op tables
}
