// Higher derivatives of sin and cos through nested tapes (needs the sin/cos ops and their
// gradients, which are written with tapegrad ops so that they differentiate again).
#include <cmath>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// The first three derivatives of f at x, each taken by one more nested non-persistent tape.
std::vector<Tensor> three_derivatives(const std::function<Tensor(const Tensor&)>& f,
                                      const Tensor& x) {
  Tensor d1, d2, d3;
  {
    GradientTape t1;
    t1.watch(x);
    {
      GradientTape t2;
      t2.watch(x);
      {
        GradientTape t3;
        t3.watch(x);
        Tensor y = f(x);
        d1 = t3.gradient(y, x);
      }
      d2 = t2.gradient(d1, x);
    }
    d3 = t1.gradient(d2, x);
  }
  return {d1, d2, d3};
}

}  // namespace

TEST_CASE("sin through three nested tapes at 0.5: cos, -sin, -cos") {
  const std::vector<Tensor> d =
      three_derivatives([](const Tensor& v) { return sin(v); }, constant(0.5));
  REQUIRE(d.size() == 3);
  require_close(d[0], {}, {std::cos(0.5)});
  require_close(d[1], {}, {-std::sin(0.5)});
  require_close(d[2], {}, {-std::cos(0.5)});
}

TEST_CASE("cos through three nested tapes at 0.5: -sin, -cos, sin") {
  const std::vector<Tensor> d =
      three_derivatives([](const Tensor& v) { return cos(v); }, constant(0.5));
  require_close(d[0], {}, {-std::sin(0.5)});
  require_close(d[1], {}, {-std::cos(0.5)});
  require_close(d[2], {}, {std::sin(0.5)});
}

TEST_CASE("third derivative of sin elementwise on a vector is -cos") {
  Tensor x = constant({-1.0, 0.0, 0.5, 2.0});
  const std::vector<Tensor> d = three_derivatives([](const Tensor& v) { return sin(v); }, x);
  require_close(d[2], {4}, {-std::cos(-1.0), -std::cos(0.0), -std::cos(0.5), -std::cos(2.0)});
}

TEST_CASE("hessian of sin(x0) cos(x1) matches the analytic second derivatives") {
  Tensor x = constant({0.3, -0.7});
  const double a = 0.3, b = -0.7;
  Tensor h = hessian(
      [](const Tensor& v) {
        Tensor first = reduce_sum(v * constant({1.0, 0.0}));
        Tensor second = reduce_sum(v * constant({0.0, 1.0}));
        return sin(first) * cos(second);
      },
      x);
  require_close(h, {2, 2},
                {-std::sin(a) * std::cos(b), -std::cos(a) * std::sin(b), -std::cos(a) * std::sin(b),
                 -std::sin(a) * std::cos(b)});
}
