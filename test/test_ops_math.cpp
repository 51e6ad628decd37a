// Binary arithmetic: add subtract multiply divide pow maximum minimum, the operators and
// scalar(): values, broadcasting, dtypes, gradients (first and second order) and bad input.
#include "support.hpp"

#include <cmath>
#include <limits>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);

Fn binary_fn(BinaryOp op) {
  return [op](const std::vector<Tensor>& a) { return op(a[0], a[1]); };
}

// Operand shape pairs exercising NumPy broadcasting: equal, trailing, leading 1s, both sides
// stretched, rank-0.
const std::vector<std::pair<Shape, Shape>>& broadcast_cases() {
  static const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{1, 1, 3}, {2, 1}},
      {{2, 1}, {1, 3}}, {{}, {2, 3}},  {{2, 3}, {}},  {{1, 2, 1}, {3, 1, 2}},
  };
  return cases;
}

// Gradient checks for every differentiable argument over every broadcast case.
void check_binary_gradients(BinaryOp op, double x_lo, double x_hi, double y_lo, double y_hi) {
  unsigned seed = 11;
  for (const auto& [xs, ys] : broadcast_cases()) {
    INFO("x shape " << shape_to_string(xs) << ", y shape " << shape_to_string(ys));
    const std::vector<Tensor> args = {random_tensor(xs, seed, x_lo, x_hi),
                                      random_tensor(ys, seed + 1, y_lo, y_hi)};
    seed += 2;
    require_gradient_matches(binary_fn(op), args, 0);
    require_gradient_matches(binary_fn(op), args, 1);
  }
}

void check_binary_second_order(BinaryOp op, double x_lo, double x_hi, double y_lo, double y_hi) {
  const std::vector<Tensor> args = {random_tensor({2, 3}, 5, x_lo, x_hi),
                                    random_tensor({3}, 6, y_lo, y_hi)};
  require_second_order_matches(binary_fn(op), args, 0);
  require_second_order_matches(binary_fn(op), args, 1);
}

Tensor int32s(const std::vector<double>& v, const Shape& s) {
  return from_values(v, s, DType::Int32);
}
Tensor int64s(const std::vector<double>& v, const Shape& s) {
  return from_values(v, s, DType::Int64);
}
Tensor float32s(const std::vector<double>& v, const Shape& s) {
  return from_values(v, s, DType::Float32);
}

}  // namespace

TEST_CASE("add, subtract, multiply, divide compute elementwise values", "[math]") {
  const Tensor x = constant({{1, 2, 3}, {4, 5, 6}});
  const Tensor y = constant({2, -4, 0.5});
  require_close(add(x, y), {2, 3}, {3, -2, 3.5, 6, 1, 6.5});
  require_close(subtract(x, y), {2, 3}, {-1, 6, 2.5, 2, 9, 5.5});
  require_close(multiply(x, y), {2, 3}, {2, -8, 1.5, 8, -20, 3});
  require_close(divide(x, y), {2, 3}, {0.5, -0.5, 6, 2, -1.25, 12});
  require_close(negative(y), {3}, {-2, 4, -0.5});
}

TEST_CASE("pow, maximum and minimum compute elementwise values", "[math]") {
  const Tensor x = constant({2, 9, 0.5, -2});
  const Tensor y = constant({3, 0.5, -1, 2});
  require_close(pow(x, y), {4}, {8, 3, 2, 4});
  require_close(pow(x, 2.0), {4}, {4, 81, 0.25, 4});
  require_close(maximum(x, y), {4}, {3, 9, 0.5, 2});
  require_close(minimum(x, y), {4}, {2, 0.5, -1, -2});
}

TEST_CASE("binary ops broadcast leading 1s, scalars and size-0 dimensions", "[math]") {
  const Tensor a = from_values({1, 2}, {2, 1});
  const Tensor b = from_values({10, 20, 30}, {1, 1, 3});
  require_close(add(a, b), {1, 2, 3}, {11, 21, 31, 12, 22, 32});
  require_close(multiply(constant(2.0), a), {2, 1}, {2, 4});
  require_close(maximum(a, constant(1.5)), {2, 1}, {1.5, 2});
  const BinaryOp ops[] = {add, subtract, multiply, divide, pow, maximum, minimum};
  for (BinaryOp op : ops) {
    const Tensor empty = op(zeros({0, 3}), ones({3}));
    CHECK(empty.shape() == Shape{0, 3});
    CHECK(op(ones({2, 0}), ones({1})).shape() == Shape{2, 0});
    CHECK(op(ones({1, 3}), ones({2, 1})).shape() == Shape{2, 3});
    CHECK(op(constant(2.0), constant(3.0)).shape() == Shape{});
  }
}

