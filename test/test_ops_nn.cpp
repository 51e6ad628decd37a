// nn ops: relu sigmoid softplus softmax log_softmax and the two cross-entropy losses: values,
// stability at logits of +-1000, gradients (first and second order), TF's numbers, bad input.
#include "support.hpp"

#include <cmath>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

bool all_finite(const Tensor& t) {
  for (double v : values(t)) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  return tape.gradient(f(x), x);
}

// A random probability distribution over the last axis (labels for the cross-entropy).
Tensor random_distribution(const Shape& shape, unsigned seed) {
  return softmax(random_tensor(shape, seed, -2, 2), -1);
}

}  // namespace

// ---- activations ------------------------------------------------------------------------

TEST_CASE("relu: values in float and integer dtypes, gradient 0 at 0", "[nn][relu]") {
  require_close(relu(constant({-1.5, 0, 2})), {3}, {0, 0, 2});
  for (DType dtype : {DType::Float32, DType::Int32, DType::Int64}) {
    const Tensor r = relu(from_values({-3, 0, 4}, {3}, dtype));
    CHECK(r.dtype() == dtype);
    require_close(r, {3}, {0, 0, 4});
  }
  require_close(gradient_of([](const Tensor& x) { return relu(x); }, constant({-1, 0, 2})), {3},
                {0, 0, 1});
}

TEST_CASE("sigmoid: values, stability at +-1000, float32", "[nn][sigmoid]") {
  require_close(sigmoid(constant({0, 2, -2})), {3},
                {0.5, 1 / (1 + std::exp(-2.0)), 1 / (1 + std::exp(2.0))});
  const Tensor big = constant({1000, -1000});
  require_close(sigmoid(big), {2}, {1, 0});
  const Tensor g = gradient_of([](const Tensor& x) { return sigmoid(x); }, big);
  CHECK(all_finite(g));
  require_close(g, {2}, {0, 0});
  const Tensor f = sigmoid(from_values({0, 1000, -1000}, {3}, DType::Float32));
  CHECK(f.dtype() == DType::Float32);
  require_close(f, {3}, {0.5, 1, 0}, 1e-7);
}

TEST_CASE("softplus: values, stability for large |x|, float32", "[nn][softplus]") {
  require_close(softplus(constant({0, 1, -1})), {3},
                {std::log(2.0), std::log1p(std::exp(1.0)), std::log1p(std::exp(-1.0))});
  const Tensor big = constant({1000, -1000, 40});
  require_close(softplus(big), {3}, {1000, 0, 40 + std::log1p(std::exp(-40.0))});
  const Tensor g = gradient_of([](const Tensor& x) { return softplus(x); }, big);
  CHECK(all_finite(g));
  require_close(g, {3}, {1, 0, 1 / (1 + std::exp(-40.0))});
  const Tensor f = softplus(from_values({0, 100}, {2}, DType::Float32));
  CHECK(f.dtype() == DType::Float32);
  require_close(f, {2}, {std::log(2.0), 100}, 1e-6);
}

TEST_CASE("activation gradients and second derivatives match central differences",
          "[nn][grad][grad2]") {
  const Tensor x = random_tensor({3, 4}, 81, -3, 3);
  const Fn relu_fn = [](const std::vector<Tensor>& a) { return relu(a[0]); };
  const Fn sigmoid_fn = [](const std::vector<Tensor>& a) { return sigmoid(a[0]); };
  const Fn softplus_fn = [](const std::vector<Tensor>& a) { return softplus(a[0]); };
  for (const Fn& f : {relu_fn, sigmoid_fn, softplus_fn}) {
    require_gradient_matches(f, {x});
    require_second_order_matches(f, {x});
  }
  // relu is piecewise linear: its gradient must still pass a dependent g through correctly.
  require_second_order_matches([](const std::vector<Tensor>& a) { return relu(a[0]) * a[0]; }, {x});
}

TEST_CASE("activations reject integer dtypes where floating only", "[nn][errors]") {
  for (DType dtype : {DType::Int32, DType::Int64}) {
    const Tensor x = ones({2}, dtype);
    CHECK_THAT(message_of<InvalidArgument>([&] { sigmoid(x); }),
               Catch::Contains("sigmoid") && Catch::Contains(dtype_name(dtype)));
    CHECK_THAT(message_of<InvalidArgument>([&] { softplus(x); }),
               Catch::Contains("softplus") && Catch::Contains(dtype_name(dtype)));
    CHECK_THAT(message_of<InvalidArgument>([&] { softmax(x); }),
               Catch::Contains("softmax") && Catch::Contains(dtype_name(dtype)));
    CHECK_THAT(message_of<InvalidArgument>([&] { log_softmax(x); }),
               Catch::Contains("log_softmax") && Catch::Contains(dtype_name(dtype)));
  }
  CHECK_THAT(message_of<InvalidArgument>([] { relu(from_values({1}, {1}, DType::Bool)); }),
             Catch::Contains("relu") && Catch::Contains("bool"));
}

