// tapegrad::function's fused loops: a run of elementwise ops replayed as one loop computes
// every element as the eager call does (bit for bit: the ops' eager kernels and their fused
// loops call one scalar function), whatever the block structure (one element, a broadcast
// scalar, several blocks and a tail, many intermediates alive), and its intermediates are
// never tensors (a replay's peak memory shows it).
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
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

// One step of a small LSTM-like recurrence on a [1, n] hidden state: its product with w
// ([2, n]) plus bias split into an input gate and a change, the cell decayed by `decay` and
// updated, then hidden = tanh(cell) * half (the scalars are tensors: a literal would be a new
// constant per op, which a trace keeps).
void recurrence_step(Tensor& hidden, Tensor& cell, const Tensor& w, const Tensor& bias,
                     const Tensor& decay, const Tensor& half) {
  const std::vector<Tensor> gates = split(hidden * w + bias, 2, 0);
  cell = cell * decay + sigmoid(gates[0]) * tanh(gates[1]);
  hidden = tanh(cell) * half;
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

using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// function(fn) called on each argument list in turn (the trace, then replays): every call bit
// for bit as fn's eager call, and one trace.
void require_replays_equal_eager(const Body& fn, const std::vector<std::vector<Tensor>>& calls) {
  const Function f = function(fn);
  for (const std::vector<Tensor>& args : calls) require_all_bitwise_equal(f(args), fn(args));
  REQUIRE(f.trace_count() == 1);
}

// The peak bytes of the tensors a call of f holds.
std::size_t peak_bytes(const Function& f, const std::vector<Tensor>& args) {
  const std::size_t before = memory_stats().bytes_in_use;
  reset_peak_memory();
  const std::vector<Tensor> results = f(args);
  return memory_stats().peak_bytes_in_use - before;
}

// The same in buffers of `buffer_bytes` (rounded up).
std::size_t peak_buffers(const Function& f, const std::vector<Tensor>& args,
                         std::size_t buffer_bytes) {
  return (peak_bytes(f, args) + buffer_bytes - 1) / buffer_bytes;
}

// fn traced fused and traced op by op (FunctionOptions::optimize off): both calls equal fn's
// eager one bit for bit; then the peak buffers each call holds.
struct PeakBuffers {
  std::size_t fused;
  std::size_t unfused;
};
PeakBuffers fused_and_unfused_peaks(const Body& fn, const std::vector<Tensor>& args,
                                    std::size_t buffer_bytes) {
  const Function fused = function(fn);
  const Function unfused = function(fn, FunctionOptions{16, false});
  const std::vector<Tensor> eager = fn(args);
  require_all_bitwise_equal(fused(args), eager);
  require_all_bitwise_equal(unfused(args), eager);
  return {peak_buffers(fused, args, buffer_bytes), peak_buffers(unfused, args, buffer_bytes)};
}

// The InvalidArgument a call of f with args throws (the test fails when it throws none).
std::string invalid_argument_of(const Function& f, const std::vector<Tensor>& args) {
  try {
    (void)f(args);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("the call threw no InvalidArgument");
  return {};
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
  require_replays_equal_eager(
      fn, {{from_values({0.3}, {1})}, {from_values({-1.7}, {1})}, {from_values({4.0}, {1})}});
}

TEST_CASE(
    "function fused: loops of one block (up to 1,024 elements) and of two, with a repeated row, "
    "a scalar and many live intermediates, equal the eager call bit for bit",
    "[function][fused]") {
  // A loop of at most one block places each operand once (an argument's row repeated over the
  // rows, an argument scalar over every element); from 1,025 elements, or with more scratch
  // than a thread keeps, it runs block by block. Both must give the eager bits, gradients
  // included. (A captured constant is not read repeated: the plan broadcasts it once.)
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (std::size_t rows : {1, 3, 128, 129, 4, 300}) {
      const std::size_t columns = rows == 4 || rows == 300 ? 1 : 8;  // 4 and 300: [n, 1] columns
      INFO(dtype_name(dtype) << " [" << rows << ", " << columns << "]");
      const auto fn = [](const std::vector<Tensor>& args) {
        const Tensor& row = args[1];    // [1, columns]
        const Tensor& shift = args[2];  // []
        GradientTape tape;
        tape.watch(args);
        // Twelve products kept alive to the end: twelve scratch blocks at once.
        std::vector<Tensor> live;
        Tensor y = args[0];
        for (int i = 0; i < 12; ++i) {
          y = tanh(y * row + shift);
          live.push_back(y * shift);
        }
        Tensor sum = live[0];
        for (std::size_t i = 1; i < live.size(); ++i) sum = sum + live[i] * row;
        std::vector<Tensor> results{sum};
        for (const Tensor& g : tape.gradient(reduce_sum(sum), args)) results.push_back(g);
        return results;
      };
      const auto call = [&](double scale) {
        return std::vector<Tensor>{
            reshape(ramp(rows * columns, dtype, scale),
                    {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(columns)}),
            reshape(ramp(columns, dtype, 0.5 * scale), {1, static_cast<std::int64_t>(columns)}),
            scalar(0.3 * scale, dtype)};
      };
      require_replays_equal_eager(fn, {call(1.0), call(-0.8), call(1.3)});
    }
  }
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
    "function fused: exp, log, tanh and sigmoid below and above 32 elements fuse with the "
    "eager kernels' bits",
    "[function][fused]") {
  // At most 32 elements the eager ops use the C library, above it the SIMD kernels
  // (kernels/vector_math.hpp), whose last bits differ on some elements: a fused loop must take
  // the eager call's choice, for the run's element count, on every block and on the tail.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (std::size_t n : {std::size_t{32}, std::size_t{33}, std::size_t{1500}, std::size_t{4099}}) {
      INFO("dtype " << dtype_name(dtype) << ", " << n << " elements");
      const Tensor c = cast(scalar(0.7, DType::Float64), dtype);
      const auto fn = [&](const std::vector<Tensor>& args) {
        GradientTape tape;
        tape.watch(args[0]);
        Tensor y = args[0];
        for (int i = 0; i < 6; ++i) y = tanh(log(add(exp(multiply(y, c)), c)) - sigmoid(y));
        return std::vector<Tensor>{y, tape.gradient(reduce_sum(y), args[0])};
      };
      const Function f = function(fn);
      for (double start : {-3.0, 0.25}) {
        const std::vector<Tensor> args = {ramp(n, dtype, start)};
        require_all_bitwise_equal(f(args), fn(args));
      }
    }
  }
  // Fused above 32 elements: the six steps' 36 intermediates stay in scratch blocks.
  const std::size_t n = 4096;
  const std::size_t buffer = n * sizeof(double);
  const Tensor c = scalar(0.7, DType::Float64);
  const auto fn = [&](const std::vector<Tensor>& args) {
    Tensor y = args[0];
    for (int i = 0; i < 6; ++i) y = tanh(log(add(exp(multiply(y, c)), c)) - sigmoid(y));
    return std::vector<Tensor>{y};
  };
  const PeakBuffers peaks = fused_and_unfused_peaks(fn, {ramp(n, DType::Float64)}, buffer);
  INFO("fused " << peaks.fused << " buffers, unfused " << peaks.unfused);
  REQUIRE(peaks.fused <= 1);
  REQUIRE(peaks.unfused >= 2);
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
  const PeakBuffers peaks = fused_and_unfused_peaks(fn, {ramp(n, DType::Float64)}, buffer);
  INFO("fused " << peaks.fused << " buffers, unfused " << peaks.unfused);
  // The value and the gradient, the reduce_sum's seed and broadcast, and its sum.
  REQUIRE(peaks.fused <= 4);
  REQUIRE(peaks.unfused >= 20);
}

