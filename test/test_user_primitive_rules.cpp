// User primitives with all four rules (issue 23): a gradient, a forward rule
// (register_forward_rule), a batching rule (register_batching_rule) and a structure rule
// (register_structure_rule). The Cube / CubeGrad pair is docs/extending.md's example ("A
// primitive with all four rules"), verbatim in substance, with counters added to show that each
// rule ran; Scale shows what the rules see of the op; the misuse cases check the errors.
#include "captured_stderr.hpp"
#include "support.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

namespace tg = tapegrad;

// How often each rule ran (atomic: the registry is process-wide).
struct RuleCalls {
  std::atomic<int> forward{0};
  std::atomic<int> batching{0};
  std::atomic<int> structure{0};
  void reset() { forward = batching = structure = 0; }
};
RuleCalls cube_calls;
RuleCalls cube_grad_calls;

// ---- docs/extending.md: the two primitives, computed with xtensor ------------------------

// 3 x^2 g, for x and g of one shape: the derivative of x^3 applied to g (linear in g).
tg::Tensor cube_grad(const tg::Tensor& x, const tg::Tensor& g) {
  if (x.shape() != g.shape()) {
    throw tg::InvalidArgument("cube_grad: x has shape " + tg::shape_to_string(x.shape()) +
                              " but g has shape " + tg::shape_to_string(g.shape()));
  }
  const xt::xarray<double>& a = x.array<double>();
  xt::xarray<double> out = 3.0 * a * a * g.array<double>();
  tg::Tensor z(std::move(out));
  tg::record_operation("CubeGrad", {x, g}, {z});
  return z;
}

// x^3.
tg::Tensor cube(const tg::Tensor& x) {
  const xt::xarray<double>& a = x.array<double>();
  xt::xarray<double> out = a * a * a;
  tg::Tensor y(std::move(out));
  tg::record_operation("Cube", {x}, {y});
  return y;
}

// ---- docs/extending.md: their rules, registered once -------------------------------------

void register_cube_rules() {
  // Cube's gradient, tangent and batch are each one call of a primitive.
  tg::register_gradient(
      "Cube",
      [](const tg::OpContext& op, const std::vector<tg::Tensor>& dy) {
        return std::vector<tg::Tensor>{cube_grad(op.inputs()[0], dy[0])};
      },
      tg::Keep::only({0}), tg::Keep::none());
  tg::register_forward_rule(
      "Cube", [](const tg::OpContext& op, const std::vector<tg::Tensor>& tangents) {
        ++cube_calls.forward;
        return std::vector<tg::Tensor>{cube_grad(op.inputs()[0], tangents[0])};
      });
  tg::register_batching_rule("Cube", [](const tg::OpContext&, const std::vector<tg::Tensor>& inputs,
                                        const std::vector<int>&) {
    ++cube_calls.batching;
    return std::vector<tg::Tensor>{cube(inputs[0])};  // elementwise: any leading axis
  });

  // CubeGrad(x, g) = 3 x^2 g: d/dx = 6 x g, d/dg = 3 x^2 (CubeGrad itself: it is linear in g).
  tg::register_gradient(
      "CubeGrad",
      [](const tg::OpContext& op, const std::vector<tg::Tensor>& dz) {
        const tg::Tensor& x = op.inputs()[0];
        const tg::Tensor& g = op.inputs()[1];
        return std::vector<tg::Tensor>{op.needs_gradient(0) ? dz[0] * g * x * 6.0 : tg::Tensor(),
                                       op.needs_gradient(1) ? cube_grad(x, dz[0]) : tg::Tensor()};
      },
      tg::Keep::all(), tg::Keep::none());
  tg::register_forward_rule("CubeGrad",
                            [](const tg::OpContext& op, const std::vector<tg::Tensor>& tangents) {
                              ++cube_grad_calls.forward;
                              const tg::Tensor& x = op.inputs()[0];
                              const tg::Tensor& g = op.inputs()[1];
                              tg::Tensor dz;  // undefined: no tangent
                              if (tangents[0].defined()) dz = tangents[0] * g * x * 6.0;
                              if (tangents[1].defined()) {
                                const tg::Tensor along_g = cube_grad(x, tangents[1]);
                                dz = dz.defined() ? dz + along_g : along_g;
                              }
                              return std::vector<tg::Tensor>{dz};
                            });
  tg::register_batching_rule(
      "CubeGrad", [](const tg::OpContext& op, const std::vector<tg::Tensor>& inputs,
                     const std::vector<int>& batch_axes) {
        ++cube_grad_calls.batching;
        // cube_grad wants equal shapes: the unbatched input gets the batch axis too.
        const std::size_t batch = inputs[batch_axes[0] == 0 ? 0 : 1].shape()[0];
        std::vector<tg::Tensor> batched = inputs;
        for (std::size_t i = 0; i < 2; ++i) {
          if (batch_axes[i] == 0) continue;
          tg::Shape shape{batch};
          const tg::Shape example = op.input_shape(i);
          shape.insert(shape.end(), example.begin(), example.end());
          batched[i] = tg::broadcast_to(inputs[i], shape);
        }
        return std::vector<tg::Tensor>{cube_grad(batched[0], batched[1])};
      });
  tg::register_structure_rule("CubeGrad",
                              [](const tg::OpContext&, const std::vector<tg::Tensor>& inputs,
                                 const std::vector<bool>& diagonal) {
                                ++cube_grad_calls.structure;
                                // With x fixed and g the diagonal d (row b is e_b d[b]), row b of 3
                                // x^2 g is e_b 3 x[b]^2 d[b]: the output is the diagonal
                                // cube_grad(x, d). Not linear in x: decline.
                                if (diagonal[0]) return std::vector<tg::Tensor>{};
                                return std::vector<tg::Tensor>{cube_grad(inputs[0], inputs[1])};
                              });
}

