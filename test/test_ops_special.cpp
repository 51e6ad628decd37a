// Special functions and the remaining elementwise math: erf, erfc, lgamma, digamma, polygamma
// (internal), atan2, floormod, clip_by_value, squared_difference. Values against the C library
// and closed forms in float64 and float32, identities, TF's conventions at special points,
// first and second derivatives against central differences, bad input.
#include "support.hpp"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>

#include "misuse_support.hpp"
#include "ops/math/math_special.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kZeta3 = 1.20205690315959428540;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Float32);
}

// d f / dx at x (scalar), by the tape.
double derivative(Tensor (*f)(const Tensor&), double at) {
  const Tensor x = constant(at);
  GradientTape tape;
  tape.watch(x);
  return tape.gradient(f(x), x).item<double>();
}

using Unary = Tensor (*)(const Tensor&);
Fn unary_fn(Unary op) {
  return [op](const std::vector<Tensor>& a) { return op(a[0]); };
}

}  // namespace

// ---- erf, erfc, lgamma, digamma, polygamma ------------------------------------------------

TEST_CASE("erf, erfc and lgamma match the C library in float64 and float32", "[special]") {
  struct Case {
    const char* name;
    Unary op;
    double (*reference)(double);
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {"erf", tapegrad::erf, [](double v) { return std::erf(v); }, -3, 3},
      {"erfc", tapegrad::erfc, [](double v) { return std::erfc(v); }, -3, 6},
      {"lgamma", tapegrad::lgamma, [](double v) { return std::lgamma(v); }, 0.01, 30},
      {"lgamma (negative)", tapegrad::lgamma, [](double v) { return std::lgamma(v); }, -4.9, -4.1},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const Tensor x = random_tensor({3, 4}, 7, c.lo, c.hi);
    std::vector<double> expected;
    for (double v : values(x)) expected.push_back(c.reference(v));
    require_close(c.op(x), {3, 4}, expected, 1e-14);
    const Tensor x32 = f32(values(x), {3, 4});
    std::vector<double> expected32;
    for (double v : values(x32)) expected32.push_back(c.reference(v));
    const Tensor y32 = c.op(x32);
    CHECK(y32.dtype() == DType::Float32);
    require_close(y32, {3, 4}, expected32, 1e-6);
  }
  require_close(erf(constant({0, kInf, -kInf})), {3}, {0, 1, -1});
  // The tail: erfc(10) = 2.09e-45, where 1 - erf(10) would be 0.
  CHECK(erfc(constant(10.0)).item<double>() == Approx(std::erfc(10.0)).epsilon(1e-14));
  CHECK(erfc(constant(10.0)).item<double>() > 0);
  CHECK(std::isinf(lgamma(constant(0.0)).item<double>()));
  CHECK(std::isinf(lgamma(constant(-3.0)).item<double>()));
}

TEST_CASE("identities: erf + erfc = 1, lgamma(n) = ln((n-1)!)", "[special]") {
  const Tensor x = random_tensor({50}, 3, -4, 4);
  require_close(add(erf(x), erfc(x)), {50}, std::vector<double>(50, 1.0), 1e-15);
  std::vector<double> n, expected;
  double log_factorial = 0;  // ln((k-1)!)
  for (int k = 1; k <= 40; ++k) {
    n.push_back(k);
    expected.push_back(log_factorial);
    log_factorial += std::log(static_cast<double>(k));
  }
  require_close(lgamma(from_values(n, {40})), {40}, expected, 1e-14);
  // Gamma(1/2) = sqrt(pi); lgamma is ln|Gamma|, so Gamma(-1/2) = -2 sqrt(pi) gives ln(2 sqrt(pi)).
  require_close(lgamma(constant({0.5, -0.5})), {2},
                {0.5 * std::log(M_PI), std::log(2 * std::sqrt(M_PI))}, 1e-15);
}

