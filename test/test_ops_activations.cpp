// Activations and the sparse softmax cross-entropy (nn_activations.cpp): values against closed
// forms in float64 and float32, TF's conventions (leaky_relu's slope at 0, alpha > 1), large
// inputs, analytic first and second derivatives, numerical checks, bad input.
#include "support.hpp"

#include <cmath>
#include <iostream>
#include <limits>

#include "misuse_support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

double sigmoid_ref(double v) { return 1 / (1 + std::exp(-v)); }

struct Activation {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
};

const std::vector<Activation>& activations() {
  static const std::vector<Activation> cases = {
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); },
       [](double v) { return v > 0 ? v : 0.2 * v; }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.01); },
       [](double v) { return v > 0 ? v : 0.01 * v; }},
      {"elu", [](const Tensor& x) { return elu(x); },
       [](double v) { return v < 0 ? std::exp(v) - 1 : v; }},
      {"selu", [](const Tensor& x) { return selu(x); },
       [](double v) { return kSeluScale * (v < 0 ? kSeluAlpha * (std::exp(v) - 1) : v); }},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"gelu", [](const Tensor& x) { return gelu(x, true); },
       [](double v) {
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
      {"silu", [](const Tensor& x) { return silu(x); },
       [](double v) { return v * sigmoid_ref(v); }},
      {"log_sigmoid", [](const Tensor& x) { return log_sigmoid(x); },
       [](double v) { return std::log(sigmoid_ref(v)); }},
      {"softsign", [](const Tensor& x) { return softsign(x); },
       [](double v) { return v / (1 + std::fabs(v)); }},
  };
  return cases;
}

// d^k f / dx^k at a scalar point (k = 1 or 2), by nested tapes.
double derivative(const std::function<Tensor(const Tensor&)>& f, double at, int order = 1) {
  const Tensor x = constant(at);
  GradientTape outer;
  outer.watch(x);
  GradientTape inner;
  inner.watch(x);
  const Tensor d1 = inner.gradient(f(x), x);
  if (order == 1) return d1.item<double>();
  return outer.gradient(d1, x).item<double>();
}

}  // namespace

TEST_CASE("activations match their closed forms in float64 and float32", "[activations]") {
  const Tensor x = random_tensor({4, 5}, 3, -4, 4);
  for (const auto& c : activations()) {
    INFO(c.name);
    std::vector<double> expected;
    for (double v : values(x)) expected.push_back(c.reference(v));
    require_close(c.op(x), {4, 5}, expected, 1e-14);
    const Tensor x32 = from_values(values(x), {4, 5}, DType::Float32);
    std::vector<double> expected32;
    for (double v : values(x32)) expected32.push_back(c.reference(v));
    const Tensor y32 = c.op(x32);
    CHECK(y32.dtype() == DType::Float32);
    require_close(y32, {4, 5}, expected32, 1e-6);
    CHECK(c.op(fill({}, 0.5)).shape() == Shape{});
    CHECK(c.op(ones({0, 3})).shape() == Shape{0, 3});
  }
}

TEST_CASE("leaky_relu: one formula for every alpha (TF's kernel), slope alpha at 0",
          "[activations]") {
  require_close(leaky_relu(constant({-2, 0, 3}), 1.5), {3}, {-3, 0, 3});
  require_close(leaky_relu(constant({-2, 0, 3}), -0.5), {3}, {1, 0, 3});
  CHECK(derivative([](const Tensor& x) { return leaky_relu(x); }, 0.0) == 0.2);
  CHECK(derivative([](const Tensor& x) { return leaky_relu(x); }, 1e-300) == 1.0);
  CHECK(derivative([](const Tensor& x) { return leaky_relu(x, 0.01); }, -3.0) == 0.01);
}

