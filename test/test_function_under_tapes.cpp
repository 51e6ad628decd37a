// tapegrad::function under tapes and accumulators: a traced signature is one recorded op
// ("Function") whose gradient is itself a Function (fn's forward and backward, traced once and
// replayed), so gradients, Variables' gradients, higher orders, forward mode, jacobian,
// hessian and vectorized_map of a Function equal the eager results; what cannot be one op
// (assignments, random draws, first calls) runs fn's own ops on the tapes.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "identical_support.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor vector_of(std::vector<double> v) {
  const std::size_t n = v.size();
  return from_values(std::move(v), {n});
}

// f(x) = sin(x) x^2 elementwise; f' = cos(x) x^2 + 2 x sin(x).
Tensor sin_x_squared(const Tensor& x) { return multiply(sin(x), multiply(x, x)); }

}  // namespace

TEST_CASE(
    "function under a tape: one op whose gradient is a replayed Function, equal to the "
    "eager gradient",
    "[function][tapes]") {
  int calls = 0;
  const Function f = function([&](const std::vector<Tensor>& args) {
    ++calls;
    return std::vector<Tensor>{sin_x_squared(args[0])};
  });
  const Tensor x = vector_of({0.5, -1.25, 2.0});
  f({x});  // traced, nothing observing
  REQUIRE(calls == 1);

  const auto eager_gradient = [&](const Tensor& at) {
    GradientTape tape;
    tape.watch(at);
    return tape.gradient(reduce_sum(sin_x_squared(at)), at);
  };
  for (int round = 0; round < 3; ++round) {
    const Tensor at = add(x, scalar(0.1 * round, DType::Float64));
    GradientTape tape;
    tape.watch(at);
    const Tensor y = f({at})[0];
    require_identical(y, sin_x_squared(at));
    const Tensor g = tape.gradient(reduce_sum(y), at);
    require_identical(g, eager_gradient(at));
    const auto xs = values(at), gs = values(g);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CHECK(gs[i] == Approx(std::cos(xs[i]) * xs[i] * xs[i] + 2 * xs[i] * std::sin(xs[i])));
    }
  }
  // The forward replayed every time; fn ran once more, to trace the gradient Function.
  CHECK(calls == 2);
}

TEST_CASE("function under a tape: the gradients of the Variables fn reads, as eager",
          "[function][tapes]") {
  Variable w(vector_of({0.5, -2.0, 1.5}), true, "w");
  Variable frozen(vector_of({1.0, 2.0, 3.0}), true, "frozen");  // read with peek(): no gradient
  int calls = 0;
  const auto body = [&](const std::vector<Tensor>& args) {
    ++calls;
    Tensor y = reduce_sum(multiply(tanh(multiply(w.value(), args[0])), frozen.peek()));
    return std::vector<Tensor>{y};
  };
  const Function f = function(body);
  const Tensor x = vector_of({0.3, 0.7, -1.1});
  f({x});
  for (int round = 0; round < 2; ++round) {
    GradientTape tape;  // watches the trainable variables fn reads through value()
    tape.watch(x);
    const Tensor y = f({x})[0];
    const std::vector<Tensor> g = tape.gradient(y, {x, w.handle(), frozen.handle()});
    GradientTape eager_tape;
    eager_tape.watch(x);
    const Tensor eager_y = body({x})[0];
    const std::vector<Tensor> eager_g =
        eager_tape.gradient(eager_y, {x, w.handle(), frozen.handle()});
    require_identical(y, eager_y);
    require_identical(g[0], eager_g[0]);
    require_identical(g[1], eager_g[1]);
    REQUIRE_FALSE(g[2].defined());  // peek() is no watched read, as in the eager call
    REQUIRE_FALSE(eager_g[2].defined());
    w.assign(multiply(w.value(), scalar(0.5, DType::Float64)));  // read afresh next round
  }
  // The trace, the gradient Function's trace and the eager reference calls: no more.
  CHECK(calls == 2 + 2);
}

TEST_CASE(
    "function under a tape: an untrainable Variable a tape watches gets its gradient, as "
    "eager, and one no tape watches gets none",
    "[function][tapes]") {
  // The one op's inputs were the trainable Variables fn reads: the watched untrainable one got
  // no gradient (undefined, no warning) where the eager call gives x.
  Variable fixed(vector_of({2.0, -1.0}), false, "fixed");
  Variable w(vector_of({0.5, 3.0}), true, "w");
  const auto body = [&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{
        reduce_sum(multiply(multiply(fixed.value(), args[0]), multiply(w.value(), w.value())))};
  };
  const Function f = function(body);
  const Tensor x = vector_of({5.0, 7.0});
  f({x});  // traced
  for (const bool watch_fixed : {true, false}) {
    CAPTURE(watch_fixed);
    GradientTape outer;  // watches only w (trainable, read)
    GradientTape tape;
    if (watch_fixed) tape.watch(fixed);
    const Tensor y = f({x})[0];
    const std::vector<Tensor> g = tape.gradient(y, {fixed.handle(), w.handle()});
    // d/dfixed = x w², d/dw = 2 fixed x w
    if (watch_fixed) {
      require_identical(g[0], vector_of({5.0 * 0.25, 7.0 * 9.0}));
    } else {
      REQUIRE_FALSE(g[0].defined());
    }
    require_identical(g[1], vector_of({2 * 2.0 * 5.0 * 0.5, 2 * -1.0 * 7.0 * 3.0}));
    // The outer tape records the one op for w; fixed, when an input, then gets its gradient
    // there too, as an unwatched argument of a recorded op does (eagerly fixed's read is an
    // op of its own, which only the watching tape records).
    const std::vector<Tensor> outer_g = outer.gradient(y, {fixed.handle(), w.handle()});
    if (watch_fixed) {
      require_identical(outer_g[0], g[0]);
    } else {
      REQUIRE_FALSE(outer_g[0].defined());
    }
    require_identical(outer_g[1], g[1]);
  }
}