TEST_CASE(
    "function fused: inputs that broadcast to the run's shape (a column, a row, a middle "
    "axis, a scalar) go through the fused loop as through the eager kernels",
    "[function][fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // m x n x 3 outputs: 12 x 7 x 3 fits one block, 40 x 50 x 3 takes six and a tail; the
    // [n, 1] column repeats every 3n elements (less than a block for n = 7, more for n = 500).
    for (const auto& [m, n] : {std::pair<std::size_t, std::size_t>{12, 7}, {40, 50}, {3, 500}}) {
      INFO("dtype " << dtype_name(dtype) << ", " << m << " x " << n << " x 3");
      const auto fn = [&](const std::vector<Tensor>& args) {
        const Tensor& g = args[0];       // [m, n, 3]
        const Tensor& column = args[1];  // [n, 1]
        const Tensor& row = args[2];     // [3]
        const Tensor& middle = args[3];  // [m, 1, 3]
        const Tensor one = scalar(1.0, dtype);
        Tensor y = multiply(column, g) + multiply(subtract(one, column), sin(g));
        y = negative(add(multiply(y, row), divide(middle, add(square(y), one))));
        return std::vector<Tensor>{y, maximum(y, column)};
      };
      const Function f = function(fn);
      const std::vector<Tensor> args = {
          reshape(ramp(m * n * 3, dtype),
                  {static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), 3}),
          reshape(ramp(n, dtype, 0.7), {static_cast<std::int64_t>(n), 1}),
          from_values({0.5, -2.0, 1.25}, {3}, dtype),
          reshape(ramp(m * 3, dtype, -1.3), {static_cast<std::int64_t>(m), 1, 3})};
      require_all_bitwise_equal(f(args), fn(args));
      std::vector<Tensor> other = args;
      other[1] = reshape(ramp(n, dtype, -0.4), {static_cast<std::int64_t>(n), 1});
      require_all_bitwise_equal(f(other), fn(other));
      REQUIRE(f.trace_count() == 1);
    }
  }
}

TEST_CASE(
    "function fused: a run with broadcast columns keeps no intermediate as a tensor, and "
    "its gradient equals the eager and the analytic one",
    "[function][fused]") {
  // ht's barycentric combination in forward mode over [8, 512, 3] float64 (96 KiB a buffer),
  // u0 and u1 [512, 1] columns: y = -(u0 a + u1 b + (1 - u0 - u1) c).
  const std::size_t m = 8, n = 512;
  const std::size_t buffer = m * n * 3 * sizeof(double);
  const Shape column_shape = {n, 1};
  const Shape tangent_shape = {m, n, 3};
  const auto combination = [](const std::vector<Tensor>& args) {
    const Tensor &u0 = args[0], &u1 = args[1], &a = args[2], &b = args[3], &c = args[4];
    const Tensor one = scalar(1.0, DType::Float64);
    return negative(multiply(u0, a) + multiply(u1, b) +
                    multiply(subtract(subtract(one, u0), u1), c));
  };
  const auto value = [&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{combination(args)};
  };
  const auto value_and_gradient = [&](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch(args[2]);
    const Tensor y = combination(args);
    return std::vector<Tensor>{y, tape.gradient(reduce_sum(square(y)), args[2])};
  };
  const std::vector<Tensor> args = {
      reshape(ramp(n, DType::Float64, 0.5), {static_cast<std::int64_t>(n), 1}),
      reshape(ramp(n, DType::Float64, 0.3), {static_cast<std::int64_t>(n), 1}),
      reshape(ramp(m * n * 3, DType::Float64), {8, 512, 3}),
      reshape(ramp(m * n * 3, DType::Float64, -1.5), {8, 512, 3}),
      reshape(ramp(m * n * 3, DType::Float64, 2.0), {8, 512, 3})};
  REQUIRE(args[0].shape() == column_shape);
  REQUIRE(args[2].shape() == tangent_shape);

  const PeakBuffers peaks = fused_and_unfused_peaks(value, args, buffer);
  INFO("fused " << peaks.fused << " buffers, unfused " << peaks.unfused);
  // Fused: the result and the three columns' patterns (3n + a block each, 60 KiB in all). Op
  // by op: two products and their sum alive at once.
  REQUIRE(peaks.fused <= 2);
  REQUIRE(peaks.unfused >= 3);

  const Function with_gradient = function(value_and_gradient);
  const std::vector<Tensor> results = with_gradient(args);
  require_all_bitwise_equal(results, value_and_gradient(args));
  // d/da sum(y^2) = 2 y * -u0, element by element.
  const auto& y = results[0].array<double>();
  const auto& dy = results[1].array<double>();
  const auto& u0 = args[0].array<double>();
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t k = 0; k < 3; ++k)
        REQUIRE(dy(i, j, k) == Approx(-2.0 * y(i, j, k) * u0(j, 0)).epsilon(1e-13));
}

