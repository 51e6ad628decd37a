// Forward mode: ForwardAccumulator, jvp and jacobian_forward against analytic derivatives and
// the tape's Jacobians; nesting with tapes and accumulators both ways; TF's forwardprop
// behaviours (unwatched tensors, integer primals, custom_gradient) and the misuse cases.
#include "captured_stderr.hpp"
#include "misuse_support.hpp"
#include "support.hpp"

#include <cmath>
#include <iostream>
#include <sstream>
#include <thread>

#include <xtensor/xmath.hpp>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

std::vector<std::int64_t> dims_of(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

// J v from the tape's Jacobian of f at x: the reference every jvp is checked against.
Tensor reverse_mode_jvp(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                        const Tensor& v) {
  GradientTape tape;
  tape.watch(x);
  Tensor y = f(x);
  Tensor j = tape.jacobian(y, x, UnconnectedGradients::Zero);
  const auto m = static_cast<std::int64_t>(y.size());
  const auto n = static_cast<std::int64_t>(x.size());
  Tensor jv = matmul(reshape(j, {m, n}), reshape(v, {n, 1}));
  return reshape(jv, dims_of(y.shape()));
}

// The accumulator's tangent of f(x) along v equals J v, and jvp() gives the same.
void require_jvp_matches(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                         const Tensor& v, double tolerance = 1e-12) {
  Tensor tangent;
  Tensor value;
  {
    ForwardAccumulator acc(x, v);
    value = f(x);
    tangent = acc.jvp(value);
  }
  const Tensor expected = reverse_mode_jvp(f, x, v);
  require_close(tangent, expected.shape(), values(expected), tolerance);
  const auto [y, t] = jvp([&](const std::vector<Tensor>& a) { return f(a[0]); }, {x}, {v});
  require_close(y, value.shape(), values(value), 0.0);
  require_close(t, expected.shape(), values(expected), tolerance);
}

// x^3 computed outside tapegrad, with a registered gradient and no forward rule.
Tensor forward_test_cube(const Tensor& x) {
  static const bool registered = [] {
    register_gradient(
        "ForwardTestCube",
        [](const OpContext& ctx, const std::vector<Tensor>& grads) {
          const Tensor& in = ctx.inputs()[0];
          return std::vector<Tensor>{grads[0] * 3.0 * in * in};
        },
        Keep::only({0}), Keep::none());
    return true;
  }();
  (void)registered;
  xt::xarray<double> cube = x.array<double>() * x.array<double>() * x.array<double>();
  Tensor y(std::move(cube));
  record_operation("ForwardTestCube", {x}, {y});
  return y;
}

// The 3x3 identity.
Tensor eye_like_3() { return from_values({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}); }

}  // namespace

TEST_CASE("jvp of elementwise ops: exact tangents", "[forward]") {
  const Tensor x = constant({0.5, -1.0, 2.0});
  const Tensor v = constant({1.0, 2.0, -3.0});
  ForwardAccumulator acc(x, v);
  Tensor y = sin(x) * exp(x);
  std::vector<double> expected;
  const auto xs = values(x);
  const auto vs = values(v);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    expected.push_back((std::cos(xs[i]) + std::sin(xs[i])) * std::exp(xs[i]) * vs[i]);
  }
  require_close(acc.jvp(y), {3}, expected);
  // The primal's own tangent, and a tensor made from the primal by an op with two uses of it.
  require_close(acc.jvp(x), {3}, vs, 0.0);
  std::vector<double> square_tangent;
  for (std::size_t i = 0; i < xs.size(); ++i) square_tangent.push_back(2.0 * xs[i] * vs[i]);
  require_close(acc.jvp(multiply(x, x)), {3}, square_tangent);
}