TEST_CASE("activations stay finite for large inputs", "[activations]") {
  require_close(log_sigmoid(constant({-1000, 1000, -40})), {3}, {-1000, 0, -40 - std::exp(-40.0)},
                1e-15);
  require_close(silu(constant({-1000, 1000})), {2}, {0, 1000});
  require_close(softsign(constant({-1e300, 1e300})), {2}, {-1, 1});
  require_close(elu(constant({-1000})), {1}, {-1});
  // gelu's tail: 0.5 x erfc(-x / sqrt 2) keeps digits that 1 + erf would cancel.
  const double tail = gelu(constant(-10.0)).item<double>();
  CHECK(tail == Approx(-10 * 0.5 * std::erfc(10 / std::sqrt(2.0))).epsilon(1e-13));
  CHECK(tail < 0);
  for (double at : {-1000.0, 1000.0}) {
    INFO("x = " << at);
    CHECK(std::isfinite(derivative([](const Tensor& x) { return log_sigmoid(x); }, at)));
    CHECK(std::isfinite(derivative([](const Tensor& x) { return silu(x); }, at)));
    CHECK(std::isfinite(derivative([](const Tensor& x) { return gelu(x); }, at)));
    CHECK(std::isfinite(derivative([](const Tensor& x) { return selu(x); }, at, 2)));
  }
}

TEST_CASE("activations: analytic first and second derivatives", "[activations][grad]") {
  auto f = [](auto fn) { return std::function<Tensor(const Tensor&)>(fn); };
  const auto elu_f = f([](const Tensor& x) { return elu(x); });
  const auto selu_f = f([](const Tensor& x) { return selu(x); });
  const auto gelu_f = f([](const Tensor& x) { return gelu(x); });
  const auto gelu_t = f([](const Tensor& x) { return gelu(x, true); });
  const auto silu_f = f([](const Tensor& x) { return silu(x); });
  const auto logsig_f = f([](const Tensor& x) { return log_sigmoid(x); });
  const auto softsign_f = f([](const Tensor& x) { return softsign(x); });
  CHECK(derivative(elu_f, -1.0) == Approx(std::exp(-1.0)).epsilon(1e-15));
  CHECK(derivative(elu_f, -1.0, 2) == Approx(std::exp(-1.0)).epsilon(1e-15));
  CHECK(derivative(elu_f, 2.0) == 1.0);
  CHECK(derivative(elu_f, 2.0, 2) == 0.0);
  CHECK(derivative(selu_f, -0.5) ==
        Approx(kSeluScale * kSeluAlpha * std::exp(-0.5)).epsilon(1e-15));
  CHECK(derivative(selu_f, -0.5, 2) ==
        Approx(kSeluScale * kSeluAlpha * std::exp(-0.5)).epsilon(1e-15));
  CHECK(derivative(selu_f, 0.5) == Approx(kSeluScale).epsilon(1e-15));
  // gelu: Phi(0) = 1/2; second derivative 2 phi(x) - x^2 phi(x), 2 phi(0) = sqrt(2 / pi) at 0.
  CHECK(derivative(gelu_f, 0.0) == 0.5);
  CHECK(derivative(gelu_f, 0.0, 2) == Approx(std::sqrt(2 / M_PI)).epsilon(1e-15));
  CHECK(derivative(gelu_t, 0.0) == 0.5);
  CHECK(derivative(gelu_t, 0.0, 2) == Approx(std::sqrt(2 / M_PI)).epsilon(1e-15));
  // silu: s (1 + x (1 - s)), 1/2 at 0; second derivative s(1-s)(2 + x(1 - 2s)), 1/2 at 0.
  CHECK(derivative(silu_f, 0.0) == 0.5);
  CHECK(derivative(silu_f, 0.0, 2) == Approx(0.5).epsilon(1e-15));
  const double s = sigmoid_ref(1.3);
  CHECK(derivative(silu_f, 1.3) == Approx(s * (1 + 1.3 * (1 - s))).epsilon(1e-15));
  // log_sigmoid: sigmoid(-x), and -s(1-s).
  CHECK(derivative(logsig_f, 1.3) == Approx(1 - s).epsilon(1e-15));
  CHECK(derivative(logsig_f, 1.3, 2) == Approx(-s * (1 - s)).epsilon(1e-15));
  // softsign: 1 / (1 + |x|)^2 and -2 sign(x) / (1 + |x|)^3.
  CHECK(derivative(softsign_f, -1.0) == Approx(0.25).epsilon(1e-15));
  CHECK(derivative(softsign_f, -1.0, 2) == Approx(0.25).epsilon(1e-15));
}

