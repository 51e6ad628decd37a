// minimize_lbfgs: Rosenbrock to 1e-8, a convex quadratic in about n iterations, the fixed
// step, several variables of several shapes, float32, stopping rules, errors.
#include "support.hpp"

#include <cmath>
#include <iostream>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor rosenbrock(const Variable& x, const Variable& y) {
  return square(1.0 - x.value()) + 100.0 * square(y.value() - square(x.value()));
}

}  // namespace

TEST_CASE("L-BFGS takes Rosenbrock from (-1.2, 1) to (1, 1) within 1e-8", "[lbfgs]") {
  Variable x(constant(-1.2), true, "x");
  Variable y(constant(1.0), true, "y");
  LBFGSOptions options;
  options.tolerance_grad = 1e-10;
  options.tolerance_change = 0.0;  // stop on the gradient only
  const LBFGSResult result = minimize_lbfgs([&] { return rosenbrock(x, y); }, {x, y}, options);
  std::cout << "L-BFGS on Rosenbrock: " << result.iterations << " iterations, "
            << result.function_evaluations << " function evaluations\n";
  CHECK(result.converged);
  CHECK(result.iterations < 100);
  CHECK(result.function_evaluations >= result.iterations + 1);
  CHECK(std::abs(x.peek().item<double>() - 1.0) <= 1e-8);
  CHECK(std::abs(y.peek().item<double>() - 1.0) <= 1e-8);
  REQUIRE(result.loss.defined());
  CHECK(result.loss.shape().empty());
  CHECK(result.loss.item<double>() <= 1e-16);
  // The returned loss is the loss at the variables' final values.
  CHECK(result.loss.item<double>() == rosenbrock(x, y).item<double>());
}

TEST_CASE("L-BFGS stops after max_iterations, not converged, at a lower loss", "[lbfgs]") {
  Variable x(constant(-1.2), true, "x");
  Variable y(constant(1.0), true, "y");
  LBFGSOptions options;
  options.max_iterations = 3;
  const double start = rosenbrock(x, y).item<double>();  // 24.2
  CHECK(start == Approx(24.2).epsilon(1e-15));
  const LBFGSResult result = minimize_lbfgs([&] { return rosenbrock(x, y); }, {x, y}, options);
  CHECK(result.iterations == 3);
  CHECK_FALSE(result.converged);
  CHECK(result.loss.item<double>() < start);
  CHECK(result.loss.item<double>() == rosenbrock(x, y).item<double>());
}

TEST_CASE("L-BFGS solves a convex quadratic in O(n) iterations", "[lbfgs]") {
  // f = 0.5 (x - x*)' A (x - x*), A symmetric positive definite (eigenvalues in about
  // [0.8, 6.2]), minimum 0 at x*. With exact line searches L-BFGS would end in n = 6
  // iterations; the strong Wolfe search accepts inexact steps (c2 = 0.9), which loses that
  // property: 12 iterations reach |g| <= 1e-7 and 16 reach 1e-10 (measured).
  const std::size_t n = 6;
  std::vector<double> a_values(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    a_values[i * n + i] = 1.0 + static_cast<double>(i);
    if (i + 1 < n) a_values[i * n + i + 1] = a_values[(i + 1) * n + i] = 0.25;
  }
  const Tensor a = from_values(a_values, {n, n}, DType::Float64);
  const std::vector<double> solution{1.0, -2.0, 0.5, 3.0, -1.0, 0.25};
  const Tensor x_star = from_values(solution, {n, 1}, DType::Float64);
  Variable x(zeros({n, 1}), true, "x");
  LBFGSOptions options;
  options.tolerance_grad = 1e-10;
  options.tolerance_change = 0.0;
  const LBFGSResult result = minimize_lbfgs(
      [&] {
        const Tensor e = x.value() - x_star;
        return 0.5 * reduce_sum(e * matmul(a, e));
      },
      {x}, options);
  std::cout << "L-BFGS on a 6-d quadratic: " << result.iterations << " iterations, "
            << result.function_evaluations << " function evaluations\n";
  CHECK(result.converged);
  CHECK(result.iterations <= 3 * static_cast<int>(n));
  require_close(x.peek(), {n, 1}, solution, 1e-10);
}

TEST_CASE("L-BFGS with a fixed step of 1 (strong_wolfe = false) on a well-scaled quadratic",
          "[lbfgs]") {
  // sum(c (w - t)^2) + sum((m - M)^2) over a vector and a matrix variable: the first step
  // (-g, length 1) already contracts each coordinate by |1 - 2c| <= 0.4.
  Variable w(constant({5.0, -3.0, 0.0}), true, "w");
  Variable m(zeros({2, 2}), true, "m");
  const Tensor c = constant({0.3, 0.5, 0.7});
  const Tensor target = constant({1.0, 2.0, -1.0});
  const Tensor target_m = constant({{0.5, -0.5}, {2.0, 1.0}});
  LBFGSOptions options;
  options.strong_wolfe = false;
  options.tolerance_grad = 1e-11;
  options.tolerance_change = 0.0;
  options.history_size = 3;
  const LBFGSResult result = minimize_lbfgs(
      [&] {
        return reduce_sum(c * square(w.value() - target)) +
               reduce_sum(square(m.value() - target_m));
      },
      {w, m}, options);
  std::cout << "L-BFGS with a fixed step: " << result.iterations << " iterations, "
            << result.function_evaluations << " function evaluations\n";
  CHECK(result.converged);
  CHECK(result.function_evaluations == result.iterations + 1);  // no line search
  require_close(w.peek(), {3}, {1.0, 2.0, -1.0}, 1e-10);
  require_close(m.peek(), {2, 2}, {0.5, -0.5, 2.0, 1.0}, 1e-10);
}