TEST_CASE(
    "function fused: forward mode's dense tangents fuse, a run ends before an op that reads "
    "its value, and the replay equals the eager Jacobian",
    "[function][fused]") {
  // jacobian_forward carries 256 tangents: each op after u = W t runs on the [256] primal and on
  // the dense [256, 256] tangents. Each shape's elementwise ops make runs; the reduce_sum reads
  // a run's value, so that run ends before it.
  const std::size_t n = 256;
  const std::size_t buffer = n * n * sizeof(double);
  std::vector<double> w_values(n * n);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < n; ++j)
      w_values[k * n + j] =
          0.05 * std::sin(0.3 * static_cast<double>(k) + 0.7 * static_cast<double>(j)) +
          (k == j ? 1.0 : 0.0);
  const Tensor w = from_values(w_values, {n, n});
  const auto mixed = [&](const Tensor& t) {
    return reshape(matmul(w, reshape(t, {static_cast<std::int64_t>(n), 1})), {-1});
  };
  const auto f = [&](const Tensor& t) {
    const Tensor u = mixed(t);
    const Tensor s = sin(u);
    const Tensor scale = reduce_sum(square(s));  // not elementwise
    return multiply(add(multiply(s, u), square(u)), scale) - exp(negative(u));
  };
  const auto fn = [&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{jacobian_forward(f, args[0])};
  };
  const std::vector<Tensor> args = {ramp(n, DType::Float64, 0.8)};
  const Function fused = function(fn);
  const Function unfused = function(fn, FunctionOptions{16, false});
  const std::vector<Tensor> eager = fn(args);
  require_all_bitwise_equal(fused(args), eager);
  require_all_bitwise_equal(unfused(args), eager);
  const std::vector<Tensor> other = {ramp(n, DType::Float64, -0.3)};
  require_all_bitwise_equal(fused(other), fn(other));

  // J = (dy/du) W, dy_i/du_k = [i = k] ((u_i cos u_i + s_i + 2 u_i) c + exp(-u_i))
  //                            + (s_i u_i + u_i^2) 2 s_k cos u_k, with c = sum s^2.
  const auto& t = args[0].array<double>();
  const auto& jacobian = eager[0].array<double>();
  std::vector<double> u(n, 0.0);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < n; ++j) u[k] += w_values[k * n + j] * t(j);
  double c = 0.0;
  for (std::size_t k = 0; k < n; ++k) c += std::sin(u[k]) * std::sin(u[k]);
  for (std::size_t i : {std::size_t{0}, std::size_t{17}, n - 1}) {
    const double s = std::sin(u[i]);
    const double inner = s * u[i] + u[i] * u[i];
    for (std::size_t j : {std::size_t{0}, std::size_t{17}, std::size_t{200}}) {
      double expected =
          ((u[i] * std::cos(u[i]) + s + 2.0 * u[i]) * c + std::exp(-u[i])) * w_values[i * n + j];
      for (std::size_t k = 0; k < n; ++k)
        expected += inner * 2.0 * std::sin(u[k]) * std::cos(u[k]) * w_values[k * n + j];
      REQUIRE(jacobian(i, j) == Approx(expected).epsilon(1e-10));
    }
  }

  // Without the reduction, the tangents' products and sums are one loop: only its result
  // becomes a tensor, where op by op several [256, 256] intermediates are alive at once.
  const auto g = [&](const Tensor& t) {
    const Tensor v = mixed(t);
    return multiply(sin(v), cos(v)) + multiply(exp(v), square(v));
  };
  const auto gn = [&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{jacobian_forward(g, a[0])};
  };
  const PeakBuffers peaks = fused_and_unfused_peaks(gn, args, buffer);
  INFO("fused " << peaks.fused << " buffers, unfused " << peaks.unfused);
  REQUIRE(peaks.fused < peaks.unfused);
}