TEST_CASE("digamma and polygamma: known values", "[special]") {
  const double pi2 = M_PI * M_PI;
  require_close(digamma(constant({1, 2, 0.5, -0.5, 10})), {5},
                {-kEulerGamma, 1 - kEulerGamma, -kEulerGamma - 2 * std::log(2.0),
                 2 - kEulerGamma - 2 * std::log(2.0),
                 -kEulerGamma + 1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5 + 1.0 / 6 + 1.0 / 7 +
                     1.0 / 8 + 1.0 / 9},
                1e-14);
  // psi'(1) = pi^2/6, psi''(1) = -2 zeta(3), psi'''(1) = pi^4/15, psi'(1/2) = pi^2/2,
  // psi'(-1/2) = pi^2/2 + 4 (reflection), psi''(1/2) = -14 zeta(3).
  require_close(detail::polygamma(1, constant({1, 0.5, -0.5})), {3},
                {pi2 / 6, pi2 / 2, pi2 / 2 + 4}, 1e-14);
  require_close(detail::polygamma(2, constant({1, 0.5})), {2}, {-2 * kZeta3, -14 * kZeta3}, 1e-14);
  require_close(detail::polygamma(3, constant(1.0)), {}, {pi2 * pi2 / 15}, 1e-14);
  require_close(detail::polygamma(0, constant({1, 2.5})), {2}, values(digamma(constant({1, 2.5}))),
                0);
  // Large arguments: psi(x) ~ ln x - 1/(2x), psi'(x) ~ 1/x.
  CHECK(digamma(constant(1e10)).item<double>() == Approx(std::log(1e10) - 0.5e-10).epsilon(1e-15));
  CHECK(detail::polygamma(1, constant(1e10)).item<double>() == Approx(1e-10).epsilon(1e-9));
  // float32 is computed in double and rounded.
  const Tensor y32 = digamma(f32({1, 0.5}, {2}));
  CHECK(y32.dtype() == DType::Float32);
  require_close(y32, {2}, {-kEulerGamma, -kEulerGamma - 2 * std::log(2.0)}, 1e-7);
}

