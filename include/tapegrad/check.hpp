// Numerical gradient checking (TF: tf.test.compute_gradient).
#pragma once

#include <functional>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// The function under test: its arguments to one output tensor.
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Both Jacobians of f's output with respect to args[arg_index], flattened to 2-D
/// [output.size(), args[arg_index].size()], in float64, and their largest absolute difference.
struct GradientCheck {
  Tensor theoretical;  ///< from the tape, one backward pass per output element
  Tensor numerical;    ///< central differences with step `delta`
  double max_error;
};

/// InvalidArgument when args[arg_index] does not exist or is not floating point.
/// Float32 arguments are evaluated as given; use float64 for tight tolerances.
GradientCheck check_gradient(const Fn& f, const std::vector<Tensor>& args,
                             std::size_t arg_index = 0, double delta = 1e-6);

/// Tolerances of verify_gradients: an analytic value a passes against the numeric n when
/// |a - n| <= atol + rtol * |n|.
struct VerifyOptions {
  int order = 2;        ///< 1: first derivatives; 2: also second derivatives
  double delta = 1e-6;  ///< central-difference step
  double atol = 1e-6;
  double rtol = 1e-5;
};

/// Checks f's derivatives with respect to every floating argument against central
/// differences: the whole Jacobian of f's output (order 1) and, for order 2, the derivative of
/// the gradient of sum(w * f) (w fixed, varied weights in [0.5, 1.5)) with respect to every
/// floating argument, which covers every second derivative (mixed ones too). Integer and bool
/// arguments are held constant. Throws GradientCheckError at the first element that
/// disagrees, naming the argument(s), the element, the analytic and the numeric value;
/// InvalidArgument for an order other than 1 or 2, a non-positive delta, negative tolerances,
/// an undefined argument, or an output of f that is not float32 or float64 (naming its
/// dtype). Use float64 arguments: float32 needs far looser tolerances.
void verify_gradients(const Fn& f, const std::vector<Tensor>& args,
                      const VerifyOptions& options = {});

}  // namespace tapegrad
