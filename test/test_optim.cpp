// SGD, Adam (both epsilon rules) and AdamW on dense gradients: closed forms, hand-computed
// steps, Rosenbrock, errors.
#include "support.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace tapegrad;
using namespace tapegrad::testing;

TEST_CASE("SGD steps on a quadratic follow the closed form", "[optim][sgd]") {
  // loss = sum(c * (w - b)^2): each step multiplies (w - b) by (1 - 2 lr c).
  const std::vector<double> c{0.5, 2.0}, b{1.0, -1.0}, w0{3.0, 2.0};
  const double lr = 0.1;
  Variable w(constant({3.0, 2.0}), true, "w");
  SGD sgd(lr);
  for (int t = 1; t <= 7; ++t) {
    auto [loss, grads] = implicit_value_and_gradients([&] {
      return reduce_sum(constant({0.5, 2.0}) * square(w.value() - constant({1.0, -1.0})));
    });
    sgd.apply_gradients(grads);
    std::vector<double> expected;
    for (std::size_t i = 0; i < 2; ++i) {
      expected.push_back(b[i] + std::pow(1.0 - 2.0 * lr * c[i], t) * (w0[i] - b[i]));
    }
    INFO("step " << t);
    require_close(w.peek(), {2}, expected, 1e-12);
  }
  CHECK(sgd.iterations() == 7);
  CHECK(sgd.slot_names().empty());
}

TEST_CASE("SGD with momentum, by hand on loss = w^2 / 2", "[optim][sgd]") {
  Variable w(constant(1.0), true, "w");
  SGD sgd(0.1, 0.9);
  // velocity = 0.9 v - 0.1 g; w += velocity; g = w.
  const double expected_w[] = {0.9, 0.72, 0.486};
  const double expected_v[] = {-0.1, -0.18, -0.234};
  for (int t = 0; t < 3; ++t) {
    sgd.apply_gradients({{w.peek(), w}});
    require_close(w.peek(), {}, {expected_w[t]}, 1e-12);
    require_close(sgd.slot(w, "momentum"), {}, {expected_v[t]}, 1e-12);
  }
}

TEST_CASE("SGD with Nesterov momentum, by hand on loss = w^2 / 2", "[optim][sgd]") {
  Variable w(constant(1.0), true, "w");
  SGD sgd(0.1, 0.9, /*nesterov=*/true);
  // velocity = 0.9 v - 0.1 g; w += 0.9 velocity - 0.1 g.
  sgd.apply_gradients({{w.peek(), w}});
  require_close(w.peek(), {}, {0.81}, 1e-12);  // 1 - 0.09 - 0.1
  sgd.apply_gradients({{w.peek(), w}});
  require_close(w.peek(), {}, {0.5751}, 1e-12);  // v = -0.171: 0.81 - 0.1539 - 0.081
}

TEST_CASE("Adam's defaults are TF's and its first steps match the formula", "[optim][adam]") {
  Variable w(constant({1.0, -1.0}), true, "w");
  Adam adam;  // lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7
  const Tensor g = constant({2.0, -0.5});
  adam.apply_gradients({{g, w}});
  // Step 1: the bias-corrected m / sqrt(v) is g / |g|, so each element moves by ~lr.
  const double eps_term_2 = 1e-7 / std::sqrt(0.001);
  require_close(w.peek(), {2},
                {1.0 - 0.001 * 2.0 / (2.0 + eps_term_2), -1.0 + 0.001 * 0.5 / (0.5 + eps_term_2)},
                1e-15);
  require_close(adam.slot(w, "m"), {2}, {0.2, -0.05}, 1e-15);
  require_close(adam.slot(w, "v"), {2}, {0.004, 0.00025}, 1e-15);
  // Step 2 with gradient 1 on both: m = 0.9 m + 0.1, v = 0.999 v + 0.001.
  Tensor before = w.peek();
  adam.apply_gradients({{constant({1.0, 1.0}), w}});
  const double alpha = 0.001 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
  const double m[] = {0.9 * 0.2 + 0.1, 0.9 * -0.05 + 0.1};
  const double v[] = {0.999 * 0.004 + 0.001, 0.999 * 0.00025 + 0.001};
  const auto w1 = values(before);
  require_close(w.peek(), {2},
                {w1[0] - alpha * m[0] / (std::sqrt(v[0]) + 1e-7),
                 w1[1] - alpha * m[1] / (std::sqrt(v[1]) + 1e-7)},
                1e-15);
  CHECK(adam.iterations() == 2);
}