TEST_CASE(
    "function fused: a run goes on past ops that read none of its values (gathers between its "
    "products), which then run first",
    "[function][fused]") {
  // z = -(sin(big * a) * b) over [32, 500, 3], a and b [500, 3] rows gathered from a table
  // between the products: the four elementwise ops are one loop, computed after both gathers;
  // split at the second gather they would be two, with sin(big * a) a tensor between them.
  const std::size_t m = 32, n = 500;
  const std::size_t buffer = m * n * 3 * sizeof(double);
  std::vector<std::int64_t> rows_a(n), rows_b(n);
  for (std::size_t i = 0; i < n; ++i) {
    rows_a[i] = static_cast<std::int64_t>((7 * i) % 64);
    rows_b[i] = static_cast<std::int64_t>((13 * i + 5) % 64);
  }
  const auto indices = [](const std::vector<std::int64_t>& rows) {
    return cast(from_values(std::vector<double>(rows.begin(), rows.end()), {rows.size()}),
                DType::Int64);
  };
  const Tensor index_a = indices(rows_a), index_b = indices(rows_b);
  const auto fn = [&](const std::vector<Tensor>& args) {
    const Tensor& table = args[0];  // [64, 3]
    const Tensor& big = args[1];    // [m, n, 3]
    const Tensor y = sin(multiply(big, gather(table, index_a)));
    const Tensor z = negative(multiply(y, gather(table, index_b)));
    return std::vector<Tensor>{z, reduce_sum(z)};  // the reduction reads the run's result
  };
  const std::vector<Tensor> args = {
      reshape(ramp(64 * 3, DType::Float64, 1.3), {64, 3}),
      reshape(ramp(m * n * 3, DType::Float64),
              {static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), 3})};
  const Function fused = function(fn);
  const Function unfused = function(fn, FunctionOptions{16, false});
  const std::vector<Tensor> eager = fn(args);
  require_all_bitwise_equal(fused(args), eager);
  require_all_bitwise_equal(unfused(args), eager);
  const auto& z = eager[0].array<double>();
  const auto& table = args[0].array<double>();
  const auto& big = args[1].array<double>();
  for (std::size_t i : {std::size_t{0}, std::size_t{9}, m - 1})
    for (std::size_t j : {std::size_t{0}, std::size_t{123}, n - 1})
      for (std::size_t k = 0; k < 3; ++k) {
        const double expected =
            -std::sin(big(i, j, k) * table(static_cast<std::size_t>(rows_a[j]), k)) *
            table(static_cast<std::size_t>(rows_b[j]), k);
        REQUIRE(z(i, j, k) == expected);
      }

  const std::size_t fused_peak = peak_bytes(fused, args);
  const std::size_t unfused_peak = peak_bytes(unfused, args);
  INFO("fused " << fused_peak << " bytes, unfused " << unfused_peak << ", a buffer " << buffer);
  // One loop: z and the two small gathers. Op by op: two [m, n, 3] tensors at once.
  REQUIRE(fused_peak < buffer + buffer / 2);
  REQUIRE(unfused_peak >= 2 * buffer);
}

TEST_CASE(
    "function fused: a gather only a run reads is read from its params inside the loop, "
    "equal to eager, and its indices are still checked",
    "[function][fused]") {
  // An [m, n, 3] run reading two gathers along axis 1 of an [m, 64, 3] table (outer m, rows of
  // 3) and an [n] run reading a gather along axis 0 of a [64] vector (outer 1, rows of 1),
  // int64 and int32 indices, over several blocks.
  const std::size_t m = 8, n = 700;
  const std::size_t buffer = m * n * 3 * sizeof(double);
  const auto fn = [](const std::vector<Tensor>& args) {
    const Tensor& table = args[0];    // [m, 64, 3]
    const Tensor& rows_a = args[1];   // [n] int64
    const Tensor& rows_b = args[2];   // [n] int32
    const Tensor& weights = args[3];  // [n, 1]
    const Tensor& vector = args[4];   // [64]
    // A table computed by a run of its own: that run must hand it over as a tensor.
    const Tensor scaled = multiply(sin(table), scalar(2.0, DType::Float64));
    const Tensor a = gather(scaled, rows_a, 1);  // [m, n, 3]
    const Tensor b = gather(table, rows_b, 1);
    const Tensor y =
        negative(multiply(weights, a) + multiply(scalar(1.0, DType::Float64) - weights, sin(b)));
    const Tensor v = gather(vector, rows_b, 0);  // [n]
    return std::vector<Tensor>{y, exp(v) * v};
  };
  const auto as_index = [](std::size_t count, std::size_t step, std::size_t shift, DType dtype) {
    std::vector<double> rows(count);
    for (std::size_t i = 0; i < count; ++i) rows[i] = static_cast<double>((step * i + shift) % 64);
    return cast(from_values(rows, {count}), dtype);
  };
  std::vector<Tensor> args = {
      reshape(ramp(m * 64 * 3, DType::Float64), {static_cast<std::int64_t>(m), 64, 3}),
      as_index(n, 7, 0, DType::Int64), as_index(n, 13, 5, DType::Int32),
      reshape(ramp(n, DType::Float64, 0.6), {static_cast<std::int64_t>(n), 1}),
      ramp(64, DType::Float64, -0.9)};
  const Function fused = function(fn);
  const Function unfused = function(fn, FunctionOptions{16, false});
  require_all_bitwise_equal(fused(args), fn(args));
  require_all_bitwise_equal(unfused(args), fn(args));
  std::vector<Tensor> other = args;
  other[1] = as_index(n, 11, 3, DType::Int64);
  require_all_bitwise_equal(fused(other), fn(other));
  REQUIRE(fused.trace_count() == 1);

  // y[i, j, k] = -(w_j 2 sin t[i, a_j, k] + (1 - w_j) sin t[i, b_j, k]), element by element.
  const std::vector<Tensor> results = fused(args);
  const auto& y = results[0].array<double>();
  const auto& t = args[0].array<double>();
  const auto& w = args[3].array<double>();
  for (std::size_t i : {std::size_t{0}, m - 1})
    for (std::size_t j : {std::size_t{0}, std::size_t{321}, n - 1})
      for (std::size_t k = 0; k < 3; ++k) {
        const std::size_t a = (7 * j) % 64, b = (13 * j + 5) % 64;
        REQUIRE(y(i, j, k) ==
                -(w(j, 0) * (std::sin(t(i, a, k)) * 2.0) + (1.0 - w(j, 0)) * std::sin(t(i, b, k))));
      }

  // The gathered [m, n, 3] values are never tensors: the result is the only buffer of that
  // size; op by op, the two gathers and the products are.
  const std::size_t fused_peak = peak_bytes(fused, args);
  const std::size_t unfused_peak = peak_bytes(unfused, args);
  INFO("fused " << fused_peak << " bytes, unfused " << unfused_peak << ", a buffer " << buffer);
  REQUIRE(fused_peak < buffer + buffer / 2);
  REQUIRE(unfused_peak >= 3 * buffer);

  // An index out of range on a later call: the replay's check throws as the eager gather does.
  std::vector<Tensor> bad = args;
  bad[2] = cast(from_values(std::vector<double>(n, 64.0), {n}), DType::Int32);
  REQUIRE_THROWS_AS(fn(bad), InvalidArgument);
  const std::string message = invalid_argument_of(fused, bad);
  INFO(message);
  CHECK(message.find("gather") != std::string::npos);
  CHECK(message.find("index 64") != std::string::npos);
  CHECK(message.find("out of range [0, 64)") != std::string::npos);
  CHECK(message.find("int32") != std::string::npos);
}

