// tapegrad::function's fused loops: a run of elementwise ops replayed as one loop computes
// every element as the eager call does (bit for bit: the ops' eager kernels and their fused
// loops call one scalar function), whatever the block structure (one element, a broadcast
// scalar, several blocks and a tail, many intermediates alive), and its intermediates are
// never tensors (a replay's peak memory shows it).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "identical_support.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

void require_all_bitwise_equal(const std::vector<Tensor>& got,
                               const std::vector<Tensor>& expected) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) require_identical(got[i], expected[i]);
}

Tensor ramp(std::size_t n, DType dtype, double scale = 1.0) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * (std::sin(0.37 * static_cast<double>(i)) + 0.05);
  return cast(from_values(std::move(v), {n}), dtype);
}

// y = sin(y * c + b), `steps` times, and dy/dx: every op of the value and of the gradient
// (Mul, Add, Sin, Cos) has an elementwise rule.
std::vector<Tensor> sin_chain_value_and_gradient(const Tensor& x, const Tensor& c, const Tensor& b,
                                                 int steps) {
  GradientTape tape;
  tape.watch(x);
  Tensor y = x;
  for (int i = 0; i < steps; ++i) y = sin(add(multiply(y, c), b));
  return {y, tape.gradient(reduce_sum(y), x)};
}

// The peak of the tensors a call of f holds, in buffers of `buffer_bytes` (rounded up).
std::size_t peak_buffers(const Function& f, const std::vector<Tensor>& args,
                         std::size_t buffer_bytes) {
  const std::size_t before = memory_stats().bytes_in_use;
  reset_peak_memory();
  const std::vector<Tensor> results = f(args);
  const std::size_t peak = memory_stats().peak_bytes_in_use - before;
  return (peak + buffer_bytes - 1) / buffer_bytes;
}

}  // namespace

TEST_CASE(
    "function fused: the 1-element chain's value and gradient equal the eager ones bit "
    "for bit",
    "[function][fused]") {
  const Tensor c = scalar(0.5, DType::Float64);
  const Tensor b = from_values({0.1}, {1});
  const auto fn = [&](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch(args[0]);
    Tensor y = args[0];
    for (int i = 0; i < 100; ++i) y = tanh(add(multiply(y, c), b));
    Tensor z = sigmoid(relu(subtract(y, divide(y, c))));
    z = maximum(minimum(square(negative(z)), reciprocal(add(z, b))), sqrt(exp(log(add(z, b)))));
    return std::vector<Tensor>{z, tape.gradient(z, args[0])};
  };
  const Function f = function(fn);
  for (double x0 : {0.3, -1.7, 4.0}) {
    const std::vector<Tensor> args = {from_values({x0}, {1})};
    require_all_bitwise_equal(f(args), fn(args));
  }
  REQUIRE(f.trace_count() == 1);
}

TEST_CASE(
    "function fused: float32 and float64 runs over several blocks, a tail and broadcast "
    "scalars equal the eager call bit for bit",
    "[function][fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (std::size_t n : {std::size_t{7}, std::size_t{1024}, std::size_t{2500}}) {
      INFO("dtype " << dtype_name(dtype) << ", " << n << " elements");
      const Tensor c = cast(scalar(0.75, DType::Float64), dtype);  // rank 0, spread over the run
      const Tensor b = cast(from_values({0.2}, {1}), dtype);       // one element, spread too
      const auto fn = [&](const std::vector<Tensor>& args) {
        return sin_chain_value_and_gradient(args[0], c, b, 12);
      };
      const Function f = function(fn);
      const std::vector<Tensor> args = {ramp(n, dtype)};
      require_all_bitwise_equal(f(args), fn(args));
      const std::vector<Tensor> other = {ramp(n, dtype, -2.5)};
      require_all_bitwise_equal(f(other), fn(other));
    }
  }
}

TEST_CASE(
    "function fused: a run with hundreds of live intermediates (smaller blocks) equals "
    "the eager call",
    "[function][fused]") {
  // 150 steps keep 150 forward values alive for the backward: the loop's blocks shrink.
  const Tensor c = scalar(0.9, DType::Float64);
  const Tensor b = scalar(-0.05, DType::Float64);
  const auto fn = [&](const std::vector<Tensor>& args) {
    return sin_chain_value_and_gradient(args[0], c, b, 150);
  };
  const Function f = function(fn);
  const std::vector<Tensor> args = {ramp(3000, DType::Float64)};
  require_all_bitwise_equal(f(args), fn(args));
}