TEST_CASE("small and large broadcasts give the same elements, up to rank 6", "[math]") {
  // Below 64 KiB of output the broadcast shape is built in place; above, through the checked
  // path. Both must agree element for element.
  const Tensor row = from_values({1, 2, 3}, {1, 3});
  const Tensor column = from_values({10, 20}, {2, 1});
  require_close(subtract(row, column), {2, 3}, {-9, -8, -7, -19, -18, -17});
  require_close(divide(column, row), {2, 3}, {10, 5, 10.0 / 3, 20, 10, 20.0 / 3});
  const Tensor deep = from_values({1, 2}, {2, 1, 1, 1, 1, 1});
  const Tensor wide = from_values({1, 10, 100}, {1, 1, 1, 1, 1, 3});
  require_close(multiply(deep, wide), {2, 1, 1, 1, 1, 3}, {1, 10, 100, 2, 20, 200});
  const Tensor tall = random_tensor({3000, 1}, 31);
  const Tensor bias = random_tensor({1, 4}, 32);  // 12000 float64s: 96 KiB, the checked path
  const Tensor big = add(tall, bias);
  REQUIRE(big.shape() == Shape{3000, 4});
  const std::vector<double> t = values(tall);
  const std::vector<double> b = values(bias);
  const std::vector<double> sums = values(big);
  const Tensor small = add(slice(tall, {0, 0}, {2, 1}), bias);  // 8 elements: in place
  require_close(small, {2, 4}, std::vector<double>(sums.begin(), sums.begin() + 8));
  for (std::size_t i = 0; i < 3000; i += 997) {
    for (std::size_t j = 0; j < 4; ++j) CHECK(sums[i * 4 + j] == t[i] + b[j]);
  }
}

TEST_CASE("the operators and scalar() match the named ops and take the tensor's dtype", "[math]") {
  const Tensor x = constant({1, 2});
  const Tensor y = constant({4, 8});
  require_close(x + y, {2}, {5, 10});
  require_close(x - y, {2}, {-3, -6});
  require_close(x * y, {2}, {4, 16});
  require_close(x / y, {2}, {0.25, 0.25});
  require_close(-x, {2}, {-1, -2});
  require_close(x + 1.0, {2}, {2, 3});
  require_close(x - 1.0, {2}, {0, 1});
  require_close(x * 3.0, {2}, {3, 6});
  require_close(x / 2.0, {2}, {0.5, 1});
  require_close(1.0 + x, {2}, {2, 3});
  require_close(1.0 - x, {2}, {0, -1});
  require_close(3.0 * x, {2}, {3, 6});
  require_close(2.0 / x, {2}, {2, 1});
  const Tensor f = float32s({1, 2}, {2}) * 0.5;
  CHECK(f.dtype() == DType::Float32);
  require_close(f, {2}, {0.5, 1});
  const Tensor s = scalar(7.0, DType::Int64);
  CHECK(s.dtype() == DType::Int64);
  CHECK(s.shape() == Shape{});
  CHECK(s.item<std::int64_t>() == 7);
}

TEST_CASE("binary ops on float32 keep float32 and its values", "[math]") {
  const Tensor x = float32s({1.5, -2, 4}, {3});
  const Tensor y = float32s({2, 0.5, -3}, {3});
  const Tensor sum = add(x, y);
  CHECK(sum.dtype() == DType::Float32);
  require_close(sum, {3}, {3.5, -1.5, 1}, 1e-6);
  require_close(subtract(x, y), {3}, {-0.5, -2.5, 7}, 1e-6);
  require_close(multiply(x, y), {3}, {3, -1, -12}, 1e-6);
  require_close(divide(x, y), {3}, {0.75, -4, -4.0 / 3.0}, 1e-6);
  require_close(pow(float32s({2, 4, 9}, {3}), float32s({3, 0.5, -0.5}, {3})), {3},
                {8, 2, 1.0 / 3.0}, 1e-6);
  require_close(maximum(x, y), {3}, {2, 0.5, 4}, 1e-6);
  require_close(minimum(x, y), {3}, {1.5, -2, -3}, 1e-6);
}