TEST_CASE("activations: first and second derivatives against central differences",
          "[activations][grad]") {
  unsigned seed = 11;
  for (const auto& c : activations()) {
    INFO(c.name);
    const auto op = c.op;
    verify_gradients([op](const std::vector<Tensor>& a) { return op(a[0]); },
                     {random_tensor({3, 4}, seed++, -3, 3)});
  }
  verify_gradients([](const std::vector<Tensor>& a) { return leaky_relu(a[0], 1.5); },
                   {random_tensor({5}, 19, -3, 3)});
}

// ---- sparse_softmax_cross_entropy_with_logits ------------------------------------------------

TEST_CASE("sparse softmax cross-entropy: logsumexp - logit of the label", "[sparse_xent]") {
  const Tensor logits = constant({{1, 2, 3}, {0.5, -1, 0}});
  const auto x = values(logits);
  auto lse = [&](std::size_t r) {
    double s = 0;
    for (std::size_t k = 0; k < 3; ++k) s += std::exp(x[r * 3 + k]);
    return std::log(s);
  };
  for (DType dtype : {DType::Int32, DType::Int64}) {
    const Tensor labels = from_values({2, 1}, {2}, dtype);
    require_close(sparse_softmax_cross_entropy_with_logits(labels, logits), {2},
                  {lse(0) - 3, lse(1) + 1}, 1e-15);
  }
  // The same as the dense loss with one-hot labels; any leading shape; float32.
  const Tensor logits3 = random_tensor({2, 3, 4}, 5, -3, 3);
  const Tensor labels3 = from_values({0, 3, 1, 2, 2, 0}, {2, 3}, DType::Int64);
  std::vector<double> hot(24, 0.0);
  const auto ids = values(labels3);
  for (std::size_t r = 0; r < 6; ++r) hot[r * 4 + static_cast<std::size_t>(ids[r])] = 1;
  const Tensor dense = softmax_cross_entropy_with_logits(from_values(hot, {2, 3, 4}), logits3);
  require_close(sparse_softmax_cross_entropy_with_logits(labels3, logits3), {2, 3}, values(dense),
                1e-14);
  const Tensor loss32 = sparse_softmax_cross_entropy_with_logits(
      labels3, from_values(values(logits3), {2, 3, 4}, DType::Float32));
  CHECK(loss32.dtype() == DType::Float32);
  require_close(loss32, {2, 3}, values(dense), 1e-5);
  // Large logits: finite.
  require_close(sparse_softmax_cross_entropy_with_logits(from_values({0}, {1}, DType::Int32),
                                                         constant({{1000, -1000}})),
                {1}, {0});
  require_close(sparse_softmax_cross_entropy_with_logits(from_values({1}, {1}, DType::Int32),
                                                         constant({{1000, -1000}})),
                {1}, {2000});
  CHECK(sparse_softmax_cross_entropy_with_logits(from_values({}, {0}, DType::Int32), zeros({0, 3}))
            .shape() == Shape{0});
}

TEST_CASE("sparse softmax cross-entropy: gradient softmax - one_hot, second derivative",
          "[sparse_xent][grad]") {
  const Tensor logits = constant({{0, 0}, {1, 2}});
  const Tensor labels = from_values({0, 1}, {2}, DType::Int32);
  {
    GradientTape tape;
    tape.watch(logits);
    const Tensor loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(labels, logits));
    const double p = sigmoid_ref(1.0);  // softmax([1, 2])[1]
    // TF's reference number: logits [0, 0] with label 0 gives [-0.5, 0.5] (halved by the mean).
    require_close(tape.gradient(loss, logits), {2, 2}, {-0.25, 0.25, (1 - p) / 2, (p - 1) / 2},
                  1e-15);
  }
  const Tensor labels6 = from_values({3, 0, 1, 1, 2, 3}, {6}, DType::Int64);
  verify_gradients(
      [labels6](const std::vector<Tensor>& a) {
        return sparse_softmax_cross_entropy_with_logits(labels6, a[0]);
      },
      {random_tensor({6, 4}, 8, -2, 2)});
  // The Hessian of one row w.r.t. its logits is diag(p) - p p^T, whatever the label.
  const Tensor row = constant({{0.3, -1.2, 0.8}});
  const Tensor h = hessian(
      [](const Tensor& z) {
        return reduce_sum(sparse_softmax_cross_entropy_with_logits(
            from_values({1}, {1}, DType::Int32), reshape(z, {1, 3})));
      },
      reshape(row, {3}));
  const auto p = values(softmax(row, -1));
  std::vector<double> expected;
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 3; ++j) expected.push_back((i == j ? p[i] : 0) - p[i] * p[j]);
  }
  require_close(h, {3, 3}, expected, 1e-12);
}

