// tapegrad::function: traces per signature, replays that equal the eager call, Variables read
// and assigned at each call, and the cases that must run eagerly (observers, value reads,
// random draws, a Variable made in fn). Every op's replay rule is checked against its eager
// call in test_op_samples.cpp ("each op through function"), on every op's batch cases.
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "captured_stderr.hpp"
#include "identical_support.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// sum(x^2 + sin x) and its gradient 2x + cos x, with a tape inside.
std::vector<Tensor> value_and_gradient(const std::vector<Tensor>& args) {
  const Tensor& x = args[0];
  GradientTape tape;
  tape.watch(x);
  Tensor y = reduce_sum(add(multiply(x, x), sin(x)));
  return {y, tape.gradient(y, x)};
}

Tensor vector_of(std::vector<double> v) {
  const std::size_t n = v.size();
  return from_values(std::move(v), {n});
}

}  // namespace

TEST_CASE("function: a value and its gradient are traced once and replayed", "[function]") {
  int calls = 0;
  const Function f = function([&](const std::vector<Tensor>& args) {
    ++calls;
    return value_and_gradient(args);
  });
  for (int k = 0; k < 4; ++k) {
    const std::vector<double> x = {0.5 * k, -1.0 + k, 2.0, 0.25 - k};
    const std::vector<Tensor> got = f({vector_of(x)});
    REQUIRE(got.size() == 2);
    const std::vector<Tensor> eager = value_and_gradient({vector_of(x)});
    require_identical(got[0], eager[0]);
    require_identical(got[1], eager[1]);
    double sum = 0.0;
    for (double v : x) sum += v * v + std::sin(v);
    CHECK(got[0].item<double>() == Approx(sum).epsilon(1e-14));
    const auto g = values(got[1]);
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(g[i] == Approx(2 * x[i] + std::cos(x[i])).epsilon(1e-14));
    }
  }
  CHECK(calls == 1);
  CHECK(f.trace_count() == 1);
}

TEST_CASE("function: a new shape or dtype is a new trace, the least recently used is dropped",
          "[function]") {
  int calls = 0;
  FunctionOptions options;
  options.max_traces = 2;
  const Function f = function(
      [&](const std::vector<Tensor>& args) {
        ++calls;
        return std::vector<Tensor>{multiply(args[0], args[0])};
      },
      options);
  const Tensor a = vector_of({1, 2, 3});
  const Tensor b = vector_of({1, 2});
  const Tensor a32 = cast(a, DType::Float32);
  f({a});
  f({b});
  f({a});  // replayed: [3] float64 is now the most recently used
  CHECK(f.trace_count() == 2);
  CHECK(calls == 2);
  CapturedStderr captured;
  require_identical(f({a32})[0], multiply(a32, a32));  // a third signature drops [2]
  CHECK(f.trace_count() == 3);
  CHECK(captured.text().find("max_traces") != std::string::npos);
  f({a});  // still kept
  CHECK(f.trace_count() == 3);
  require_identical(f({b})[0], vector_of({1, 4}));  // traced again
  CHECK(f.trace_count() == 4);
  CHECK(calls == 4);
  // One warning per Function, not one per dropped trace.
  const std::string text = captured.text();
  CHECK(text.find("trace was dropped") == text.rfind("trace was dropped"));
}

TEST_CASE("function: one tensor passed twice and a captured tensor equal to an argument",
          "[function]") {
  const Function difference = function([](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{subtract(args[0], args[1])};
  });
  const Tensor x = vector_of({1, 2, 3});
  const Tensor y = vector_of({10, 20, 30});
  require_identical(difference({x, x})[0], vector_of({0, 0, 0}));
  require_identical(difference({x, y})[0], vector_of({-9, -18, -27}));  // another signature
  require_identical(difference({y, x})[0], vector_of({9, 18, 27}));     // replayed
  CHECK(difference.trace_count() == 2);

  // The trace sees a fresh handle for the argument: w stays the captured constant.
  const Tensor w = vector_of({2, 3, 4});
  const Function scaled = function(
      [&](const std::vector<Tensor>& args) { return std::vector<Tensor>{multiply(args[0], w)}; });
  require_identical(scaled({w})[0], vector_of({4, 9, 16}));
  require_identical(scaled({x})[0], vector_of({2, 6, 12}));
  // A result that is an argument is the new argument on a replay; a constant result stays.
  const Function passthrough = function([&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{args[0], w, Tensor()};
  });
  passthrough({x});
  const std::vector<Tensor> got = passthrough({y});
  require_identical(got[0], y);
  require_identical(got[1], w);
  CHECK_FALSE(got[2].defined());
}

