// custom_gradient: every form, its errors, what the tape keeps, higher orders, lifetime.
#include "support.hpp"

#include <cmath>
#include <memory>
#include <thread>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// TF's docstring example: the naive form's gradient overflows to NaN at x = 100 (float32).
Tensor log1pexp_naive(const Tensor& x) { return log(1.0 + exp(x)); }

auto log1pexp = custom_gradient([](const Tensor& x) {
  Tensor e = exp(x);
  auto grad = [e](const Tensor& dy) { return dy * (1.0 - 1.0 / (1.0 + e)); };
  return std::make_pair(log(1.0 + e), grad);
});

// x^3 whose gradient is written with tapegrad ops, so it can be differentiated again.
auto cube = custom_gradient([](const Tensor& x) {
  auto grad = [x](const Tensor& dy) { return dy * 3.0 * x * x; };
  return std::make_pair(x * x * x, grad);
});

}  // namespace

TEST_CASE("log1pexp: the custom gradient is 1 at x = 100 where the naive one is NaN",
          "[custom_gradient]") {
  Tensor x = constant(100.0f);
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = log1pexp(x);
    CHECK(std::isinf(y.item<float>()));  // exp(100) overflows float32 in the forward too
    CHECK(tape.gradient(y, x).item<float>() == 1.0f);
  }
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = log1pexp_naive(x);
    CHECK(std::isnan(tape.gradient(y, x).item<float>()));
  }
}

TEST_CASE("log1pexp's custom gradient matches central differences", "[custom_gradient]") {
  require_close(log1pexp(constant(100.0)), {}, {100.0});
  require_close(log1pexp(constant(0.0)), {}, {std::log(2.0)});
  Fn f = [](const std::vector<Tensor>& a) { return log1pexp(a[0]); };
  require_gradient_matches(f, {random_tensor({3, 2}, 11, -3.0, 3.0)});
}

TEST_CASE("custom_gradient with several inputs and outputs (TF's bar(x, y) = x * y)",
          "[custom_gradient]") {
  auto bar = custom_gradient([](const std::vector<Tensor>& in) {
    Tensor x = in[0], y = in[1];
    auto grad = [x, y](const std::vector<Tensor>& dys) {
      // outputs: z = x*y and s = x + 2y
      return std::vector<Tensor>{dys[0] * y + dys[1], dys[0] * x + dys[1] * 2.0};
    };
    return std::make_pair(std::vector<Tensor>{x * y, x + 2.0 * y}, grad);
  });
  Tensor x = constant(2.0), y = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(std::vector<Tensor>{x, y});
  auto out = bar({x, y});
  REQUIRE(out.size() == 2);
  require_close(out[0], {}, {6.0});
  require_close(out[1], {}, {8.0});
  auto g_z = tape.gradient(out[0], std::vector<Tensor>{x, y});
  require_close(g_z[0], {}, {3.0});
  require_close(g_z[1], {}, {2.0});
  // An unused output gets a zero gradient: only s contributes here.
  auto g_s = tape.gradient(out[1], std::vector<Tensor>{x, y});
  require_close(g_s[0], {}, {1.0});
  require_close(g_s[1], {}, {2.0});
  auto g_both = tape.gradient(std::vector<Tensor>{out[0], out[1]}, std::vector<Tensor>{x, y});
  require_close(g_both[0], {}, {4.0});
  require_close(g_both[1], {}, {4.0});
}

TEST_CASE("a gradient function returning the wrong number of gradients", "[custom_gradient]") {
  auto f = custom_gradient(
      [](const std::vector<Tensor>& in) {
        auto grad = [](const std::vector<Tensor>& dys) { return std::vector<Tensor>{dys[0]}; };
        return std::make_pair(std::vector<Tensor>{in[0] * in[1]}, grad);
      },
      "TwoInputsOneGradient");
  Tensor x = constant(2.0), y = constant(3.0);
  GradientTape tape;
  tape.watch(std::vector<Tensor>{x, y});
  Tensor z = f({x, y})[0];
  auto msg = message_of<InvalidArgument>([&] { tape.gradient(z, std::vector<Tensor>{x, y}); });
  CHECK_THAT(msg, Catch::Contains("TwoInputsOneGradient") && Catch::Contains("returned 1") &&
                      Catch::Contains("expected 2"));
}