TEST_CASE("jvp of matmul with tangents on both operands is dA B + A dB", "[forward]") {
  const Tensor a = constant({{1.0, 2.0}, {3.0, 4.0}});
  const Tensor b = constant({{0.5, -1.0, 2.0}, {1.5, 0.0, -2.0}});
  const Tensor da = constant({{0.0, 1.0}, {-1.0, 2.0}});
  const Tensor db = constant({{1.0, 1.0, 0.0}, {0.0, -1.0, 3.0}});
  ForwardAccumulator acc({a, b}, {da, db});
  Tensor tangent = acc.jvp(matmul(a, b));
  // dA B = [[1.5, 0, -2], [2.5, 1, -6]], A dB = [[1, -1, 6], [3, -1, 12]].
  require_close(tangent, {2, 3}, {2.5, -1.0, 4.0, 5.5, 0.0, 6.0});
  // Transposed operands too.
  require_jvp_matches([&](const Tensor& x) { return matmul(x, a, /*transpose_a=*/true); },
                      random_tensor({2, 3}, 3), random_tensor({2, 3}, 4));
}

TEST_CASE("jvp of reductions: sum, mean, max, logsumexp", "[forward]") {
  const Tensor x = constant({{1.0, 5.0, 2.0}, {-1.0, 0.0, 3.0}});
  const Tensor v = constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  ForwardAccumulator acc(x, v);
  require_close(acc.jvp(reduce_sum(x)), {}, {21.0});
  require_close(acc.jvp(reduce_sum(x, {1})), {2}, {6.0, 15.0});
  require_close(acc.jvp(reduce_mean(x, {0})), {3}, {2.5, 3.5, 4.5});
  // The maximum moves with its argmax element.
  require_close(acc.jvp(reduce_max(x, {1})), {2}, {2.0, 6.0});
  require_jvp_matches([](const Tensor& t) { return reduce_logsumexp(t, {0}); },
                      random_tensor({3, 4}, 5), random_tensor({3, 4}, 6));
}

TEST_CASE("jvp through broadcasting has the broadcast shape", "[forward]") {
  const Tensor x = from_values({1.0, 2.0, 3.0}, {3, 1});
  const Tensor y = from_values({10.0, 20.0}, {1, 2});  // [1, 2]
  const Tensor dx = from_values({1.0, 0.0, -1.0}, {3, 1});
  const Tensor dy = from_values({0.5, 2.0}, {1, 2});
  ForwardAccumulator acc({x, y}, {dx, dy});
  // d(x * y) = dx * y + x * dy.
  require_close(acc.jvp(multiply(x, y)), {3, 2}, {10.5, 22.0, 1.0, 4.0, -8.5, -14.0});
  // Only x carries a tangent in x + 7: y is not involved.
  require_close(acc.jvp(x + 7.0), {3, 1}, {1.0, 0.0, -1.0});
  require_jvp_matches([&](const Tensor& t) { return divide(t, y) + square(t); },
                      random_tensor({3, 1}, 7), random_tensor({3, 1}, 8));
}

TEST_CASE("jvp of gather (a sparse gradient in the fallback) selects the tangent's rows",
          "[forward]") {
  const Tensor params = constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}, {7.0, 8.0}});
  const Tensor dparams = constant({{0.1, 0.2}, {0.3, 0.4}, {0.5, 0.6}, {0.7, 0.8}});
  const Tensor indices = from_values({2, 0, 2}, {3}, DType::Int32);
  ForwardAccumulator acc(params, dparams);
  Tensor rows = gather(params, indices);
  require_close(acc.jvp(rows), {3, 2}, {0.5, 0.6, 0.1, 0.2, 0.5, 0.6});
  // The integer indices carry no tangent.
  CHECK_FALSE(acc.jvp(indices).defined());
}