TEST_CASE(
    "function fused: NaN and infinities go through the fused loop as through the eager "
    "kernels",
    "[function][fused]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const auto fn = [](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    const Tensor& y = args[1];
    Tensor m = maximum(x, y);
    Tensor n = minimum(x, negative(y));
    return std::vector<Tensor>{relu(add(m, n)), divide(sqrt(m), reciprocal(n))};
  };
  const Function f = function(fn);
  const std::vector<Tensor> args = {from_values({nan, 1.0, -inf, 0.0, 2.0}, {5}),
                                    from_values({3.0, nan, 4.0, -0.0, inf}, {5})};
  require_all_bitwise_equal(f(args), fn(args));
}

TEST_CASE(
    "function fused: a run split by a Variable read and assignment, and by an op without "
    "an elementwise rule, keeps fn's order",
    "[function][fused]") {
  Variable v(from_values({1.0, 2.0, 3.0}, {3}));
  const Tensor w = from_values({0.5, -1.0, 2.0, 0.25, 1.5, -0.75}, {3, 2});
  const auto fn = [&](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    Tensor a = multiply(add(x, x), x);                       // a run of two
    v.assign_add(a);                                         // a step between runs
    Tensor r = multiply(sin(v.value()), add(a, x));          // reads the assigned value
    Tensor m = reshape(matmul(reshape(r, {1, 3}), w), {2});  // no elementwise rule
    Tensor s = cos(subtract(m, sqrt(square(m))));
    return std::vector<Tensor>{s, multiply(r, r)};
  };
  const Function f = function(fn);
  const Tensor x = from_values({0.5, -0.25, 1.5}, {3});
  const std::vector<Tensor> replayed = f({x});  // the trace: v becomes 1 + a
  const std::vector<Tensor> replayed_again = f({x});
  // Eager with v at each call's starting value.
  Variable eager_v(from_values({1.0, 2.0, 3.0}, {3}));
  const auto eager = [&](const Tensor& xe) {
    Tensor a = multiply(add(xe, xe), xe);
    eager_v.assign_add(a);
    Tensor r = multiply(sin(eager_v.value()), add(a, xe));
    Tensor m = reshape(matmul(reshape(r, {1, 3}), w), {2});
    return std::vector<Tensor>{cos(subtract(m, sqrt(square(m)))), multiply(r, r)};
  };
  const std::vector<Tensor> first = eager(x);
  const std::vector<Tensor> second = eager(x);
  require_all_bitwise_equal(replayed, first);
  require_all_bitwise_equal(replayed_again, second);
  require_identical(v.value(), eager_v.value());
}

TEST_CASE(
    "function fused: a fused replay holds only the tensors read after the run, and without "
    "optimize every intermediate is a tensor",
    "[function][fused]") {
  // 20 steps of 4,096 float64 elements (32 KiB a buffer): the backward reads the 20 cosines'
  // inputs, so the op-by-op replay holds about 20 buffers at its peak.
  const std::size_t n = 4096;
  const std::size_t buffer = n * sizeof(double);
  const Tensor c = scalar(0.8, DType::Float64);
  const Tensor b = scalar(0.3, DType::Float64);
  const auto fn = [&](const std::vector<Tensor>& args) {
    return sin_chain_value_and_gradient(args[0], c, b, 20);
  };
  const std::vector<Tensor> args = {ramp(n, DType::Float64)};
  const Function fused = function(fn);
  const Function unfused = function(fn, FunctionOptions{16, false});
  require_all_bitwise_equal(fused(args), unfused(args));  // both traced
  const std::size_t fused_peak = peak_buffers(fused, args, buffer);
  const std::size_t unfused_peak = peak_buffers(unfused, args, buffer);
  INFO("fused " << fused_peak << " buffers, unfused " << unfused_peak);
  // The value and the gradient, the reduce_sum's seed and broadcast, and its sum.
  REQUIRE(fused_peak <= 4);
  REQUIRE(unfused_peak >= 20);
}