TEST_CASE("a gradient of the wrong shape names the custom op", "[custom_gradient]") {
  auto f = custom_gradient(
      [](const Tensor& x) {
        auto grad = [](const Tensor&) { return constant({1.0, 2.0, 3.0}); };
        return std::make_pair(x * 2.0, grad);
      },
      "BadShape");
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = f(x);
  auto msg = message_of<InvalidArgument>([&] { tape.gradient(y, x); });
  CHECK_THAT(msg, Catch::Contains("BadShape") && Catch::Contains("[3]") && Catch::Contains("[2]"));
}

TEST_CASE("variables read inside f: the gradient function takes them and returns theirs",
          "[custom_gradient][variable]") {
  Variable w(constant({2.0, -1.0}), true, "w");
  Variable b(constant(0.5), true, "b");
  std::vector<std::string> seen_names;
  auto affine = custom_gradient([&](const Tensor& x) {
    Tensor wv = w.value();
    Tensor y = wv * x + b.value();
    auto grad = [x, wv, &seen_names](const Tensor& dy, const std::vector<Variable>& variables) {
      for (const auto& v : variables) seen_names.push_back(v.name());
      std::vector<Tensor> var_grads{dy * x, reduce_sum(dy)};  // creation order: w, b
      return std::make_pair(dy * wv, var_grads);
    };
    return std::make_pair(y, grad);
  });
  Tensor x = constant({3.0, 4.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = affine(x);
  require_close(y, {2}, {6.5, -3.5});
  CHECK(tape.watched_variables().size() == 2);
  auto grads = tape.gradient(reduce_sum(y), std::vector<Tensor>{x, w.handle(), b.handle()});
  require_close(grads[0], {2}, {2.0, -1.0});
  require_close(grads[1], {2}, {3.0, 4.0});
  require_close(grads[2], {}, {2.0});
  CHECK(seen_names == std::vector<std::string>{"w", "b"});
}

TEST_CASE("the vector form with variables", "[custom_gradient][variable]") {
  Variable scale(constant(3.0), true, "scale");
  auto scaled_sum = custom_gradient([&](const std::vector<Tensor>& in) {
    Tensor s = scale.value();
    Tensor a = in[0], c = in[1];
    auto grad = [s, a, c](const std::vector<Tensor>& dys, const std::vector<Variable>&) {
      return std::make_pair(std::vector<Tensor>{dys[0] * s, dys[0] * s},
                            std::vector<Tensor>{dys[0] * (a + c)});
    };
    return std::make_pair(std::vector<Tensor>{s * (a + c)}, grad);
  });
  Tensor a = constant(1.0), c = constant(2.0);
  auto [value, grads] = implicit_value_and_gradients([&] { return scaled_sum({a, c})[0]; });
  require_close(value, {}, {9.0});
  REQUIRE(grads.size() == 1);
  CHECK(grads[0].second == scale);
  require_close(grads[0].first, {}, {3.0});
}

TEST_CASE("f reads a variable but the gradient function does not take variables",
          "[custom_gradient][variable]") {
  Variable v(constant(2.0), true, "closed_over");
  auto f = custom_gradient(
      [&](const Tensor& x) {
        auto grad = [](const Tensor& dy) { return dy; };
        return std::make_pair(x * v.value(), grad);
      },
      "ReadsVariable");
  Tensor x = constant(1.0);
  auto msg = message_of<InvalidArgument>([&] { f(x); });
  CHECK_THAT(msg, Catch::Contains("ReadsVariable") && Catch::Contains("'closed_over'") &&
                      Catch::Contains("std::vector<Variable>"));
}

TEST_CASE("one gradient per variable is required", "[custom_gradient][variable]") {
  Variable v1(constant(2.0), true, "v1");
  Variable v2(constant(3.0), true, "v2");
  auto f = custom_gradient(
      [&](const Tensor& x) {
        auto grad = [](const Tensor& dy, const std::vector<Variable>&) {
          return std::make_pair(dy, std::vector<Tensor>{dy});
        };
        return std::make_pair(x * v1.value() * v2.value(), grad);
      },
      "MissingVariableGradient");
  Tensor x = constant(1.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = f(x);
  auto msg = message_of<InvalidArgument>([&] { tape.gradient(y, x); });
  CHECK_THAT(msg, Catch::Contains("MissingVariableGradient") && Catch::Contains("returned 1") &&
                      Catch::Contains("expected 2") && Catch::Contains("'v2'"));
}

TEST_CASE("the custom op is one entry: f's inner ops are not kept", "[custom_gradient]") {
  // Inside f, an op with no gradient at all: were it recorded, gradient() would throw.
  auto f = custom_gradient([](const Tensor& x) {
    Tensor y = exp(x) * 2.0;
    record_operation("OpWithoutGradientInsideCustom", {x}, {y});
    auto grad = [y](const Tensor& dy) { return dy * y; };
    return std::make_pair(y, grad);
  });
  Tensor x = random_tensor({64}, 3);
  GradientTape plain_tape;
  plain_tape.watch(x);
  Tensor plain = exp(x) * 2.0;
  // A tape with one entry that keeps no tensor: what the custom op's tape may hold, give or
  // take its closure's few dozen bytes; one kept 64-element tensor is 512 bytes more.
  GradientTape one_entry_tape;
  one_entry_tape.watch(x);
  Tensor sum = x + x;
  CHECK(plain_tape.bytes_held() >= one_entry_tape.bytes_held() + 2 * 512);
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = f(x);
    CHECK(tape.bytes_held() < one_entry_tape.bytes_held() + 512);
    require_close(tape.gradient(y, x), {64}, values(y));
  }
}

TEST_CASE("a gradient function made of tapegrad ops is differentiable", "[custom_gradient]") {
  Tensor x = constant(2.0);
  GradientTape outer;
  outer.watch(x);
  Tensor dy;
  {
    GradientTape inner;
    inner.watch(x);
    dy = inner.gradient(cube(x), x);
  }
  require_close(dy, {}, {12.0});
  require_close(outer.gradient(dy, x), {}, {12.0});  // 6x
  Fn f = [](const std::vector<Tensor>& a) { return cube(a[0]); };
  require_gradient_matches(f, {random_tensor({4}, 5)});
  require_second_order_matches(f, {random_tensor({4}, 6)});
}

TEST_CASE(
    "TF's nested pattern: a custom_gradient inside the gradient function defines the "
    "second order",
    "[custom_gradient]") {
  // y = x^3. The forward runs with the tapes paused, so without the inner custom_gradient
  // the first-order gradient 3x^2 would be a constant to the outer tape.
  int second_order_calls = 0;
  auto op = custom_gradient([&](const Tensor& x) {
    Tensor y = x * x * x;
    Tensor x_grad = 3.0 * x * x;
    auto first_order = [x, x_grad, &second_order_calls](const Tensor& dy) {
      auto first_order_custom = custom_gradient([&](const Tensor&) {
        auto second_order = [x, &second_order_calls](const Tensor& ddy) {
          ++second_order_calls;
          return ddy * 6.0 * x;
        };
        return std::make_pair(x_grad, second_order);
      });
      return dy * first_order_custom(x);
    };
    return std::make_pair(y, first_order);
  });
  Tensor x = constant(1.5);
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(op(x), x);
  }
  require_close(g, {}, {3.0 * 1.5 * 1.5});
  require_close(outer.gradient(g, x), {}, {6.0 * 1.5});
  CHECK(second_order_calls == 1);
}

TEST_CASE(
    "the gradient function and its captures are released once a non-persistent tape "
    "used them",
    "[custom_gradient]") {
  auto capture = std::make_shared<int>(7);
  std::weak_ptr<int> observed = capture;
  auto f = custom_gradient([capture](const Tensor& x) {
    auto grad = [capture](const Tensor& dy) { return dy * static_cast<double>(*capture); };
    return std::make_pair(x * 7.0, grad);
  });
  capture.reset();
  std::weak_ptr<int> held_by_f = observed;
  Tensor x = constant(1.0);
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = f(x);
    Tensor g = tape.gradient(y, x);
    require_close(g, {}, {7.0});
  }
  // Only f's own copy remains: the grad fn copy recorded on the tape is gone.
  CHECK(observed.use_count() == 1);

  // A clearer witness: a capture only the grad fn holds.
  auto only_in_grad = std::make_shared<int>(1);
  std::weak_ptr<int> grad_capture = only_in_grad;
  auto g_fn = custom_gradient([&only_in_grad](const Tensor& x) {
    auto grad = [held = std::move(only_in_grad)](const Tensor& dy) { return dy * 1.0; };
    return std::make_pair(x * 1.0, grad);
  });
  GradientTape tape;
  tape.watch(x);
  Tensor y = g_fn(x);
  CHECK_FALSE(grad_capture.expired());
  (void)tape.gradient(y, x);
  CHECK(grad_capture.expired());
}