TEST_CASE("set_learning_rate changes the next steps and keeps the slots", "[optim]") {
  // SGD with momentum on loss = w^2 / 2 (g = w): velocity = 0.9 v - lr g; w += velocity.
  Variable w(constant(1.0), true, "w");
  SGD sgd(0.1, 0.9);
  sgd.apply_gradients({{w.peek(), w}});  // v = -0.1, w = 0.9
  sgd.set_learning_rate(0.5);
  CHECK(sgd.learning_rate() == 0.5);
  sgd.apply_gradients({{w.peek(), w}});  // v = -0.09 - 0.45 = -0.54, w = 0.36
  require_close(sgd.slot(w, "momentum"), {}, {-0.54}, 1e-12);
  require_close(w.peek(), {}, {0.36}, 1e-12);

  // Adam: step 2 with the new rate uses m, v and t carried over from step 1.
  Variable u(constant(1.0), true, "u");
  Adam adam(0.01);
  CHECK(adam.learning_rate() == 0.01);
  adam.apply_gradients({{constant(2.0), u}});  // m = 0.2, v = 0.004
  const double u1 = values(u.peek())[0];
  adam.set_learning_rate(0.002);
  CHECK(adam.learning_rate() == 0.002);
  adam.apply_gradients({{constant(1.0), u}});
  const double m = 0.9 * 0.2 + 0.1, v = 0.999 * 0.004 + 0.001;
  const double alpha = 0.002 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
  require_close(u.peek(), {}, {u1 - alpha * m / (std::sqrt(v) + 1e-7)}, 1e-15);
  CHECK(adam.iterations() == 2);

  // A bad rate is refused and the old one stays.
  auto msg = message_of<InvalidArgument>([&] { adam.set_learning_rate(-0.5); });
  CHECK_THAT(
      msg, Catch::Contains("Adam") && Catch::Contains("learning_rate") && Catch::Contains("-0.5"));
  msg = message_of<InvalidArgument>([&] { sgd.set_learning_rate(std::nan("")); });
  CHECK_THAT(msg,
             Catch::Contains("SGD") && Catch::Contains("learning_rate") && Catch::Contains("nan"));
  CHECK(adam.learning_rate() == 0.002);
  CHECK(sgd.learning_rate() == 0.5);
}

TEST_CASE("Adam takes Rosenbrock from (-1.2, 1) to (1, 1)", "[optim][adam]") {
  Variable x(constant(-1.2), true, "x");
  Variable y(constant(1.0), true, "y");
  Adam adam(0.02);
  for (int step = 0; step < 5000; ++step) {
    auto [loss, grads] = implicit_value_and_gradients(
        [&] { return square(1.0 - x.value()) + 100.0 * square(y.value() - square(x.value())); });
    adam.apply_gradients(grads);
  }
  CHECK(std::abs(x.peek().item<double>() - 1.0) < 1e-4);
  CHECK(std::abs(y.peek().item<double>() - 1.0) < 1e-4);
}

TEST_CASE("slots are per variable, shared by copies of a variable", "[optim]") {
  Variable a(constant(1.0), true, "a");
  Variable a_copy = a;
  Variable b(constant(1.0), true, "b");
  SGD sgd(1.0, 0.5);
  sgd.apply_gradients({{constant(1.0), a}, {constant(2.0), b}});
  sgd.apply_gradients({{constant(1.0), a_copy}});
  require_close(sgd.slot(a, "momentum"), {}, {-1.5});  // 0.5 * -1 - 1
  require_close(sgd.slot(b, "momentum"), {}, {-2.0});
  require_close(a.peek(), {}, {1.0 - 1.0 - 1.5});
  Variable never(constant(0.0));
  auto msg = message_of<InvalidArgument>([&] { sgd.slot(never, "momentum"); });
  CHECK_THAT(msg, Catch::Contains("momentum") && Catch::Contains(never.name()));
  msg = message_of<InvalidArgument>([&] { sgd.slot(a, "velocity"); });
  CHECK_THAT(msg, Catch::Contains("'velocity'"));
}