TEST_CASE(
    "function: a read after assign_add or assign_sub replays the updated value, when the "
    "read before it is dropped",
    "[function]") {
  // The first read is only a temporary, so the Variable holds its value's only handle: an
  // update in place kept that tensor's id, the trace took the second read for the first, and
  // every replay returned the value from before the update.
  for (const bool optimize : {true, false}) {
    CAPTURE(optimize);
    Variable v(vector_of({1, 2}), true, "v");
    FunctionOptions options;
    options.optimize = optimize;
    const Function step = function(
        [&](const std::vector<Tensor>& args) {
          Tensor first = reduce_sum(v.value());
          v.assign_add(args[0]);
          Tensor second = reduce_sum(exp(v.peek()));
          v.assign_sub(args[1]);
          Tensor third = reduce_sum(v.value());
          return std::vector<Tensor>{first, second, third};
        },
        options);
    double a = 1, b = 2;  // v's elements, followed by hand
    for (int call = 0; call < 4; ++call) {
      CAPTURE(call);
      const double add = 0.5 + call, sub = 0.25 * call;
      const std::vector<Tensor> got = step({vector_of({add, -add}), vector_of({sub, sub})});
      CHECK(got[0].item<double>() == a + b);
      a += add;
      b -= add;
      CHECK(got[1].item<double>() == Approx(std::exp(a) + std::exp(b)).epsilon(1e-14));
      a -= sub;
      b -= sub;
      CHECK(got[2].item<double>() == a + b);
    }
    require_identical(v.value(), vector_of({a, b}));
    CHECK(step.trace_count() == 1);
  }
}

TEST_CASE("function: Variables are read afresh and assigned again at every call", "[function]") {
  Variable v(vector_of({1, 2}), true, "v");
  int calls = 0;
  // Reads v, adds x to it, and returns what it read before and after.
  const Function step = function([&](const std::vector<Tensor>& args) {
    ++calls;
    Tensor before = v.value();
    v.assign_add(args[0]);
    Tensor after = multiply(v.value(), scalar(10.0, DType::Float64));
    return std::vector<Tensor>{before, after};
  });
  const Tensor one = vector_of({1, 1});
  std::vector<Tensor> got = step({one});
  require_identical(got[0], vector_of({1, 2}));
  require_identical(got[1], vector_of({20, 30}));
  got = step({one});
  require_identical(got[0], vector_of({2, 3}));
  require_identical(got[1], vector_of({30, 40}));
  v.assign(vector_of({-5, 5}));  // from outside: the next replay reads it
  got = step({vector_of({0.5, 0.5})});
  require_identical(got[0], vector_of({-5, 5}));
  require_identical(got[1], vector_of({-45, 55}));
  require_identical(v.value(), vector_of({-4.5, 5.5}));
  CHECK(calls == 1);

  // assign and assign_sub, of a constant and of a traced value, and peek.
  Variable u(vector_of({0, 0}), true, "u");
  const Function set = function([&](const std::vector<Tensor>& args) {
    u.assign(args[0]);
    u.assign_sub(vector_of({1, 1}));
    return std::vector<Tensor>{u.peek()};
  });
  require_identical(set({vector_of({3, 4})})[0], vector_of({2, 3}));
  require_identical(set({vector_of({7, 9})})[0], vector_of({6, 8}));
  require_identical(u.value(), vector_of({6, 8}));
}

TEST_CASE("function: a training step with a tape and a hand-written update equals eager steps",
          "[function]") {
  // Least squares on a fixed batch: w <- w - 0.1 * d/dw mean((X w - y)^2).
  const Tensor features = from_values({1, 2, 0.5, -1, 3, 1}, {3, 2});
  const Tensor targets = from_values({1, -1, 2}, {3, 1});
  auto make_step = [&](Variable& w) {
    return [&features, &targets, &w](const std::vector<Tensor>& args) {
      GradientTape tape;
      Tensor loss = reduce_mean(square(subtract(matmul(features, w.value()), targets)));
      Tensor g = tape.gradient(loss, w);
      w.assign_sub(multiply(g, args[0]));
      return std::vector<Tensor>{loss};
    };
  };
  Variable traced_w(from_values({0.1, -0.2}, {2, 1}), true, "w");
  Variable eager_w(from_values({0.1, -0.2}, {2, 1}), true, "w");
  int calls = 0;
  const Function traced_step =
      function([&, step = make_step(traced_w)](const std::vector<Tensor>& args) {
        ++calls;
        return step(args);
      });
  auto eager_step = make_step(eager_w);
  const Tensor rate = scalar(0.1, DType::Float64);
  for (int k = 0; k < 6; ++k) {
    INFO("step " << k);
    require_identical(traced_step({rate})[0], eager_step({rate})[0]);
    require_identical(traced_w.value(), eager_w.value());
  }
  CHECK(traced_step.trace_count() == 1);
  CHECK(calls == 1);  // five replays
}

