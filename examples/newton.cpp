// newton: minimise f(x, y) = (x - 1)^4 + (x - 1)^2 + (y + 2)^2 + x y / 10 with Newton's
// method, the gradient from `gradients` and the 2x2 Hessian from `hessian`.
#include <cmath>
#include <cstdio>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

// f of a point p = [x, y].
tg::Tensor objective(const tg::Tensor& p) {
  tg::Tensor x = tg::reduce_sum(p * tg::constant({1.0, 0.0}));
  tg::Tensor y = tg::reduce_sum(p * tg::constant({0.0, 1.0}));
  tg::Tensor dx = x - 1.0;
  return tg::square(tg::square(dx)) + tg::square(dx) + tg::square(y + 2.0) + x * y / 10.0;
}

int main() {
  const tg::Fn f = [](const std::vector<tg::Tensor>& args) { return objective(args[0]); };
  tg::Tensor p = tg::constant({3.0, 1.0});

  std::printf("%4s %14s %14s %16s %12s\n", "step", "x", "y", "f(x, y)", "|grad|");
  for (int step = 0; step < 20; ++step) {
    auto [value, grads] = tg::value_and_gradients(f, {p});
    const auto& g = grads[0].array<double>();
    const auto& at = p.array<double>();
    const double grad_norm = std::hypot(g(0), g(1));
    std::printf("%4d %14.10f %14.10f %16.12f %12.3e\n", step, at(0), at(1), value.item<double>(),
                grad_norm);
    if (grad_norm < 1e-12) break;

    // Solve H d = g for the 2x2 Hessian by Cramer's rule, then step p -= d.
    const tg::Tensor hessian = tg::hessian(objective, p);  // [2, 2]
    const auto& h = hessian.array<double>();
    const double det = h(0, 0) * h(1, 1) - h(0, 1) * h(1, 0);
    const double d0 = (h(1, 1) * g(0) - h(0, 1) * g(1)) / det;
    const double d1 = (h(0, 0) * g(1) - h(1, 0) * g(0)) / det;
    p = tg::constant({at(0) - d0, at(1) - d1});
  }
  return 0;
}