TEST_CASE("undefined gradients are skipped", "[optim]") {
  Variable used(constant(1.0), true, "used");
  Variable unused(constant(5.0), true, "unused_by_loss");
  SGD sgd(0.5);
  auto [loss, grads] = implicit_value_and_gradients([&] {
    Tensor ignored = unused.value();
    return used.value() * 4.0;
  });
  REQUIRE(grads.size() == 2);
  CHECK_FALSE(grads[1].first.defined());
  sgd.apply_gradients(grads);
  require_close(used.peek(), {}, {-1.0});
  require_close(unused.peek(), {}, {5.0});
  Adam adam;
  adam.apply_gradients({{Tensor(), unused}});
  require_close(unused.peek(), {}, {5.0});
}

TEST_CASE("float32 variables are updated in float32", "[optim]") {
  Variable w(fill({3}, 2.0, DType::Float32), true, "w32");
  SGD sgd(0.25);
  sgd.apply_gradients({{fill({3}, 1.0, DType::Float32), w}});
  CHECK(w.dtype() == DType::Float32);
  require_close(w.peek(), {3}, {1.75, 1.75, 1.75});
}

TEST_CASE("optimizer argument errors", "[optim]") {
  Variable w(constant({1.0, 2.0}), true, "w");
  SGD sgd;
  auto msg = message_of<InvalidArgument>([&] { sgd.apply_gradients({{constant(1.0), w}}); });
  CHECK_THAT(msg, Catch::Contains("SGD") && Catch::Contains("'w'") && Catch::Contains("[2]") &&
                      Catch::Contains("[]"));
  Adam adam;
  msg = message_of<InvalidArgument>([&] {
    adam.apply_gradients({{zeros({2}, DType::Float32), w}});
  });
  CHECK_THAT(msg,
             Catch::Contains("Adam") && Catch::Contains("float32") && Catch::Contains("float64"));
  Variable ints(zeros({2}, DType::Int32), true, "ints");
  msg = message_of<InvalidArgument>([&] {
    sgd.apply_gradients({{zeros({2}, DType::Int32), ints}});
  });
  CHECK_THAT(msg, Catch::Contains("'ints'") && Catch::Contains("int32"));
  CHECK_THAT(message_of<InvalidArgument>([] { SGD(-1.0); }), Catch::Contains("learning_rate"));
  CHECK_THAT(message_of<InvalidArgument>([] { SGD(0.1, 1.5); }), Catch::Contains("momentum"));
  CHECK_THAT(message_of<InvalidArgument>([] { Adam(0.1, 1.0); }), Catch::Contains("beta_1"));
  CHECK_THAT(message_of<InvalidArgument>([] { Adam(0.1, 0.9, 0.999, -1.0); }),
             Catch::Contains("epsilon"));
}