void register_cube_once() {
  static const bool registered = [] {
    register_cube_rules();
    return true;
  }();
  (void)registered;
}

void require_identical(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  CHECK(actual.shape() == expected.shape());
  CHECK(actual.dtype() == expected.dtype());
  CHECK(values(actual) == values(expected));
}

// Row by row: fn of each row of x, stacked (what vectorized_map must equal).
Tensor loop_over_rows(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  std::vector<Tensor> rows;
  for (std::size_t b = 0; b < x.shape()[0]; ++b) {
    rows.push_back(fn(gather(x, from_values({static_cast<double>(b)}, {}, DType::Int64), 0)));
  }
  return stack(rows, 0);
}

// x with values whose cubes and squares are exact in float64.
Tensor cube_input() { return constant({1.0, -2.0, 0.5, 3.0}); }

}  // namespace

TEST_CASE("a user primitive's gradient and its gradient's gradient", "[user_rules]") {
  register_cube_once();
  const Tensor x = cube_input();
  GradientTape outer;
  outer.watch(x);
  GradientTape inner;
  inner.watch(x);
  const Tensor y = cube(x);
  require_close(y, {4}, {1.0, -8.0, 0.125, 27.0}, 0);
  const Tensor dy = from_values({1.0, 2.0, -1.0, 0.5}, {4});
  const Tensor dx = inner.gradient({y}, {x}, {dy})[0];
  require_close(dx, {4}, {3.0, 24.0, -0.75, 13.5}, 0);  // 3 x^2 dy
  // d/dx of sum(3 x^2 dy) = 6 x dy.
  require_close(outer.gradient(dx, x), {4}, {6.0, -24.0, -3.0, 9.0}, 0);
  const Fn f = [](const std::vector<Tensor>& a) { return reduce_sum(cube(a[0]) * a[0]); };
  require_gradient_matches(f, {random_tensor({3, 2}, 11)});
  require_second_order_matches(f, {random_tensor({3, 2}, 12)});
}

