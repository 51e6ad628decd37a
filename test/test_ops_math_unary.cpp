// Unary math: square sqrt exp log tanh abs sign log1p sin cos reciprocal, the trigonometric
// and hyperbolic functions, expm1, rsqrt, floor, ceil, round: values, dtypes,
// gradients (first and second order), TF's special points and bad input.
#include "support.hpp"

#include <cmath>
#include <limits>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

using UnaryOp = Tensor (*)(const Tensor&);

struct UnaryCase {
  const char* name;
  UnaryOp op;
  double (*reference)(double);
  double lo, hi;  // a random-input domain where the op is smooth
  bool floating_only;
};

double sign_reference(double v) { return (v > 0) - (v < 0); }
double square_reference(double v) { return v * v; }
double reciprocal_reference(double v) { return 1 / v; }
double sqrt_reference(double v) { return std::sqrt(v); }
double exp_reference(double v) { return std::exp(v); }
double log_reference(double v) { return std::log(v); }
double tanh_reference(double v) { return std::tanh(v); }
double abs_reference(double v) { return std::fabs(v); }
double log1p_reference(double v) { return std::log1p(v); }
double sin_reference(double v) { return std::sin(v); }
double cos_reference(double v) { return std::cos(v); }
double tan_reference(double v) { return std::tan(v); }
double asin_reference(double v) { return std::asin(v); }
double acos_reference(double v) { return std::acos(v); }
double atan_reference(double v) { return std::atan(v); }
double sinh_reference(double v) { return std::sinh(v); }
double cosh_reference(double v) { return std::cosh(v); }
double asinh_reference(double v) { return std::asinh(v); }
double acosh_reference(double v) { return std::acosh(v); }
double atanh_reference(double v) { return std::atanh(v); }
double expm1_reference(double v) { return std::expm1(v); }
double rsqrt_reference(double v) { return 1 / std::sqrt(v); }
double floor_reference(double v) { return std::floor(v); }
double ceil_reference(double v) { return std::ceil(v); }
double round_reference(double v) { return std::nearbyint(v); }

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"square", square, square_reference, -2, 2, false},
      {"sqrt", sqrt, sqrt_reference, 0.2, 3, true},
      {"exp", exp, exp_reference, -2, 2, true},
      {"log", log, log_reference, 0.2, 3, true},
      {"tanh", tanh, tanh_reference, -2, 2, true},
      {"abs", abs, abs_reference, -2, 2, false},
      {"sign", sign, sign_reference, -2, 2, false},
      {"log1p", log1p, log1p_reference, -0.5, 3, true},
      {"sin", sin, sin_reference, -3, 3, true},
      {"cos", cos, cos_reference, -3, 3, true},
      {"reciprocal", reciprocal, reciprocal_reference, 0.3, 3, true},
      {"tan", tan, tan_reference, -1.2, 1.2, true},
      {"asin", asin, asin_reference, -0.9, 0.9, true},
      {"acos", acos, acos_reference, -0.9, 0.9, true},
      {"atan", atan, atan_reference, -3, 3, true},
      {"sinh", sinh, sinh_reference, -2, 2, true},
      {"cosh", cosh, cosh_reference, -2, 2, true},
      {"asinh", asinh, asinh_reference, -3, 3, true},
      {"acosh", acosh, acosh_reference, 1.2, 3, true},
      {"atanh", atanh, atanh_reference, -0.9, 0.9, true},
      {"expm1", expm1, expm1_reference, -2, 2, true},
      {"rsqrt", rsqrt, rsqrt_reference, 0.3, 3, true},
      // Piecewise constant: random inputs never land within delta of a jump.
      {"floor", floor, floor_reference, -3, 3, true},
      {"ceil", ceil, ceil_reference, -3, 3, true},
      {"round", round, round_reference, -3, 3, true},
  };
  return cases;
}

Fn unary_fn(UnaryOp op) {
  return [op](const std::vector<Tensor>& a) { return op(a[0]); };
}

}  // namespace

