// verify_gradients: every first and second derivative of a function against central
// differences, with a message that says which element disagrees.
#include <cmath>
#include <sstream>
#include <string>

#include "tapegrad/check.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace {

// "[1, 0]": the multi-index of flat element `flat` of `shape` ("[]" for a scalar).
std::string element_of(const Shape& shape, std::size_t flat) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  std::string out = "[";
  for (std::size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + "]";
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

// Compares two [n_out, n_in] Jacobians element by element; `what(row, column)` describes a
// failing element for the message.
template <class Describe>
void compare(const GradientCheck& check, const VerifyOptions& options, Describe what) {
  const auto& analytic = check.theoretical.array<double>();
  const auto& numeric = check.numerical.array<double>();
  const std::size_t columns = analytic.shape()[1];
  for (std::size_t k = 0; k < analytic.size(); ++k) {
    const double a = analytic.data()[k];
    const double n = numeric.data()[k];
    const double bound = options.atol + options.rtol * std::abs(n);
    if (std::abs(a - n) <= bound) continue;  // false for NaN: a NaN always fails
    throw GradientCheckError("verify_gradients: " + what(k / columns, k % columns) + ": analytic " +
                             number(a) + ", numeric " + number(n) + " (difference " +
                             number(std::abs(a - n)) +
                             " > atol + rtol * |numeric| = " + number(bound) + ")");
  }
}

// Fixed weights for the second-order check: spread over [0.5, 1.5) so that no symmetric
// cancellation hides an error, and never zero.
Tensor weights_like(const Tensor& y) {
  std::vector<double> w(y.size());
  for (std::size_t k = 0; k < w.size(); ++k)
    w[k] = 0.5 + std::fmod(0.6180339887 * static_cast<double>(k + 1), 1.0);
  return from_values(w, y.shape(), y.dtype());
}

}  // namespace

void verify_gradients(const Fn& f, const std::vector<Tensor>& args, const VerifyOptions& options) {
  if (options.order != 1 && options.order != 2) {
    throw InvalidArgument("verify_gradients: order must be 1 or 2, got " +
                          std::to_string(options.order));
  }
  if (!(options.delta > 0) || !(options.atol >= 0) || !(options.rtol >= 0)) {
    throw InvalidArgument(
        "verify_gradients: delta must be positive and atol, rtol non-negative; got delta " +
        number(options.delta) + ", atol " + number(options.atol) + ", rtol " +
        number(options.rtol));
  }
  std::vector<std::size_t> floating;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) {
      throw InvalidArgument("verify_gradients: argument " + std::to_string(i) + " is undefined");
    }
    if (is_floating(args[i].dtype())) floating.push_back(i);
  }
  const Tensor y = f(args);
  if (!y.defined()) throw InvalidArgument("verify_gradients: f returned an undefined tensor");
  // An integer or bool output has no derivative to verify; caught here, it would surface as an
  // internal error of the weights built for the second order.
  if (!is_floating(y.dtype())) {
    throw InvalidArgument("verify_gradients: f's output is not floating point: it has dtype " +
                          std::string(dtype_name(y.dtype())) + " and shape " +
                          shape_to_string(y.shape()) +
                          " (only a float32 or float64 output has derivatives to verify)");
  }

  for (std::size_t i : floating) {
    const GradientCheck check = check_gradient(f, args, i, options.delta);
    compare(check, options, [&](std::size_t row, std::size_t column) {
      return "argument " + std::to_string(i) + ", first derivative of output element " +
             element_of(y.shape(), row) + " with respect to element " +
             element_of(args[i].shape(), column);
    });
  }
  if (options.order == 1) return;

  const Tensor w = weights_like(y);
  for (std::size_t i : floating) {
    // The gradient of sum(w * f) with respect to argument i, as a function of every argument.
    const Fn gradient_i = [&f, &w, i](const std::vector<Tensor>& a) {
      GradientTape tape;
      tape.watch(a[i]);
      const Tensor weighted = reduce_sum(multiply(f(a), w));
      return tape.gradient(weighted, a[i], UnconnectedGradients::Zero);
    };
    for (std::size_t j : floating) {
      const GradientCheck check = check_gradient(gradient_i, args, j, options.delta);
      compare(check, options, [&](std::size_t row, std::size_t column) {
        return "arguments " + std::to_string(i) + " and " + std::to_string(j) +
               ", second derivative: element " + element_of(args[i].shape(), row) +
               " of the gradient of sum(w * f) with respect to argument " + std::to_string(i) +
               ", differentiated with respect to element " + element_of(args[j].shape(), column) +
               " of argument " + std::to_string(j);
      });
    }
  }
}

}  // namespace tapegrad
