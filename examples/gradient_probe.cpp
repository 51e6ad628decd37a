// Directional-derivative probe of the digits examples. Float32 models: the step is large
// (3e-3 along a unit direction) so that rounding in the loss stays far below the difference.
#include "gradient_probe.hpp"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace digits {

namespace tg = tapegrad;

namespace {

// A random unit direction of the variable's shape, in its dtype.
tg::Tensor unit_direction(const tg::Variable& v, std::mt19937& generator) {
  std::normal_distribution<double> normal;
  std::vector<double> d(tg::num_elements(v.shape()));
  double norm = 0;
  for (double& x : d) {
    x = normal(generator);
    norm += x * x;
  }
  for (double& x : d) x /= std::sqrt(norm);
  return tg::from_values(d, v.shape(), v.dtype());
}

double scalar_of(const tg::Tensor& t) { return tg::cast(t, tg::DType::Float64).item<double>(); }

}  // namespace

int check_gradients(const std::function<tg::Tensor()>& loss, const tg::Module& model,
                    std::uint32_t seed) {
  constexpr double kStep = 3e-3;
  std::vector<std::string> names;
  std::vector<tg::Variable> variables;
  for (const auto& [name, variable] : model.named_variables()) {
    if (!variable.trainable()) continue;
    names.push_back(name);
    variables.push_back(variable);
  }
  std::vector<tg::Tensor> grads;
  {
    tg::GradientTape tape;
    const tg::Tensor l = loss();
    grads = tape.gradient(l, variables);
  }
  std::mt19937 generator(seed);
  int status = 0;
  std::cout << std::defaultfloat
            << "gradient check (directional derivative vs central difference, step " << kStep
            << "):\n";
  for (std::size_t i = 0; i < variables.size(); ++i) {
    tg::Variable v = variables[i];
    const tg::Tensor d = unit_direction(v, generator);
    const double analytic =
        grads[i].defined() ? scalar_of(tg::reduce_sum(tg::multiply(grads[i], d))) : 0.0;
    const tg::Tensor original = v.peek();
    const tg::Tensor step = tg::multiply(d, tg::scalar(kStep, v.dtype()));
    v.assign(tg::add(original, step));
    const double up = scalar_of(loss());
    v.assign(tg::subtract(original, step));
    const double down = scalar_of(loss());
    v.assign(original);
    const double numeric = (up - down) / (2 * kStep);
    const bool ok =
        grads[i].defined() && std::abs(analytic - numeric) <=
                                  1e-4 + 0.10 * std::max(std::abs(analytic), std::abs(numeric));
    if (!ok) status = 4;
    std::cout << "  " << std::left << std::setw(14) << names[i] << std::right << std::scientific
              << std::setprecision(4) << " tape " << std::setw(11) << analytic << "  numeric "
              << std::setw(11) << numeric << (ok ? "  ok" : "  MISMATCH") << "\n"
              << std::defaultfloat;
  }
  return status;
}

}  // namespace digits
