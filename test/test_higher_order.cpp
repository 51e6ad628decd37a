// Nested tapes: derivatives of any order, mixed partials, and what an outer tape records of
// an inner gradient computation (TF: nested tf.GradientTape).
#include <cmath>
#include <iostream>
#include <sstream>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// The n-th derivative of f at a scalar x, through n nested non-persistent tapes.
Tensor nth_derivative(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, int n) {
  if (n == 0) return f(x);
  GradientTape tape;
  tape.watch(x);
  Tensor inner = nth_derivative(f, x, n - 1);
  return tape.gradient(inner, x);
}

}  // namespace

TEST_CASE("third derivatives through three nested tapes") {
  SECTION("x^4 at 1.5: 24 x") {
    Tensor x = constant(1.5);
    Tensor d3;
    {
      GradientTape t1;
      t1.watch(x);
      Tensor d2;
      {
        GradientTape t2;
        t2.watch(x);
        Tensor d1;
        {
          GradientTape t3;
          t3.watch(x);
          Tensor y = x * x * x * x;
          d1 = t3.gradient(y, x);
        }
        d2 = t2.gradient(d1, x);
      }
      d3 = t1.gradient(d2, x);
    }
    require_close(d3, {}, {24 * 1.5});
  }
  SECTION("tanh at 0.5: (1 - t^2)(6 t^2 - 2)") {
    const double t = std::tanh(0.5);
    require_close(nth_derivative([](const Tensor& v) { return tanh(v); }, constant(0.5), 3), {},
                  {(1 - t * t) * (6 * t * t - 2)});
  }
  SECTION("exp(2x) at 0.3, up to the fourth order: 16 exp(0.6)") {
    require_close(nth_derivative([](const Tensor& v) { return exp(v * 2.0); }, constant(0.3), 4),
                  {}, {16 * std::exp(0.6)}, 1e-11);
  }
  SECTION("log at 2: 2 / x^3") {
    require_close(nth_derivative([](const Tensor& v) { return log(v); }, constant(2.0), 3), {},
                  {2.0 / 8.0});
  }
}

TEST_CASE("mixed partials of x^2 y^3 are 6 x y^2 in either order") {
  Tensor x = constant(2.0);
  Tensor y = constant(3.0);
  auto f = [](const Tensor& a, const Tensor& b) { return a * a * b * b * b; };
  Tensor dxdy, dydx;
  {
    GradientTape outer;
    outer.watch(y);
    Tensor dfdx;
    {
      GradientTape inner;
      inner.watch(x);
      dfdx = inner.gradient(f(x, y), x);  // 2 x y^3
    }
    dxdy = outer.gradient(dfdx, y);
  }
  {
    GradientTape outer;
    outer.watch(x);
    Tensor dfdy;
    {
      GradientTape inner;
      inner.watch(y);
      dfdy = inner.gradient(f(x, y), y);  // 3 x^2 y^2
    }
    dydx = outer.gradient(dfdy, x);
  }
  require_close(dxdy, {}, {6 * 2.0 * 9.0});
  require_close(dydx, {}, {108.0});
}

TEST_CASE("f(x, y) = x^3 y - x y^2 at (2, 3): gradients 27 and -4, d2f/dx2 = 36 (TF)") {
  Tensor x = constant(2.0);
  Tensor y = constant(3.0);
  GradientTape outer;
  outer.watch(x);
  std::vector<Tensor> first;
  Tensor value;
  {
    GradientTape inner;
    inner.watch({x, y});
    value = x * x * x * y - x * y * y;
    first = inner.gradient(value, {x, y});
  }
  require_close(value, {}, {6});
  require_close(first[0], {}, {27});
  require_close(first[1], {}, {-4});
  require_close(outer.gradient(first[0], x), {}, {36});
}

TEST_CASE("a gradient computed inside an outer tape records its backward ops on the outer tape") {
  Tensor x = constant({0.5, 1.5});
  GradientTape outer(/*persistent=*/true);
  outer.watch(x);
  const std::size_t before = outer.bytes_held();
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(reduce_sum(x * x * x), x);  // 3 x^2
  }
  // The backward ops are on the outer tape: it holds more and can differentiate g.
  CHECK(outer.bytes_held() > before);
  Tensor g_squared = reduce_sum(g * g);
  auto stop = outer.stop_recording();  // (a recording persistent tape would record, and warn)
  require_close(outer.gradient(g, x), {2}, {6 * 0.5, 6 * 1.5});
  require_close(outer.gradient(g_squared, x), {2}, {36 * 0.5 * 0.5 * 0.5, 36 * 1.5 * 1.5 * 1.5});
}

TEST_CASE("second-order checks of composite functions against central differences") {
  const Tensor a = random_tensor({3, 2}, 21);
  const Tensor w = random_tensor({2, 4}, 22);
  require_second_order_matches(
      [](const std::vector<Tensor>& v) {
        return reduce_sum(tanh(v[0]) * exp(v[0]) / (v[0] * v[0] + 1.0));
      },
      {a});
  require_second_order_matches(
      [](const std::vector<Tensor>& v) { return reduce_mean(tanh(matmul(v[0], v[1])), {0}); },
      {a, w}, 0);
  require_second_order_matches(
      [](const std::vector<Tensor>& v) { return reduce_mean(tanh(matmul(v[0], v[1])), {0}); },
      {a, w}, 1);
  require_second_order_matches(
      [](const std::vector<Tensor>& v) {
        return transpose(reshape(sqrt(v[0] * v[0] + 1.0), {2, 3})) * log(v[0] * v[0] + 2.0);
      },
      {a});
}

TEST_CASE("stop_recording on an outer tape while an inner tape computes leaves it untouched") {
  Tensor x = constant({1.0, 2.0});
  GradientTape outer(/*persistent=*/true);
  outer.watch(x);
  Tensor before = x * 3.0;
  const std::size_t held = outer.bytes_held();
  Tensor g, y;
  {
    auto pause = outer.stop_recording();
    CHECK_FALSE(outer.recording());
    GradientTape inner;
    inner.watch(x);
    y = x * x * x;
    g = inner.gradient(y, x);
  }
  CHECK(outer.recording());
  require_close(g, {2}, {3, 12});
  CHECK(outer.bytes_held() == held);
  auto stop = outer.stop_recording();
  CHECK_FALSE(outer.gradient(g, x).defined());
  CHECK_FALSE(outer.gradient(y, x).defined());
  require_close(outer.gradient(before, x), {2}, {3, 3});
}

TEST_CASE("a persistent tape still recording records its own backward and warns once") {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  Tensor x = constant(2.0);
  Tensor g, h, k;
  {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor y = x * x * x * x;
    g = tape.gradient(y, x);  // 4 x^3, recorded on the tape itself
    h = tape.gradient(g, x);  // 12 x^2
    k = tape.gradient(h, x);  // 24 x
  }
  std::cerr.rdbuf(old);
  require_close(g, {}, {32});
  require_close(h, {}, {48});
  require_close(k, {}, {48});
  const std::string text = captured.str();
  INFO(text);
  const auto first = text.find("persistent tape that is still recording");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("persistent tape that is still recording", first + 1) == std::string::npos);
}

TEST_CASE("a non-persistent tape stops recording before its gradient: no self-recording") {
  Tensor x = constant(2.0);
  GradientTape outer;
  outer.watch(x);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  Tensor g = tape.gradient(y, x);
  CHECK_FALSE(tape.recording());
  require_close(g, {}, {4});
  require_close(outer.gradient(g, x), {}, {2});  // the outer tape did record it
}