TEST_CASE("unary ops: hand-computed values", "[math_unary]") {
  require_close(square(constant({-3, 0.5})), {2}, {9, 0.25});
  require_close(sqrt(constant({4, 0, 2.25})), {3}, {2, 0, 1.5});
  require_close(exp(constant({0, 1})), {2}, {1, std::exp(1.0)});
  require_close(log(constant({1, std::exp(2.0)})), {2}, {0, 2});
  require_close(tanh(constant({0, 100, -100})), {3}, {0, 1, -1});
  require_close(abs(constant({-2.5, 0, 3})), {3}, {2.5, 0, 3});
  require_close(sign(constant({-2.5, 0, 3})), {3}, {-1, 0, 1});
  require_close(log1p(constant({0, 1e-20, std::exp(1.0) - 1})), {3}, {0, 1e-20, 1});
  require_close(sin(constant({0, M_PI / 2, M_PI / 6})), {3}, {0, 1, 0.5});
  require_close(cos(constant({0, M_PI, M_PI / 3})), {3}, {1, -1, 0.5});
  require_close(reciprocal(constant({2, -0.25})), {2}, {0.5, -4});
  CHECK(std::isinf(reciprocal(constant(0.0)).item<double>()));
  CHECK(std::isnan(sign(constant(std::numeric_limits<double>::quiet_NaN())).item<double>()));
}

TEST_CASE("trigonometric, hyperbolic and rounding ops: TF's values at special points",
          "[math_unary]") {
  require_close(tan(constant({0, M_PI / 4})), {2}, {0, 1});
  require_close(asin(constant({1, -0.5})), {2}, {M_PI / 2, -M_PI / 6});
  require_close(acos(constant({1, 0.5})), {2}, {0, M_PI / 3});
  require_close(atan(constant({1, -1e300})), {2}, {M_PI / 4, -M_PI / 2});
  require_close(sinh(constant({0, 1})), {2}, {0, (std::exp(1.0) - std::exp(-1.0)) / 2});
  require_close(cosh(constant({0, 1})), {2}, {1, (std::exp(1.0) + std::exp(-1.0)) / 2});
  require_close(acosh(constant({1, 2})), {2}, {0, std::log(2 + std::sqrt(3.0))});
  require_close(atanh(constant({0, 0.5})), {2}, {0, 0.5 * std::log(3.0)});
  require_close(expm1(constant({0, 1e-20})), {2}, {0, 1e-20});  // exp(x) - 1 would give 0
  require_close(rsqrt(constant({4, 0.25})), {2}, {0.5, 2});
  CHECK(std::isinf(rsqrt(constant(0.0)).item<double>()));
  // Outside the domain: NaN, as TF; at atanh's edge: infinity.
  CHECK(std::isnan(asin(constant(2.0)).item<double>()));
  CHECK(std::isnan(acosh(constant(0.5)).item<double>()));
  CHECK(std::isinf(atanh(constant(1.0)).item<double>()));
  // TF's round takes halves to even; floor and ceil go down and up.
  require_close(round(constant({0.5, 1.5, 2.5, -0.5, -1.5, 2.4})), {6}, {0, 2, 2, -0.0, -2, 2});
  require_close(floor(constant({-1.5, 1.5, 2})), {3}, {-2, 1, 2});
  require_close(ceil(constant({-1.5, 1.5, 2})), {3}, {-1, 2, 2});
}

TEST_CASE("floor, ceil and round have a zero gradient, not none (TF)", "[math_unary][grad]") {
  const Tensor x = constant({-1.3, 0.2, 2.7});
  for (UnaryOp op : std::vector<UnaryOp>{tapegrad::floor, tapegrad::ceil, tapegrad::round}) {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(op(x)), x);
    REQUIRE(g.defined());
    CHECK(values(g) == std::vector<double>{0, 0, 0});
  }
}

TEST_CASE("unary ops match the C library on random float64 and float32 inputs", "[math_unary]") {
  for (const auto& c : unary_cases()) {
    INFO(c.name);
    const Tensor x = random_tensor({3, 4}, 21, c.lo, c.hi);
    std::vector<double> expected;
    for (double v : values(x)) expected.push_back(c.reference(v));
    require_close(c.op(x), {3, 4}, expected, 1e-12);
    const Tensor x32 = from_values(values(x), {3, 4}, DType::Float32);
    std::vector<double> expected32;
    for (double v : values(x32)) expected32.push_back(c.reference(v));
    const Tensor y32 = c.op(x32);
    CHECK(y32.dtype() == DType::Float32);
    require_close(y32, {3, 4}, expected32, 1e-6);
  }
}