TEST_CASE("jvp of softmax, log_softmax, tanh(W x) and a small network match J v", "[forward]") {
  require_jvp_matches([](const Tensor& t) { return softmax(t); }, random_tensor({2, 4}, 9),
                      random_tensor({2, 4}, 10));
  require_jvp_matches([](const Tensor& t) { return log_softmax(t); }, random_tensor({5}, 11),
                      random_tensor({5}, 12));
  const Tensor w = random_tensor({4, 3}, 13);
  require_jvp_matches(
      [&](const Tensor& t) {
        return tanh(matmul(w, reshape(t, {3, 1})));
      },
      random_tensor({3}, 14), random_tensor({3}, 15));
  const Tensor b = random_tensor({4}, 16);
  require_jvp_matches(
      [&](const Tensor& t) {
        Tensor h = relu(matmul(t, w, false, true) + b);  // [2, 4]
        return reduce_mean(sigmoid(h) * h, {1});
      },
      random_tensor({2, 3}, 17), random_tensor({2, 3}, 18));
  require_jvp_matches(
      [](const Tensor& t) {
        return concat({t, square(t)}, 0);
      },
      random_tensor({2, 2}, 19), random_tensor({2, 2}, 20));
}

TEST_CASE("the generic fallback on many ops: every tangent equals J v from the tape", "[forward]") {
  using F = std::function<Tensor(const Tensor&)>;
  const Tensor labels = softmax(random_tensor({2, 3}, 30));
  const Tensor spd_base = random_tensor({3, 3}, 31);
  const Tensor segment_ids = from_values({1, 0, 1, 2}, {4}, DType::Int32);
  const Tensor positive_other = random_tensor({2, 3}, 32, 0.5, 1.5);
  const std::vector<std::pair<std::string, F>> ops = {
      {"pow", [](const Tensor& t) { return pow(t, 3.0); }},
      {"pow (tensor exponent)", [&](const Tensor& t) { return pow(positive_other, t); }},
      {"sqrt, log, log1p, reciprocal",
       [](const Tensor& t) {
         Tensor p = square(t) + 0.5;
         return sqrt(p) + log(p) + log1p(p) + reciprocal(p);
       }},
      {"maximum, minimum",
       [&](const Tensor& t) { return maximum(t, positive_other - 1.0) + minimum(t, t * 0.5); }},
      {"where", [](const Tensor& t) { return where(greater(t, 0.0 * t), t * t, negative(t)); }},
      {"abs, softplus, subtract", [](const Tensor& t) { return subtract(abs(t), softplus(t)); }},
      {"transpose, tile, expand_dims, squeeze",
       [](const Tensor& t) {
         return squeeze(expand_dims(tile(transpose(t), {2, 1}), 0));
       }},
      {"broadcast_to",
       [](const Tensor& t) {
         return broadcast_to(t, {4, 2, 3}) * 2.0;
       }},
      {"reduce_prod, reduce_min",
       [](const Tensor& t) { return reduce_prod(t, {1}) + reduce_min(t, {1}); }},
      {"split (one op, two outputs)",
       [](const Tensor& t) {
         std::vector<Tensor> parts = split(t, 3, 1);
         return parts[0] * parts[2] + parts[1];
       }},
      {"stack",
       [](const Tensor& t) {
         return stack({t, sin(t)}, 1);
       }},
      {"softmax cross-entropy",
       [&](const Tensor& t) { return softmax_cross_entropy_with_logits(labels, t); }},
      {"sigmoid cross-entropy",
       [&](const Tensor& t) { return sigmoid_cross_entropy_with_logits(sigmoid(labels), t); }},
      {"matrix_inverse, determinant, solve, cholesky",
       [&](const Tensor& t) {
         Tensor a = matmul(reshape(t, {3, 2}), reshape(t, {3, 2}), false, true) +
                    matmul(spd_base, spd_base, false, true) + eye_like_3() * 3.0;
         return concat({reshape(matrix_inverse(a), {9}), reshape(matrix_determinant(a), {1}),
                        reshape(solve(a, reshape(t, {3, 2})), {6}), reshape(cholesky(a), {9})},
                       0);
       }},
      {"unsorted_segment_sum",
       [&](const Tensor& t) {
         return unsorted_segment_sum(concat({t, t * t}, 0), segment_ids, 3);
       }},
  };
  const Tensor x = random_tensor({2, 3}, 33);
  const Tensor v = random_tensor({2, 3}, 34);
  for (const auto& [name, f] : ops) {
    INFO(name);
    require_jvp_matches(f, x, v, 1e-10);
  }
}