TEST_CASE("function: fn that reads values from C++ runs eagerly, with one warning", "[function]") {
  int calls = 0;
  const Function branchy = function([&](const std::vector<Tensor>& args) {
    ++calls;
    const bool positive = reduce_sum(args[0]).item<double>() > 0;
    return std::vector<Tensor>{positive ? exp(args[0]) : negative(args[0])};
  });
  CapturedStderr captured;
  require_identical(branchy({vector_of({1, 2})})[0], exp(vector_of({1, 2})));
  require_identical(branchy({vector_of({-1, -2})})[0], vector_of({1, 2}));
  require_identical(branchy({vector_of({3, -2})})[0], exp(vector_of({3, -2})));
  CHECK(calls == 3);
  const std::string text = captured.text();
  CHECK(text.find("Tensor::item()") != std::string::npos);
  CHECK(text.find("runs eagerly") != std::string::npos);
  CHECK(text.find("Tensor::item()") == text.rfind("Tensor::item()"));
}

TEST_CASE("function: random draws, a Variable made in fn and ops without a replay run eagerly",
          "[function]") {
  Generator generator(7);
  int calls = 0;
  const Function noisy = function([&](const std::vector<Tensor>& args) {
    ++calls;
    return std::vector<Tensor>{add(args[0], random_normal({2}, generator))};
  });
  CapturedStderr captured;
  const Tensor zero = vector_of({0, 0});
  const Tensor first = noisy({zero})[0];
  const Tensor second = noisy({zero})[0];
  CHECK(values(first) != values(second));  // new numbers at every call, as the eager fn
  CHECK(calls == 2);
  CHECK(captured.text().find("random_normal") != std::string::npos);

  const Function makes_variable = function([&](const std::vector<Tensor>& args) {
    ++calls;
    Variable local(zero);
    local.assign_add(args[0]);
    return std::vector<Tensor>{local.value()};
  });
  require_identical(makes_variable({vector_of({1, 2})})[0], vector_of({1, 2}));
  require_identical(makes_variable({vector_of({3, 4})})[0], vector_of({3, 4}));
  CHECK(calls == 4);
  CHECK(captured.text().find("a Variable constructed in fn") != std::string::npos);
}

TEST_CASE("function: under a tape, an accumulator, vectorized_map and another function",
          "[function]") {
  int calls = 0;
  const Function cube = function([&](const std::vector<Tensor>& args) {
    ++calls;
    return std::vector<Tensor>{multiply(args[0], multiply(args[0], args[0]))};
  });
  const Tensor x = vector_of({1, -2, 0.5});
  cube({x});  // traced
  cube({x});  // replayed
  CHECK(calls == 1);

  // Under a tape the traced signature is one op; its gradient, 3 x^2, is a Function of its
  // own, traced by running fn once more (test_function_under_tapes.cpp has the rest).
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(cube({x})[0]);
  require_identical(tape.gradient(y, x), vector_of({3, 12, 0.75}));
  CHECK(calls == 2);

  // Second order through two tapes.
  {
    GradientTape outer;
    outer.watch(x);
    Tensor dy;
    {
      GradientTape inner;
      inner.watch(x);
      dy = inner.gradient(reduce_sum(cube({x})[0]), x);
    }
    require_identical(outer.gradient(reduce_sum(dy), x), vector_of({6, -12, 3}));
  }

  // Forward mode: the tangent 3 x^2 v.
  {
    ForwardAccumulator accumulator(x, vector_of({1, 1, 2}));
    const Tensor out = cube({x})[0];
    require_identical(accumulator.jvp(out), vector_of({3, 12, 1.5}));
  }

  // vectorized_map traces cube's ops (rows of a [2, 3] batch).
  const Tensor batch = from_values({1, 2, 3, -1, -2, -3}, {2, 3});
  const std::vector<Tensor> mapped =
      vectorized_map([&](const std::vector<Tensor>& row) { return cube(row); }, {batch});
  require_identical(mapped[0], from_values({1, 8, 27, -1, -8, -27}, {2, 3}));

  // A function calling a function: the inner one runs eagerly inside the outer trace.
  const Function twice = function([&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{add(cube(args)[0], cube(args)[0])};
  });
  twice({x});
  require_identical(twice({vector_of({2, 1, -1})})[0], vector_of({16, 2, -2}));
}