// pow's whole-exponent fast paths must not cost accuracy: float64 equals std::pow bit for bit
// (a Vandermonde matrix of exponents 0..128, bases across [-1.7, 1.7] and a wide range), and
// float32's squaring in float64 stays within 1 float32 ulp of the correctly rounded power.
TEST_CASE("pow with whole exponents keeps std::pow's accuracy", "[math]") {
  std::vector<double> bases, exponents;
  for (int i = 0; i < 41; ++i) {
    for (int j = -128; j <= 128; ++j) {
      bases.push_back(-1.7 + 3.4 * i / 40.0 + (i % 7 == 3 ? 5.3 : 0.0));
      exponents.push_back(j);
    }
  }
  const Shape shape{bases.size()};
  const auto z = pow(from_values(bases, shape), from_values(exponents, shape)).array<double>();
  std::size_t differing = 0;
  for (std::size_t k = 0; k < bases.size(); ++k) {
    const double expected = std::pow(bases[k], exponents[k]);
    if (!(z(k) == expected || (std::isnan(z(k)) && std::isnan(expected)))) ++differing;
  }
  CHECK(differing == 0);

  const Tensor z32 =
      pow(from_values(bases, shape, DType::Float32), from_values(exponents, shape, DType::Float32));
  std::vector<float> bases32;
  for (double b : bases) bases32.push_back(static_cast<float>(b));
  const std::vector<double>& exponents32 = exponents;
  std::size_t beyond_one_ulp = 0;
  for (std::size_t k = 0; k < bases32.size(); ++k) {
    const double exact =
        std::pow(static_cast<double>(bases32[k]), static_cast<double>(exponents32[k]));
    const float rounded = static_cast<float>(exact);
    const float got = z32.array<float>()(k);
    if (std::isinf(rounded) || rounded == 0.0f) {
      if (got != rounded) ++beyond_one_ulp;
      continue;
    }
    const float ulp = std::nextafter(std::fabs(rounded), std::numeric_limits<float>::infinity()) -
                      std::fabs(rounded);
    if (std::fabs(got - rounded) > ulp) ++beyond_one_ulp;
  }
  CHECK(beyond_one_ulp == 0);
}

TEST_CASE("binary ops on int32 and int64 compute integer results", "[math]") {
  for (auto make : {int32s, int64s}) {
    const Tensor x = make({7, -7, 3, 0}, {4});
    const Tensor y = make({2, 2, -4, 5}, {4});
    const DType dtype = x.dtype();
    const Tensor sum = add(x, y);
    CHECK(sum.dtype() == dtype);
    require_close(sum, {4}, {9, -5, -1, 5});
    require_close(subtract(x, y), {4}, {5, -9, 7, -5});
    require_close(multiply(x, y), {4}, {14, -14, -12, 0});
    require_close(divide(x, y), {4}, {3, -3, 0, 0});  // truncation toward zero
    require_close(negative(x), {4}, {-7, 7, -3, 0});
    require_close(maximum(x, y), {4}, {7, 2, 3, 5});
    require_close(minimum(x, y), {4}, {2, -7, -4, 0});
    require_close(pow(x, make({2, 3, 0, 4}, {4})), {4}, {49, -343, 1, 0});
    require_close(pow(x, 2.0), {4}, {49, 49, 9, 0});
    require_close(x * 2.0, {4}, {14, -14, 6, 0});
  }
}

TEST_CASE("integer division by zero and negative integer powers throw", "[math]") {
  const std::string div = message_of<InvalidArgument>([] {
    divide(int32s({1, 2}, {2}), int32s({1, 0}, {2}));
  });
  CHECK_THAT(div, Catch::Contains("divide") && Catch::Contains("division by zero"));
  const std::string neg = message_of<InvalidArgument>([] {
    pow(int64s({2, 3}, {2}), int64s({1, -1}, {2}));
  });
  CHECK_THAT(neg, Catch::Contains("pow") && Catch::Contains("negative integer powers") &&
                      Catch::Contains("int64") && Catch::Contains("[2]"));
  const std::string frac = message_of<InvalidArgument>([] { pow(int32s({2}, {1}), 0.5); });
  CHECK_THAT(frac, Catch::Contains("pow") && Catch::Contains("int32") &&
                       Catch::Contains("not an integer"));
}