TEST_CASE("a user primitive without a forward rule uses the fallback and says so once",
          "[forward]") {
  const Tensor x = constant({1.0, -2.0});
  const Tensor v = constant({0.5, 1.0});
  CapturedStderr err;
  for (int round = 0; round < 3; ++round) {
    ForwardAccumulator acc(x, v);
    Tensor y = forward_test_cube(x);
    require_close(acc.jvp(y), {2}, {1.5, 12.0});  // 3 x^2 v
  }
  const std::string said = err.text();
  INFO(said);
  const auto first = said.find("'ForwardTestCube' has no forward rule");
  REQUIRE(first != std::string::npos);
  CHECK(said.find("'ForwardTestCube' has no forward rule", first + 1) == std::string::npos);
}

TEST_CASE(
    "custom_gradient inside an accumulator: the tangent is the transpose of the custom "
    "gradient (TF)",
    "[forward]") {
  // The forward is x^2, the declared gradient 3 dy: forward mode follows the declaration.
  auto declared = custom_gradient([](const Tensor& x) {
    auto grad = [](const Tensor& dy) { return dy * 3.0; };
    return std::make_pair(x * x, grad);
  });
  // A numerically stable log(1 + e^x) whose gradient is sigmoid(x).
  auto log1pexp = custom_gradient([](const Tensor& x) {
    Tensor e = exp(x);
    auto grad = [e](const Tensor& dy) { return dy * (1.0 - 1.0 / (1.0 + e)); };
    return std::make_pair(log(1.0 + e), grad);
  });
  const Tensor x = constant({1.0, 2.0});
  const Tensor v = constant({1.0, -1.0});
  ForwardAccumulator acc(x, v);
  require_close(acc.jvp(declared(x)), {2}, {3.0, -3.0});
  const double s1 = 1.0 / (1.0 + std::exp(-1.0));
  const double s2 = 1.0 / (1.0 + std::exp(-2.0));
  require_close(acc.jvp(log1pexp(x)), {2}, {s1, -s2});
}

TEST_CASE("jvp of a tensor with no tangent: None, or zeros with Zero (TF)", "[forward]") {
  const Tensor x = constant({1.0, 2.0});
  const Tensor unwatched = constant({3.0, 4.0});
  const Tensor before = sin(x);  // computed before the accumulator existed
  ForwardAccumulator acc(x, constant({1.0, 1.0}));
  Tensor z = exp(unwatched);
  CHECK_FALSE(acc.jvp(z).defined());
  CHECK_FALSE(acc.jvp(before).defined());
  require_close(acc.jvp(z, UnconnectedGradients::Zero), {2}, {0.0, 0.0}, 0.0);
  // stop_gradient is not differentiable: no tangent goes through it.
  CHECK_FALSE(acc.jvp(stop_gradient(x)).defined());
  // An op whose derivative is zero still gives a (zero) tangent.
  require_close(acc.jvp(sign(x)), {2}, {0.0, 0.0}, 0.0);
  CHECK_THROWS_AS(acc.jvp(Tensor()), InvalidArgument);
}

TEST_CASE("integer primals get no tangent (TF)", "[forward]") {
  const Tensor i = from_values({1, 2, 3}, {3}, DType::Int32);
  const Tensor x = constant({1.0, 2.0, 3.0});
  CapturedStderr err;
  ForwardAccumulator acc({i, x}, {from_values({1, 1, 1}, {3}, DType::Int32), ones({3})});
  CHECK_FALSE(acc.jvp(i).defined());
  // A float computed from the integer primal alone carries nothing; from x it does.
  Tensor from_int = cast(i, DType::Float64) * 2.0;
  CHECK_FALSE(acc.jvp(from_int).defined());
  require_close(acc.jvp(from_int * x), {3}, {2.0, 4.0, 6.0});
  require_close(acc.jvp(i, UnconnectedGradients::Zero), {3}, {0.0, 0.0, 0.0}, 0.0);
}

