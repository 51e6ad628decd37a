// What the op families share: the forward of a one-input elementwise op, the gradient rule of
// a fused activation gradient, and small formatting helpers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/shape_util.hpp"
#include "ops/math_kernels.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/operand_checks.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad {

// The names every op family file defines its ops with.
using detail::KeepSet;
using detail::OpDefinition;
using Grads = std::vector<GradientValue>;

}  // namespace tapegrad

namespace tapegrad::detail {

// "[1, -1, 3]" for any list of integers (axes, begins, sizes, multiples).
template <class Int>
std::string ints_to_string(const std::vector<Int>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(values[i]);
  }
  return out + "]";
}

inline std::vector<std::int64_t> signed_shape(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

// The forward of a one-input elementwise op, recorded as `op`: `function` is its public name
// (for errors), `kernel` maps one element, and `vectorised` (optional: exp, log, tanh or sigmoid's
// VectorFunction) computes large inputs at once. `accepted`: floating dtypes only, or every
// numeric one.
template <DTypeSet accepted, class Kernel, class Vectorised = NoVectorFunction>
Tensor unary_op(const OpDefinition& op, const char* function, const Tensor& x, Kernel kernel,
                Vectorised vectorised = {}) {
  Tensor out = unary_kernel<accepted>(function, x, kernel, vectorised);
  record(op, {&x}, out);
  return out;
}
template <class Kernel>
Tensor floating_unary_op(const OpDefinition& op, const char* function, const Tensor& x,
                         Kernel kernel) {
  return unary_op<DTypeSet::Floating>(op, function, x, kernel);
}
template <class Kernel>
Tensor numeric_unary_op(const OpDefinition& op, const char* function, const Tensor& x,
                        Kernel kernel) {
  return unary_op<DTypeSet::Numeric>(op, function, x, kernel);
}

// The gradient rule of a fused activation gradient F(y, g) = g s(y) with inputs (y, g), where
// s(y) is the activation's slope written in what it keeps, its output y (TanhGrad: 1 - y^2) or
// its input (SoftplusGrad: sigmoid(x)). F is linear in g, so d/dg = F(y, h); d/dy = h g s'(y),
// where `g_times_ds(y, g)` gives g s'(y).
using FusedGradient = Tensor (*)(const Tensor& y, const Tensor& g);
inline std::vector<GradientValue> fused_activation_gradient(const OpContext& op, const Tensor& h,
                                                            FusedGradient fused,
                                                            FusedGradient g_times_ds) {
  const Tensor& y = op.inputs()[0];
  const Tensor& g = op.inputs()[1];
  std::vector<GradientValue> grads(2);
  if (op.needs_gradient(0)) grads[0] = multiply(h, g_times_ds(y, g));
  if (op.needs_gradient(1)) grads[1] = fused(y, h);
  return grads;
}

// The gradient summed back to input i's shape: `g` itself for an operand that was not
// broadcast, found without building either shape (a tiny op's gradient calls this).
inline Tensor sum_to_input(const OpContext& op, std::size_t i, const Tensor& g) {
  return op.input_shape_matches(i, g) ? g : unbroadcast(g, op.input_shape(i));
}

}  // namespace tapegrad::detail