// ---- softmax and log_softmax ------------------------------------------------------------

TEST_CASE("softmax and log_softmax: values along any axis", "[nn][softmax]") {
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const Tensor row = constant({1, 2, 3});
  require_close(softmax(row), {3}, {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z});
  require_close(log_softmax(row), {3}, {1 - std::log(z), 2 - std::log(z), 3 - std::log(z)});
  // m = [[0, 1], [0, 3]]. Axis 0 normalises columns: [0, 0] and [1, 3]; axis 1 rows.
  const Tensor m = constant({{0, 1}, {0, 3}});
  const double c = 1 / (1 + std::exp(2.0));   // e^1 / (e^1 + e^3)
  const double r0 = 1 / (1 + std::exp(1.0));  // e^0 / (e^0 + e^1)
  const double r1 = 1 / (1 + std::exp(3.0));  // e^0 / (e^0 + e^3)
  require_close(softmax(m, 0), {2, 2}, {0.5, c, 0.5, 1 - c});
  require_close(softmax(m, 1), {2, 2}, {r0, 1 - r0, r1, 1 - r1});
  require_close(softmax(m, -1), {2, 2}, values(softmax(m, 1)));
  require_close(log_softmax(m, -2), {2, 2},
                {std::log(0.5), std::log(c), std::log(0.5), std::log(1 - c)});
  // A middle axis of a rank-3 tensor sums to 1 along it.
  const Tensor s = reduce_sum(softmax(random_tensor({2, 3, 4}, 91), 1), {1});
  require_close(s, {2, 4}, std::vector<double>(8, 1.0));
  CHECK(softmax(zeros({0, 3})).shape() == Shape{0, 3});
  CHECK(log_softmax(zeros({2, 0})).shape() == Shape{2, 0});
}

TEST_CASE("softmax and log_softmax are finite at logits of +-1000", "[nn][softmax]") {
  const Tensor x = constant({{1000, -1000, 0}, {1000, 1000, -1000}});
  require_close(softmax(x), {2, 3}, {1, 0, 0, 0.5, 0.5, 0});
  require_close(log_softmax(x), {2, 3},
                {0, -2000, -1000, -std::log(2.0), -std::log(2.0), -2000 - std::log(2.0)});
  const Tensor w = constant({{1, 2, 3}, {-1, 0.5, 2}});
  const Tensor g1 = gradient_of([&](const Tensor& v) { return reduce_sum(softmax(v) * w); }, x);
  const Tensor g2 = gradient_of([&](const Tensor& v) { return reduce_sum(log_softmax(v) * w); }, x);
  CHECK(all_finite(g1));
  CHECK(all_finite(g2));
  // log_softmax row 0: w - softmax * sum(w) = [1 - 6, 2, 3].
  require_close(g2, {2, 3}, {-5, 2, 3, -1 - 0.75, 0.5 - 0.75, 2});
  const Tensor f = softmax(from_values({1000, -1000}, {2}, DType::Float32));
  CHECK(f.dtype() == DType::Float32);
  require_close(f, {2}, {1, 0}, 1e-7);
}

TEST_CASE("softmax and log_softmax gradients and second derivatives match", "[nn][grad][grad2]") {
  const Tensor x = random_tensor({3, 4}, 101, -2, 2);
  for (int axis : {-1, 0, 1}) {
    INFO("axis " << axis);
    // A weighted sum so the gradient is not the trivial zero of sum(softmax).
    const Tensor w = random_tensor({3, 4}, 102);
    const Fn sm = [axis, w](const std::vector<Tensor>& a) { return softmax(a[0], axis) * w; };
    const Fn lsm = [axis, w](const std::vector<Tensor>& a) { return log_softmax(a[0], axis) * w; };
    require_gradient_matches(sm, {x});
    require_gradient_matches(lsm, {x});
    require_second_order_matches(sm, {x});
    require_second_order_matches(lsm, {x});
  }
  const Fn middle = [](const std::vector<Tensor>& a) { return softmax(a[0], 1); };
  require_gradient_matches(middle, {random_tensor({2, 3, 2}, 103)});
}

TEST_CASE("softmax and log_softmax reject rank 0 and an out-of-range axis", "[nn][errors]") {
  CHECK_THAT(message_of<InvalidArgument>([] { softmax(constant(1.0)); }),
             Catch::Contains("softmax") && Catch::Contains("[]") && Catch::Contains("rank"));
  CHECK_THAT(
      message_of<InvalidArgument>([] {
        log_softmax(ones({2, 3}), 2);
      }),
      Catch::Contains("log_softmax") && Catch::Contains("axis 2") && Catch::Contains("[2, 3]"));
  CHECK_THAT(message_of<InvalidArgument>([] {
               softmax(ones({2, 3}), -3);
             }),
             Catch::Contains("softmax") && Catch::Contains("axis -3"));
}