TEST_CASE("binary op gradients match central differences over broadcast shapes", "[math][grad]") {
  SECTION("add") { check_binary_gradients(add, -1, 1, -1, 1); }
  SECTION("subtract") { check_binary_gradients(subtract, -1, 1, -1, 1); }
  SECTION("multiply") { check_binary_gradients(multiply, -1, 1, -1, 1); }
  SECTION("divide") { check_binary_gradients(divide, -1, 1, 0.5, 2); }
  SECTION("pow") { check_binary_gradients(pow, 0.5, 2, -1.5, 1.5); }
  SECTION("maximum") { check_binary_gradients(maximum, -1, 1, -1, 1); }
  SECTION("minimum") { check_binary_gradients(minimum, -1, 1, -1, 1); }
}

TEST_CASE("negative and pow with a double exponent: gradients", "[math][grad]") {
  const std::vector<Tensor> args = {random_tensor({2, 3}, 3, 0.5, 2)};
  require_gradient_matches([](const std::vector<Tensor>& a) { return negative(a[0]); }, args);
  require_gradient_matches([](const std::vector<Tensor>& a) { return pow(a[0], 2.5); }, args);
  require_gradient_matches([](const std::vector<Tensor>& a) { return pow(a[0], -1.0); }, args);
  require_gradient_matches([](const std::vector<Tensor>& a) { return 2.0 / a[0] - a[0] * 3.0; },
                           args);
}

TEST_CASE("binary op second derivatives match central differences", "[math][grad2]") {
  SECTION("add") { check_binary_second_order(add, -1, 1, -1, 1); }
  SECTION("subtract") { check_binary_second_order(subtract, -1, 1, -1, 1); }
  SECTION("multiply") { check_binary_second_order(multiply, -1, 1, -1, 1); }
  SECTION("divide") { check_binary_second_order(divide, -1, 1, 0.5, 2); }
  SECTION("pow") { check_binary_second_order(pow, 0.5, 2, -1.5, 1.5); }
  SECTION("negative") {
    require_second_order_matches(
        [](const std::vector<Tensor>& a) { return multiply(negative(a[0]), a[0]); },
        {random_tensor({4}, 8)});
  }
  SECTION("maximum and minimum of nonlinear operands") {
    // Piecewise: the second derivative is the operand's where it wins.
    const Fn max_fn = [](const std::vector<Tensor>& a) { return maximum(square(a[0]), a[1]); };
    const Fn min_fn = [](const std::vector<Tensor>& a) { return minimum(a[1], square(a[0])); };
    const std::vector<Tensor> args = {random_tensor({2, 3}, 9), random_tensor({3}, 10, 0, 0.5)};
    require_second_order_matches(max_fn, args, 0);
    require_second_order_matches(min_fn, args, 0);
  }
}

TEST_CASE("pow gradients follow TF at a zero or negative base", "[math][grad]") {
  const Tensor x = constant({0, -2, 4});
  const Tensor y = constant({2, 2, 0.5});
  GradientTape tape;
  tape.watch(x);
  tape.watch(y);
  const Tensor z = pow(x, y);
  const auto g = tape.gradient(z, {x, y});
  // dx = y x^(y-1); dy = log(x) x^y where x > 0, else 0.
  require_close(g[0], {3}, {0, -4, 0.25});
  require_close(g[1], {3}, {0, 0, 2 * std::log(4.0)});
}

TEST_CASE("pow: x^0 has derivative 0 in x at x = 0 too, its other derivatives unchanged",
          "[math][grad]") {
  // x^0 = 1 for every x, so dz/dx = 0 everywhere; y x^(y-1) would give 0 * inf = NaN at x = 0.
  const Tensor x = constant({0.0, 2.0, 0.0, -3.0});
  const Tensor y = constant({0.0, 0.0, 2.0, 0.0});
  GradientTape outer;
  outer.watch(x);
  outer.watch(y);
  Tensor dx;
  {
    GradientTape inner;
    inner.watch(x);
    inner.watch(y);
    const Tensor z = pow(x, y);
    require_close(z, {4}, {1, 1, 0, 1});
    dx = inner.gradient(z, x);
  }
  require_close(dx, {4}, {0, 0, 0, 0});
  // d/dy (y x^(y-1)) at y = 0 is x^-1 where x != 0 (the mask is only at 0^0, whose mixed
  // derivative is infinite; 0 is given there).
  const auto second = outer.gradient(dx, {x, y});
  require_close(second[0], {4}, {0, 0, 2, 0});  // d2z/dx2: 0, 0, y (y-1) x^(y-2) = 2, 0
  CHECK(values(second[1])[0] == 0.0);
  CHECK(values(second[1])[1] == Approx(0.5));
  CHECK(values(second[1])[3] == Approx(-1.0 / 3.0));
  // Forward mode agrees with reverse mode, also for pow(x, double).
  const auto [value, tangent] = jvp([](const std::vector<Tensor>& a) { return pow(a[0], 0.0); },
                                    {x}, {constant({1, 1, 1, 1})});
  require_close(value, {4}, {1, 1, 1, 1});
  require_close(tangent, {4}, {0, 0, 0, 0});
  GradientTape tape;
  tape.watch(x);
  require_close(tape.gradient(reduce_sum(pow(x, 0.0)), x), {4}, {0, 0, 0, 0});
}