TEST_CASE("L-BFGS on float32 variables keeps them float32", "[lbfgs]") {
  Variable w(fill({2}, 3.0, DType::Float32), true, "w32");
  const Tensor target = from_values({1.0, -2.0}, {2}, DType::Float32);
  const LBFGSResult result =
      minimize_lbfgs([&] { return reduce_sum(square(w.value() - target)); }, {w});
  CHECK(w.dtype() == DType::Float32);
  CHECK(result.loss.dtype() == DType::Float32);
  require_close(w.peek(), {2}, {1.0, -2.0}, 1e-6);
}

TEST_CASE("L-BFGS stopping: already optimal, tolerance_change, unused variables", "[lbfgs]") {
  Variable w(constant({1.0, 2.0}), true, "w");
  Variable unused(constant(7.0), true, "unused");
  const auto loss = [&] { return reduce_sum(square(w.value() - constant({1.0, 2.0}))); };
  LBFGSResult at_minimum = minimize_lbfgs(loss, {w, unused});
  CHECK(at_minimum.iterations == 0);
  CHECK(at_minimum.function_evaluations == 1);
  CHECK(at_minimum.converged);
  CHECK(at_minimum.loss.item<double>() == 0.0);
  require_close(unused.peek(), {}, {7.0}, 0.0);  // zero gradient: left alone

  // A huge tolerance_change stops after the first iteration, which counts as converged.
  w.assign(constant({4.0, -4.0}));
  LBFGSOptions options;
  options.tolerance_change = 1e6;
  LBFGSResult one = minimize_lbfgs(loss, {w}, options);
  CHECK(one.iterations == 1);
  CHECK(one.converged);
}

TEST_CASE("minimize_lbfgs argument errors name the function, shapes and dtypes", "[lbfgs]") {
  Variable w(constant({1.0, 2.0}), true, "w");
  const auto scalar_loss = [&] { return reduce_sum(square(w.value())); };
  CHECK_THAT(message_of<InvalidArgument>([&] { minimize_lbfgs(scalar_loss, {}); }),
             Catch::Contains("minimize_lbfgs") && Catch::Contains("no variables"));
  LBFGSOptions options;
  options.max_iterations = 0;
  CHECK_THAT(message_of<InvalidArgument>([&] { minimize_lbfgs(scalar_loss, {w}, options); }),
             Catch::Contains("minimize_lbfgs") && Catch::Contains("max_iterations") &&
                 Catch::Contains("0"));
  options = LBFGSOptions{};
  options.history_size = -1;
  CHECK_THAT(message_of<InvalidArgument>([&] { minimize_lbfgs(scalar_loss, {w}, options); }),
             Catch::Contains("minimize_lbfgs") && Catch::Contains("history_size") &&
                 Catch::Contains("-1"));
  CHECK_THAT(
      message_of<InvalidArgument>([&] { minimize_lbfgs([&] { return square(w.value()); }, {w}); }),
      Catch::Contains("minimize_lbfgs") && Catch::Contains("shape [2]") &&
          Catch::Contains("float64"));
  CHECK_THAT(
      message_of<InvalidArgument>(
          [&] { minimize_lbfgs([] { return fill({}, 1.0, DType::Int32); }, {w}); }),
      Catch::Contains("minimize_lbfgs") && Catch::Contains("shape []") && Catch::Contains("int32"));
  CHECK_THAT(message_of<InvalidArgument>([&] { minimize_lbfgs([] { return Tensor(); }, {w}); }),
             Catch::Contains("minimize_lbfgs") && Catch::Contains("undefined"));
  Variable ints(zeros({2}, DType::Int32), true, "ints");
  CHECK_THAT(
      message_of<InvalidArgument>([&] {
        minimize_lbfgs(scalar_loss, {w, ints});
      }),
      Catch::Contains("minimize_lbfgs") && Catch::Contains("'ints'") && Catch::Contains("int32"));
  CHECK_THAT(message_of<InvalidArgument>([&] {
               minimize_lbfgs(scalar_loss, {w, w});
             }),
             Catch::Contains("minimize_lbfgs") && Catch::Contains("'w'"));
  // Nothing was assigned by the failed calls.
  require_close(w.peek(), {2}, {1.0, 2.0}, 0.0);
}
