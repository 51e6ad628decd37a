// What the math family's files share: the forwards of its elementwise ops (one line each) and
// the gradient rule of a fused activation gradient (TanhGrad; nn's SigmoidGrad has its form).
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/math_kernels.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {

// The forward of a two-input elementwise op over float and integer dtypes, recorded as `op`:
// `function` is its public name (for errors), `kernel` maps one pair of elements. The operands
// must share a dtype and broadcast (NumPy).
template <class Kernel>
Tensor numeric_binary_op(const OpDefinition& op, const char* function, const Tensor& x,
                         const Tensor& y, Kernel kernel) {
  Tensor out = numeric_binary(function, x, y, kernel);
  record(op, {&x, &y}, out);
  return out;
}

// The forward of a one-input floating op whose `expression` (xtensor, vectorised by xsimd)
// computes large inputs at once; `kernel` maps one element of small ones.
template <class Kernel, class Expression>
Tensor vectorised_floating_unary_op(const OpDefinition& op, const char* function,
                                    const Tensor& x, Kernel kernel, Expression expression) {
  Tensor out = unary_kernel<DTypeSet::Floating>(function, x, kernel, expression);
  record(op, {&x}, out);
  return out;
}

// The gradient rule of a fused activation gradient F(y, g) = g s(y) with inputs (y, g), where
// s(y) is the activation's slope written in its output y (TanhGrad: 1 - y^2). F is linear in
// g, so d/dg = F(y, h); d/dy = h g s'(y), where `g_times_ds(y, g)` gives g s'(y).
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

}  // namespace tapegrad::detail