// ---- Bad input -------------------------------------------------------------------------------

TEST_CASE("nn_activations misuse cases", "[activations][errors]") {
  const int before = misuse_cases_run();
  const Tensor ints = from_values({1, 2}, {2}, DType::Int32);
  for (const auto& c : activations()) {
    const auto op = c.op;
    expect_misuse<InvalidArgument>(std::string(c.name) + " of int32", [&] { op(ints); },
                                   {c.name, "int32", "[2]"});
  }
  expect_misuse<InvalidArgument>("leaky_relu with alpha NaN",
                                 [] { leaky_relu(constant({1.0}), std::nan("")); },
                                 {"leaky_relu", "alpha = nan", "[1]"});
  expect_misuse<InvalidArgument>("leaky_relu of int64 (alpha 2)",
                                 [&] { leaky_relu(from_values({1}, {1}, DType::Int64), 2.0); },
                                 {"leaky_relu", "int64"});
  const char* op = "sparse_softmax_cross_entropy_with_logits";
  const Tensor logits = zeros({2, 3});
  expect_misuse<InvalidArgument>(
      "sparse xent: a label past the classes",
      [&] {
        sparse_softmax_cross_entropy_with_logits(from_values({0, 3}, {2}, DType::Int64), logits);
      },
      {op, "row 1", "label 3", "[0, 3)", "[2, 3]"});
  expect_misuse<InvalidArgument>(
      "sparse xent: a negative label",
      [&] {
        sparse_softmax_cross_entropy_with_logits(from_values({-1, 0}, {2}, DType::Int32), logits);
      },
      {op, "row 0", "label -1"});
  expect_misuse<InvalidArgument>(
      "sparse xent: float labels",
      [&] {
        sparse_softmax_cross_entropy_with_logits(constant({0.0, 1.0}), logits);
      },
      {op, "labels has shape [2] and dtype float64", "int32 or int64"});
  expect_misuse<InvalidArgument>(
      "sparse xent: integer logits",
      [&] {
        sparse_softmax_cross_entropy_with_logits(ints,
                                                 from_values({1, 2, 3, 4}, {2, 2}, DType::Int32));
      },
      {op, "logits has shape [2, 2] and dtype int32", "float32 or float64"});
  expect_misuse<InvalidArgument>(
      "sparse xent: labels of the wrong shape",
      [&] {
        sparse_softmax_cross_entropy_with_logits(from_values({0, 1, 2}, {3}, DType::Int32), logits);
      },
      {op, "[3]", "[2, 3]", "labels' shape plus one axis"});
  expect_misuse<InvalidArgument>("sparse xent: rank-0 logits",
                                 [&] {
                                   sparse_softmax_cross_entropy_with_logits(
                                       from_values({0}, {}, DType::Int32), constant(1.0));
                                 },
                                 {op, "[]", "labels' shape plus one axis"});
  expect_misuse<InvalidArgument>("sparse xent: undefined logits",
                                 [&] { sparse_softmax_cross_entropy_with_logits(ints, Tensor()); },
                                 {op, "undefined"});
  const int run = misuse_cases_run() - before;
  std::cout << "nn_activations misuse cases: " << run << " run\n";
  REQUIRE(run == 18);
}