TEST_CASE("optimizers refuse infinite hyperparameters", "[optim]") {
  // An infinite learning rate was accepted: one step sent the variables to -inf, and the
  // checkpoint saved afterwards could never be restored (its learning rate is refused there).
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THAT(message_of<InvalidArgument>([&] { SGD{inf}; }),
             Catch::Contains("SGD") && Catch::Contains("learning_rate") && Catch::Contains("inf"));
  CHECK_THAT(message_of<InvalidArgument>([&] { Adam{inf}; }),
             Catch::Contains("Adam") && Catch::Contains("learning_rate"));
  CHECK_THAT(message_of<InvalidArgument>([&] { Adam(0.1, 0.9, 0.999, inf); }),
             Catch::Contains("Adam") && Catch::Contains("epsilon"));
  CHECK_THAT(message_of<InvalidArgument>([&] { AdamW{inf}; }),
             Catch::Contains("AdamW") && Catch::Contains("learning_rate"));
  CHECK_THAT(message_of<InvalidArgument>([&] { AdamW(0.1, inf); }),
             Catch::Contains("AdamW") && Catch::Contains("weight_decay"));
  CHECK_THAT(message_of<InvalidArgument>([&] { AdamW(0.1, 0.0, 0.9, 0.999, inf); }),
             Catch::Contains("AdamW") && Catch::Contains("epsilon"));
  SGD sgd(0.5);
  Adam adam(0.5);
  AdamW adamw(0.5);
  CHECK_THROWS_AS(sgd.set_learning_rate(inf), InvalidArgument);
  CHECK_THROWS_AS(adam.set_learning_rate(inf), InvalidArgument);
  CHECK_THROWS_AS(adamw.set_learning_rate(-inf), InvalidArgument);
  CHECK(sgd.learning_rate() == 0.5);
  CHECK(adam.learning_rate() == 0.5);
  CHECK(adamw.learning_rate() == 0.5);
}

TEST_CASE("a failed apply_gradients changes nothing: no variable, slot or step count", "[optim]") {
  // The pairs were checked one at a time while updating: a bad second pair left the first
  // variable stepped with iterations() still 0, and the next call stepped it again at t = 1
  // with its moments already moved.
  for (const int bad : {0, 1, 2, 3}) {
    CAPTURE(bad);
    Variable a(constant({1.0, 2.0}), true, "a");
    Variable b(constant({{1.0, 2.0}, {3.0, 4.0}}), true, "b");
    Adam adam(0.1);
    GradientValue bad_gradient;
    if (bad == 0) bad_gradient = GradientValue(constant({1.0, 1.0}));           // shape
    if (bad == 1) bad_gradient = GradientValue(zeros({2, 2}, DType::Float32));  // dtype
    if (bad == 2) {
      bad_gradient = GradientValue(
          IndexedSlices{constant({{1.0, 1.0}}), cast(constant({5.0}), DType::Int64), {2, 2}});
    }
    if (bad == 3) {
      bad_gradient = GradientValue(
          IndexedSlices{constant({{1.0, 1.0}}), cast(constant({-1.0}), DType::Int32), {2, 2}});
    }
    const std::string message = message_of<InvalidArgument>([&] {
      adam.apply_gradients(std::vector<std::pair<GradientValue, Variable>>{
          {GradientValue(constant({1.0, 1.0})), a}, {bad_gradient, b}});
    });
    CHECK_THAT(message, Catch::Contains("Adam") && Catch::Contains("'b'"));
    require_close(a.value(), {2}, {1.0, 2.0}, 0.0);  // untouched
    CHECK(adam.iterations() == 0);
    // The next call is the first step, bit for bit a fresh optimizer's.
    adam.apply_gradients({{constant({1.0, 1.0}), a}});
    CHECK(adam.iterations() == 1);
    Variable fresh(constant({1.0, 2.0}), true, "fresh");
    Adam(0.1).apply_gradients({{constant({1.0, 1.0}), fresh}});
    require_close(a.value(), {2}, values(fresh.value()), 0.0);
    CHECK(values(a.value())[0] < 0.91);  // it moved by about the learning rate
  }
}

namespace {

// Adam written down from the published rules, one element, plain double arithmetic.
// torch_epsilon: w -= lr m_hat / (sqrt(v_hat) + eps) (torch.optim.Adam / AdamW); otherwise
// Keras's w -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps). weight_decay: AdamW's
// w -= lr wd w first.
struct ReferenceAdam {
  double lr, b1, b2, eps, weight_decay;
  bool torch_epsilon;
  double m = 0.0, v = 0.0;
  int t = 0;

