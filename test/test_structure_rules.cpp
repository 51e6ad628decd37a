// The ops' structure rules (OpDefinition::structure_rule) end to end: the vectorized Jacobian
// through each op that has one equals the loop of backward passes and the exact values
// (dyadic operands, so every product and quotient is exact). Each rule called directly, on the
// one-hot rows, is checked by test_op_samples on its op's samples (test/samples/).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::values;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Float64);
}

// The dense Jacobian of an elementwise op: the diagonal matrix of its derivatives d.
std::vector<double> diagonal_matrix(const std::vector<double>& d) {
  std::vector<double> dense(d.size() * d.size(), 0.0);
  for (std::size_t b = 0; b < d.size(); ++b) dense[b * d.size() + b] = d[b];
  return dense;
}

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
