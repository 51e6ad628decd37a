// The ops' structure rules (OpDefinition::structure_rule): what the vectorized Jacobian does
// with a diagonal batch (row b is e_b d[b]). Every op that has one is checked against its own
// forward run row by row on the one-hot rows, with exact expected values (dyadic operands, so
// every product and quotient is exact), and where it must decline; and end to end, the
// vectorized Jacobian through each op equals the loop of backward passes and the exact values.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ops/internal_ops.hpp"
#include "runtime/batching_context.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/replay_context.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::values;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Float64);
}

// One call of an op's structure rule: each input a diagonal (example-shaped) or a constant.
struct StructureCase {
  std::string op;
  std::vector<Tensor> inputs;
  std::vector<bool> diagonal;  // per input
  std::optional<Attrs> attrs;
  Shape output;                  // the output of one example
  std::vector<double> expected;  // the dense batch [n] ++ output, row-major; empty: declines
};

Attrs transposes(bool ta, bool tb) { return Attrs().set("transpose_a", ta).set("transpose_b", tb); }

// d = {0.5, -2, 3} as the diagonal in most cases: the dense batches are 3 x 3 diagonals.
std::vector<double> diagonal_matrix(const std::vector<double>& d) {
  std::vector<double> dense(d.size() * d.size(), 0.0);
  for (std::size_t b = 0; b < d.size(); ++b) dense[b * d.size() + b] = d[b];
  return dense;
}

std::vector<StructureCase> cases() {
  const Tensor d = f64({0.5, -2, 3}, {3});
  const Tensor e = f64({0.25, 1, -1}, {3});
  const Tensor c = f64({4, 0.5, -1}, {3});
  const auto diag = diagonal_matrix;
  // A constant y (or x) and a diagonal g: the fused activation gradients.
  const auto fused = [&](const char* op, const std::vector<double>& y,
                         const std::vector<double>& result) {
    return StructureCase{op, {f64(y, {3}), d}, {false, true}, std::nullopt, {3}, diag(result)};
  };
  const Tensor w = f64({1, 2, 3, 4, 5, 6}, {2, 3});    // [[1, 2, 3], [4, 5, 6]]
  const Tensor w_t = f64({1, 4, 2, 5, 3, 6}, {3, 2});  // its transpose, stored
  return {
      {"Identity", {d}, {true}, std::nullopt, {3}, diag({0.5, -2, 3})},
      {"Reshape",
       {f64({0.5, -2, 3, 0.25}, {2, 2})},
       {true},
       std::nullopt,
       {4},
       diag({0.5, -2, 3, 0.25})},
      {"Neg", {d}, {true}, std::nullopt, {3}, diag({-0.5, 2, -3})},
      {"Add", {d, e}, {true, true}, std::nullopt, {3}, diag({0.75, -1, 2})},
      {"Sub", {d, e}, {true, true}, std::nullopt, {3}, diag({0.25, -3, 4})},
      {"Mul", {d, e}, {true, true}, std::nullopt, {3}, diag({0.125, -2, -3})},
      {"Mul", {d, c}, {true, false}, std::nullopt, {3}, diag({2, -1, -3})},
      {"Mul", {f64({2}, {}), d}, {false, true}, std::nullopt, {3}, diag({1, -4, 6})},
      {"RealDiv", {d, c}, {true, false}, std::nullopt, {3}, diag({0.125, -4, -3})},
      // g (1 - y^2), g y (1 - y), y > 0 ? g : 0, g sigmoid(x), y < 0 ? g (y + 1) : g.
      fused("TanhGrad", {0.5, -0.5, 0}, {0.375, -1.5, 3}),
      fused("SigmoidGrad", {0.5, 0.25, 0.75}, {0.125, -0.375, 0.5625}),
      fused("ReluGrad", {1, -1, 0}, {0.5, 0, 0}),
      fused("SoftplusGrad", {0, 40, -800}, {0.25, -2, 0}),
      fused("EluGrad", {-0.5, 2, -0.75}, {0.25, -2, 0.75}),
      // Phi(x) + x phi(x), and its tanh form: 1/2 at 0, 1 and 0 far out.
      fused("GeluGrad", {0, 40, -40}, {0.25, -2, 0}),
      fused("GeluTanhGrad", {0, 40, -40}, {0.25, -2, 0}),
      // -g y^2, g / (2 y), -g y^3 / 2.
      fused("ReciprocalGrad", {0.5, 2, -1}, {-0.125, 8, -3}),
      fused("SqrtGrad", {0.5, 2, 0.25}, {0.5, -0.5, 6}),
      fused("RsqrtGrad", {1, 2, 0.5}, {-0.25, 8, -0.1875}),
      // op(W) times a diagonal column: row b is d[b] times column b of op(W) (dense [3, 2, 1]).
      {"MatMul",
       {w, f64({0.5, -2, 3}, {3, 1})},
       {false, true},
       transposes(false, false),
       {2, 1},
       {0.5, 2, -4, -10, 9, 18}},
      {"MatMul",
       {w_t, f64({0.5, -2, 3}, {1, 3})},
       {false, true},
       transposes(true, true),
       {2, 1},
       {0.5, 2, -4, -10, 9, 18}},
      // A diagonal row times op(W): row b is d[b] times row b of op(W) (dense [2, 1, 3]).
      {"MatMul",
       {f64({0.5, -2}, {1, 2}), w},
       {true, false},
       transposes(false, false),
       {1, 3},
       {0.5, 1, 1.5, -8, -10, -12}},
      {"MatMul",
       {f64({0.5, -2}, {2, 1}), w_t},
       {true, false},
       transposes(true, true),
       {1, 3},
       {0.5, 1, 1.5, -8, -10, -12}},
      // Declined: the dense batch is needed.
      {"Add", {d, c}, {true, false}, std::nullopt, {3}, {}},               // a constant addend
      {"Add", {d, f64({0.5}, {1})}, {true, true}, std::nullopt, {3}, {}},  // broadcast diagonal
      {"Mul", {d, f64({1, 2, 3, 4, 5, 6}, {2, 3})}, {true, false}, std::nullopt, {2, 3}, {}},
      {"RealDiv", {c, d}, {false, true}, std::nullopt, {3}, {}},   // a diagonal divisor
      {"TanhGrad", {d, c}, {true, false}, std::nullopt, {3}, {}},  // y diagonal, g constant
      {"MatMul",
       {w, f64({0.5, -2, 3, 1, 2, 4}, {3, 2})},
       {false, true},
       transposes(false, false),
       {2, 2},
       {}},  // not a column
  };
}

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
    row.push_back(f64(one_hot, sc.inputs[i].shape()));
  }
  return row;
}