TEST_CASE(
    "function fused: a gather of one element per index, read inside the loop, checks each "
    "index as it reads it",
    "[function][fused]") {
  // sin(table[ids]) * 2 + 1: the gathered values are read from the table block by block, and
  // each index is checked there (no pass of its own); a bad index on a later call throws the
  // eager gather's error, naming its position.
  constexpr std::size_t n = 5000;
  const auto fn = [](const std::vector<Tensor>& args) {
    const Tensor picked = gather(args[0], args[1]);
    return std::vector<Tensor>{
        add(multiply(sin(picked), scalar(2.0, DType::Float64)), scalar(1.0, DType::Float64))};
  };
  std::vector<double> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = static_cast<double>((31 * i + 7) % 64);
  const std::vector<Tensor> args = {ramp(64, DType::Float64),
                                    cast(from_values(rows, {n}), DType::Int64)};
  const Function fused = function(fn);
  require_all_bitwise_equal(fused(args), fn(args));
  require_all_bitwise_equal(fused(args), fn(args));
  const std::vector<Tensor> results = fused(args);
  const auto& y = results[0].array<double>();
  const auto& table = args[0].array<double>();
  for (std::size_t i : {std::size_t{0}, std::size_t{2500}, n - 1})
    REQUIRE(y(i) == std::sin(table((31 * i + 7) % 64)) * 2.0 + 1.0);
  // The gathered values are never a tensor: the result is the only buffer of n elements.
  REQUIRE(peak_bytes(fused, args) < n * sizeof(double) * 3 / 2);

  for (const double bad_value : {-1.0, 64.0}) {
    std::vector<double> bad_rows = rows;
    bad_rows[3217] = bad_value;
    const std::vector<Tensor> bad = {args[0], cast(from_values(bad_rows, {n}), DType::Int64)};
    REQUIRE_THROWS_AS(fn(bad), InvalidArgument);
    const std::string message = invalid_argument_of(fused, bad);
    INFO(message);
    CHECK(message.find("gather") != std::string::npos);
    CHECK(message.find("index " + std::to_string(static_cast<int>(bad_value))) !=
          std::string::npos);
    CHECK(message.find("indices[3217]") != std::string::npos);
    CHECK(message.find("out of range [0, 64)") != std::string::npos);
  }
  REQUIRE(fused.trace_count() == 1);
}

TEST_CASE(
    "function fused: a gather before a Variable assignment throws before it, as eager does, "
    "when a run after the assignment reads it",
    "[function][fused]") {
  // exp(x) gathered, then v += x, then a run reading the gather: a gather absorbed into the run
  // checked its indices only when the run's loop ran, after the assignment, so a bad index
  // left v incremented (and every later call off by that step).
  const auto values = [](std::initializer_list<double> list) {
    return from_values(std::vector<double>(list), {list.size()});
  };
  for (const bool optimize : {true, false}) {
    CAPTURE(optimize);
    Variable v(values({1, 2, 3}), true, "v");
    const Function f = function(
        [&](const std::vector<Tensor>& args) {
          const Tensor picked = gather(exp(args[0]), args[1]);
          v.assign_add(args[0]);
          return std::vector<Tensor>{sin(add(picked, scalar(1.0, DType::Float64)))};
        },
        FunctionOptions{16, optimize});
    const Tensor x = values({0.5, 1.0, 2.0});
    const std::vector<Tensor> got = f({x, cast(values({2, 0}), DType::Int64)});
    const auto& y = got[0].array<double>();
    CHECK(y(0) == std::sin(std::exp(2.0) + 1.0));
    CHECK(y(1) == std::sin(std::exp(0.5) + 1.0));
    require_identical(v.peek(), values({1.5, 3, 5}));
    const std::string message = invalid_argument_of(f, {x, cast(values({0, 7}), DType::Int64)});
    INFO(message);
    CHECK(message.find("gather") != std::string::npos);
    CHECK(message.find("index 7") != std::string::npos);
    CHECK(message.find("out of range [0, 3)") != std::string::npos);
    require_identical(v.peek(), values({1.5, 3, 5}));  // the assignment did not happen
    f({x, cast(values({1, 1}), DType::Int64)});
    require_identical(v.peek(), values({2, 4, 7}));
    CHECK(f.trace_count() == 1);
  }
}

TEST_CASE(
    "function fused: ops interleaved in two dtypes of one shape and in two shapes of one size "
    "make runs of their own, and replay as eager",
    "[function][fused]") {
  // float64 [64], float32 [64] and float64 [8, 8]: equal element counts and equal shapes of
  // different dtypes, so that a run taking an op of the wrong signature would read or write
  // elements of the wrong type or layout.
  const auto fn = [](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    const Tensor x32 = cast(x, DType::Float32);
    const Tensor square = reshape(x, {8, 8});
    Tensor a = multiply(x, x);
    Tensor b = multiply(x32, x32);
    Tensor c = multiply(square, square);
    a = add(a, x);
    b = add(b, x32);
    c = add(c, square);
    a = sin(a);
    b = cos(b);
    c = tanh(c);
    return std::vector<Tensor>{a, b, c, add(add(a, cast(b, DType::Float64)), reshape(c, {64}))};
  };
  const std::vector<Tensor> args = {ramp(64, DType::Float64, 1.5)};
  const std::vector<Tensor> eager = fn(args);
  CHECK(eager[1].dtype() == DType::Float32);
  CHECK(eager[2].shape() == Shape{8, 8});
  const Function fused = function(fn);
  const Function unfused = function(fn, FunctionOptions{16, false});
  for (int call = 0; call < 3; ++call) {  // the trace, then replays
    require_all_bitwise_equal(fused(args), eager);
    require_all_bitwise_equal(unfused(args), eager);
  }
  const std::vector<Tensor> other = {ramp(64, DType::Float64, -0.7)};
  require_all_bitwise_equal(fused(other), fn(other));
  CHECK(fused.trace_count() == 1);
}

