// rosenbrock: Adam walks the Rosenbrock valley f(x, y) = (1 - x)^2 + 100 (y - x^2)^2 from
// (-1.2, 1) to its minimum at (1, 1).
//   ./rosenbrock [learning_rate=0.02] [steps=6000]
#include <cstdlib>
#include <iomanip>
#include <iostream>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

tg::Tensor rosenbrock(const tg::Tensor& x, const tg::Tensor& y) {
  return tg::square(1.0 - x) + 100.0 * tg::square(y - tg::square(x));
}

int main(int argc, char** argv) {
  const double learning_rate = argc > 1 ? std::atof(argv[1]) : 0.02;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 6000;

  tg::Variable x(tg::constant(-1.2), /*trainable=*/true, "x");
  tg::Variable y(tg::constant(1.0), /*trainable=*/true, "y");
  tg::Adam adam(learning_rate);

  std::cout << std::setprecision(8);
  for (int step = 1; step <= steps; ++step) {
    // The tape finds x and y because the function reads them.
    auto [loss, grads] = tg::implicit_value_and_gradients([&] { return rosenbrock(x, y); });
    adam.apply_gradients(grads);
    if (step % (steps / 10 > 0 ? steps / 10 : 1) == 0 || step == 1) {
      std::cout << "step " << std::setw(6) << step << "  loss " << std::setw(14)
                << loss.item<double>() << "  (x, y) = (" << x.peek().item<double>() << ", "
                << y.peek().item<double>() << ")\n";
    }
  }
  std::cout << "final point: (" << x.peek().item<double>() << ", " << y.peek().item<double>()
            << "), the minimum is (1, 1)\n";
  return 0;
}
