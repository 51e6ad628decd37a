// Built against an installed tapegrad; exits non-zero on a wrong gradient.
#include <cmath>
#include <iostream>

#include <tapegrad/tapegrad.hpp>

int main() {
  tapegrad::Tensor x = tapegrad::constant(3.0);
  tapegrad::GradientTape tape;
  tape.watch(x);
  tapegrad::Tensor y = tapegrad::tanh(x * x);
  const double got = tape.gradient(y, x).item<double>();
  const double t = std::tanh(9.0);
  const double expected = (1 - t * t) * 6.0;
  const bool ok = std::abs(got - expected) < 1e-12;
  std::cout << "consumer: d tanh(x^2)/dx at 3 = " << got << (ok ? " (ok)" : " (WRONG)") << '\n';
  return ok ? 0 : 1;
}
