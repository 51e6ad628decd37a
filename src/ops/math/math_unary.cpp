// One-input math: abs, sign, square, sqrt, exp, log, log1p, sin, cos, tanh, reciprocal, expm1,
// rsqrt, and the fused gradients SqrtGrad, TanhGrad, ReciprocalGrad, RsqrtGrad. Negation is
// with the arithmetic in math.cpp.
// Each op reads top to bottom: its definition, its forward, its gradient. Everything but the
// public functions has internal linkage (static, constexpr).
#include <cmath>
#include <type_traits>

#include "kernels/int_arith.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "ops/structure_support.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

// ---- Abs --------------------------------------------------------------------------------

static Grads abs_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents abs_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(abs_op) = detail::differentiable_op("Abs", abs_gradient, KeepSet::all(),
                                                        KeepSet::none(), abs_tangent,
                                                        detail::batch_unary<&tapegrad::abs>);

template <class T>
static T absolute(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(v);
  } else {
    return detail::wrapping_abs(v);  // |INT_MIN| wraps, as in TF
  }
}

Tensor abs(const Tensor& x) {
  return detail::numeric_unary_op(abs_op, "abs", x, [](auto v) { return absolute(v); });
}

static Tangents abs_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return multiply(dx, sign(x)); });
}

// sign(0) = 0 gives abs a zero gradient at 0, as TF.
static Grads abs_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], sign(op.inputs()[0]))};
}

// ---- Sign -------------------------------------------------------------------------------

// sign is piecewise constant: TF registers a zero gradient rather than none, so a sign in a
// loss does not make the sources look unconnected.
TAPEGRAD_BUILTIN_OP(sign_op) = detail::differentiable_op("Sign", detail::zero_gradient,
                                                         KeepSet::none(), KeepSet::none(),
                                                         detail::zero_tangent,
                                                         detail::batch_unary<&tapegrad::sign>);

template <class T>
static T sign_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return v;
  }
  return static_cast<T>((v > T(0)) - (v < T(0)));
}

Tensor sign(const Tensor& x) {
  return detail::numeric_unary_op(sign_op, "sign", x, [](auto v) { return sign_of(v); });
}

// ---- Square -----------------------------------------------------------------------------

static Grads square_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents square_tangent(const ForwardContext& op, const Tangents& tangents);
struct SquareElement {
  template <class T>
  static T apply(T v) {
    return detail::wrapping_mul(v, v);
  }
};
TAPEGRAD_BUILTIN_OP(square_op) = detail::with_elementwise(
    detail::differentiable_op("Square", square_gradient, KeepSet::all(), KeepSet::none(),
                              square_tangent, detail::batch_unary<&tapegrad::square>),
    detail::unary_elementwise<SquareElement>);

Tensor square(const Tensor& x) {
  return detail::numeric_unary_op(square_op, "square", x,
                                  [](auto v) { return SquareElement::apply(v); });
}

static Tangents square_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return multiply(dx, multiply(x, scalar(2.0, x.dtype())));
  });
}

static Grads square_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  return {multiply(g[0], multiply(x, scalar(2.0, x.dtype())))};
}

// ---- Sqrt, SqrtGrad ---------------------------------------------------------------------

static Grads sqrt_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents sqrt_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads sqrt_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents sqrt_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor sqrt_grad_fixed_y(const Tensor& y, const Tensor& g);
struct SqrtElement {
  template <class T>
  static T apply(T v) {
    return std::sqrt(v);
  }
};
TAPEGRAD_BUILTIN_OP(sqrt_op) = detail::with_elementwise(
    detail::differentiable_op("Sqrt", sqrt_gradient, KeepSet::none(), KeepSet::all(), sqrt_tangent,
                              detail::batch_unary<&tapegrad::sqrt>),
    detail::unary_elementwise<SqrtElement>);
// The slope 0.5 / y first, then times g: the batching rule's sqrt_grad_fixed_y (a fixed y)
// computes the same two roundings, so a batched replay gives these bits loop or op by op.
struct SqrtGradElement {
  template <class T>
  static T apply(T yv, T gv) {
    return gv * (T(0.5) / yv);
  }
};
TAPEGRAD_BUILTIN_OP(sqrt_grad_definition) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op(
            "SqrtGrad", sqrt_grad_gradient, KeepSet::all(), KeepSet::none(), sqrt_grad_tangent,
            detail::batch_fused_activation<&detail::sqrt_grad_op, &sqrt_grad_fixed_y>),
        detail::binary_elementwise<SqrtGradElement>),
    detail::structure_fused_activation<&detail::sqrt_grad_op>);