TEST_CASE(
    "function fused: loops read the parts of a split in place, bit for bit, and a split whose "
    "parts are not all theirs still runs",
    "[function][fused]") {
  // An LSTM-like recursion: the gates of every step computed at once, split into steps (one
  // run of the input's elements each) and each step's [2, 6] pre-activations split in two.
  constexpr std::int64_t kSteps = 40, kBits = 6;
  const Tensor w = ramp(kBits, DType::Float64, 0.8);
  const Tensor b = ramp(2 * kBits, DType::Float64, 0.3);
  const Tensor recurrent = reshape(b, {2, kBits});
  const auto fn = [&](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch(args[0]);
    const std::vector<Tensor> forget =
        split(sigmoid(args[0] * w + 0.25), static_cast<int>(kSteps), 0);
    Tensor hidden = slice(args[0], {0, 0}, {1, kBits});
    Tensor cell = hidden * 0.5;
    for (std::int64_t t = 0; t < kSteps; ++t) {
      const std::vector<Tensor> gates = split(hidden * recurrent + 0.1, 2, 0);
      cell = cell * forget[static_cast<std::size_t>(t)] + sigmoid(gates[0]) * tanh(gates[1]);
      hidden = tanh(cell) * forget[static_cast<std::size_t>(t)];
    }
    // A split along the later axis of a [2, 6] tensor: its parts are not runs of its elements.
    const std::vector<Tensor> columns = split(concat({hidden, cell}, 0) * 2.0, 3, 1);
    // A split one of whose parts is also a result: it runs, and the loops read its views.
    const std::vector<Tensor> halves = split(cell * cell + hidden, 2, 1);
    const Tensor total = reduce_sum(hidden) + reduce_sum(columns[1] * columns[2] - columns[0]) +
                         reduce_sum(halves[1] * 3.0 + 1.0);
    return std::vector<Tensor>{total, halves[0], tape.gradient(total, args[0])};
  };
  std::vector<std::vector<Tensor>> calls;
  for (double scale : {1.0, -0.6, 2.5}) {
    calls.push_back({reshape(ramp(static_cast<std::size_t>(kSteps * kBits), DType::Float64, scale),
                             {kSteps, kBits})});
  }
  require_replays_equal_eager(fn, calls);
}

TEST_CASE(
    "function fused: a replay writes a small loop output of the last call again only when "
    "nobody holds it",
    "[function][fused]") {
  // The loop's output is not a result itself: a reshape's view of it is, and the views the
  // caller keeps hold it. A replay must then give the loop a new tensor, or the first call's
  // results would change under the caller.
  const auto fn = [](const std::vector<Tensor>& args) {
    const Tensor mixed = (args[0] * 2.0 + 1.0) * args[0];
    return std::vector<Tensor>{reshape(mixed, {4, 4}), reduce_sum(mixed)};
  };
  const Function f = function(fn);
  const auto args_of = [](double scale) {
    return std::vector<Tensor>{ramp(16, DType::Float64, scale)};
  };
  // Four calls (the trace, then three replays) whose results are all held at once.
  const std::vector<double> scales{1.0, -0.5, 3.0, 0.25};
  std::vector<std::vector<Tensor>> held;
  for (double scale : scales) held.push_back(f(args_of(scale)));
  for (std::size_t k = 0; k < scales.size(); ++k) {
    require_all_bitwise_equal(held[k], fn(args_of(scales[k])));
  }
  // Once the views are gone, replays that keep nothing stay right too.
  for (double scale : {0.7, -1.1, 2.2})
    require_all_bitwise_equal(f(args_of(scale)), fn(args_of(scale)));
}

TEST_CASE(
    "function fused: a recursion's small values live in the Function's arena, reused once "
    "dead, and replay as eager",
    "[function][fused]") {
  // 1,000 steps of a [2, 6] loop split in two and a [1, 6] loop: every value only loops read,
  // so no tensor is made for any. Dead values give their bytes back: the Function keeps a few
  // cache lines between calls, not one buffer per value (3,000 of them, about 300 KB). The
  // constants are tensors of their own, made once (a literal would be a new constant, which
  // the trace keeps, per op).
  constexpr int kSteps = 1000;
  constexpr std::int64_t kBits = 6;
  const Tensor w = reshape(ramp(2 * kBits, DType::Float64, 0.9), {2, kBits});
  const Tensor tenth = scalar(0.1, DType::Float64);
  const Tensor decay = scalar(0.9, DType::Float64);
  const Tensor half = scalar(0.5, DType::Float64);
  const auto fn = [&](const std::vector<Tensor>& args) {
    Tensor hidden = args[0];
    Tensor cell = args[0] * half;
    for (int t = 0; t < kSteps; ++t) recurrence_step(hidden, cell, w, tenth, decay, half);
    return std::vector<Tensor>{reduce_sum(hidden), cell};
  };
  const auto args_of = [](double scale) {
    return std::vector<Tensor>{reshape(ramp(kBits, DType::Float64, scale), {1, kBits})};
  };
  const std::size_t before = memory_stats().bytes_in_use;
  std::size_t held = 0;
  {
    const Function f = function(fn);
    for (double scale : {1.0, -0.8, 2.0, 0.3}) {
      require_all_bitwise_equal(f(args_of(scale)), fn(args_of(scale)));
    }
    held = memory_stats().bytes_in_use - before;
    CHECK(f.trace_count() == 1);
  }
  INFO("bytes the Function holds between calls: " << held);
  CHECK(held < 16 * 1024);
}