  double step(double w, double g) {
    ++t;
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    const double c1 = 1.0 - std::pow(b1, t), c2 = 1.0 - std::pow(b2, t);
    w -= lr * weight_decay * w;
    if (torch_epsilon) return w - lr * (m / c1) / (std::sqrt(v / c2) + eps);
    return w - lr * std::sqrt(c2) / c1 * m / (std::sqrt(v) + eps);
  }
};

// Runs `optimizer` on loss = sum(c * (w - b)^2) (gradient 2 c (w - b)) for `steps` steps from
// w0 beside one ReferenceAdam per element, comparing every step to 1e-12.
void check_against_reference(Optimizer& optimizer, std::vector<ReferenceAdam> reference,
                             int steps) {
  const std::vector<double> c{0.5, 2.0, 0.01}, b{1.0, -1.0, 3.0};
  std::vector<double> w{3.0, 2.0, -0.5};
  Variable var(constant({3.0, 2.0, -0.5}), true, "w");
  for (int t = 1; t <= steps; ++t) {
    auto [loss, grads] = implicit_value_and_gradients([&] {
      return reduce_sum(constant({0.5, 2.0, 0.01}) *
                        square(var.value() - constant({1.0, -1.0, 3.0})));
    });
    optimizer.apply_gradients(grads);
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = reference[i].step(w[i], 2.0 * c[i] * (w[i] - b[i]));
    }
    INFO("step " << t);
    require_close(var.peek(), {3}, w, 1e-12);
  }
  require_close(optimizer.slot(var, "m"), {3}, {reference[0].m, reference[1].m, reference[2].m},
                1e-12);
  require_close(optimizer.slot(var, "v"), {3}, {reference[0].v, reference[1].v, reference[2].v},
                1e-12);
  CHECK(optimizer.iterations() == steps);
}