TEST_CASE("a persistent tape keeps the gradient function until it is destroyed",
          "[custom_gradient]") {
  auto capture = std::make_shared<int>(1);
  std::weak_ptr<int> observed = capture;
  auto f = custom_gradient([&capture](const Tensor& x) {
    auto grad = [held = std::move(capture)](const Tensor& dy) { return dy * 2.0; };
    return std::make_pair(x * 2.0, grad);
  });
  Tensor x = constant(1.0);
  {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor y = f(x);
    require_close(tape.gradient(y, x), {}, {2.0});
    require_close(tape.gradient(y, x), {}, {2.0});
    CHECK_FALSE(observed.expired());
  }
  CHECK(observed.expired());
}

TEST_CASE("without an active tape nothing is recorded and the grad fn is dropped",
          "[custom_gradient]") {
  auto capture = std::make_shared<int>(1);
  std::weak_ptr<int> observed = capture;
  auto f = custom_gradient([&capture](const Tensor& x) {
    auto grad = [held = std::move(capture)](const Tensor& dy) { return dy; };
    return std::make_pair(x + 1.0, grad);
  });
  require_close(f(constant(1.0)), {}, {2.0});
  CHECK(observed.expired());
}

TEST_CASE("f may return its input unchanged", "[custom_gradient]") {
  auto twice_gradient = custom_gradient([](const Tensor& x) {
    auto grad = [](const Tensor& dy) { return dy * 2.0; };
    return std::make_pair(x, grad);
  });
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = twice_gradient(x);
  CHECK(y.id() != x.id());
  require_close(y, {2}, {1.0, 2.0});
  require_close(tape.gradient(y, x), {2}, {2.0, 2.0});
}