TEST_CASE("unary ops keep shapes: scalars and size-0 dimensions", "[math_unary]") {
  for (const auto& c : unary_cases()) {
    INFO(c.name);
    CHECK(c.op(fill({}, 1.5)).shape() == Shape{});
    CHECK(c.op(ones({0, 4})).shape() == Shape{0, 4});
    CHECK(c.op(ones({2, 0, 1})).shape() == Shape{2, 0, 1});
  }
}

TEST_CASE("square, abs and sign accept integers, the rest are floating only", "[math_unary]") {
  for (DType dtype : {DType::Int32, DType::Int64}) {
    const Tensor x = from_values({-3, 0, 4}, {3}, dtype);
    const Tensor sq = square(x);
    CHECK(sq.dtype() == dtype);
    require_close(sq, {3}, {9, 0, 16});
    require_close(abs(x), {3}, {3, 0, 4});
    require_close(sign(x), {3}, {-1, 0, 1});
    require_close(negative(x), {3}, {3, 0, -4});
  }
  for (const auto& c : unary_cases()) {
    if (!c.floating_only) continue;
    for (DType dtype : {DType::Int32, DType::Int64}) {
      const std::string msg = message_of<InvalidArgument>([&] { c.op(ones({2}, dtype)); });
      CHECK_THAT(msg, Catch::Contains(c.name) && Catch::Contains(dtype_name(dtype)));
    }
  }
  const std::string b =
      message_of<InvalidArgument>([] { abs(from_values({1}, {1}, DType::Bool)); });
  CHECK_THAT(b, Catch::Contains("abs") && Catch::Contains("bool"));
}

TEST_CASE("unary ops reject an undefined tensor naming the op", "[math_unary][errors]") {
  for (const auto& c : unary_cases()) {
    const std::string msg = message_of<InvalidArgument>([&] { c.op(Tensor()); });
    CHECK_THAT(msg, Catch::Contains(c.name) && Catch::Contains("undefined"));
  }
}

TEST_CASE("unary op gradients match central differences", "[math_unary][grad]") {
  unsigned seed = 31;
  for (const auto& c : unary_cases()) {
    INFO(c.name);
    require_gradient_matches(unary_fn(c.op), {random_tensor({2, 3}, seed++, c.lo, c.hi)});
    require_gradient_matches(unary_fn(c.op), {random_tensor({}, seed++, c.lo, c.hi)});
  }
}

TEST_CASE("unary op second derivatives match central differences", "[math_unary][grad2]") {
  unsigned seed = 41;
  for (const auto& c : unary_cases()) {
    INFO(c.name);
    require_second_order_matches(unary_fn(c.op), {random_tensor({2, 3}, seed++, c.lo, c.hi)});
  }
  // abs and sign are piecewise linear: composed with x, their gradients (sign, and sign's
  // zero gradient) feed a non-zero second derivative: d2/dx2 (x |x|) = 2 sign(x).
  const Tensor x = random_tensor({5}, 51, -2, 2);
  require_second_order_matches([](const std::vector<Tensor>& a) { return a[0] * abs(a[0]); }, {x});
  require_second_order_matches([](const std::vector<Tensor>& a) { return a[0] * sign(a[0]); }, {x});
}

TEST_CASE("TF's special points: abs and sign at 0, sqrt at 0", "[math_unary][grad]") {
  const Tensor x = constant({-2, 0, 3});
  {
    GradientTape tape;
    tape.watch(x);
    require_close(tape.gradient(abs(x), x), {3}, {-1, 0, 1});
  }
  {
    GradientTape tape;
    tape.watch(x);
    // sign has a registered zero gradient: zeros, not an unconnected (undefined) gradient.
    require_close(tape.gradient(sign(x), x), {3}, {0, 0, 0});
  }
  {
    const Tensor z = constant({0, 4});
    GradientTape tape;
    tape.watch(z);
    const Tensor g = tape.gradient(sqrt(z), z);
    const auto v = values(g);
    CHECK(std::isinf(v[0]));
    CHECK(v[0] > 0);
    CHECK(v[1] == Approx(0.25));
  }
}

TEST_CASE("unary gradients on float32 stay float32", "[math_unary][grad]") {
  const Tensor x = from_values({0.5, 1.0}, {2}, DType::Float32);
  GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(sin(x) + log1p(x) + reciprocal(x), x);
  CHECK(g.dtype() == DType::Float32);
  require_close(g, {2}, {std::cos(0.5) + 1 / 1.5 - 4, std::cos(1.0) + 0.5 - 1}, 1e-6);
}