TEST_CASE("nested accumulators give higher derivatives: d2 sin = -sin, d3 sin = -cos",
          "[forward]") {
  const Tensor x = constant({0.3, 1.2, -2.0});
  const Tensor one = ones({3});
  ForwardAccumulator outer(x, one);
  Tensor second;
  Tensor first_inner;
  {
    ForwardAccumulator inner(x, one);
    Tensor y = sin(x);
    first_inner = inner.jvp(y);
    second = outer.jvp(first_inner);
  }
  std::vector<double> cos_x;
  std::vector<double> minus_sin_x;
  for (double xi : values(x)) {
    cos_x.push_back(std::cos(xi));
    minus_sin_x.push_back(-std::sin(xi));
  }
  require_close(first_inner, {3}, cos_x);
  require_close(second, {3}, minus_sin_x);

  // Three levels.
  ForwardAccumulator a(x, one);
  ForwardAccumulator b(x, one);
  ForwardAccumulator c(x, one);
  Tensor y = sin(x);
  Tensor third = a.jvp(b.jvp(c.jvp(y)));
  std::vector<double> minus_cos_x;
  for (double ci : cos_x) minus_cos_x.push_back(-ci);
  require_close(third, {3}, minus_cos_x, 1e-12);
}

namespace {

// f(x) = x0^2 x1 + x1^3 + sin(x0): H = [[2 x1 - sin x0, 2 x0], [2 x0, 6 x1]].
Tensor two_variable(const Tensor& x) {
  Tensor x0 = slice(x, {0}, {1});
  Tensor x1 = slice(x, {1}, {1});
  return reduce_sum(x0 * x0 * x1 + x1 * x1 * x1 + sin(x0));
}

std::vector<double> two_variable_hvp(double x0, double x1, double v0, double v1) {
  return {(2 * x1 - std::sin(x0)) * v0 + 2 * x0 * v1, 2 * x0 * v0 + 6 * x1 * v1};
}

}  // namespace

TEST_CASE("a tape inside an accumulator (forward-over-reverse) gives H v", "[forward]") {
  const Tensor x = constant({0.7, -1.3});
  const Tensor v = constant({2.0, 0.5});
  ForwardAccumulator acc(x, v);
  Tensor g;
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = two_variable(x);
    g = tape.gradient(y, x);
  }
  require_close(acc.jvp(g), {2}, two_variable_hvp(0.7, -1.3, 2.0, 0.5));
}

TEST_CASE("an accumulator inside a tape (reverse-over-forward) gives H v", "[forward]") {
  const Tensor x = constant({0.7, -1.3});
  const Tensor v = constant({2.0, 0.5});
  GradientTape tape;
  tape.watch(x);
  Tensor directional;
  {
    ForwardAccumulator acc(x, v);
    Tensor y = two_variable(x);
    directional = acc.jvp(y);  // grad f . v, recorded by the tape
  }
  require_close(directional, {},
                {2 * 0.7 * -1.3 * 2.0 + std::cos(0.7) * 2.0 + (0.49 + 3 * 1.69) * 0.5});
  require_close(tape.gradient(directional, x), {2}, two_variable_hvp(0.7, -1.3, 2.0, 0.5));
}

TEST_CASE(
    "hessian_vector_product and hessian (forward-over-reverse) against the analytic "
    "Hessian",
    "[forward]") {
  const Tensor x = constant({0.7, -1.3});
  require_close(hessian_vector_product(two_variable, x, constant({2.0, 0.5})), {2},
                two_variable_hvp(0.7, -1.3, 2.0, 0.5));
  require_close(hessian(two_variable, x), {2, 2}, {2 * -1.3 - std::sin(0.7), 1.4, 1.4, 6 * -1.3});
}