TEST_CASE(
    "function fused: loops write a concat's parts into its output, which loops read, bit for "
    "bit, and concats whose parts are not runs, or are read twice, still run",
    "[function][fused]") {
  constexpr std::int64_t kBits = 5;
  const Tensor w = reshape(ramp(3 * kBits, DType::Float64, 0.7), {3, kBits});
  const Tensor columns = reshape(ramp(6, DType::Float64, 1.3), {3, 2});
  const auto fn = [&](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];  // [1, 5]
    Tensor total = reduce_sum(x * 0.0);
    Tensor y = x;
    for (int t = 0; t < 20; ++t) {
      // Three parts of unequal origins, one run each of the [3, 5] output, which a loop reads.
      const Tensor joined = concat({sin(y) * 2.0, cos(y) + 1.0, y * y}, 0);
      const Tensor mixed = tanh(joined * w + 0.2);
      // Along the later axis of a [3, k] output: the parts are not runs; the concat runs.
      const Tensor side = concat({mixed * 0.5, columns * reduce_sum(y * y)}, 1);
      total = total + reduce_sum(side);
      // A part also read by a loop of its own: the concat runs.
      const Tensor shared = exp(y * -0.1);
      const Tensor second_row = slice(mixed, {1, 0}, {1, kBits});
      y = reduce_sum(concat({shared, shared * second_row}, 0) * 0.3, {0}, true) + shared;
    }
    return std::vector<Tensor>{total, y};
  };
  std::vector<std::vector<Tensor>> calls;
  for (double scale : {1.0, -0.4, 1.7}) {
    calls.push_back({reshape(ramp(kBits, DType::Float64, scale), {1, kBits})});
  }
  require_replays_equal_eager(fn, calls);
}

TEST_CASE(
    "function fused: a recurrence's step outputs, joined for the ops above, are written into "
    "the join's place and copied out once, gradients included, bit for bit",
    "[function][fused]") {
  // Each step's hidden state is read by the next step's loop and by the join of all steps,
  // which a matmul (an op) and a loop read: the loops write the parts into the join's place in
  // the arena and the join copies them out as one tensor. The gradient of the recurrent
  // weights reads the hidden states again after the join's last reader. A join one of whose parts
  // an op also reads (`scaled`, read by a matmul) runs as an op, and so does the join of the
  // gradients in the backward pass when its parts are not loop outputs.
  constexpr int kSteps = 40;
  constexpr std::int64_t kBits = 5;
  const Tensor w = reshape(ramp(2 * kBits, DType::Float64, 0.8), {2, kBits});
  const Tensor v = reshape(ramp(3 * kBits, DType::Float64, 0.3), {kBits, 3});
  const Tensor tenth = scalar(0.1, DType::Float64);
  const Tensor decay = scalar(0.9, DType::Float64);
  const Tensor half = scalar(0.5, DType::Float64);
  const Tensor square = reshape(ramp(kBits * kBits, DType::Float64, -0.2), {kBits, kBits});
  const auto fn = [&](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch({args[0], w});
    Tensor hidden = args[0];  // [1, 5]
    Tensor cell = args[0] * half;
    std::vector<Tensor> hiddens;
    for (int t = 0; t < kSteps; ++t) {
      recurrence_step(hidden, cell, w, tenth, decay, half);
      hiddens.push_back(hidden);
    }
    const Tensor layer = concat(hiddens, 0);  // [40, 5]
    const Tensor loss = reduce_sum(matmul(layer, v)) + reduce_sum(tanh(layer * 0.3));
    const Tensor scaled = hiddens[3] * 2.0;
    const Tensor other = concat({scaled, hiddens[5] + 1.0}, 0);
    const Tensor probe = matmul(scaled, v) + reduce_sum(matmul(other, v));
    // A join with a part an op makes (the copy writes it over its place, where a loop then
    // reads it) among parts loops make.
    const Tensor mixed =
        concat({matmul(hiddens[2], square), hiddens[7] * 2.0, hiddens[8] + 1.0}, 0);
    const Tensor mixed_read = reduce_sum(tanh(mixed * 0.3)) + reduce_sum(matmul(mixed, v));
    // The gradient of w reads every hidden state again, after the join is dead: the join's
    // bytes in the arena, which hold them, stay taken until then.
    const std::vector<Tensor> gradients = tape.gradient(loss, {args[0], w});
    return std::vector<Tensor>{loss, gradients[0], gradients[1], probe, mixed_read};
  };
  std::vector<std::vector<Tensor>> calls;
  for (double scale : {1.0, -0.6, 2.1}) {
    calls.push_back({reshape(ramp(kBits, DType::Float64, scale), {1, kBits})});
  }
  require_replays_equal_eager(fn, calls);
  // float32 too, with another shape of step.
  const auto fn32 = [](const std::vector<Tensor>& args) {
    Tensor hidden = args[0];  // [2, 3]
    std::vector<Tensor> hiddens;
    for (int t = 0; t < 12; ++t) {
      hidden = tanh(hidden * 0.7 + 0.2);
      hiddens.push_back(hidden);
    }
    const Tensor joined = concat(hiddens, 0);  // [24, 3]
    return std::vector<Tensor>{reduce_sum(matmul(joined, transpose(joined))), joined * 3.0};
  };
  std::vector<std::vector<Tensor>> calls32;
  for (double scale : {0.5, -1.5}) {
    calls32.push_back({reshape(ramp(6, DType::Float32, scale), {2, 3})});
  }
  require_replays_equal_eager(fn32, calls32);
}