TEST_CASE("function: custom gradients, forward mode, vectorized_map and Jacobians inside fn",
          "[function]") {
  // Each fn runs once (the trace); the other inputs are replays, equal to fn's eager result.
  auto check_replays = [](const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs) {
    int calls = 0;
    const Function f = function([&](const std::vector<Tensor>& args) {
      ++calls;
      return fn(args);
    });
    for (const Tensor& x : inputs) {
      const std::vector<Tensor> got = f({x});
      const std::vector<Tensor> expected = fn({x});
      REQUIRE(got.size() == expected.size());
      for (std::size_t k = 0; k < got.size(); ++k) require_identical(got[k], expected[k]);
    }
    CHECK(calls == 1);
  };
  const std::vector<Tensor> inputs = {vector_of({0.5, -1, 2}), vector_of({3, 0.25, -0.75}),
                                      vector_of({-2, 1.5, 0.1})};
  // A custom gradient (log(1 + e^x) with its stable gradient), through a tape inside fn.
  auto log1pexp = custom_gradient([](const Tensor& x) {
    Tensor e = exp(x);
    auto grad = [e](const Tensor& dy) {
      return multiply(dy, subtract(scalar(1.0, DType::Float64),
                                   reciprocal(add(scalar(1.0, DType::Float64), e))));
    };
    return std::make_pair(log1p(e), grad);
  });
  check_replays(
      [&](const std::vector<Tensor>& args) {
        GradientTape tape;
        tape.watch(args[0]);
        Tensor y = reduce_sum(log1pexp(args[0]));
        return std::vector<Tensor>{y, tape.gradient(y, args[0])};
      },
      inputs);
  // Forward mode: the tangent of sin(x) x along x.
  check_replays(
      [](const std::vector<Tensor>& args) {
        ForwardAccumulator accumulator(args[0], args[0]);
        Tensor y = multiply(sin(args[0]), args[0]);
        return std::vector<Tensor>{y, accumulator.jvp(y)};
      },
      inputs);
  // vectorized_map, jacobian and hessian inside fn.
  check_replays(
      [](const std::vector<Tensor>& args) {
        const Tensor rows = reshape(concat({args[0], square(args[0])}, 0), {2, 3});
        Tensor mapped =
            vectorized_map([](const Tensor& row) { return reduce_sum(exp(row)); }, rows);
        Tensor jac = jacobian([](const Tensor& x) { return multiply(sin(x), x); }, args[0]);
        Tensor hess =
            hessian([](const Tensor& x) { return reduce_sum(multiply(x, exp(x))); }, args[0]);
        return std::vector<Tensor>{mapped, jac, hess};
      },
      inputs);
}

TEST_CASE("function: a user primitive or a DetectAnomaly scope in fn runs it eagerly",
          "[function]") {
  int calls = 0;
  // A primitive with its own C++ kernel, as docs/extending.md writes one.
  const Function user_op = function([&](const std::vector<Tensor>& args) {
    ++calls;
    xt::xarray<double> negated = -args[0].array<double>();
    Tensor y(std::move(negated));
    record_operation("FunctionTestNegate", {args[0]}, {y});
    return std::vector<Tensor>{y};
  });
  CapturedStderr captured;
  require_identical(user_op({vector_of({1, 2})})[0], vector_of({-1, -2}));
  require_identical(user_op({vector_of({3, 4})})[0], vector_of({-3, -4}));
  CHECK(calls == 2);
  CHECK(captured.text().find("op 'FunctionTestNegate' has no replay rule") != std::string::npos);

  const Function checked = function([&](const std::vector<Tensor>& args) {
    ++calls;
    DetectAnomaly anomaly;
    return std::vector<Tensor>{log(args[0])};
  });
  checked({vector_of({1, 2})});
  CHECK_THROWS_AS(checked({vector_of({-1, 2})}), AnomalyError);  // NaN from log(-1), caught
  CHECK(calls == 4);
  CHECK(captured.text().find("DetectAnomaly") != std::string::npos);
}