Tensor sqrt(const Tensor& x) {
  return detail::floating_unary_op(sqrt_op, "sqrt", x,
                                   [](auto v) { return SqrtElement::apply(v); });
}

// g / (2 y) with g halved instead of y doubled: one rounding either way, and no overflow of
// 2 y for the largest y.
Tensor detail::sqrt_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel(
      "SqrtGrad", y, g, [](auto yv, auto gv) { return SqrtGradElement::apply(yv, gv); });
  record(sqrt_grad_definition, {&y, &g}, out);
  return out;
}

static Tangents sqrt_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return detail::sqrt_grad_op(op.outputs[0], dx); });
}

// One fused op (TF's SqrtGrad) from the kept output: d sqrt(x) = 1 / (2 sqrt(x)).
static Grads sqrt_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::sqrt_grad_op(op.outputs()[0], g[0])};
}

// SqrtGrad(y, g) = g / (2 y): its slope in y is -1 / (2 y^2), so g s'(y) = -SqrtGrad(y, g) / y.
static Tensor sqrt_g_times_ds(const Tensor& y, const Tensor& g) {
  return negative(divide(detail::sqrt_grad_op(y, g), y));
}

static Tangents sqrt_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::sqrt_grad_op, sqrt_g_times_ds);
}

static Grads sqrt_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::sqrt_grad_op, sqrt_g_times_ds);
}

// Batched g, fixed y: the slope 1 / (2 y) once, broadcast.
static Tensor sqrt_grad_fixed_y(const Tensor& y, const Tensor& g) {
  return multiply(g, divide(scalar(0.5, y.dtype()), y));
}

// ---- Exp, Log ---------------------------------------------------------------------------

static Grads exp_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents exp_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads log_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents log_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(exp_op) = detail::with_elementwise(
    detail::differentiable_op("Exp", exp_gradient, KeepSet::none(), KeepSet::all(), exp_tangent,
                              detail::batch_unary<&tapegrad::exp>),
    detail::vector_math_elementwise<detail::VectorFunction::Exp>);
TAPEGRAD_BUILTIN_OP(log_op) = detail::with_elementwise(
    detail::differentiable_op("Log", log_gradient, KeepSet::all(), KeepSet::none(), log_tangent,
                              detail::batch_unary<&tapegrad::log>),
    detail::vector_math_elementwise<detail::VectorFunction::Log>);

Tensor exp(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Exp>(exp_op, "exp", x);
}

Tensor log(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Log>(log_op, "log", x);
}

static Tangents exp_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& y = op.outputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) { return multiply(dx, y); });
}

// Each from what it keeps: exp from its output, log from its input.
static Grads exp_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], op.outputs()[0])};
}

static Tangents log_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) { return divide(dx, x); });
}

static Grads log_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {divide(g[0], op.inputs()[0])};
}

// ---- Log1p ------------------------------------------------------------------------------

static Grads log1p_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents log1p_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(log1p_op) = detail::differentiable_op("Log1p", log1p_gradient, KeepSet::all(),
                                                          KeepSet::none(), log1p_tangent,
                                                          detail::batch_unary<&tapegrad::log1p>);

Tensor log1p(const Tensor& x) {
  return detail::floating_unary_op(log1p_op, "log1p", x, [](auto v) { return std::log1p(v); });
}

static Tangents log1p_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return divide(dx, add(scalar(1.0, x.dtype()), x)); });
}

static Grads log1p_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  return {divide(g[0], add(scalar(1.0, x.dtype()), x))};
}

// ---- Sin, Cos ---------------------------------------------------------------------------

static Grads sin_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents sin_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads cos_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents cos_tangent(const ForwardContext& op, const Tangents& tangents);
struct SinElement {
  template <class T>
  static T apply(T v) {
    return std::sin(v);
  }
};
TAPEGRAD_BUILTIN_OP(sin_op) = detail::with_elementwise(
    detail::differentiable_op("Sin", sin_gradient, KeepSet::all(), KeepSet::none(), sin_tangent,
                              detail::batch_unary<&tapegrad::sin>),
    detail::unary_elementwise<SinElement>);
struct CosElement {
  template <class T>
  static T apply(T v) {
    return std::cos(v);
  }
};
TAPEGRAD_BUILTIN_OP(cos_op) = detail::with_elementwise(
    detail::differentiable_op("Cos", cos_gradient, KeepSet::all(), KeepSet::none(), cos_tangent,
                              detail::batch_unary<&tapegrad::cos>),
    detail::unary_elementwise<CosElement>);

