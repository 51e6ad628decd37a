// Numerical gradient checking: the tape's Jacobian against central differences.
#include "tapegrad/check.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace {

std::vector<double> as_doubles(const Tensor& t) {
  const Tensor as_double = cast(t, DType::Float64);
  const auto& values = as_double.array<double>();
  return std::vector<double>(values.begin(), values.end());
}

// x with element j moved by `step`, in x's own dtype: the sum is taken in float64 and rounded
// once to x's dtype.
Tensor perturbed(const Tensor& x, std::size_t j, double step) {
  std::vector<double> values = as_doubles(x);
  values[j] += step;
  return from_values(values, x.shape(), x.dtype());
}

}  // namespace

GradientCheck check_gradient(const Fn& f, const std::vector<Tensor>& args, std::size_t arg_index,
                             double delta) {
  if (arg_index >= args.size()) {
    throw InvalidArgument("check_gradient: arg_index " + std::to_string(arg_index) +
                          " is out of range for " + std::to_string(args.size()) + " arguments");
  }
  const Tensor& x = args[arg_index];
  if (!x.defined() || !is_floating(x.dtype())) {
    throw InvalidArgument(std::string("check_gradient: argument ") + std::to_string(arg_index) +
                          " must be a defined float32 or float64 tensor" +
                          (x.defined() ? std::string(", got ") + dtype_name(x.dtype()) : ""));
  }
  const std::size_t n_in = x.size();

  // Theoretical: one backward pass per output element on one persistent tape.
  std::vector<double> theoretical;
  std::size_t n_out = 0;
  {
    std::vector<Tensor> inputs = args;
    GradientTape tape(/*persistent=*/true);
    tape.watch(inputs[arg_index]);
    Tensor y = f(inputs);
    if (!y.defined()) throw InvalidArgument("check_gradient: f returned an undefined tensor");
    auto stop = tape.stop_recording();
    n_out = y.size();
    theoretical.assign(n_out * n_in, 0.0);
    for (std::size_t i = 0; i < n_out; ++i) {
      std::vector<double> one_hot(n_out, 0.0);
      one_hot[i] = 1.0;
      Tensor seed = from_values(one_hot, y.shape(), y.dtype());
      Tensor g = tape.gradient({y}, {inputs[arg_index]}, {seed})[0];
      if (!g.defined()) continue;  // unconnected: a zero row
      const auto row = as_doubles(g);
      std::copy(row.begin(), row.end(),
                theoretical.begin() + static_cast<std::ptrdiff_t>(i * n_in));
    }
  }

  // Numerical: central differences, one column per input element.
  std::vector<double> numerical(n_out * n_in, 0.0);
  for (std::size_t j = 0; j < n_in; ++j) {
    std::vector<Tensor> plus = args, minus = args;
    plus[arg_index] = perturbed(x, j, delta);
    minus[arg_index] = perturbed(x, j, -delta);
    const auto yp = as_doubles(f(plus));
    const auto ym = as_doubles(f(minus));
    if (yp.size() != n_out || ym.size() != n_out) {
      throw InvalidArgument("check_gradient: f's output size changed under perturbation");
    }
    for (std::size_t i = 0; i < n_out; ++i) numerical[i * n_in + j] = (yp[i] - ym[i]) / (2 * delta);
  }

  double max_error = 0.0;
  for (std::size_t k = 0; k < numerical.size(); ++k) {
    const double e = std::abs(theoretical[k] - numerical[k]);
    max_error = std::isnan(e) ? e : std::max(max_error, e);
    if (std::isnan(e)) break;
  }
  return GradientCheck{from_values(theoretical, {n_out, n_in}),
                       from_values(numerical, {n_out, n_in}), max_error};
}

}  // namespace tapegrad