TEST_CASE("forward mode runs the user's forward rule, not the transposed gradient",
          "[user_rules]") {
  register_cube_once();
  cube_calls.reset();
  cube_grad_calls.reset();
  const Tensor x = cube_input();
  const Tensor t = from_values({1.0, 0.5, 2.0, -1.0}, {4});
  CapturedStderr err;
  Tensor tangent;
  {
    ForwardAccumulator accumulator(x, t);
    const Tensor y = cube(x);
    tangent = accumulator.jvp(y);
  }
  require_close(tangent, {4}, {3.0, 6.0, 1.5, -27.0}, 0);  // 3 x^2 t
  CHECK(cube_calls.forward == 1);
  const auto [value, jvp_tangent] =
      jvp([](const std::vector<Tensor>& a) { return cube(a[0]); }, {x}, {t});
  require_close(value, {4}, {1.0, -8.0, 0.125, 27.0}, 0);
  require_identical(jvp_tangent, tangent);
  CHECK(cube_calls.forward == 2);
  // The fallback would have said so once.
  CHECK(err.text().find("forward rule") == std::string::npos);
  CHECK(err.text().find("fallback") == std::string::npos);

  // Forward over reverse: the tangent of the gradient 3 x^2 is 6 x t, by CubeGrad's rule.
  Tensor gradient_tangent;
  {
    ForwardAccumulator accumulator(x, t);
    GradientTape tape;
    tape.watch(x);
    const Tensor y = cube(x);
    const Tensor dx = tape.gradient(y, x);
    require_close(dx, {4}, {3.0, 12.0, 0.75, 27.0}, 0);
    gradient_tangent = accumulator.jvp(dx);
  }
  require_close(gradient_tangent, {4}, {6.0, -6.0, 6.0, -18.0}, 0);
  CHECK(cube_grad_calls.forward >= 1);
  // CubeGrad's tangent along g: 3 x^2 t_g.
  const Tensor g = ones({4});
  const auto [z, z_tangent] = jvp(
      [](const std::vector<Tensor>& a) { return cube_grad(a[0], a[1]); }, {x, g}, {zeros({4}), t});
  require_close(z, {4}, {3.0, 12.0, 0.75, 27.0}, 0);
  require_close(z_tangent, {4}, {3.0, 6.0, 1.5, -27.0}, 0);
}

TEST_CASE("vectorized_map runs the user's batching rule: no loop, no warning", "[user_rules]") {
  register_cube_once();
  cube_calls.reset();
  cube_grad_calls.reset();
  const Tensor x = random_tensor({5, 3}, 21);
  const auto cube_of_row = [](const Tensor& row) { return cube(row); };
  CapturedStderr err;
  const Tensor batched = vectorized_map(cube_of_row, x, /*fallback_to_loop=*/false);
  CHECK(cube_calls.batching == 1);
  CHECK(err.text().empty());
  require_identical(batched, loop_over_rows(cube_of_row, x));

  // Per-example gradients: the walk runs CubeGrad with x batched and g fixed (ones).
  const auto gradient_of_row = [](const Tensor& row) {
    GradientTape tape;
    tape.watch(row);
    return tape.gradient(reduce_sum(cube(row)), row);
  };
  const Tensor gradients = vectorized_map(gradient_of_row, x, /*fallback_to_loop=*/false);
  CHECK(cube_calls.batching == 1);  // cube(row) itself is dead code: the gradient needs x only
  CHECK(cube_grad_calls.batching == 1);
  CHECK(err.text().empty());
  require_identical(gradients, loop_over_rows(gradient_of_row, x));
  require_identical(gradients, 3.0 * x * x);
}

TEST_CASE("the vectorized jacobians run the user's structure rule and equal the diagonal",
          "[user_rules]") {
  register_cube_once();
  cube_grad_calls.reset();
  const Tensor x = cube_input();
  const Tensor expected =
      from_values({3.0, 0, 0, 0, 0, 12.0, 0, 0, 0, 0, 0.75, 0, 0, 0, 0, 27.0}, {4, 4});
  CapturedStderr err;
  auto jacobian_of_cube = [&](bool vectorize) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = cube(x);
    JacobianOptions options;
    options.vectorize = vectorize;
    return tape.jacobian(y, x, options);
  };
  // The walk runs CubeGrad(x, seed) on the identity seed, kept diagonal by the rule.
  require_identical(jacobian_of_cube(true), expected);
  CHECK(cube_grad_calls.structure == 1);
  CHECK(cube_grad_calls.batching == 0);  // never made dense
  require_identical(jacobian_of_cube(false), expected);
  CHECK(err.text().empty());

  // jacobian_forward: Cube's forward rule runs CubeGrad(x, direction) on the identity.
  cube_calls.reset();
  cube_grad_calls.reset();
  require_identical(jacobian_forward([](const Tensor& v) { return cube(v); }, x), expected);
  CHECK(cube_calls.forward >= 1);
  CHECK(cube_grad_calls.structure == 1);
  CHECK(err.text().empty());

  // The Hessian of sum(x^3) (a jacobian of the gradient): diag(6 x), through CubeGrad's gradient.
  GradientTape outer;
  outer.watch(x);
  Tensor dx;
  {
    GradientTape inner;
    inner.watch(x);
    dx = inner.gradient(reduce_sum(cube(x)), x);
  }
  require_identical(
      outer.jacobian(dx, x),
      from_values({6.0, 0, 0, 0, 0, -12.0, 0, 0, 0, 0, 3.0, 0, 0, 0, 0, 18.0}, {4, 4}));
  CHECK(err.text().empty());

  // batch_jacobian: per example, diag(3 x^2) (dense seeds: the batching rule runs).
  const Tensor xs = random_tensor({2, 3}, 31);
  GradientTape tape;
  tape.watch(xs);
  const Tensor per_example = tape.batch_jacobian(cube(xs), xs);
  std::vector<double> diagonal_jacobians;
  const std::vector<double> v = values(xs);
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 3; ++j) {
        const double e = v[b * 3 + i];
        diagonal_jacobians.push_back(i == j ? 3.0 * e * e : 0.0);
      }
    }
  }
  require_close(per_example, {2, 3, 3}, diagonal_jacobians, 0);
}