Tensor sin(const Tensor& x) {
  return detail::floating_unary_op(sin_op, "sin", x, [](auto v) { return SinElement::apply(v); });
}

Tensor cos(const Tensor& x) {
  return detail::floating_unary_op(cos_op, "cos", x, [](auto v) { return CosElement::apply(v); });
}

static Tangents sin_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return multiply(dx, cos(x)); });
}

static Grads sin_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], cos(op.inputs()[0]))};
}

static Tangents cos_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return negative(multiply(dx, sin(x))); });
}

static Grads cos_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {negative(multiply(g[0], sin(op.inputs()[0])))};
}

// ---- Tanh, TanhGrad ---------------------------------------------------------------------

static Grads tanh_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents tanh_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads tanh_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents tanh_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor tanh_grad_fixed_y(const Tensor& y, const Tensor& g);
TAPEGRAD_BUILTIN_OP(tanh_op) = detail::with_elementwise(
    detail::differentiable_op("Tanh", tanh_gradient, KeepSet::none(), KeepSet::all(), tanh_tangent,
                              detail::batch_unary<&tapegrad::tanh>),
    detail::vector_math_elementwise<detail::VectorFunction::Tanh>);
struct TanhGradElement {
  template <class T>
  static T apply(T yv, T gv) {
    return gv * (1 - yv * yv);
  }
};
TAPEGRAD_BUILTIN_OP(tanh_grad_definition) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op(
            "TanhGrad", tanh_grad_gradient, KeepSet::all(), KeepSet::none(), tanh_grad_tangent,
            detail::batch_fused_activation<&detail::tanh_grad_op, &tanh_grad_fixed_y>),
        detail::binary_elementwise<TanhGradElement>),
    detail::structure_fused_activation<&detail::tanh_grad_op>);

Tensor tanh(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Tanh>(tanh_op, "tanh", x);
}

Tensor detail::tanh_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel(
      "TanhGrad", y, g, [](auto yv, auto gv) { return TanhGradElement::apply(yv, gv); });
  record(tanh_grad_definition, {&y, &g}, out);
  return out;
}

static Tangents tanh_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& y = op.outputs[0];
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return detail::tanh_grad_op(y, dx); });
}

// One fused kernel (TF's TanhGrad) instead of four ops: it dominates small-tensor backward.
static Grads tanh_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::tanh_grad_op(op.outputs()[0], g[0])};
}

// TanhGrad(y, g) = g (1 - y^2), so g s'(y) = -2 g y (ReciprocalGrad's too: its slope is -y^2).
static Tensor g_times_minus_two_y(const Tensor& y, const Tensor& g) {
  return multiply(scalar(-2.0, y.dtype()), multiply(g, y));
}

static Tangents tanh_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::tanh_grad_op, g_times_minus_two_y);
}

static Grads tanh_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::tanh_grad_op, g_times_minus_two_y);
}

// Batched g, fixed y (the forward's output): the slope 1 - y^2 once, broadcast.
static Tensor tanh_grad_fixed_y(const Tensor& y, const Tensor& g) {
  return multiply(g, subtract(scalar(1.0, y.dtype()), multiply(y, y)));
}

// ---- Reciprocal, ReciprocalGrad ---------------------------------------------------------

static Grads reciprocal_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents reciprocal_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads reciprocal_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents reciprocal_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor reciprocal_grad_fixed_y(const Tensor& y, const Tensor& g);
struct ReciprocalElement {
  template <class T>
  static T apply(T v) {
    return T(1) / v;
  }
};
TAPEGRAD_BUILTIN_OP(reciprocal_op) = detail::with_elementwise(
    detail::differentiable_op("Reciprocal", reciprocal_gradient, KeepSet::none(), KeepSet::all(),
                              reciprocal_tangent, detail::batch_unary<&tapegrad::reciprocal>),
    detail::unary_elementwise<ReciprocalElement>);
struct ReciprocalGradElement {
  template <class T>
  static T apply(T yv, T gv) {
    return -(gv * (yv * yv));
  }
};
TAPEGRAD_BUILTIN_OP(reciprocal_grad_definition) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op(
            "ReciprocalGrad", reciprocal_grad_gradient, KeepSet::all(), KeepSet::none(),
            reciprocal_grad_tangent,
            detail::batch_fused_activation<&detail::reciprocal_grad_op, &reciprocal_grad_fixed_y>),
        detail::binary_elementwise<ReciprocalGradElement>),
    detail::structure_fused_activation<&detail::reciprocal_grad_op>);