TEST_CASE("function: optimize drops the ops no result needs", "[function][memory]") {
  const Tensor x = random_tensor({4096}, 3);
  auto make = [](bool optimize) {
    FunctionOptions options;
    options.optimize = optimize;
    return function(
        [](const std::vector<Tensor>& args) {
          for (int k = 0; k < 8; ++k) exp(add(args[0], scalar(double(k), DType::Float64)));  // dead
          return std::vector<Tensor>{sin(args[0])};
        },
        options);
  };
  const Function kept_all = make(false);
  const Function optimized = make(true);
  kept_all({x});
  optimized({x});
  auto buffers_taken = [&](const Function& f) {
    const MemoryStats before = memory_stats();
    const Tensor out = f({x})[0];
    require_identical(out, sin(x));
    const MemoryStats after = memory_stats();
    return (after.system_allocations - before.system_allocations) +
           (after.cache_hits - before.cache_hits);
  };
  // sin's result, and without optimisation 16 more (add and exp, 8 times).
  CHECK(buffers_taken(kept_all) >= buffers_taken(optimized) + 16);
}

TEST_CASE("function: what fn computes from constants alone is computed once, at the trace",
          "[function][memory]") {
  // exp(c) * 2 + 1 depends on the captured c only: the trace keeps its value, and a replay
  // runs the one op that reads the argument (its result is the only buffer it takes).
  const Tensor x = random_tensor({4096}, 7);
  const Tensor c = random_tensor({4096}, 8);
  int traces = 0;
  const Function f = function([&](const std::vector<Tensor>& args) {
    ++traces;
    const Tensor folded =
        add(multiply(exp(c), scalar(2.0, DType::Float64)), scalar(1.0, DType::Float64));
    return std::vector<Tensor>{add(args[0], folded)};
  });
  const Tensor expected =
      add(x, add(multiply(exp(c), scalar(2.0, DType::Float64)), scalar(1.0, DType::Float64)));
  require_identical(f({x})[0], expected);
  const MemoryStats before = memory_stats();
  const Tensor out = f({x})[0];
  const MemoryStats after = memory_stats();
  require_identical(out, expected);
  CHECK(traces == 1);
  CHECK((after.system_allocations - before.system_allocations) +
            (after.cache_hits - before.cache_hits) ==
        1);
  // A new argument: the folded value is reused, the argument read afresh.
  const Tensor y = random_tensor({4096}, 9);
  require_identical(f({y})[0], add(y, add(multiply(exp(c), scalar(2.0, DType::Float64)),
                                          scalar(1.0, DType::Float64))));
}

TEST_CASE("function: a replay holds no more intermediate buffers than the eager call",
          "[function][memory]") {
  // 40 ops on 1 MiB: the eager call holds about two buffers at a time, and so must a replay.
  const Tensor x = random_tensor({131072}, 5);
  const Function chain = function([](const std::vector<Tensor>& args) {
    Tensor y = args[0];
    for (int k = 0; k < 40; ++k) y = sin(y);
    return std::vector<Tensor>{y};
  });
  chain({x});
  const std::size_t buffer = 131072 * sizeof(double);
  reset_peak_memory();
  const std::size_t before = memory_stats().bytes_in_use;
  const Tensor out = chain({x})[0];
  const std::size_t peak = memory_stats().peak_bytes_in_use - before;
  Tensor eager = x;
  for (int k = 0; k < 40; ++k) eager = sin(eager);
  require_identical(out, eager);
  CHECK(peak <= 3 * buffer);
  // Steady state: ten more replays reuse the cache's buffers and obtain none from the system.
  const std::uint64_t from_system = memory_stats().system_allocations;
  for (int call = 0; call < 10; ++call) require_identical(chain({x})[0], eager);
  CHECK(memory_stats().system_allocations == from_system);
}

