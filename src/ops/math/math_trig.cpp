// Trigonometric and hyperbolic functions beyond sin and cos (math_unary.cpp): tan, asin, acos,
// atan, sinh, cosh, asinh, acosh, atanh. Each op's derivative is one "slope" function of its
// input written in tapegrad ops, which gives both its gradient and its forward rule
// (slope_gradient, slope_tangent): second derivatives and forward-over-reverse work.
#include <cmath>

#include "ops/batching_support.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

static Tensor one_like(const Tensor& x) { return scalar(1.0, x.dtype()); }

// ---- Tan: d tan x = 1 + tan^2 x ---------------------------------------------------------

static Tensor tan_slope(const Tensor& x) { return add(one_like(x), square(tan(x))); }
TAPEGRAD_BUILTIN_OP(tan_op) = detail::differentiable_op("Tan", detail::slope_gradient<tan_slope>,
                                                        KeepSet::all(), KeepSet::none(),
                                                        detail::slope_tangent<tan_slope>,
                                                        detail::batch_unary<&tapegrad::tan>);

Tensor tan(const Tensor& x) {
  return detail::floating_unary_op(tan_op, "tan", x, [](auto v) { return std::tan(v); });
}

// ---- Asin, Acos: +-1 / sqrt(1 - x^2) ----------------------------------------------------

static Tensor asin_slope(const Tensor& x) { return rsqrt(subtract(one_like(x), square(x))); }
static Tensor acos_slope(const Tensor& x) { return negative(asin_slope(x)); }
TAPEGRAD_BUILTIN_OP(asin_op) = detail::differentiable_op("Asin", detail::slope_gradient<asin_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<asin_slope>,
                                                         detail::batch_unary<&tapegrad::asin>);
TAPEGRAD_BUILTIN_OP(acos_op) = detail::differentiable_op("Acos", detail::slope_gradient<acos_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<acos_slope>,
                                                         detail::batch_unary<&tapegrad::acos>);

Tensor asin(const Tensor& x) {
  return detail::floating_unary_op(asin_op, "asin", x, [](auto v) { return std::asin(v); });
}

Tensor acos(const Tensor& x) {
  return detail::floating_unary_op(acos_op, "acos", x, [](auto v) { return std::acos(v); });
}

// ---- Atan: 1 / (1 + x^2) ----------------------------------------------------------------

static Tensor atan_slope(const Tensor& x) { return reciprocal(add(one_like(x), square(x))); }
TAPEGRAD_BUILTIN_OP(atan_op) = detail::differentiable_op("Atan", detail::slope_gradient<atan_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<atan_slope>,
                                                         detail::batch_unary<&tapegrad::atan>);

Tensor atan(const Tensor& x) {
  return detail::floating_unary_op(atan_op, "atan", x, [](auto v) { return std::atan(v); });
}

// ---- Sinh, Cosh: each the other's derivative --------------------------------------------

static Tensor sinh_slope(const Tensor& x) { return cosh(x); }
static Tensor cosh_slope(const Tensor& x) { return sinh(x); }
TAPEGRAD_BUILTIN_OP(sinh_op) = detail::differentiable_op("Sinh", detail::slope_gradient<sinh_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<sinh_slope>,
                                                         detail::batch_unary<&tapegrad::sinh>);
TAPEGRAD_BUILTIN_OP(cosh_op) = detail::differentiable_op("Cosh", detail::slope_gradient<cosh_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<cosh_slope>,
                                                         detail::batch_unary<&tapegrad::cosh>);

Tensor sinh(const Tensor& x) {
  return detail::floating_unary_op(sinh_op, "sinh", x, [](auto v) { return std::sinh(v); });
}

Tensor cosh(const Tensor& x) {
  return detail::floating_unary_op(cosh_op, "cosh", x, [](auto v) { return std::cosh(v); });
}

// ---- Asinh, Acosh: 1 / sqrt(x^2 +- 1); Atanh: 1 / (1 - x^2) -------------------------------

static Tensor asinh_slope(const Tensor& x) { return rsqrt(add(square(x), one_like(x))); }
static Tensor acosh_slope(const Tensor& x) { return rsqrt(subtract(square(x), one_like(x))); }
static Tensor atanh_slope(const Tensor& x) { return reciprocal(subtract(one_like(x), square(x))); }
TAPEGRAD_BUILTIN_OP(asinh_op) = detail::differentiable_op("Asinh",
                                                          detail::slope_gradient<asinh_slope>,
                                                          KeepSet::all(), KeepSet::none(),
                                                          detail::slope_tangent<asinh_slope>,
                                                          detail::batch_unary<&tapegrad::asinh>);
TAPEGRAD_BUILTIN_OP(acosh_op) = detail::differentiable_op("Acosh",
                                                          detail::slope_gradient<acosh_slope>,
                                                          KeepSet::all(), KeepSet::none(),
                                                          detail::slope_tangent<acosh_slope>,
                                                          detail::batch_unary<&tapegrad::acosh>);
TAPEGRAD_BUILTIN_OP(atanh_op) = detail::differentiable_op("Atanh",
                                                          detail::slope_gradient<atanh_slope>,
                                                          KeepSet::all(), KeepSet::none(),
                                                          detail::slope_tangent<atanh_slope>,
                                                          detail::batch_unary<&tapegrad::atanh>);

Tensor asinh(const Tensor& x) {
  return detail::floating_unary_op(asinh_op, "asinh", x, [](auto v) { return std::asinh(v); });
}

Tensor acosh(const Tensor& x) {
  return detail::floating_unary_op(acosh_op, "acosh", x, [](auto v) { return std::acosh(v); });
}

Tensor atanh(const Tensor& x) {
  return detail::floating_unary_op(atanh_op, "atanh", x, [](auto v) { return std::atanh(v); });
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(math_trig)