TEST_CASE("identities: the recurrences of digamma and polygamma, also for negative x",
          "[special]") {
  // psi^(n)(x + 1) = psi^(n)(x) + (-1)^n n! / x^(n+1).
  const Tensor x = add(random_tensor({40}, 11, -6, 6), scalar(0.0123, DType::Float64));
  for (int n = 0; n <= 4; ++n) {
    INFO("n = " << n);
    const auto at_x = values(detail::polygamma(n, x));
    const auto at_x1 = values(detail::polygamma(n, add(x, scalar(1.0, DType::Float64))));
    const auto xs = values(x);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      INFO("x = " << xs[i]);
      const double step = (n % 2 == 0 ? 1 : -1) * std::tgamma(n + 1.0) / std::pow(xs[i], n + 1);
      // Near 0 both sides are dwarfed by the step: compare relative to it.
      CHECK(at_x1[i] == Approx(at_x[i] + step).epsilon(1e-12).margin(1e-14 * std::fabs(step)));
    }
  }
  const auto psi = values(digamma(x));
  const auto psi1 = values(digamma(add(x, scalar(1.0, DType::Float64))));
  for (std::size_t i = 0; i < psi.size(); ++i) {
    CHECK(psi1[i] == Approx(psi[i] + 1 / values(x)[i]).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("digamma and polygamma at the poles and at infinities", "[special]") {
  const auto psi = values(digamma(constant({0, -1, -7, kInf, -kInf, kNaN})));
  CHECK(std::isnan(psi[0]));
  CHECK(std::isnan(psi[1]));
  CHECK(std::isnan(psi[2]));
  CHECK(psi[3] == kInf);
  CHECK(std::isnan(psi[4]));
  CHECK(std::isnan(psi[5]));
  // Odd orders tend to +inf from both sides of a pole; even orders have no limit.
  CHECK(detail::polygamma(1, constant(-2.0)).item<double>() == kInf);
  CHECK(std::isnan(detail::polygamma(2, constant(0.0)).item<double>()));
  CHECK(detail::polygamma(1, constant(kInf)).item<double>() == 0);
}

TEST_CASE("erf, erfc, lgamma, digamma: analytic derivatives", "[special][grad]") {
  for (double at : {-1.3, 0.0, 0.5, 2.0}) {
    INFO("x = " << at);
    const double slope = 2 / std::sqrt(M_PI) * std::exp(-at * at);
    CHECK(derivative(tapegrad::erf, at) == Approx(slope).epsilon(1e-15));
    CHECK(derivative(tapegrad::erfc, at) == Approx(-slope).epsilon(1e-15));
  }
  CHECK(derivative(tapegrad::lgamma, 1.0) == Approx(-kEulerGamma).epsilon(1e-14));
  CHECK(derivative(tapegrad::lgamma, -0.5) ==
        Approx(2 - kEulerGamma - 2 * std::log(2.0)).epsilon(1e-13));
  CHECK(derivative(tapegrad::digamma, 1.0) == Approx(M_PI * M_PI / 6).epsilon(1e-14));
}

TEST_CASE("lgamma's derivatives nest: the third is polygamma(2) = -2 zeta(3) at 1",
          "[special][grad]") {
  const Tensor x = constant(1.0);
  GradientTape t3;
  t3.watch(x);
  GradientTape t2;
  t2.watch(x);
  GradientTape t1;
  t1.watch(x);
  const Tensor y = lgamma(x);
  const Tensor d1 = t1.gradient(y, x);
  const Tensor d2 = t2.gradient(d1, x);
  const Tensor d3 = t3.gradient(d2, x);
  CHECK(d1.item<double>() == Approx(-kEulerGamma).epsilon(1e-14));
  CHECK(d2.item<double>() == Approx(M_PI * M_PI / 6).epsilon(1e-14));
  CHECK(d3.item<double>() == Approx(-2 * kZeta3).epsilon(1e-14));
}

TEST_CASE("erf, erfc, lgamma, digamma, polygamma: first and second derivatives",
          "[special][grad]") {
  verify_gradients(unary_fn(tapegrad::erf), {random_tensor({2, 3}, 21, -2, 2)});
  verify_gradients(unary_fn(tapegrad::erfc), {random_tensor({2, 3}, 22, -2, 2)});
  verify_gradients(unary_fn(tapegrad::lgamma), {random_tensor({2, 3}, 23, 0.3, 5)});
  verify_gradients(unary_fn(tapegrad::lgamma), {random_tensor({4}, 24, -2.9, -2.1)});
  verify_gradients(unary_fn(tapegrad::digamma), {random_tensor({2, 3}, 25, 0.5, 5)});
  verify_gradients(unary_fn(tapegrad::digamma), {random_tensor({4}, 26, -1.8, -1.2)});
  verify_gradients([](const std::vector<Tensor>& a) { return detail::polygamma(2, a[0]); },
                   {random_tensor({2, 3}, 27, 0.8, 4)}, VerifyOptions{2, 1e-6, 1e-5, 1e-5});
}

// ---- atan2 ---------------------------------------------------------------------------------

TEST_CASE("atan2 matches the C library, broadcasting, with TF's values on the axes", "[atan2]") {
  const Tensor y = random_tensor({2, 3}, 31, -2, 2);
  const Tensor x = random_tensor({3}, 32, -2, 2);
  std::vector<double> expected;
  const auto ys = values(y), xs = values(x);
  for (std::size_t i = 0; i < 6; ++i) expected.push_back(std::atan2(ys[i], xs[i % 3]));
  require_close(atan2(y, x), {2, 3}, expected, 1e-15);
  const Tensor y32 = atan2(f32(ys, {2, 3}), f32(xs, {3}));
  CHECK(y32.dtype() == DType::Float32);
  require_close(y32, {2, 3}, expected, 1e-6);
  // The origin and the negative x axis: atan2(0, 0) = 0, atan2(0, -0) = pi, atan2(-0, -1) = -pi.
  require_close(atan2(constant({0, 0, -0.0, 1, -1}), constant({0, -0.0, -1, 0, 0})), {5},
                {0, M_PI, -M_PI, M_PI / 2, -M_PI / 2});
}

TEST_CASE("atan2's gradient: x / r^2 for y, -y / r^2 for x, NaN at the origin (TF)",
          "[atan2][grad]") {
  const Tensor y = constant({1, -2, 0});
  const Tensor x = constant({2, 3, 0});
  GradientTape tape;
  tape.watch(y);
  tape.watch(x);
  const auto g = tape.gradient(atan2(y, x), {y, x});
  const auto gy = values(g[0]), gx = values(g[1]);
  CHECK(gy[0] == Approx(2.0 / 5));
  CHECK(gy[1] == Approx(3.0 / 13));
  CHECK(gx[0] == Approx(-1.0 / 5));
  CHECK(gx[1] == Approx(2.0 / 13));
  CHECK(std::isnan(gy[2]));
  CHECK(std::isnan(gx[2]));
  // Broadcasting: the gradient of the row operand is summed back to [3].
  verify_gradients([](const std::vector<Tensor>& a) { return atan2(a[0], a[1]); },
                   {random_tensor({2, 3}, 33, 0.5, 2), random_tensor({3}, 34, -2, -0.5)});
}

// ---- floormod ------------------------------------------------------------------------------

TEST_CASE("floormod takes y's sign (Python, TF), integers and floats, broadcasting", "[floormod]") {
  for (DType dtype : {DType::Int32, DType::Int64}) {
    const Tensor x = from_values({-7, 7, -7, 7, 0, 6}, {6}, dtype);
    const Tensor y = from_values({3, -3, -3, 3, 5, 3}, {6}, dtype);
    const Tensor r = floormod(x, y);
    CHECK(r.dtype() == dtype);
    require_close(r, {6}, {2, -2, -1, 1, 0, 0});
  }
  // INT_MIN mod -1 is 0 (the C++ % would be undefined behaviour).
  const auto int_min = static_cast<double>(std::numeric_limits<std::int32_t>::min());
  require_close(
      floormod(from_values({int_min}, {1}, DType::Int32), from_values({-1}, {1}, DType::Int32)),
      {1}, {0});
  require_close(floormod(constant({-7.5, 7.5, -7.5, 2.25}), constant({2, -2, -2, 0.5})), {4},
                {0.5, -0.5, -1.5, 0.25});
  require_close(floormod(f32({-1, 5.5}, {2}), f32({4}, {1})), {2}, {3, 1.5}, 1e-6);
  require_close(floormod(random_tensor({2, 3}, 1, 0.1, 0.9), constant({1.0})), {2, 3},
                values(random_tensor({2, 3}, 1, 0.1, 0.9)));
  CHECK(std::isnan(floormod(constant(1.0), constant(0.0)).item<double>()));
}

TEST_CASE("floormod's gradient: g for x, -floor(x / y) g for y (TF)", "[floormod][grad]") {
  const Tensor x = constant({-7.5, 7.5, 5.2});
  const Tensor y = constant({2, -2, 2});
  GradientTape tape;
  tape.watch(x);
  tape.watch(y);
  const auto g = tape.gradient(floormod(x, y), {x, y});
  require_close(g[0], {3}, {1, 1, 1});
  require_close(g[1], {3}, {4, 4, -2});  // -floor(-3.75), -floor(-3.75), -floor(2.6)
  verify_gradients([](const std::vector<Tensor>& a) { return floormod(a[0], a[1]); },
                   {constant({{-7.3, 1.2, 4.4}, {3.3, -0.7, 9.1}}), constant({2.0, -1.5, 3.0})});
}

// ---- clip_by_value -------------------------------------------------------------------------

TEST_CASE("clip_by_value: scalar and broadcast tensor bounds, int and float", "[clip]") {
  require_close(clip_by_value(constant({-3, -1, 0, 1, 3}), -1.0, 1.0), {5}, {-1, -1, 0, 1, 1});
  const Tensor x = constant({{-3, 0.5, 7}, {2, -0.2, 0.1}});
  const Tensor lo = constant({-1, 0, 0});
  const Tensor hi = from_values({1, 0.15}, {2, 1});
  require_close(clip_by_value(x, lo, hi), {2, 3}, {-1, 0.5, 1, 0.15, 0, 0.1});
  const Tensor xi = from_values({-5, 2, 9}, {3}, DType::Int64);
  const Tensor ci = clip_by_value(xi, 0.0, 4.0);
  CHECK(ci.dtype() == DType::Int64);
  require_close(ci, {3}, {0, 2, 4});
  const Tensor c32 = clip_by_value(f32({-2, 0.25, 2}, {3}), -0.5, 0.5);
  CHECK(c32.dtype() == DType::Float32);
  require_close(c32, {3}, {-0.5, 0.25, 0.5});
  CHECK(std::isnan(clip_by_value(constant(kNaN), 0.0, 1.0).item<double>()));
  require_close(clip_by_value(constant({4.0}), 2.0, 2.0), {1}, {2});  // lo == hi is fine
}

TEST_CASE("clip_by_value's gradient passes to x at the bounds, to lo/hi beyond them (TF)",
          "[clip][grad]") {
  const Tensor x = constant({-2, -1, 0, 1, 2});
  const Tensor lo = constant(-1.0);
  const Tensor hi = constant(1.0);
  GradientTape tape;
  tape.watch(x);
  tape.watch(lo);
  tape.watch(hi);
  const auto g = tape.gradient(clip_by_value(x, lo, hi), {x, lo, hi});
  require_close(g[0], {5}, {0, 1, 1, 1, 0});
  require_close(g[1], {}, {1});
  require_close(g[2], {}, {1});
  verify_gradients(
      [](const std::vector<Tensor>& a) { return multiply(a[0], clip_by_value(a[0], a[1], a[2])); },
      {constant({{-3, 0.5, 7}, {2, -0.2, 0.1}}), constant({-1, 0, 0}),
       from_values({1, 0.15}, {2, 1})});
}

// ---- squared_difference ----------------------------------------------------------------------

TEST_CASE("squared_difference: values, broadcasting, integers", "[squared_difference]") {
  require_close(squared_difference(constant({{1, 2}, {3, 4}}), constant({4, 0})), {2, 2},
                {9, 4, 1, 16});
  const Tensor i = squared_difference(from_values({-3, 5}, {2}, DType::Int32),
                                      from_values({2}, {1}, DType::Int32));
  CHECK(i.dtype() == DType::Int32);
  require_close(i, {2}, {25, 9});
  require_close(squared_difference(f32({1.5}, {1}), f32({-0.5}, {1})), {1}, {4}, 1e-6);
}

TEST_CASE("squared_difference's gradient: 2 (a - b) g, summed back to each shape",
          "[squared_difference][grad]") {
  const Tensor a = constant({{1, 2}, {3, 4}});
  const Tensor b = constant({4, 0});
  GradientTape tape;
  tape.watch(a);
  tape.watch(b);
  const auto g = tape.gradient(squared_difference(a, b), {a, b});
  require_close(g[0], {2, 2}, {-6, 4, -2, 8});
  require_close(g[1], {2}, {8, -12});
  verify_gradients([](const std::vector<Tensor>& v) { return squared_difference(v[0], v[1]); },
                   {random_tensor({2, 3}, 41), random_tensor({1, 3}, 42)});
}

// ---- Bad input -----------------------------------------------------------------------------

TEST_CASE("math_special misuse cases", "[special][errors]") {
  const int before = misuse_cases_run();
  const Tensor ints = from_values({1, 2}, {2}, DType::Int32);
  const std::vector<std::pair<const char*, Unary>> unary = {{"erf", tapegrad::erf},
                                                            {"erfc", tapegrad::erfc},
                                                            {"lgamma", tapegrad::lgamma},
                                                            {"digamma", tapegrad::digamma}};
  for (const auto& [name, op] : unary) {
    expect_misuse<InvalidArgument>(std::string(name) + " of int32", [&, op = op] { op(ints); },
                                   {name, "int32", "[2]"});
    expect_misuse<InvalidArgument>(std::string(name) + " of undefined", [op = op] { op(Tensor()); },
                                   {name, "undefined"});
  }
  expect_misuse<InvalidArgument>("polygamma of order -1",
                                 [] { detail::polygamma(-1, constant({1.0})); },
                                 {"polygamma", "n = -1", "[1]"});
  expect_misuse<InvalidArgument>("atan2: float32 with float64",
                                 [] {
                                   atan2(f32({1}, {1}), constant({1.0, 2.0}));
                                 },
                                 {"atan2", "float32", "float64", "[1]", "[2]"});
  expect_misuse<InvalidArgument>("atan2 of integers", [&] { atan2(ints, ints); },
                                 {"atan2", "int32", "float32 or float64"});
  expect_misuse<InvalidArgument>("atan2: shapes that do not broadcast",
                                 [] {
                                   atan2(constant({1.0, 2.0}), constant({1.0, 2.0, 3.0}));
                                 },
                                 {"atan2", "[2]", "[3]"});
  expect_misuse<InvalidArgument>(
      "floormod: integer division by zero",
      [] {
        floormod(from_values({4, 5}, {2}, DType::Int64), from_values({2, 0}, {2}, DType::Int64));
      },
      {"floormod", "division by zero", "int64", "[2]"});
  expect_misuse<InvalidArgument>("floormod of bool",
                                 [] {
                                   const Tensor b = from_values({1}, {1}, DType::Bool);
                                   floormod(b, b);
                                 },
                                 {"floormod", "bool"});
  expect_misuse<InvalidArgument>("clip_by_value: scalar lo > hi",
                                 [] { clip_by_value(constant({1.0}), 2.0, 1.0); },
                                 {"clip_by_value", "lo = 2", "hi = 1", "[1]"});
  expect_misuse<InvalidArgument>("clip_by_value: NaN bound",
                                 [] { clip_by_value(constant({1.0}), kNaN, 1.0); },
                                 {"clip_by_value", "lo = nan"});
  expect_misuse<InvalidArgument>(
      "clip_by_value: tensor lo > hi at one element",
      [] {
        clip_by_value(constant({1.0, 2.0, 3.0}), constant({0, 5, 0}), constant(4.0));
      },
      {"clip_by_value", "element 1", "lo = 5", "hi = 4", "[3]"});
  expect_misuse<InvalidArgument>(
      "clip_by_value: bounds that would broadcast x to a larger shape",
      [] {
        clip_by_value(constant({1.0, 2.0}), from_values({0, 0}, {2, 1}), constant(4.0));
      },
      {"clip_by_value", "x has shape [2]", "lo has shape [2, 1]", "broadcast to x's shape"});
  expect_misuse<InvalidArgument>(
      "clip_by_value: dtype mismatch",
      [] { clip_by_value(constant({1.0}), f32({0}, {1}), f32({2}, {1})); },
      {"clip_by_value", "float64", "float32"});
  expect_misuse<InvalidArgument>("clip_by_value: an int32 x with a bound of 0.5",
                                 [&] { clip_by_value(ints, 0.5, 1.0); },
                                 {"clip_by_value", "int32"});
  expect_misuse<InvalidArgument>(
      "squared_difference: int32 with int64",
      [&] { squared_difference(ints, from_values({1}, {1}, DType::Int64)); },
      {"squared_difference", "int32", "int64"});
  expect_defined("squared_difference: int32 wraps", [] {
    const Tensor big = from_values({65536}, {1}, DType::Int32);
    REQUIRE(values(squared_difference(big, from_values({0}, {1}, DType::Int32)))[0] == 0);
  });
  const int run = misuse_cases_run() - before;
  std::cout << "math_special misuse cases: " << run << " run\n";
  REQUIRE(run == 22);
}