TEST_CASE(
    "function fused: a loop writes its output over an input it reads last when nothing else "
    "holds that input, never over an argument, a captured tensor or a result",
    "[function][fused][memory]") {
  constexpr std::size_t kN = 100000;  // 800 KB: not recycled, not in the arena
  const Tensor captured = ramp(kN, DType::Float64, 0.5);
  const auto fn = [&](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    const Tensor a = x * 2.0 + captured;  // reads the argument and the captured tensor last
    const Tensor total = reduce_sum(a);   // an op between: a's loop ends here
    // One loop: c, then a * 0.5 + x, which reads a after c is written: that output, not c,
    // is written over a.
    const Tensor c = tanh(a * 3.0 - total) + 1.0;
    return std::vector<Tensor>{c, total, a * 0.5 + x};
  };
  std::vector<std::vector<Tensor>> calls;
  for (double scale : {1.0, -0.3, 2.0}) calls.push_back({ramp(kN, DType::Float64, scale)});
  const std::vector<std::string> argument_bytes = {element_bytes(calls[0][0]),
                                                   element_bytes(calls[1][0])};
  const std::string captured_bytes = element_bytes(captured);
  const Function f = function(fn);
  for (const std::vector<Tensor>& args : calls) require_all_bitwise_equal(f(args), fn(args));
  // An argument that one loop reads, once and last: the caller holds it, so it is not written.
  const auto only_reader = [](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{tanh(args[0] * 3.0) + 1.0};
  };
  const Function g = function(only_reader);
  for (const std::vector<Tensor>& args : calls) {
    require_all_bitwise_equal(g(args), only_reader(args));
  }
  REQUIRE(element_bytes(calls[0][0]) == argument_bytes[0]);
  REQUIRE(element_bytes(calls[1][0]) == argument_bytes[1]);
  REQUIRE(element_bytes(captured) == captured_bytes);
  // a, then c and the third result over a: two buffers at the peak (three without the reuse).
  const double peak = static_cast<double>(peak_bytes(f, calls[0])) / (kN * sizeof(double));
  INFO("peak " << peak << " buffers");
  REQUIRE(peak < 2.5);
  // A result the caller holds is not written by the next call.
  const std::vector<Tensor> first = f(calls[0]);
  const std::string first_bytes = element_bytes(first[0]);
  const std::vector<Tensor> second = f(calls[1]);
  REQUIRE(element_bytes(first[0]) == first_bytes);
  require_all_bitwise_equal(second, fn(calls[1]));
}

TEST_CASE(
    "function fused: a loop that reads a written-in-place join expanded over a broadcast, or "
    "gathers from it, reads its tensor, bit for bit",
    "[function][fused]") {
  // The parts (one-element steps of a recurrence) are written into the join's place; an op
  // reads the join too, so the join is copied out as a tensor. A loop that broadcasts the
  // [8, 1] join along its last axis, or gathers rows from it, needs that tensor's shape: given
  // the join's place in the arena instead, the replay read through no tensor and crashed.
  const Tensor row = reshape(ramp(4, DType::Float64, 0.8), {1, 4});
  const Tensor indices = from_values({5, 0, 2, 7}, {4}, DType::Int64);
  const auto fn = [&](const std::vector<Tensor>& args) {
    Tensor hidden = args[0];  // [1, 1]
    std::vector<Tensor> steps;
    for (int t = 0; t < 8; ++t) {
      hidden = tanh(hidden * 0.9 + 0.1);
      steps.push_back(hidden);
    }
    const Tensor join = concat(steps, 0);  // [8, 1]
    const Tensor by_op = matmul(join, row);
    const Tensor expanded = tanh(join * row + 0.5);             // [8, 1] against [1, 4]
    const Tensor gathered = gather(join, indices) * 3.0 + 1.0;  // rows 5, 0, 2, 7
    return std::vector<Tensor>{by_op, expanded, gathered, reduce_sum(join * 2.0)};
  };
  std::vector<std::vector<Tensor>> calls;
  for (double start : {0.3, -1.2, 2.5}) calls.push_back({fill({1, 1}, start)});
  require_replays_equal_eager(fn, calls);
  // The expanded read against values computed here: tanh(h_t * row_j + 0.5).
  const std::vector<Tensor> results = fn(calls[0]);
  const std::vector<double> row_values = values(row);
  double h = 0.3;
  std::vector<double> expected;
  for (int t = 0; t < 8; ++t) {
    h = std::tanh(h * 0.9 + 0.1);
    for (double r : row_values) expected.push_back(std::tanh(h * r + 0.5));
  }
  require_close(results[1], {8, 4}, expected, 1e-15);
}

TEST_CASE(
    "function fused: a sum over leading axes of a few rows is a loop of its own, bit for bit "
    "(rows of -0.0 included), and other sums run as ops",
    "[function][fused]") {
  // The eager kernel adds the rows in order from +0.0, so a sum of rows that are all -0.0 is
  // +0.0: a loop that started from the first row would give -0.0.
  const auto fn = [](const std::vector<Tensor>& args) {
    const Tensor& x = args[0];  // [9, 4], positive
    std::vector<Tensor> results;
    for (std::int64_t rows : {1, 2, 3, 5, 8, 9}) {
      const Tensor block = sin(slice(x, {0, 0}, {rows, 4})) * 1.5 + 2.0;
      const Tensor sum = reduce_sum(block, {0}, true);   // a loop up to 8 rows
      results.push_back(sum * 0.5 + 1.0);                // read by a loop
      results.push_back(reduce_sum(block * -0.0, {0}));  // every row -0.0
    }
    const Tensor cube = reshape(x, {3, 3, 4}) * 3.0 - 1.0;
    results.push_back(reduce_sum(cube, {0, 1}));  // leading axes: 9 rows, an op
    results.push_back(reduce_sum(reshape(x, {2, 3, 6}) + 1.0, {0, 1}, true));  // 6 rows: a loop
    results.push_back(reduce_sum(cube, {1}));                       // not leading: the op
    results.push_back(reduce_sum(slice(x, {0, 0}, {2, 1}) - 3.0));  // into one element: the op
    return results;
  };
  std::vector<std::vector<Tensor>> calls;
  for (double scale : {1.0, 0.4, 2.2}) {
    calls.push_back({reshape(abs(ramp(36, DType::Float64, scale)) + 0.01, {9, 4})});
  }
  require_replays_equal_eager(fn, calls);
  const std::vector<Tensor> zeros = fn(calls[0]);
  REQUIRE(std::signbit(values(zeros[3])[0]) == false);  // +0.0
  REQUIRE(values(zeros[3])[0] == 0.0);
}
