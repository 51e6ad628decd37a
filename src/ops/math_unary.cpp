// Unary math beyond the basics in math.cpp: abs, sign, log1p, sin, cos, reciprocal.
// Forward kernels and gradients side by side.
#include <cmath>
#include <type_traits>

#include "kernels/int_arith.hpp"
#include "kernels/math_kernels.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

using detail::KeepSet;
using detail::OpDefinition;
using Grads = std::vector<GradientValue>;

namespace {

template <class T>
T sign_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return v;
  }
  return static_cast<T>((v > T(0)) - (v < T(0)));
}

template <class T>
T absolute(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(v);
  } else {
    return detail::wrapping_abs(v);
  }
}

// ---- gradients --------------------------------------------------------------------------

// sign(0) = 0 gives abs a zero gradient at 0, as TF.
Grads abs_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {multiply(g[0], sign(ctx.inputs()[0]))};
}

// sign is piecewise constant: TF registers a zero gradient rather than none, so a sign in a
// loss does not make the sources look unconnected.
Grads sign_grad(const OpContext& ctx, const std::vector<Tensor>&) {
  return {zeros(ctx.input_shape(0), ctx.input_dtype(0))};
}

Grads log1p_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& x = ctx.inputs()[0];
  return {divide(g[0], add(scalar(1.0, x.dtype()), x))};
}

Grads sin_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {multiply(g[0], cos(ctx.inputs()[0]))};
}

Grads cos_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {negative(multiply(g[0], sin(ctx.inputs()[0])))};
}

// d(1/x) = -1/x^2 = -y^2, from the kept output as TF's ReciprocalGrad.
Grads reciprocal_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& y = ctx.outputs()[0];
  return {negative(multiply(g[0], multiply(y, y)))};
}

constexpr OpDefinition abs_op =
    detail::differentiable_op("Abs", abs_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition sign_op =
    detail::differentiable_op("Sign", sign_grad, KeepSet::none(), KeepSet::none());
constexpr OpDefinition log1p_op =
    detail::differentiable_op("Log1p", log1p_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition sin_op =
    detail::differentiable_op("Sin", sin_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition cos_op =
    detail::differentiable_op("Cos", cos_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition reciprocal_op =
    detail::differentiable_op("Reciprocal", reciprocal_grad, KeepSet::none(), KeepSet::all());

}  // namespace

Tensor abs(const Tensor& x) {
  Tensor out = detail::numeric_unary("abs", x, [](auto v) { return absolute(v); });
  detail::record(abs_op, {&x}, out);
  return out;
}

Tensor sign(const Tensor& x) {
  Tensor out = detail::numeric_unary("sign", x, [](auto v) { return sign_of(v); });
  detail::record(sign_op, {&x}, out);
  return out;
}

Tensor log1p(const Tensor& x) {
  Tensor out = detail::floating_unary("log1p", x, [](auto v) { return std::log1p(v); });
  detail::record(log1p_op, {&x}, out);
  return out;
}

Tensor sin(const Tensor& x) {
  Tensor out = detail::floating_unary("sin", x, [](auto v) { return std::sin(v); });
  detail::record(sin_op, {&x}, out);
  return out;
}

Tensor cos(const Tensor& x) {
  Tensor out = detail::floating_unary("cos", x, [](auto v) { return std::cos(v); });
  detail::record(cos_op, {&x}, out);
  return out;
}

Tensor reciprocal(const Tensor& x) {
  Tensor out = detail::floating_unary("reciprocal", x, [](auto v) { return decltype(v)(1) / v; });
  detail::record(reciprocal_op, {&x}, out);
  return out;
}

namespace detail {

void register_math_unary_ops(OpRegistrar& registry) { registry.add({&abs_op, &sign_op, &log1p_op, &sin_op, &cos_op, &reciprocal_op}); }

}  // namespace detail

}  // namespace tapegrad