// jacobian_forward is one vectorized pass over the basis vectors: an elementwise chain keeps
// the identity diagonal (its Jacobian is exactly diag(f'(x))), and the pass is made of recorded
// ops, so an outer tape differentiates the Jacobian: d/dx sum(J(x^3)) = d/dx sum(3 x^2) = 6 x.
TEST_CASE("jacobian_forward: a diagonal Jacobian, and differentiable under a tape", "[forward]") {
  const Tensor x = constant({0.5, -1.0, 2.0});
  Tensor j = jacobian_forward([](const Tensor& t) { return sin(t * t); }, x);
  require_close(j, {3, 3},
                {2 * 0.5 * std::cos(0.25), 0, 0, 0, 2 * -1.0 * std::cos(1.0), 0, 0, 0,
                 2 * 2.0 * std::cos(4.0)});
  GradientTape tape;
  tape.watch(x);
  Tensor total = reduce_sum(jacobian_forward([](const Tensor& t) { return t * t * t; }, x));
  require_close(tape.gradient(total, x), {3}, {3.0, -6.0, 12.0});
}

TEST_CASE("jacobian_forward equals GradientTape::jacobian", "[forward]") {
  const Tensor w = random_tensor({5, 3}, 21);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> functions = {
      {"tanh(W x)",
       [&](const Tensor& x) {
         return tanh(matmul(w, reshape(x, {3, 1})));
       }},
      {"softmax",
       [](const Tensor& x) {
         return softmax(reshape(x, {1, 3}));
       }},
      {"x outer x",
       [](const Tensor& x) {
         return multiply(reshape(x, {3, 1}), reshape(x, {1, 3}));
       }},
      {"scalar sum of squares", [](const Tensor& x) { return reduce_sum(square(x)); }},
      {"constant in x",
       [](const Tensor&) {
         return constant({1.0, 2.0});
       }},
  };
  const Tensor x = random_tensor({3}, 22);
  for (const auto& [name, f] : functions) {
    INFO(name);
    Tensor forward = jacobian_forward(f, x);
    GradientTape tape;
    tape.watch(x);
    Tensor y = f(x);
    Tensor reverse = tape.jacobian(y, x, UnconnectedGradients::Zero);
    require_close(forward, reverse.shape(), values(reverse));
  }
  // A matrix argument: the shape is f(x).shape ++ x.shape.
  const Tensor m = random_tensor({2, 2}, 23);
  Tensor jm = jacobian_forward([](const Tensor& t) { return matmul(t, t); }, m);
  CHECK(jm.shape() == Shape{2, 2, 2, 2});
  require_close(jm, {2, 2, 2, 2},
                values(jacobian([](const Tensor& t) { return matmul(t, t); }, m)));
  // An empty argument.
  CHECK(jacobian_forward([](const Tensor& t) { return reduce_sum(t); }, zeros({0})).shape() ==
        Shape{0});
}

TEST_CASE("jvp with the same tensor passed twice adds both directions", "[forward]") {
  const Tensor x = constant({2.0});
  const auto [y, t] = jvp([](const std::vector<Tensor>& a) { return a[0] * a[1]; }, {x, x},
                          {constant({1.0}), constant({10.0})});
  require_close(y, {1}, {4.0});
  require_close(t, {1}, {2.0 * 1.0 + 2.0 * 10.0});
}