// Runs `optimizer` on one float64 scalar variable through a fixed gradient sequence; returns
// its value after each step.
std::vector<double> run_fixed_gradients(Optimizer& optimizer, const std::vector<double>& grads) {
  Variable w(constant(1.0), true, "w");
  std::vector<double> out;
  for (double g : grads) {
    optimizer.apply_gradients({{constant(g), w}});
    out.push_back(w.peek().item<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("Adam(AdamOptions) with Keras's epsilon matches the rule and the old constructor",
          "[optim][adam]") {
  AdamOptions options;
  CHECK(options.learning_rate == 1e-3);
  CHECK(options.beta1 == 0.9);
  CHECK(options.beta2 == 0.999);
  CHECK(options.epsilon == 1e-7);
  CHECK_FALSE(options.pytorch_epsilon);
  options.learning_rate = 0.1;
  options.beta1 = 0.8;
  options.beta2 = 0.99;
  options.epsilon = 0.05;
  Adam adam(options);
  CHECK(adam.learning_rate() == 0.1);
  check_against_reference(adam, std::vector<ReferenceAdam>(3, {0.1, 0.8, 0.99, 0.05, 0.0, false}),
                          6);
  // The positional constructor is the same optimizer, bit for bit.
  Adam positional(0.1, 0.8, 0.99, 0.05);
  Adam named(options);
  const std::vector<double> grads{0.3, -1.0, 2.0, 0.0, 1e-3};
  CHECK(run_fixed_gradients(positional, grads) == run_fixed_gradients(named, grads));
}

TEST_CASE("Adam with pytorch_epsilon follows torch.optim.Adam's rule", "[optim][adam]") {
  AdamOptions options;
  options.learning_rate = 0.1;
  options.epsilon = 0.05;  // large enough to matter at every step
  options.pytorch_epsilon = true;
  Adam adam(options);
  check_against_reference(adam, std::vector<ReferenceAdam>(3, {0.1, 0.9, 0.999, 0.05, 0.0, true}),
                          7);
}

TEST_CASE("the two epsilon rules differ where epsilon matters: tiny gradients", "[optim][adam]") {
  // |g| ~ 1e-8 with epsilon 1e-8: sqrt(v_hat) ~ |g| is comparable to epsilon, while Keras's
  // sqrt(v) (not bias-corrected) is ~30x smaller at step 1, so epsilon dominates there.
  const std::vector<double> grads{1e-8, -3e-9, 2e-8, 2e-8, 5e-9, -1e-8};
  AdamOptions options;
  options.learning_rate = 0.01;
  options.epsilon = 1e-8;
  Adam keras(options);
  options.pytorch_epsilon = true;
  Adam torch(options);
  const std::vector<double> got_keras = run_fixed_gradients(keras, grads);
  const std::vector<double> got_torch = run_fixed_gradients(torch, grads);
  ReferenceAdam ref_keras{0.01, 0.9, 0.999, 1e-8, 0.0, false};
  ReferenceAdam ref_torch{0.01, 0.9, 0.999, 1e-8, 0.0, true};
  double wk = 1.0, wt = 1.0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    wk = ref_keras.step(wk, grads[i]);
    wt = ref_torch.step(wt, grads[i]);
    INFO("step " << i + 1);
    CHECK(got_keras[i] == Approx(wk).margin(1e-15).epsilon(0));
    CHECK(got_torch[i] == Approx(wt).margin(1e-15).epsilon(0));
  }
  // Step 1 by hand: m_hat = g, sqrt(v_hat) = g, so torch moves lr g / (g + eps) = lr / 2;
  // Keras moves lr sqrt(0.001)/0.1 * 1e-9 / (sqrt(1e-19) + 1e-8) = 3.0653e-4, ~16x less.
  CHECK(got_torch[0] == Approx(1.0 - 0.005).margin(1e-15).epsilon(0));
  const double keras_step1 = 0.01 * std::sqrt(0.001) / 0.1 * 1e-9 / (std::sqrt(1e-19) + 1e-8);
  CHECK(got_keras[0] == Approx(1.0 - keras_step1).margin(1e-15).epsilon(0));
  CHECK(keras_step1 == Approx(3.065343e-4).epsilon(1e-6));
}

TEST_CASE("AdamW follows torch.optim.AdamW's rule, decay included", "[optim][adamw]") {
  AdamW adamw(0.05, 0.1, 0.9, 0.999, 1e-3);
  CHECK(adamw.learning_rate() == 0.05);
  CHECK(adamw.weight_decay() == 0.1);
  CHECK(adamw.slot_names() == std::vector<std::string>{"m", "v"});
  check_against_reference(adamw, std::vector<ReferenceAdam>(3, {0.05, 0.9, 0.999, 1e-3, 0.1, true}),
                          8);
}

TEST_CASE("AdamW's defaults are PyTorch's, the decay is decoupled from m and v", "[optim][adamw]") {
  AdamW adamw;  // lr 1e-3, weight_decay 1e-2, betas (0.9, 0.999), eps 1e-8
  ReferenceAdam reference{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
  const std::vector<double> grads{0.5, -0.25, 1e-9, 0.0, 2.0, -3.0};
  const std::vector<double> got = run_fixed_gradients(adamw, grads);
  double w = 1.0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    w = reference.step(w, grads[i]);
    INFO("step " << i + 1);
    CHECK(got[i] == Approx(w).margin(1e-12).epsilon(1e-12));
  }
  // Step 1 by hand: w = 1 - 1e-3 * 1e-2 * 1 - 1e-3 * 0.5 / (0.5 + 1e-8).
  AdamW first;
  Variable u(constant(1.0), true, "u");
  first.apply_gradients({{constant(0.5), u}});
  require_close(u.peek(), {}, {1.0 - 1e-5 - 1e-3 * 0.5 / (0.5 + 1e-8)}, 1e-15);
  // m and v saw the gradient only (not the decay): m = 0.1 g, v = 0.001 g^2.
  require_close(first.slot(u, "m"), {}, {0.05}, 1e-15);
  require_close(first.slot(u, "v"), {}, {0.00025}, 1e-15);
  // A zero gradient still decays the variable (step 2: m_hat != 0 moves it as well).
  Variable z(constant(2.0), true, "z");
  AdamW decay_only(0.1, 0.5);
  decay_only.apply_gradients({{constant(0.0), z}});
  require_close(z.peek(), {}, {2.0 - 0.1 * 0.5 * 2.0}, 1e-15);  // m = v = 0: only the decay
}

TEST_CASE("AdamW without decay is Adam with pytorch_epsilon, sparse is the densified update",
          "[optim][adamw]") {
  AdamOptions options;
  options.learning_rate = 0.01;
  options.epsilon = 1e-8;
  options.pytorch_epsilon = true;
  Adam adam(options);
  AdamW adamw(0.01, 0.0);
  const std::vector<double> grads{0.3, -1.0, 2.0, 1e-9, 0.7};
  CHECK(run_fixed_gradients(adam, grads) == run_fixed_gradients(adamw, grads));

  // Rows 0 and 2 of a [3, 2] table get gradients; all rows decay (as the dense update).
  Variable sparse_table(constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}), true, "sparse");
  Variable dense_table(constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}), true, "dense");
  AdamW on_sparse(0.1, 0.2), on_dense(0.1, 0.2);
  for (int step = 0; step < 3; ++step) {
    IndexedSlices rows{constant({{0.5, -1.0}, {2.0, 0.25}, {0.5, 0.5}}),
                       from_values({0, 2, 0}, {3}, DType::Int64),
                       {3, 2}};
    on_sparse.apply_gradients(
        std::vector<std::pair<GradientValue, Variable>>{{rows, sparse_table}});
    on_dense.apply_gradients({{constant({{1.0, -0.5}, {0.0, 0.0}, {2.0, 0.25}}), dense_table}});
  }
  require_close(sparse_table.peek(), {3, 2}, values(dense_table.peek()), 1e-15);
  // Row 1 had no gradient: only the decay moved it, three times by (1 - 0.02).
  const double keep = std::pow(1.0 - 0.02, 3);
  const auto got = values(sparse_table.peek());
  CHECK(got[2] == Approx(3.0 * keep).margin(1e-15).epsilon(0));
  CHECK(got[3] == Approx(4.0 * keep).margin(1e-15).epsilon(0));
}