TEST_CASE("maximum and minimum send tied gradients to the first argument", "[math][grad]") {
  const Tensor x = constant({1, 2, 3});
  const Tensor y = constant({1, 1, 4});
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(y);
    const auto g = tape.gradient(maximum(x, y), {x, y});
    require_close(g[0], {3}, {1, 1, 0});
    require_close(g[1], {3}, {0, 0, 1});
  }
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(y);
    const auto g = tape.gradient(minimum(x, y), {x, y});
    require_close(g[0], {3}, {1, 0, 1});
    require_close(g[1], {3}, {0, 1, 0});
  }
}

TEST_CASE("broadcast gradients are summed back to each operand's shape", "[math][grad]") {
  const Tensor x = constant({{1, 2, 3}, {4, 5, 6}});  // [2, 3]
  const Tensor y = from_values({10}, {1, 1});         // [1, 1]
  GradientTape tape;
  tape.watch(x);
  tape.watch(y);
  const auto g = tape.gradient(multiply(x, y), {x, y});
  require_close(g[0], {2, 3}, {10, 10, 10, 10, 10, 10});
  require_close(g[1], {1, 1}, {21});
}

TEST_CASE("gradients through a size-0 broadcast are zeros of the operand's shape", "[math][grad]") {
  const Tensor x = zeros({0, 3});
  const Tensor y = constant({1, 2, 3});
  GradientTape tape;
  tape.watch(y);
  const Tensor z = reduce_sum(multiply(x, y));
  require_close(tape.gradient(z, y), {3}, {0, 0, 0});
}

TEST_CASE("binary ops reject mixed dtypes naming the op, shapes and dtypes", "[math][errors]") {
  const Tensor x = ones({2, 3});
  const Tensor y = ones({3}, DType::Float32);
  const BinaryOp ops[] = {add, subtract, multiply, divide, pow, maximum, minimum};
  const char* names[] = {"add", "subtract", "multiply", "divide", "pow", "maximum", "minimum"};
  for (std::size_t i = 0; i < 7; ++i) {
    const std::string msg = message_of<InvalidArgument>([&] { ops[i](x, y); });
    CHECK_THAT(msg, Catch::Contains(names[i]) && Catch::Contains("[2, 3]") &&
                        Catch::Contains("[3]") && Catch::Contains("float64") &&
                        Catch::Contains("float32"));
  }
  const std::string ints =
      message_of<InvalidArgument>([] { add(ones({2}, DType::Int32), ones({2}, DType::Int64)); });
  CHECK_THAT(ints, Catch::Contains("add") && Catch::Contains("int32") && Catch::Contains("int64"));
}

TEST_CASE("binary ops reject shapes that do not broadcast", "[math][errors]") {
  const Tensor x = ones({2, 3});
  const Tensor y = ones({4});
  const BinaryOp ops[] = {add, subtract, multiply, divide, pow, maximum, minimum};
  const char* names[] = {"add", "subtract", "multiply", "divide", "pow", "maximum", "minimum"};
  for (std::size_t i = 0; i < 7; ++i) {
    const std::string msg = message_of<InvalidArgument>([&] { ops[i](x, y); });
    CHECK_THAT(msg, Catch::Contains(names[i]) && Catch::Contains("[2, 3]") &&
                        Catch::Contains("[4]") && Catch::Contains("broadcast"));
  }
}

TEST_CASE("binary ops reject Bool operands", "[math][errors]") {
  const Tensor b = from_values({1, 0}, {2}, DType::Bool);
  const std::string msg = message_of<InvalidArgument>([&] { multiply(b, b); });
  CHECK_THAT(msg, Catch::Contains("multiply") && Catch::Contains("bool"));
}