TEST_CASE("function: an op of a hundred inputs, constants among them, replays as eager",
          "[function]") {
  // concat reads 100 values once each, and a constant between them: every traced input is
  // moved into it (its last reader), past the 64 that one bit mask per op could mark.
  const Tensor x = random_tensor({100, 3}, 11);
  const Tensor c = random_tensor({1, 3}, 12);
  const auto body = [&](const Tensor& arg) {
    std::vector<Tensor> parts = split(arg, 100, 0);
    for (Tensor& part : parts) part = sin(part);
    parts.insert(parts.begin() + 50, c);
    return concat(parts, 0);
  };
  const Function f =
      function([&](const std::vector<Tensor>& args) { return std::vector<Tensor>{body(args[0])}; });
  const Tensor expected = body(x);
  CHECK(expected.shape() == Shape{101, 3});
  require_identical(f({x})[0], expected);  // the trace
  require_identical(f({x})[0], expected);  // a replay
  const Tensor y = random_tensor({100, 3}, 13);
  require_identical(f({y})[0], body(y));
  CHECK(f.trace_count() == 1);
}

TEST_CASE("function misuse: the error names function and the argument", "[function][misuse]") {
  const Function f = function([](const std::vector<Tensor>& args) { return args; });
  CHECK(message_of<InvalidArgument>([&] {
          f({vector_of({1}), Tensor()});
        }) == "function: argument 1 is undefined");
  Variable v(vector_of({1, 2}));
  const std::string handle = message_of<InvalidArgument>([&] { f({v.handle()}); });
  CHECK(handle.find("function: argument 0 is a variable handle (shape [2], dtype float64)") == 0);
  CHECK(message_of<InvalidArgument>([] { function(nullptr); }) == "function: fn is empty");
  FunctionOptions none;
  none.max_traces = 0;
  CHECK(message_of<InvalidArgument>([&] {
          function([](const std::vector<Tensor>& args) { return args; }, none);
        }).find("function: FunctionOptions::max_traces is 0") == 0);
  // An exception in fn while tracing keeps no trace.
  int calls = 0;
  const Function throws_once = function([&](const std::vector<Tensor>& args) {
    if (++calls == 1) throw InvalidArgument("first call");
    return std::vector<Tensor>{negative(args[0])};
  });
  CHECK(message_of<InvalidArgument>([&] { throws_once({vector_of({1})}); }) == "first call");
  CHECK(throws_once.trace_count() == 0);
  require_identical(throws_once({vector_of({1})})[0], vector_of({-1}));
  CHECK(throws_once.trace_count() == 1);
}

TEST_CASE("function: an optimizer's update inside fn is replayed on each call's gradients",
          "[function][optim]") {
  // The same least-squares steps with Adam (C++ on its own slots and step count) and SGD with
  // momentum: a Function of the step against eager steps, bit for bit.
  const Tensor features = from_values({1, 2, 0.5, -1, 3, 1}, {3, 2});
  const Tensor targets = from_values({1, -1, 2}, {3, 1});
  auto run = [&](Optimizer& optimizer, Variable& w) {
    return [&features, &targets, &optimizer, &w](const std::vector<Tensor>&) {
      GradientTape tape;
      Tensor loss = reduce_mean(square(subtract(matmul(features, w.value()), targets)));
      optimizer.apply_gradients({{tape.gradient(loss, w), w}});
      return std::vector<Tensor>{loss};
    };
  };
  Variable traced_w(from_values({0.1, -0.2}, {2, 1}), true, "w");
  Variable eager_w(from_values({0.1, -0.2}, {2, 1}), true, "w");
  Adam traced_adam(0.05), eager_adam(0.05);
  int calls = 0;
  const Function traced =
      function([&, step = run(traced_adam, traced_w)](const std::vector<Tensor>& args) {
        ++calls;
        return step(args);
      });
  auto eager = run(eager_adam, eager_w);
  for (int k = 0; k < 5; ++k) {
    INFO("step " << k);
    require_identical(traced({})[0], eager({})[0]);
    require_identical(traced_w.value(), eager_w.value());
  }
  CHECK(calls == 1);
  CHECK(traced_adam.iterations() == 5);
  require_identical(traced_adam.slot(traced_w, "m"), eager_adam.slot(eager_w, "m"));
  require_identical(traced_adam.slot(traced_w, "v"), eager_adam.slot(eager_w, "v"));

  Variable traced_u(from_values({0.3, 0.4}, {2, 1}), true, "u");
  Variable eager_u(from_values({0.3, 0.4}, {2, 1}), true, "u");
  SGD traced_sgd(0.02, 0.9), eager_sgd(0.02, 0.9);
  const Function traced_momentum = function(run(traced_sgd, traced_u));
  auto eager_momentum = run(eager_sgd, eager_u);
  for (int k = 0; k < 5; ++k) {
    require_identical(traced_momentum({})[0], eager_momentum({})[0]);
    require_identical(traced_u.value(), eager_u.value());
  }
}