TEST_CASE("AdamW keeps float32 variables float32", "[optim][adamw]") {
  Variable w(fill({2}, 1.0, DType::Float32), true, "w32");
  AdamW adamw(0.5, 0.5);
  adamw.apply_gradients({{fill({2}, 2.0, DType::Float32), w}});
  CHECK(w.dtype() == DType::Float32);
  // 1 - 0.25 - 0.5 * 2 / (2 + 1e-8), in float32 (1 - beta rounded from double, as PyTorch).
  require_close(w.peek(), {2}, {0.25, 0.25}, 1e-6);
}

TEST_CASE("AdamW argument errors and set_learning_rate", "[optim][adamw]") {
  CHECK_THAT(message_of<InvalidArgument>([] { AdamW(-1.0); }),
             Catch::Contains("AdamW") && Catch::Contains("learning_rate"));
  CHECK_THAT(
      message_of<InvalidArgument>([] { AdamW(0.1, -0.5); }),
      Catch::Contains("AdamW") && Catch::Contains("weight_decay") && Catch::Contains("-0.5"));
  CHECK_THAT(message_of<InvalidArgument>([] { AdamW(0.1, 0.0, 1.0); }),
             Catch::Contains("AdamW") && Catch::Contains("beta1"));
  CHECK_THAT(message_of<InvalidArgument>([] { AdamW(0.1, 0.0, 0.9, 0.999, std::nan("")); }),
             Catch::Contains("AdamW") && Catch::Contains("epsilon"));
  AdamOptions bad;
  bad.beta2 = 1.0;
  CHECK_THAT(message_of<InvalidArgument>([&] { Adam{bad}; }), Catch::Contains("Adam"));
  AdamW adamw;
  adamw.set_learning_rate(0.25);
  CHECK(adamw.learning_rate() == 0.25);
  CHECK_THAT(message_of<InvalidArgument>([&] { adamw.set_learning_rate(-1.0); }),
             Catch::Contains("AdamW") && Catch::Contains("learning_rate"));
  Variable w(constant({1.0, 2.0}), true, "w");
  CHECK_THAT(message_of<InvalidArgument>([&] {
               adamw.apply_gradients({{constant(1.0), w}});
             }),
             Catch::Contains("AdamW") && Catch::Contains("'w'") && Catch::Contains("[2]"));
}