TEST_CASE(
    "function under nested tapes and an accumulator: second derivatives and tangents "
    "equal the eager ones",
    "[function][tapes]") {
  int calls = 0;
  const Function f = function([&](const std::vector<Tensor>& args) {
    ++calls;
    return std::vector<Tensor>{sin_x_squared(args[0])};
  });
  const Tensor x = vector_of({0.5, -1.25, 2.0});
  f({x});
  const auto second = [&](const std::function<Tensor(const Tensor&)>& g) {
    GradientTape outer;
    outer.watch(x);
    Tensor dy;
    {
      GradientTape inner;
      inner.watch(x);
      dy = inner.gradient(reduce_sum(g(x)), x);
    }
    return outer.gradient(reduce_sum(dy), x);
  };
  const Tensor eager_second = second(sin_x_squared);
  for (int round = 0; round < 2; ++round) {
    require_identical(second([&](const Tensor& at) { return f({at})[0]; }), eager_second);
  }
  // f'' = (2 - x^2) sin x + 4 x cos x.
  const auto xs = values(x), d2 = values(eager_second);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    CHECK(d2[i] == Approx((2 - xs[i] * xs[i]) * std::sin(xs[i]) + 4 * xs[i] * std::cos(xs[i])));
  }
  const int calls_after_two_rounds = calls;
  require_identical(second([&](const Tensor& at) { return f({at})[0]; }), eager_second);
  CHECK(calls == calls_after_two_rounds);  // a third round only replays

  const Tensor v = vector_of({1.0, -0.5, 2.0});
  ForwardAccumulator accumulator(x, v);
  const Tensor y = f({x})[0];
  ForwardAccumulator eager_accumulator(x, v);
  const Tensor eager_y = sin_x_squared(x);
  REQUIRE(values(accumulator.jvp(y)) ==
          std::vector<double>(values(eager_accumulator.jvp(eager_y))));
}

TEST_CASE("function: jacobian, hessian and vectorized_map of a Function equal the eager ones",
          "[function][tapes]") {
  const Function f = function([](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    return std::vector<Tensor>{multiply(exp(multiply(x, scalar(0.5, DType::Float64))), x)};
  });
  const auto eager = [](const Tensor& x) {
    return multiply(exp(multiply(x, scalar(0.5, DType::Float64))), x);
  };
  const Tensor x = vector_of({0.2, -0.4, 1.3});
  f({x});
  const auto through_f = [&](const Tensor& at) { return f({at})[0]; };
  require_identical(jacobian(through_f, x), jacobian(eager, x));
  require_identical(hessian([&](const Tensor& at) { return reduce_sum(through_f(at)); }, x),
                    hessian([&](const Tensor& at) { return reduce_sum(eager(at)); }, x));
  const Tensor batch = from_values({1, 2, 3, -1, -2, -3}, {2, 3});
  require_identical(
      vectorized_map([&](const std::vector<Tensor>& row) { return f(row); }, {batch})[0],
      eager(batch));
}

TEST_CASE(
    "function under a tape: first calls, assignments and random draws run fn's own ops "
    "on the tape",
    "[function][tapes]") {
  int calls = 0;
  Variable counter(scalar(0.0, DType::Float64), false, "counter");
  const Function assigns = function([&](const std::vector<Tensor>& args) {
    ++calls;
    counter.assign_add(scalar(1.0, DType::Float64));
    return std::vector<Tensor>{multiply(args[0], args[0])};
  });
  const Tensor x = vector_of({1.5, -2.0});
  for (int round = 0; round < 3; ++round) {
    GradientTape tape;
    tape.watch(x);
    // The first call traces while the tape records; the trace assigns, so fn runs each time.
    const Tensor g = tape.gradient(reduce_sum(assigns({x})[0]), x);
    require_identical(g, vector_of({3.0, -4.0}));
  }
  CHECK(calls == 3);
  CHECK(counter.value().item<double>() == 3.0);  // once per call, as eager

  // A random draw: each call draws anew (never a replay of the traced numbers).
  Generator generator(7);
  const Function noisy = function([&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{
        multiply(args[0], random_uniform({2}, generator, 1.0, 2.0, DType::Float64))};
  });
  Generator reference(7);
  for (int round = 0; round < 2; ++round) {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(noisy({x})[0]), x);
    require_identical(g, random_uniform({2}, reference, 1.0, 2.0, DType::Float64));
  }
}

TEST_CASE(
    "function under a tape: signatures of different argument counts each get their own "
    "gradient",
    "[function][tapes]") {
  // fn sums its arguments' squares: called with one and with two arguments, the gradient
  // Functions must split (arguments, output gradients) differently.
  const Function f = function([](const std::vector<Tensor>& args) {
    Tensor total = reduce_sum(square(args[0]));
    for (std::size_t i = 1; i < args.size(); ++i) total = add(total, reduce_sum(square(args[i])));
    return std::vector<Tensor>{total};
  });
  const Tensor x = vector_of({1.0, -2.0});
  const Tensor y = vector_of({0.5, 3.0, -1.0});
  f({x});
  f({x, y});  // both traced
  for (int round = 0; round < 2; ++round) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(y);
    const Tensor one = f({x})[0];
    const Tensor two = f({x, y})[0];
    const std::vector<Tensor> g =
        tape.gradient(add(one, multiply(scalar(10.0, DType::Float64), two)), {x, y});
    require_identical(g[0], vector_of({22.0, -44.0}));        // 2x + 10 (2x)
    require_identical(g[1], vector_of({10.0, 60.0, -20.0}));  // 10 (2y)
  }
}
