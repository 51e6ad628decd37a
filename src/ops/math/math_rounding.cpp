// Rounding: floor, ceil, round (half to even, as TF). Piecewise constant: their gradient and
// tangent are zeros (TF registers zeros, not none).
#include <cmath>

#include "ops/batching_support.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

TAPEGRAD_BUILTIN_OP(floor_op) = detail::differentiable_op("Floor", detail::zero_gradient,
                                                          KeepSet::none(), KeepSet::none(),
                                                          detail::zero_tangent,
                                                          detail::batch_unary<&tapegrad::floor>);
TAPEGRAD_BUILTIN_OP(ceil_op) = detail::differentiable_op("Ceil", detail::zero_gradient,
                                                         KeepSet::none(), KeepSet::none(),
                                                         detail::zero_tangent,
                                                         detail::batch_unary<&tapegrad::ceil>);
TAPEGRAD_BUILTIN_OP(round_op) = detail::differentiable_op("Round", detail::zero_gradient,
                                                          KeepSet::none(), KeepSet::none(),
                                                          detail::zero_tangent,
                                                          detail::batch_unary<&tapegrad::round>);

Tensor floor(const Tensor& x) {
  return detail::floating_unary_op(floor_op, "floor", x, [](auto v) { return std::floor(v); });
}

Tensor ceil(const Tensor& x) {
  return detail::floating_unary_op(ceil_op, "ceil", x, [](auto v) { return std::ceil(v); });
}

// std::nearbyint in the default rounding mode rounds halves to even: round(2.5) = 2.
Tensor round(const Tensor& x) {
  return detail::floating_unary_op(round_op, "round", x, [](auto v) { return std::nearbyint(v); });
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(math_rounding)