Shape with_batch(std::size_t n, const Shape& example) {
  Shape shape{n};
  shape.insert(shape.end(), example.begin(), example.end());
  return shape;
}

}  // namespace

TEST_CASE("each structure rule equals its op's forward on the one-hot rows, exactly",
          "[vectorize][jacobian][structure]") {
  const std::vector<StructureCase> all = cases();
  std::map<std::string, std::size_t> covered;
  for (const StructureCase& sc : all) {
    INFO(sc.op << " on " << sc.inputs.size() << " inputs, output " << shape_to_string(sc.output));
    const detail::OpDefinition& op = detail::op_named(sc.op);
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
    const detail::StructureContext context{{op, attrs, output_shapes, output_dtypes}};
    const auto result = op.structure_rule(context, structured, constants);
    if (sc.expected.empty()) {
      CHECK_FALSE(result.has_value());
      continue;
    }
    ++covered[sc.op];
    REQUIRE(result.has_value());
    REQUIRE(result->size() == 1);
    const detail::StructuredValue& out = result->front();
    // MatMul's result is the dense batch; every other rule keeps the output diagonal.
    CHECK(out.is_diagonal() == (sc.op != "MatMul"));
    const Tensor dense = out.is_diagonal()
                             ? detail::diagonal_blocks(out.diagonal, n, with_batch(n, sc.output))
                             : out.dense;
    // The op's forward on each one-hot row (its replay rule calls it as the eager call did).
    std::vector<Tensor> rows;
    for (std::size_t b = 0; b < n; ++b) {
      const detail::ReplayContext replay{op, attrs, output_shapes, output_dtypes};
      rows.push_back(op.replay_rule(replay, row_inputs(sc, b))[0]);
    }
    const Tensor by_rows = stack(rows, 0);
    REQUIRE(dense.shape() == with_batch(n, sc.output));
    REQUIRE(by_rows.shape() == dense.shape());
    CHECK(values(dense) == values(by_rows));
    CHECK(values(dense) == sc.expected);
  }
  // Every op with a structure rule has a case that it keeps structured.
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    if (op->structure_rule == nullptr) continue;
    INFO(op->name << " has a structure rule and no case here");
    CHECK(covered.count(op->name) == 1);
  }
}