namespace {

// alpha x, alpha a recorded attribute: every rule reads it from the OpContext.
Tensor scale(const Tensor& x, double alpha) {
  xt::xarray<double> out = alpha * x.array<double>();
  Tensor y(std::move(out));
  record_operation("RulesScale", {x}, {y}, Attrs().set("alpha", alpha));
  return y;
}

// What the last rule to run saw of its op.
struct SeenOp {
  std::string op_type;
  double alpha = 0;
  Shape input_shape;
  Shape output_shape;
  bool input_defined = false;
  bool output_defined = false;
  bool needs_gradient = false;
};
thread_local SeenOp seen;
thread_local int scale_rule_calls = 0;

void see(const OpContext& op) {
  ++scale_rule_calls;
  seen.op_type = op.op_type();
  seen.alpha = op.attrs().get_double("alpha");
  seen.input_shape = op.input_shape(0);
  seen.output_shape = op.output_shape(0);
  seen.input_defined = op.inputs().at(0).defined();
  seen.output_defined = op.outputs().at(0).defined();
  seen.needs_gradient = op.needs_gradient(0);
  CHECK(op.num_inputs() == 1);
  CHECK(op.num_outputs() == 1);
  CHECK(op.input_dtype(0) == DType::Float64);
  CHECK(op.output_dtype(0) == DType::Float64);
}

void register_scale_once() {
  static const bool registered = [] {
    register_gradient("RulesScale", [](const OpContext& op, const std::vector<Tensor>& dy) {
      return std::vector<Tensor>{scale(dy[0], op.attrs().get_double("alpha"))};
    });
    register_forward_rule("RulesScale", [](const OpContext& op, const std::vector<Tensor>& t) {
      see(op);
      return std::vector<Tensor>{scale(t[0], op.attrs().get_double("alpha"))};
    });
    register_batching_rule("RulesScale", [](const OpContext& op, const std::vector<Tensor>& in,
                                            const std::vector<int>& batch_axes) {
      see(op);
      CHECK(batch_axes == std::vector<int>{0});
      return std::vector<Tensor>{scale(in[0], op.attrs().get_double("alpha"))};
    });
    register_structure_rule("RulesScale", [](const OpContext& op, const std::vector<Tensor>& in,
                                             const std::vector<bool>& diagonal) {
      see(op);
      CHECK(diagonal == std::vector<bool>{true});
      return std::vector<Tensor>{scale(in[0], op.attrs().get_double("alpha"))};
    });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("every rule sees the op through OpContext: its type, attributes and shapes",
          "[user_rules]") {
  register_scale_once();
  const Tensor x = constant({{1.0, 2.0}, {3.0, -1.0}, {0.5, 4.0}});

  scale_rule_calls = 0;
  const Tensor t = ones({3, 2});
  const auto [y, y_tangent] =
      jvp([](const std::vector<Tensor>& a) { return scale(a[0], 2.5); }, {x}, {t});
  require_close(y_tangent, {3, 2}, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5}, 0);
  CHECK(scale_rule_calls == 1);
  CHECK(seen.op_type == "RulesScale");
  CHECK(seen.alpha == 2.5);
  CHECK(seen.input_shape == Shape{3, 2});
  CHECK(seen.output_shape == Shape{3, 2});
  CHECK(seen.input_defined);  // the forward rule sees the op as it ran
  CHECK(seen.output_defined);
  CHECK(seen.needs_gradient);  // the input carries a tangent

  scale_rule_calls = 0;
  const Tensor mapped =
      vectorized_map([](const Tensor& row) { return scale(row, -3.0); }, x, false);
  require_close(mapped, {3, 2}, {-3.0, -6.0, -9.0, 3.0, -1.5, -12.0}, 0);
  CHECK(scale_rule_calls == 1);
  CHECK(seen.alpha == -3.0);
  CHECK(seen.input_shape == Shape{2});  // one example's
  CHECK(seen.output_shape == Shape{2});
  CHECK_FALSE(seen.input_defined);  // batched: the batch is the rule's argument
  CHECK_FALSE(seen.output_defined);
  CHECK_FALSE(seen.needs_gradient);

  // The walk runs RulesScale on the identity seed: its structure rule keeps it diagonal.
  scale_rule_calls = 0;
  GradientTape tape;
  tape.watch(x);
  const Tensor jacobian = tape.jacobian(scale(x, 0.5), x);
  CHECK(scale_rule_calls == 1);
  CHECK(seen.input_shape == Shape{3, 2});
  CHECK_FALSE(seen.input_defined);
  std::vector<double> half_identity(36, 0.0);
  for (std::size_t i = 0; i < 6; ++i) half_identity[i * 6 + i] = 0.5;
  require_close(jacobian, {3, 2, 3, 2}, half_identity, 0);
}

namespace {

// 2 x, whose batching rule the test registers after vectorized_map has looped over it.
Tensor late_twice(const Tensor& x) {
  xt::xarray<double> out = 2.0 * x.array<double>();
  Tensor y(std::move(out));
  record_operation("RulesLateTwice", {x}, {y});
  return y;
}

}  // namespace

TEST_CASE("a batching rule registered after the op was used is used from then on", "[user_rules]") {
  const std::function<Tensor(const Tensor&)> twice = late_twice;
  const Tensor x = random_tensor({4, 2}, 41);
  CapturedStderr err;
  const Tensor looped = vectorized_map(twice, x);
  CHECK(err.text().find("op 'RulesLateTwice' has no batching rule") != std::string::npos);
  auto message = message_of<InvalidArgument>([&] { vectorized_map(twice, x, false); });
  CHECK_THAT(message, Catch::Contains("RulesLateTwice"));

  register_batching_rule("RulesLateTwice", [](const OpContext&, const std::vector<Tensor>& in,
                                              const std::vector<int>&) {
    return std::vector<Tensor>{late_twice(in[0])};
  });
  const std::size_t warnings = err.text().size();
  const Tensor batched = vectorized_map(twice, x, false);
  CHECK(err.text().size() == warnings);
  require_identical(batched, looped);
  require_identical(batched, x * 2.0);
}

TEST_CASE("registering a rule: a built-in name, twice, or an empty function throws",
          "[user_rules][misuse]") {
  const ForwardRuleFunction forward = [](const OpContext&, const std::vector<Tensor>& t) {
    return t;
  };
  const BatchingRuleFunction batching = [](const OpContext&, const std::vector<Tensor>& in,
                                           const std::vector<int>&) { return in; };
  const StructureRuleFunction structure = [](const OpContext&, const std::vector<Tensor>& in,
                                             const std::vector<bool>&) { return in; };

  auto message = message_of<InvalidArgument>([&] { register_forward_rule("Mul", forward); });
  CHECK_THAT(message, Catch::Contains("register_forward_rule") && Catch::Contains("'Mul'") &&
                          Catch::Contains("built-in"));
  message = message_of<InvalidArgument>([&] { register_batching_rule("Exp", batching); });
  CHECK_THAT(message, Catch::Contains("register_batching_rule") && Catch::Contains("'Exp'") &&
                          Catch::Contains("built-in"));
  message = message_of<InvalidArgument>([&] { register_structure_rule("Neg", structure); });
  CHECK_THAT(message, Catch::Contains("register_structure_rule") && Catch::Contains("'Neg'") &&
                          Catch::Contains("built-in"));

  message = message_of<InvalidArgument>(
      [&] { register_forward_rule("RulesEmpty", ForwardRuleFunction()); });
  CHECK_THAT(message, Catch::Contains("register_forward_rule") && Catch::Contains("'RulesEmpty'") &&
                          Catch::Contains("empty"));
  message = message_of<InvalidArgument>(
      [&] { register_batching_rule("RulesEmpty", BatchingRuleFunction()); });
  CHECK_THAT(message, Catch::Contains("register_batching_rule") &&
                          Catch::Contains("'RulesEmpty'") && Catch::Contains("empty"));
  message = message_of<InvalidArgument>(
      [&] { register_structure_rule("RulesEmpty", StructureRuleFunction()); });
  CHECK_THAT(message, Catch::Contains("register_structure_rule") &&
                          Catch::Contains("'RulesEmpty'") && Catch::Contains("empty"));

  // Once per op type and rule; the first registration stays.
  register_forward_rule("RulesTwice", forward);
  register_batching_rule("RulesTwice", batching);
  register_structure_rule("RulesTwice", structure);
  message = message_of<InvalidArgument>([&] { register_forward_rule("RulesTwice", forward); });
  CHECK_THAT(message, Catch::Contains("register_forward_rule") && Catch::Contains("'RulesTwice'") &&
                          Catch::Contains("already has a forward rule"));
  message = message_of<InvalidArgument>([&] { register_batching_rule("RulesTwice", batching); });
  CHECK_THAT(message, Catch::Contains("register_batching_rule") &&
                          Catch::Contains("'RulesTwice'") &&
                          Catch::Contains("already has a batching rule"));
  message = message_of<InvalidArgument>([&] { register_structure_rule("RulesTwice", structure); });
  CHECK_THAT(message, Catch::Contains("register_structure_rule") &&
                          Catch::Contains("'RulesTwice'") &&
                          Catch::Contains("already has a structure rule"));
  // A rule is not a gradient: the op still has none.
  CHECK_FALSE(is_registered("RulesTwice"));
}

namespace {

// 2 x, with rules that return the wrong shapes.
Tensor bad_rules(const Tensor& x) {
  xt::xarray<double> out = 2.0 * x.array<double>();
  Tensor y(std::move(out));
  record_operation("RulesWrongShapes", {x}, {y});
  return y;
}

void register_bad_rules_once() {
  static const bool registered = [] {
    register_gradient("RulesWrongShapes", [](const OpContext&, const std::vector<Tensor>& dy) {
      return std::vector<Tensor>{bad_rules(dy[0])};
    });
    register_forward_rule("RulesWrongShapes", [](const OpContext&, const std::vector<Tensor>&) {
      return std::vector<Tensor>{ones({1})};
    });
    register_batching_rule("RulesWrongShapes", [](const OpContext& op, const std::vector<Tensor>&,
                                                  const std::vector<int>&) {
      return std::vector<Tensor>{ones(op.output_shape(0))};  // no batch
    });
    register_structure_rule("RulesWrongShapes", [](const OpContext&, const std::vector<Tensor>&,
                                                   const std::vector<bool>&) {
      return std::vector<Tensor>{ones({7, 7})};
    });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("a rule's result of the wrong shape: an error naming the op, the rule and the shapes",
          "[user_rules][misuse]") {
  register_bad_rules_once();
  const Tensor x = random_tensor({4, 3}, 51);

  auto message = message_of<InvalidArgument>([&] {
    ForwardAccumulator accumulator(x, ones({4, 3}));
    bad_rules(x);
  });
  CHECK_THAT(message, Catch::Contains("'RulesWrongShapes'") && Catch::Contains("[1]") &&
                          Catch::Contains("[4, 3]"));

  message = message_of<InvalidArgument>(
      [&] { vectorized_map([](const Tensor& row) { return bad_rules(row); }, x, false); });
  CHECK_THAT(message, Catch::Contains("batching rule of 'RulesWrongShapes'") &&
                          Catch::Contains("shape [3]") && Catch::Contains("expected shape [4, 3]"));

  message = message_of<InvalidArgument>([&] {
    GradientTape tape;
    tape.watch(x);
    tape.jacobian(bad_rules(x), x);
  });
  CHECK_THAT(message, Catch::Contains("structure rule of 'RulesWrongShapes'") &&
                          Catch::Contains("shape [7, 7]") &&
                          Catch::Contains("expected shape [4, 3]"));
}