TEST_CASE("forward mode misuse: tangents that do not fit, other threads", "[forward][misuse]") {
  const Tensor x = constant({1.0, 2.0});
  expect_misuse<InvalidArgument>("tangent shape differs from the primal's",
                                 [&] {
                                   ForwardAccumulator acc(x, constant({1.0, 2.0, 3.0}));
                                 },
                                 {"ForwardAccumulator", "tangent 0", "[3]", "primal", "[2]"});
  expect_misuse<InvalidArgument>(
      "tangent dtype differs from the primal's",
      [&] {
        ForwardAccumulator acc(x, cast(constant({1.0, 2.0}), DType::Float32));
      },
      {"ForwardAccumulator", "tangent 0", "float32", "float64"});
  expect_misuse<InvalidArgument>("one tangent too few",
                                 [&] {
                                   ForwardAccumulator acc({x, x * 2.0}, {x});
                                 },
                                 {"ForwardAccumulator", "2 primals", "1 tangents"});
  expect_misuse<InvalidArgument>("a primal given twice",
                                 [&] {
                                   ForwardAccumulator acc({x, x}, {x, x});
                                 },
                                 {"ForwardAccumulator", "primal 1", "primal 0"});
  expect_misuse<InvalidArgument>("undefined tangent", [&] { ForwardAccumulator acc(x, Tensor()); },
                                 {"ForwardAccumulator", "tangent 0", "undefined"});
  expect_misuse<InvalidArgument>("jvp() with a tangent of the wrong shape",
                                 [&] {
                                   jvp([](const std::vector<Tensor>& a) { return a[0]; }, {x},
                                       {from_values({1.0, 2.0}, {1, 2})});
                                 },
                                 {"tangent 0", "[1, 2]", "[2]"});
  expect_misuse<InvalidArgument>(
      "jvp() of a function returning None",
      [&] { jvp([](const std::vector<Tensor>&) { return Tensor(); }, {x}, {x}); }, {"jvp", "None"});
  expect_misuse<InvalidArgument>("jacobian_forward of an integer argument",
                                 [&] {
                                   jacobian_forward([](const Tensor& t) { return t; },
                                                    from_values({1}, {1}, DType::Int32));
                                 },
                                 {"jacobian_forward", "int32"});
  expect_misuse<TapeError>("jvp() on another thread",
                           [&] {
                             ForwardAccumulator acc(x, x);
                             Tensor y = sin(x);
                             std::string message;
                             bool threw_tape_error = false;
                             std::thread other([&] {
                               try {
                                 acc.jvp(y);
                               } catch (const TapeError& e) {
                                 threw_tape_error = true;
                                 message = e.what();
                               }
                             });
                             other.join();
                             if (threw_tape_error) throw TapeError(message);
                           },
                           {"ForwardAccumulator::jvp", "another thread"});
}

TEST_CASE("an accumulator destroyed on another thread stops observing", "[forward]") {
  const Tensor x = constant({1.0});
  auto acc = std::make_unique<ForwardAccumulator>(x, constant({1.0}));
  Tensor y = sin(x);
  require_close(acc->jvp(y), {1}, {std::cos(1.0)});
  std::thread([&] { acc.reset(); }).join();
  // This thread drops it at its next op; ops keep running and tapes keep working.
  Tensor z = sin(y);
  GradientTape tape;
  tape.watch(x);
  Tensor w = x * x;
  require_close(tape.gradient(w, x), {1}, {2.0});
  require_close(z, {1}, {std::sin(std::sin(1.0))});
}

TEST_CASE("forward mode misuse: a user primitive with no gradient under an accumulator",
          "[forward][misuse]") {
  const Tensor x = constant({1.0, 2.0});
  expect_misuse<LookupError>("op without a gradient run on a tangent-carrying input",
                             [&] {
                               ForwardAccumulator acc(x, ones({2}));
                               Tensor y(xt::xarray<double>(x.array<double>() * 2.0));
                               record_operation("ForwardTestNoGradient", {x}, {y});
                             },
                             {"ForwardAccumulator", "'ForwardTestNoGradient'",
                              "no registered gradient", "register_gradient"});
  // The accumulator that saw the error still works (its pause and private tapes are undone).
  ForwardAccumulator acc(x, ones({2}));
  Tensor y(xt::xarray<double>(x.array<double>() * 2.0));
  CHECK_THROWS_AS(record_operation("ForwardTestNoGradient", {x}, {y}), LookupError);
  require_close(acc.jvp(sin(x)), {2}, {std::cos(1.0), std::cos(2.0)});
  // An op on inputs without tangents is never differentiated: no error.
  const Tensor other = constant({3.0});
  Tensor z(xt::xarray<double>(other.array<double>() * 2.0));
  record_operation("ForwardTestNoGradient", {other}, {z});
  CHECK_FALSE(acc.jvp(z).defined());
}