namespace {

JacobianOptions loop_options() {
  JacobianOptions options;
  options.vectorize = false;
  return options;
}

Tensor jacobian_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                   const JacobianOptions& options) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.jacobian(y, x, options);
}

}  // namespace

TEST_CASE("the vectorized jacobian through each structured op equals the loop, exactly",
          "[vectorize][jacobian][structure]") {
  const Tensor c = f64({4, 0.5, -1}, {3});
  const Tensor k = f64({2}, {});
  const Tensor w = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  struct EndToEnd {
    std::string name;
    std::function<Tensor(const Tensor&)> f;
    Tensor x;
    Shape jacobian_shape;
    std::vector<double> expected;
  };
  const auto diag = diagonal_matrix;
  const std::vector<EndToEnd> all{
      // The walk: Reshape, Add's two branches, Neg, RealDiv and Mul by constants, Sub.
      {"reshape(-(x c) / k + x - x x)",
       [&](const Tensor& x) {
         return reshape(subtract(add(divide(negative(multiply(x, c)), k), x), multiply(x, x)),
                        {3, 1});
       },
       // d/dx = -c/k + 1 - 2x: {-2 + 1 - 1, -0.25 + 1 + 4, 0.5 + 1 - 6}.
       f64({0.5, -2, 3}, {3}),
       {3, 1, 3},
       diag({-2, 4.75, -4.5})},
      {"tanh at 0",
       [](const Tensor& x) { return tanh(x); },
       f64({0, 0, 0}, {3}),
       {3, 3},
       diag({1, 1, 1})},
      {"sigmoid at 0",
       [](const Tensor& x) { return sigmoid(x); },
       f64({0, 0, 0}, {3}),
       {3, 3},
       diag({0.25, 0.25, 0.25})},
      {"relu",
       [](const Tensor& x) { return relu(x); },
       f64({0.5, -2, 3}, {3}),
       {3, 3},
       diag({1, 0, 1})},
      {"softplus",
       [](const Tensor& x) { return softplus(x); },
       f64({0, 40, -800}, {3}),
       {3, 3},
       diag({0.5, 1, 0})},
      {"elu",
       [](const Tensor& x) { return elu(x); },
       f64({0.5, 2, 0}, {3}),
       {3, 3},
       diag({1, 1, 1})},
      {"gelu",
       [](const Tensor& x) { return gelu(x, false); },
       f64({0, 40, -40}, {3}),
       {3, 3},
       diag({0.5, 1, 0})},
      {"gelu (tanh)",
       [](const Tensor& x) { return gelu(x, true); },
       f64({0, 40, -40}, {3}),
       {3, 3},
       diag({0.5, 1, 0})},
      {"reciprocal",
       [](const Tensor& x) { return reciprocal(x); },
       f64({0.5, 2, -1}, {3}),
       {3, 3},
       diag({-4, -0.25, -1})},
      {"sqrt",
       [](const Tensor& x) { return sqrt(x); },
       f64({0.25, 4, 1}, {3}),
       {3, 3},
       diag({1, 0.25, 0.5})},
      {"rsqrt",
       [](const Tensor& x) { return rsqrt(x); },
       f64({1, 4, 0.25}, {3}),
       {3, 3},
       diag({-0.5, -0.0625, -4})},
      // The walk's MatMul of the constant W^T and the diagonal column: J = W.
      {"W x",
       [&](const Tensor& x) { return matmul(w, x); },
       f64({0.5, -2, 3}, {3, 1}),
       {2, 1, 3, 1},
       {1, 2, 3, 4, 5, 6}},
      // Through tanh first: J = diag(1 - tanh(W x)^2) W, at x = 0 exactly W.
      {"tanh(W x) at 0",
       [&](const Tensor& x) { return tanh(matmul(w, x)); },
       f64({0, 0, 0}, {3, 1}),
       {2, 1, 3, 1},
       {1, 2, 3, 4, 5, 6}},
  };
  for (const EndToEnd& e : all) {
    INFO(e.name);
    const Tensor vectorized = jacobian_of(e.f, e.x, JacobianOptions{});
    const Tensor loop = jacobian_of(e.f, e.x, loop_options());
    REQUIRE(vectorized.shape() == e.jacobian_shape);
    REQUIRE(loop.shape() == e.jacobian_shape);
    CHECK(values(vectorized) == values(loop));
    CHECK(values(vectorized) == e.expected);
  }
}