// ---- softmax cross-entropy --------------------------------------------------------------

TEST_CASE("softmax cross-entropy: values per row over the last axis", "[nn][softmax_ce]") {
  const Tensor loss = softmax_cross_entropy_with_logits(constant({{1, 0}, {0.25, 0.75}}),
                                                        constant({{0, 0}, {1, 2}}));
  const double lse = std::log(std::exp(1.0) + std::exp(2.0));
  require_close(loss, {2}, {std::log(2.0), 0.25 * (lse - 1) + 0.75 * (lse - 2)});
  const Tensor batched = softmax_cross_entropy_with_logits(random_distribution({2, 3, 4}, 1),
                                                           random_tensor({2, 3, 4}, 2));
  CHECK(batched.shape() == Shape{2, 3});
  const Tensor one_row = softmax_cross_entropy_with_logits(constant({0, 1}), constant({3, 3}));
  CHECK(one_row.shape() == Shape{});
  CHECK(one_row.item<double>() == Approx(std::log(2.0)));
  CHECK(softmax_cross_entropy_with_logits(zeros({0, 3}), zeros({0, 3})).shape() == Shape{0});
  const Tensor f = softmax_cross_entropy_with_logits(from_values({1, 0}, {1, 2}, DType::Float32),
                                                     from_values({0, 0}, {1, 2}, DType::Float32));
  CHECK(f.dtype() == DType::Float32);
  require_close(f, {1}, {std::log(2.0)}, 1e-6);
}

TEST_CASE("TF's number: mean cross-entropy at logits [[0,0]], labels [[1,0]]",
          "[nn][softmax_ce][grad]") {
  const Tensor labels = constant({{1, 0}});
  const Tensor logits = constant({{0, 0}});
  GradientTape tape;
  tape.watch(logits);
  tape.watch(labels);
  const Tensor loss = reduce_mean(softmax_cross_entropy_with_logits(labels, logits));
  const auto g = tape.gradient(loss, {logits, labels});
  require_close(g[0], {1, 2}, {-0.5, 0.5});
  // TF2: labels get -log_softmax(logits) * g.
  require_close(g[1], {1, 2}, {std::log(2.0), std::log(2.0)});
}

TEST_CASE("softmax cross-entropy is finite at logits of +-1000", "[nn][softmax_ce]") {
  const Tensor labels = constant({{0, 1}, {0.5, 0.5}});
  const Tensor logits = constant({{1000, -1000}, {-1000, -1000}});
  require_close(softmax_cross_entropy_with_logits(labels, logits), {2}, {2000, std::log(2.0)});
  GradientTape tape;
  tape.watch(logits);
  tape.watch(labels);
  const auto g = tape.gradient(softmax_cross_entropy_with_logits(labels, logits), {logits, labels});
  require_close(g[0], {2, 2}, {1, -1, 0, 0});
  require_close(g[1], {2, 2}, {0, 2000, std::log(2.0), std::log(2.0)});
}

TEST_CASE("softmax cross-entropy gradients and second derivatives match, both arguments",
          "[nn][softmax_ce][grad][grad2]") {
  const Fn f = [](const std::vector<Tensor>& a) {
    return softmax_cross_entropy_with_logits(a[0], a[1]);
  };
  for (const Shape& shape : {Shape{3, 4}, Shape{2, 2, 3}, Shape{5}}) {
    INFO("shape " << shape_to_string(shape));
    const std::vector<Tensor> args = {random_distribution(shape, 111),
                                      random_tensor(shape, 112, -3, 3)};
    require_gradient_matches(f, args, 0);
    require_gradient_matches(f, args, 1);
    require_second_order_matches(f, args, 0);
    require_second_order_matches(f, args, 1);
  }
  // The Hessian w.r.t. logits of one row with one-hot labels is diag(p) - p p^T.
  const Tensor logits = constant({0.5, -1.0, 2.0});
  const Tensor labels = constant({0, 1, 0});
  std::vector<double> hessian;
  {
    GradientTape outer(/*persistent=*/true);
    outer.watch(logits);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(logits);
      g = inner.gradient(softmax_cross_entropy_with_logits(labels, logits), logits);
    }
    auto stop = outer.stop_recording();
    for (int i = 0; i < 3; ++i) {
      std::vector<double> one_hot(3, 0.0);
      one_hot[static_cast<std::size_t>(i)] = 1.0;
      const auto row = values(outer.gradient({g}, {logits}, {from_values(one_hot, {3})})[0]);
      hessian.insert(hessian.end(), row.begin(), row.end());
    }
  }
  const Tensor h = from_values(hessian, {3, 3});
  const auto p = values(softmax(logits));
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) expected.push_back((i == j ? p[i] : 0.0) - p[i] * p[j]);
  }
  require_close(h, {3, 3}, expected, 1e-10);
}

