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

}  // namespace tapegrad