TEST_CASE("accumulators are per thread: concurrent threads get their own tangents",
          "[forward][threads]") {
  std::vector<std::thread> threads;
  std::vector<double> results(4, 0.0);
  for (std::size_t k = 0; k < results.size(); ++k) {
    threads.emplace_back([k, &results] {
      const Tensor x = constant(static_cast<double>(k) + 0.5);
      const Tensor v = constant(static_cast<double>(k) + 1.0);
      for (int round = 0; round < 20; ++round) {
        ForwardAccumulator acc(x, v);
        GradientTape tape;
        tape.watch(x);
        Tensor g = tape.gradient(x * x * x, x);  // 3 x^2
        results[k] = acc.jvp(g).item<double>();  // 6 x v
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < results.size(); ++k) {
    const double x = static_cast<double>(k) + 0.5;
    CHECK(results[k] == Approx(6.0 * x * (static_cast<double>(k) + 1.0)).epsilon(1e-14));
  }
}

// The Jacobian's shape is learnt from the two traces of the vectorized pass: f runs exactly
// twice (no primal call of its own), and f's shape must still be the same on every call.
TEST_CASE("jacobian_forward calls f only for its two traces", "[forward]") {
  const Tensor x = constant({0.5, -1.0, 2.0});
  int calls = 0;
  const Tensor j = jacobian_forward(
      [&](const Tensor& t) {
        ++calls;
        return reshape(t * t, {3, 1});
      },
      x);
  CHECK(calls == 2);
  require_close(j, {3, 1, 3}, {1.0, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, 4.0});
  // One element: the batch of one is f's single call.
  calls = 0;
  require_close(jacobian_forward(
                    [&](const Tensor& t) {
                      ++calls;
                      return concat({sin(t), t * 3.0}, 0);
                    },
                    constant({0.0})),
                {2, 1}, {1.0, 3.0});
  CHECK(calls == 1);
}

TEST_CASE("jacobian_forward misuse: f's shape changes between calls", "[forward][misuse]") {
  tapegrad::testing::CapturedStderr quiet;  // the loop fallback's one-time warning
  expect_misuse<InvalidArgument>("f returns a longer result on its second call",
                                 [&] {
                                   int calls = 0;
                                   jacobian_forward(
                                       [&](const Tensor& t) {
                                         ++calls;
                                         return calls == 1 ? t * 2.0 : concat({t, t}, 0);
                                       },
                                       constant({1.0, 2.0}));
                                 },
                                 {"jacobian_forward", "[2]", "[4]"});
}

// subtract's tangent: dx - dy, broadcast to the output, whichever tangents there are.
TEST_CASE("jvp of subtract with one or both tangents, broadcast", "[forward]") {
  const Tensor x = constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});  // [2, 3]
  const Tensor y = constant({10.0, 20.0, 30.0});                  // [3]
  const Tensor dx = constant({{0.5, 1.0, 1.5}, {2.0, 2.5, 3.0}});
  const Tensor dy = constant({1.0, -1.0, 2.0});
  const Fn f = [](const std::vector<Tensor>& a) { return subtract(a[0], a[1]); };
  const auto both = jvp(f, {x, y}, {dx, dy});
  require_close(both.first, {2, 3}, {-9.0, -18.0, -27.0, -6.0, -15.0, -24.0});
  require_close(both.second, {2, 3}, {-0.5, 2.0, -0.5, 1.0, 3.5, 1.0}, 0.0);
  // y's tangent alone, broadcast over x's rows; then x's alone.
  ForwardAccumulator only_y(y, dy);
  require_close(only_y.jvp(subtract(x, y)), {2, 3}, {-1.0, 1.0, -2.0, -1.0, 1.0, -2.0}, 0.0);
  ForwardAccumulator only_x(x, dx);
  require_close(only_x.jvp(subtract(y, x)), {2, 3}, {-0.5, -1.0, -1.5, -2.0, -2.5, -3.0}, 0.0);
}