TEST_CASE("softmax cross-entropy rejects mismatched shapes, dtypes, rank 0 and integers",
          "[nn][softmax_ce][errors]") {
  const char* op = "softmax_cross_entropy_with_logits";
  CHECK_THAT(message_of<InvalidArgument>([] {
               softmax_cross_entropy_with_logits(ones({2, 3}), ones({2, 4}));
             }),
             Catch::Contains(op) && Catch::Contains("labels has shape [2, 3]") &&
                 Catch::Contains("logits has shape [2, 4]"));
  CHECK_THAT(message_of<InvalidArgument>([] {
               softmax_cross_entropy_with_logits(ones({2, 3}, DType::Float32), ones({2, 3}));
             }),
             Catch::Contains(op) && Catch::Contains("float32") && Catch::Contains("float64") &&
                 Catch::Contains("[2, 3]"));
  CHECK_THAT(message_of<InvalidArgument>(
                 [] { softmax_cross_entropy_with_logits(constant(1.0), constant(1.0)); }),
             Catch::Contains(op) && Catch::Contains("rank"));
  CHECK_THAT(message_of<InvalidArgument>([] {
               softmax_cross_entropy_with_logits(ones({2}, DType::Int32), ones({2}, DType::Int32));
             }),
             Catch::Contains(op) && Catch::Contains("int32"));
}

// ---- sigmoid cross-entropy --------------------------------------------------------------

TEST_CASE("sigmoid cross-entropy: values and stability at +-1000", "[nn][sigmoid_ce]") {
  const Tensor labels = constant({1, 0, 1, 0, 0.3});
  const Tensor logits = constant({0, 1000, 1000, -1000, 2});
  const double mixed = 2 - 2 * 0.3 + std::log1p(std::exp(-2.0));
  require_close(sigmoid_cross_entropy_with_logits(labels, logits), {5},
                {std::log(2.0), 1000, 0, 0, mixed});
  GradientTape tape;
  tape.watch(logits);
  tape.watch(labels);
  const auto g = tape.gradient(sigmoid_cross_entropy_with_logits(labels, logits), {logits, labels});
  CHECK(all_finite(g[0]));
  require_close(g[0], {5}, {-0.5, 1, 0, 0, 1 / (1 + std::exp(-2.0)) - 0.3});
  require_close(g[1], {5}, {0, -1000, -1000, 1000, -2});
  const Tensor f = sigmoid_cross_entropy_with_logits(from_values({1}, {1}, DType::Float32),
                                                     from_values({0}, {1}, DType::Float32));
  CHECK(f.dtype() == DType::Float32);
  require_close(f, {1}, {std::log(2.0)}, 1e-6);
}

TEST_CASE("sigmoid cross-entropy gradients and second derivatives match, both arguments",
          "[nn][sigmoid_ce][grad][grad2]") {
  const Fn f = [](const std::vector<Tensor>& a) {
    return sigmoid_cross_entropy_with_logits(a[0], a[1]);
  };
  for (const Shape& shape : {Shape{3, 4}, Shape{}}) {
    const std::vector<Tensor> args = {random_tensor(shape, 121, 0, 1),
                                      random_tensor(shape, 122, -4, 4)};
    require_gradient_matches(f, args, 0);
    require_gradient_matches(f, args, 1);
    require_second_order_matches(f, args, 0);
    require_second_order_matches(f, args, 1);
  }
}

TEST_CASE("sigmoid cross-entropy requires equal shapes and dtypes", "[nn][sigmoid_ce][errors]") {
  const char* op = "sigmoid_cross_entropy_with_logits";
  CHECK_THAT(message_of<InvalidArgument>([] {
               sigmoid_cross_entropy_with_logits(ones({3}), ones({2, 3}));
             }),
             Catch::Contains(op) && Catch::Contains("labels has shape [3]") &&
                 Catch::Contains("logits has shape [2, 3]") && Catch::Contains("same shape"));
  CHECK_THAT(message_of<InvalidArgument>(
                 [] { sigmoid_cross_entropy_with_logits(ones({3}), ones({3}, DType::Float32)); }),
             Catch::Contains(op) && Catch::Contains("float64") && Catch::Contains("float32"));
  CHECK_THAT(message_of<InvalidArgument>([] {
               sigmoid_cross_entropy_with_logits(ones({3}, DType::Int64), ones({3}, DType::Int64));
             }),
             Catch::Contains(op) && Catch::Contains("int64"));
}