Tensor reciprocal(const Tensor& x) {
  return detail::floating_unary_op(reciprocal_op, "reciprocal", x,
                                   [](auto v) { return ReciprocalElement::apply(v); });
}

Tensor detail::reciprocal_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel("ReciprocalGrad", y, g, [](auto yv, auto gv) {
    return ReciprocalGradElement::apply(yv, gv);
  });
  record(reciprocal_grad_definition, {&y, &g}, out);
  return out;
}

static Tangents reciprocal_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return detail::reciprocal_grad_op(op.outputs[0], dx);
  });
}

// d(1/x) = -1/x^2 = -y^2, from the kept output: one fused op (TF's ReciprocalGrad), not three.
static Grads reciprocal_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::reciprocal_grad_op(op.outputs()[0], g[0])};
}

static Tangents reciprocal_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::reciprocal_grad_op,
                                          g_times_minus_two_y);
}

static Grads reciprocal_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::reciprocal_grad_op,
                                           g_times_minus_two_y);
}

// Batched g, fixed y: the slope -y^2 once, broadcast.
static Tensor reciprocal_grad_fixed_y(const Tensor& y, const Tensor& g) {
  return multiply(g, negative(multiply(y, y)));
}

// ---- Expm1: d (e^x - 1) = e^x -----------------------------------------------------------

static Tensor expm1_slope(const Tensor& x) { return exp(x); }
TAPEGRAD_BUILTIN_OP(expm1_op) = detail::differentiable_op("Expm1",
                                                          detail::slope_gradient<expm1_slope>,
                                                          KeepSet::all(), KeepSet::none(),
                                                          detail::slope_tangent<expm1_slope>,
                                                          detail::batch_unary<&tapegrad::expm1>);

Tensor expm1(const Tensor& x) {
  return detail::floating_unary_op(expm1_op, "expm1", x, [](auto v) { return std::expm1(v); });
}

// ---- Rsqrt, RsqrtGrad: d x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2 ----------------------------

static Grads rsqrt_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents rsqrt_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads rsqrt_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents rsqrt_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor rsqrt_grad_fixed_y(const Tensor& y, const Tensor& g);
TAPEGRAD_BUILTIN_OP(rsqrt_op) = detail::differentiable_op("Rsqrt", rsqrt_gradient, KeepSet::none(),
                                                          KeepSet::all(), rsqrt_tangent,
                                                          detail::batch_unary<&tapegrad::rsqrt>);
TAPEGRAD_BUILTIN_OP(rsqrt_grad_definition) = detail::with_structure(
    detail::differentiable_op(
        "RsqrtGrad", rsqrt_grad_gradient, KeepSet::all(), KeepSet::none(), rsqrt_grad_tangent,
        detail::batch_fused_activation<&detail::rsqrt_grad_op, &rsqrt_grad_fixed_y>),
    detail::structure_fused_activation<&detail::rsqrt_grad_op>);

Tensor rsqrt(const Tensor& x) {
  return detail::floating_unary_op(rsqrt_op, "rsqrt", x,
                                   [](auto v) { return decltype(v)(1) / std::sqrt(v); });
}

Tensor detail::rsqrt_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel("RsqrtGrad", y, g, [](auto yv, auto gv) {
    return gv * (decltype(gv)(-0.5) * (yv * yv * yv));
  });
  record(rsqrt_grad_definition, {&y, &g}, out);
  return out;
}

static Tangents rsqrt_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return detail::rsqrt_grad_op(op.outputs[0], dx); });
}

// One fused op (TF's RsqrtGrad) from the kept output, instead of four from the input (the
// slope rsqrt(x) / x needed a second rsqrt).
static Grads rsqrt_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::rsqrt_grad_op(op.outputs()[0], g[0])};
}

// RsqrtGrad(y, g) = -g y^3 / 2: its slope in y is -3 y^2 / 2.
static Tensor rsqrt_g_times_ds(const Tensor& y, const Tensor& g) {
  return multiply(scalar(-1.5, y.dtype()), multiply(g, square(y)));
}

static Tangents rsqrt_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::rsqrt_grad_op, rsqrt_g_times_ds);
}

static Grads rsqrt_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::rsqrt_grad_op, rsqrt_g_times_ds);
}

// Batched g, fixed y: the slope -y^3 / 2 once, broadcast.
static Tensor rsqrt_grad_fixed_y(const Tensor& y, const Tensor& g) {
  return multiply(g, multiply(scalar(-0.5, y.dtype()), multiply(square(y), y)));
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(math_unary)
