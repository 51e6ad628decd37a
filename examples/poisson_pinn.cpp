// poisson_pinn: a physics-informed network for the 1-D Poisson problem
//   -u''(x) = pi^2 sin(pi x) on [0, 1],  u(0) = u(1) = 0,  exact solution u(x) = sin(pi x).
// A 1-32-32-1 tanh network is trained on the residual of the equation at collocation points
// and on the two boundary values: Adam first, then L-BFGS (the usual optimiser of such
// networks). u'' comes from two nested tapes over x inside the tape over the weights, so
// each training step differentiates three tapes deep.
//   ./poisson_pinn [adam_steps=500] [lbfgs_iterations=300]
// Prints the loss and the largest error against sin(pi x) on a fine grid; exits 1 when that
// error is above 1e-2.
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr std::size_t kWidth = 32;
constexpr std::int64_t kCollocationPoints = 64;

struct Network {
  std::vector<tg::Variable> weights, biases;

  explicit Network(tg::Generator& generator) {
    const std::vector<std::size_t> sizes = {1, kWidth, kWidth, 1};
    for (std::size_t layer = 0; layer + 1 < sizes.size(); ++layer) {
      // Glorot normal: stddev sqrt(2 / (fan_in + fan_out)).
      const double stddev = std::sqrt(2.0 / static_cast<double>(sizes[layer] + sizes[layer + 1]));
      weights.emplace_back(
          tg::random_normal({sizes[layer], sizes[layer + 1]}, generator, 0.0, stddev));
      biases.emplace_back(tg::zeros({sizes[layer + 1]}));
    }
  }

  // x [n, 1] -> u [n, 1]
  tg::Tensor operator()(const tg::Tensor& x) const {
    tg::Tensor h = x;
    for (std::size_t layer = 0; layer < weights.size(); ++layer) {
      h = tg::matmul(h, weights[layer]) + biases[layer];
      if (layer + 1 < weights.size()) h = tg::tanh(h);
    }
    return h;
  }

  std::vector<tg::Variable> variables() const {
    std::vector<tg::Variable> all = weights;
    all.insert(all.end(), biases.begin(), biases.end());
    return all;
  }
};

// The mean squared residual of -u'' = pi^2 sin(pi x) at x, plus the squared boundary values.
// Each u(x_i) depends on x_i alone, so the gradient of sum(u) with respect to x is u' at every
// point, and the gradient of sum(u') is u''.
tg::Tensor loss(const Network& u, const tg::Tensor& x, const tg::Tensor& boundary) {
  tg::GradientTape second;
  second.watch(x);
  tg::Tensor u_x;
  {
    tg::GradientTape first;
    first.watch(x);
    u_x = first.gradient(tg::reduce_sum(u(x)), x);
  }
  const tg::Tensor u_xx = second.gradient(tg::reduce_sum(u_x), x);
  const tg::Tensor residual = u_xx + kPi * kPi * tg::sin(kPi * x);
  return tg::reduce_mean(tg::square(residual)) + tg::reduce_sum(tg::square(u(boundary)));
}

}  // namespace

int main(int argc, char** argv) {
  const int adam_steps = argc > 1 ? std::atoi(argv[1]) : 500;
  const int lbfgs_iterations = argc > 2 ? std::atoi(argv[2]) : 300;

  tg::Generator generator(7);
  const Network u(generator);
  const tg::Tensor x =
      tg::reshape(tg::linspace(0.0, 1.0, kCollocationPoints), {kCollocationPoints, 1});
  const tg::Tensor boundary = tg::from_values({0.0, 1.0}, {2, 1});
  const auto variables = u.variables();

  std::cout << std::setprecision(4);
  tg::Adam adam(0.01);
  for (int step = 1; step <= adam_steps; ++step) {
    tg::GradientTape tape;  // records the weights' reads: the outermost of the three tapes
    const tg::Tensor value = loss(u, x, boundary);
    const std::vector<tg::Tensor> grads = tape.gradient(value, variables);
    std::vector<std::pair<tg::Tensor, tg::Variable>> pairs;
    for (std::size_t i = 0; i < grads.size(); ++i) pairs.emplace_back(grads[i], variables[i]);
    adam.apply_gradients(pairs);
    if (step == 1 || step % 100 == 0) {
      std::cout << "adam step " << std::setw(4) << step << "  loss " << value.item<double>()
                << "\n";
    }
  }

  tg::LBFGSOptions options;
  options.max_iterations = lbfgs_iterations;
  const tg::LBFGSResult result =
      tg::minimize_lbfgs([&] { return loss(u, x, boundary); }, variables, options);
  std::cout << "l-bfgs: " << result.iterations << " iterations, " << result.function_evaluations
            << " evaluations, loss " << result.loss.item<double>() << "\n";

  const tg::Tensor grid = tg::reshape(tg::linspace(0.0, 1.0, 501), {501, 1});
  const double error = tg::reduce_max(tg::abs(u(grid) - tg::sin(kPi * grid))).item<double>();
  std::cout << "largest |u(x) - sin(pi x)| on 501 points: " << error << "\n";
  return error <= 1e-2 ? 0 : 1;
}