TEST_CASE("f returning a tensor made earlier on another thread gets a fresh output",
          "[custom_gradient][thread]") {
  // Ids come in per-thread blocks: w, made on a thread that starts after this thread took its
  // block, has a larger id than anything this thread has made, yet f did not create it.
  Tensor x = constant({1.0, 2.0});
  Tensor w;
  std::thread([&w] { w = constant({3.0, 4.0}); }).join();
  auto returns_w = custom_gradient([&w](const Tensor&) {
    auto grad = [](const Tensor& dy) { return dy * 5.0; };
    return std::make_pair(w, grad);
  });
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(w);
  Tensor y = returns_w(x);
  // w is still a watched source of its own: the custom op did not become its producer.
  Tensor z = w * 3.0;
  auto stopped = tape.stop_recording();
  CHECK(y.id() != w.id());
  CHECK(y.id() != x.id());
  require_close(y, {2}, {3.0, 4.0});
  require_close(tape.gradient(y, x), {2}, {5.0, 5.0});
  CHECK_FALSE(tape.gradient(z, x).defined());
  require_close(tape.gradient(z, w), {2}, {3.0, 3.0});
}

TEST_CASE("f's own tensors from a later id block stay its outputs", "[custom_gradient]") {
  // 70,000 tensors inside f cross at least one of this thread's id blocks (65,536 ids): the
  // output, made after the crossing, is still f's own and is returned as is, not wrapped in
  // an identity.
  std::uint64_t made = 0;
  auto many = custom_gradient([&made](const Tensor& x) {
    Tensor acc = x;
    for (int i = 0; i < 70000; ++i) acc = acc + 0.0;
    Tensor out = acc * 2.0;
    made = out.id();
    auto grad = [](const Tensor& dy) { return dy * 7.0; };
    return std::make_pair(out, grad);
  });
  Tensor x = constant({1.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = many(x);
  CHECK(y.id() == made);
  require_close(y, {1}, {2.0});
  require_close(tape.gradient(y, x), {1}, {7.0});
}

TEST_CASE("custom_gradient inside a larger computation, on two tapes", "[custom_gradient]") {
  Tensor x = constant({0.5, -1.0});
  GradientTape t1;
  GradientTape t2;
  t1.watch(x);
  t2.watch(x);
  Tensor y = reduce_sum(square(cube(x * 2.0)));  // sum((2x)^6) -> 6 * 2^6 x^5
  auto expected = std::vector<double>{6 * 64 * std::pow(0.5, 5), 6 * 64 * std::pow(-1.0, 5)};
  require_close(t1.gradient(y, x), {2}, expected, 1e-10);
  require_close(t2.gradient(y, x), {2}, expected, 1e-10);
}
