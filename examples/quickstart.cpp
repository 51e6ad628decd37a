// quickstart: the first derivatives a new user computes with tapegrad.
#include <iostream>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

int main() {
  // d(x*x)/dx at x = 3 is 6.
  tg::Tensor x = tg::constant(3.0);
  {
    tg::GradientTape tape;
    tape.watch(x);
    tg::Tensor y = x * x;
    std::cout << "y = x*x at 3: " << y.item<double>()
              << ", dy/dx = " << tape.gradient(y, x).item<double>() << '\n';
  }

  // A persistent tape answers several questions about one computation.
  {
    tg::GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    tg::Tensor y = x * x;
    tg::Tensor z = y * y;
    auto paused = tape.stop_recording();  // gradients of gradients are not wanted here
    std::cout << "z = (x*x)^2: dz/dx = " << tape.gradient(z, x).item<double>()
              << ", dy/dx = " << tape.gradient(y, x).item<double>() << '\n';
  }

  // Nested tapes give the second derivative: d2/dx2 x^3 at 2 is 12.
  {
    tg::Tensor x2 = tg::constant(2.0);
    tg::GradientTape outer;
    outer.watch(x2);
    tg::Tensor dy_dx;
    {
      tg::GradientTape inner;
      inner.watch(x2);
      tg::Tensor y = x2 * x2 * x2;
      dy_dx = inner.gradient(y, x2);
    }
    std::cout << "y = x^3 at 2: dy/dx = " << dy_dx.item<double>()
              << ", d2y/dx2 = " << outer.gradient(dy_dx, x2).item<double>() << '\n';
  }

  // A least-squares fit: gradient of mean((X w - t)^2) with respect to w.
  {
    tg::Tensor X = tg::constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}});
    // A one-column literal {{1.0}, {2.0}} would be ambiguous with a 1-D list: reshape instead.
    tg::Tensor t = tg::reshape(tg::constant({1.0, 2.0, 3.0}), {3, 1});
    tg::Tensor w = tg::reshape(tg::constant({0.5, -0.5}), {2, 1});
    tg::GradientTape tape;
    tape.watch(w);
    tg::Tensor loss = tg::reduce_mean(tg::square(tg::matmul(X, w) - t));
    std::cout << "loss = " << loss.item<double>() << ", dloss/dw = " << tape.gradient(loss, w)
              << '\n';
  }
  return 0;
}
