// Elementwise arithmetic (add ... pow, maximum, minimum) and the first unary math ops:
// forward kernels and gradients side by side. More unary math is in math_unary.cpp,
// comparisons and where in compare.cpp.
#include "tapegrad/ops/math.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include <xtensor/xmath.hpp>

#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/int_arith.hpp"
#include "kernels/math_kernels.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

using detail::KeepSet;
using detail::OpDefinition;
using Grads = std::vector<GradientValue>;

namespace {

using detail::floating_unary;
using detail::numeric_binary;

// ---- gradients --------------------------------------------------------------------------

// The gradient summed back to input i's shape (a no-op for an operand that was not broadcast).
Tensor reduce_to_input(const OpContext& ctx, std::size_t i, const Tensor& g) {
  return ctx.input_shape_matches(i, g) ? g : unbroadcast(g, ctx.input_shape(i));
}

Grads add_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = reduce_to_input(ctx, 0, g[0]);
  if (ctx.needs_gradient(1)) r[1] = reduce_to_input(ctx, 1, g[0]);
  return r;
}

Grads subtract_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = reduce_to_input(ctx, 0, g[0]);
  if (ctx.needs_gradient(1)) r[1] = reduce_to_input(ctx, 1, negative(g[0]));
  return r;
}

Grads multiply_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& x = ctx.inputs()[0];
  const Tensor& y = ctx.inputs()[1];
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = unbroadcast(multiply(g[0], y), x.shape());
  if (ctx.needs_gradient(1)) r[1] = unbroadcast(multiply(g[0], x), y.shape());
  return r;
}

Grads divide_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& x = ctx.inputs()[0];
  const Tensor& y = ctx.inputs()[1];
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = unbroadcast(divide(g[0], y), x.shape());
  if (ctx.needs_gradient(1)) {
    r[1] = unbroadcast(negative(divide(multiply(g[0], x), multiply(y, y))), y.shape());
  }
  return r;
}

Grads negative_grad(const OpContext&, const std::vector<Tensor>& g) { return {negative(g[0])}; }

Grads square_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& x = ctx.inputs()[0];
  return {multiply(g[0], multiply(x, scalar(2.0, x.dtype())))};
}

Grads sqrt_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& y = ctx.outputs()[0];
  return {divide(g[0], multiply(y, scalar(2.0, y.dtype())))};
}

Grads exp_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {multiply(g[0], ctx.outputs()[0])};
}

Grads log_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {divide(g[0], ctx.inputs()[0])};
}

// One fused kernel (TF's TanhGrad) instead of four ops: it dominates small-tensor backward.
Grads tanh_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {detail::tanh_grad_op(ctx.outputs()[0], g[0])};
}

// TanhGrad(y, g) = g (1 - y^2): d/dy = -2 g y h, d/dg = TanhGrad(y, h).
Grads tanh_grad_grad(const OpContext& ctx, const std::vector<Tensor>& h) {
  const Tensor& y = ctx.inputs()[0];
  const Tensor& g = ctx.inputs()[1];
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = multiply(h[0], multiply(scalar(-2.0, y.dtype()), multiply(g, y)));
  if (ctx.needs_gradient(1)) r[1] = detail::tanh_grad_op(y, h[0]);
  return r;
}

// TF: dx = g * y * x^(y-1); dy = g * log(x) * x^y where x > 0, else 0 (the mask keeps a NaN
// from log of a non-positive base out of the gradient and out of its own derivatives).
Grads pow_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& x = ctx.inputs()[0];
  const Tensor& y = ctx.inputs()[1];
  const DType dtype = x.dtype();
  Grads r(2);
  if (ctx.needs_gradient(0)) {
    const Tensor x_to_y_minus_1 = pow(x, subtract(y, scalar(1.0, dtype)));
    r[0] = unbroadcast(multiply(g[0], multiply(y, x_to_y_minus_1)), x.shape());
  }
  if (ctx.needs_gradient(1)) {
    const Tensor& z = ctx.outputs()[0];
    const Tensor positive = greater(x, scalar(0.0, dtype));
    const Tensor safe_x = where(positive, x, scalar(1.0, dtype));
    const Tensor log_x = where(positive, log(safe_x), scalar(0.0, dtype));
    r[1] = unbroadcast(multiply(g[0], multiply(z, log_x)), y.shape());
  }
  return r;
}

// The gradient goes to x where x_wins (ties included, as TF), to y elsewhere.
Grads select_between(const OpContext& ctx, const std::vector<Tensor>& g, const Tensor& x_wins) {
  const Tensor zero = scalar(0.0, g[0].dtype());
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = unbroadcast(where(x_wins, g[0], zero), ctx.input_shape(0));
  if (ctx.needs_gradient(1)) r[1] = unbroadcast(where(x_wins, zero, g[0]), ctx.input_shape(1));
  return r;
}

Grads maximum_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return select_between(ctx, g, greater_equal(ctx.inputs()[0], ctx.inputs()[1]));
}

Grads minimum_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return select_between(ctx, g, less_equal(ctx.inputs()[0], ctx.inputs()[1]));
}

// ---- op slots (defined once, on first use) ----------------------------------------------

constexpr OpDefinition add_op =
    detail::differentiable_op("Add", add_grad, KeepSet::none(), KeepSet::none());
constexpr OpDefinition subtract_op =
    detail::differentiable_op("Sub", subtract_grad, KeepSet::none(), KeepSet::none());
constexpr OpDefinition multiply_op =
    detail::differentiable_op("Mul", multiply_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition divide_op =
    detail::differentiable_op("RealDiv", divide_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition negative_op =
    detail::differentiable_op("Neg", negative_grad, KeepSet::none(), KeepSet::none());
constexpr OpDefinition square_op =
    detail::differentiable_op("Square", square_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition sqrt_op =
    detail::differentiable_op("Sqrt", sqrt_grad, KeepSet::none(), KeepSet::all());
constexpr OpDefinition exp_op =
    detail::differentiable_op("Exp", exp_grad, KeepSet::none(), KeepSet::all());
constexpr OpDefinition log_op =
    detail::differentiable_op("Log", log_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition tanh_op =
    detail::differentiable_op("Tanh", tanh_grad, KeepSet::none(), KeepSet::all());

constexpr OpDefinition tanh_grad_definition =
    detail::differentiable_op("TanhGrad", tanh_grad_grad, KeepSet::all(), KeepSet::none());

constexpr OpDefinition pow_op =
    detail::differentiable_op("Pow", pow_grad, KeepSet::all(), KeepSet::all());
constexpr OpDefinition maximum_op =
    detail::differentiable_op("Maximum", maximum_grad, KeepSet::all(), KeepSet::none());
constexpr OpDefinition minimum_op =
    detail::differentiable_op("Minimum", minimum_grad, KeepSet::all(), KeepSet::none());

// Integer division by zero has no value (TF raises): rejected before the kernel runs.
void require_nonzero_integer_divisor(const char* op, const Tensor& x, const Tensor& y) {
  auto any_zero = [](const auto& a) {
    for (auto v : a) {
      if (v == 0) return true;
    }
    return false;
  };
  bool zero = false;
  if (y.dtype() == DType::Int32) zero = any_zero(y.array<std::int32_t>());
  if (y.dtype() == DType::Int64) zero = any_zero(y.array<std::int64_t>());
  if (zero) throw InvalidArgument(detail::describe(op, x, y) + ": integer division by zero");
}

// The scalar operand of `x (op) value`: it takes x's dtype, which must hold it exactly
// (int32 * 0.5 is rejected, as TF rejects it, instead of silently multiplying by 0).
Tensor scalar_operand(const char* op, const Tensor& x, double value) {
  detail::require_defined(op, x);
  const bool exact = detail::dispatch_any(x.dtype(), [&](auto zero) {
    return detail::exactly_representable<decltype(zero)>(value);
  });
  if (!exact) {
    throw InvalidArgument(detail::describe(op, x) + ": the scalar " + std::to_string(value) +
                          " is not exactly representable in x's dtype " + dtype_name(x.dtype()) +
                          " (no implicit promotion; cast x to a floating dtype first)");
  }
  return scalar(value, x.dtype());
}

// NaN in either operand gives NaN (NumPy's and TF's maximum/minimum), whichever order.
template <class T>
T nan_or(T a, T b, T otherwise) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return otherwise;
}

// Integer power by squaring; unsigned arithmetic so that overflow wraps (as TF's kernel)
// instead of being undefined behaviour. The caller rejects negative exponents.
template <class T>
T integer_pow(T base, T exponent) {
  using U = std::make_unsigned_t<T>;
  U result = 1;
  U b = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e != 0; e >>= 1) {
    if (e & 1U) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(result);
}

template <class T>
T power(T base, T exponent) {
  if constexpr (std::is_integral_v<T>) {
    return integer_pow(base, exponent);
  } else {
    return std::pow(base, exponent);
  }
}

bool has_negative_exponent(const Tensor& y) {
  switch (y.dtype()) {
    case DType::Int32:
      for (auto v : y.array<std::int32_t>()) if (v < 0) return true;
      return false;
    case DType::Int64:
      for (auto v : y.array<std::int64_t>()) if (v < 0) return true;
      return false;
    default: return false;
  }
}

}  // namespace

// ---- forward ops ------------------------------------------------------------------------

Tensor add(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("add", x, y, [](auto a, auto b) { return detail::wrapping_add(a, b); });
  detail::record(add_op, {&x, &y}, out);
  return out;
}

Tensor subtract(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("subtract", x, y, [](auto a, auto b) { return detail::wrapping_sub(a, b); });
  detail::record(subtract_op, {&x, &y}, out);
  return out;
}

Tensor multiply(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("multiply", x, y, [](auto a, auto b) { return detail::wrapping_mul(a, b); });
  detail::record(multiply_op, {&x, &y}, out);
  return out;
}

Tensor divide(const Tensor& x, const Tensor& y) {
  detail::require_same_dtype("divide", x, y);
  require_nonzero_integer_divisor("divide", x, y);
  Tensor out = numeric_binary("divide", x, y, [](auto a, auto b) { return detail::wrapping_div(a, b); });
  detail::record(divide_op, {&x, &y}, out);
  return out;
}

Tensor pow(const Tensor& x, const Tensor& y) {
  detail::require_same_dtype("pow", x, y);
  if (has_negative_exponent(y)) {
    throw InvalidArgument(detail::describe("pow", x, y) +
                          ": integers to negative integer powers are not allowed");
  }
  Tensor out = numeric_binary("pow", x, y, [](auto a, auto b) { return power(a, b); });
  detail::record(pow_op, {&x, &y}, out);
  return out;
}

Tensor pow(const Tensor& x, double y) {
  detail::require_defined("pow", x);
  if (!is_floating(x.dtype()) && std::trunc(y) != y) {
    throw InvalidArgument(detail::describe("pow", x) + ": the exponent " + std::to_string(y) +
                          " is not an integer, so it cannot take x's integer dtype");
  }
  return pow(x, scalar_operand("pow", x, y));
}

Tensor maximum(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("maximum", x, y, [](auto a, auto b) { return nan_or(a, b, a >= b ? a : b); });
  detail::record(maximum_op, {&x, &y}, out);
  return out;
}

Tensor minimum(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("minimum", x, y, [](auto a, auto b) { return nan_or(a, b, a <= b ? a : b); });
  detail::record(minimum_op, {&x, &y}, out);
  return out;
}

Tensor negative(const Tensor& x) {
  detail::require_defined("negative", x);
  Tensor out = detail::dispatch_numeric("negative", x, [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor(x.array<T>(), [](T v) { return detail::wrapping_neg(v); });
  });
  detail::record(negative_op, {&x}, out);
  return out;
}

Tensor square(const Tensor& x) {
  detail::require_defined("square", x);
  Tensor out = detail::dispatch_numeric("square", x, [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor(x.array<T>(), [](T v) { return detail::wrapping_mul(v, v); });
  });
  detail::record(square_op, {&x}, out);
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = floating_unary("sqrt", x, [](auto v) { return std::sqrt(v); });
  detail::record(sqrt_op, {&x}, out);
  return out;
}

Tensor exp(const Tensor& x) {
  detail::require_defined("exp", x);
  Tensor out = detail::dispatch_floating("exp", x, [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor_vectorised(
        x.array<T>(), [](T v) { return std::exp(v); }, [](const auto& a) { return xt::exp(a); });
  });
  detail::record(exp_op, {&x}, out);
  return out;
}

Tensor log(const Tensor& x) {
  detail::require_defined("log", x);
  Tensor out = detail::dispatch_floating("log", x, [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor_vectorised(
        x.array<T>(), [](T v) { return std::log(v); }, [](const auto& a) { return xt::log(a); });
  });
  detail::record(log_op, {&x}, out);
  return out;
}

Tensor tanh(const Tensor& x) {
  detail::require_defined("tanh", x);
  Tensor out = detail::dispatch_floating("tanh", x, [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor_vectorised(
        x.array<T>(), [](T v) { return std::tanh(v); }, [](const auto& a) { return xt::tanh(a); });
  });
  detail::record(tanh_op, {&x}, out);
  return out;
}

namespace detail {

Tensor tanh_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel("TanhGrad", y, g,
                                      [](auto yv, auto gv) { return gv * (1 - yv * yv); });
  record(tanh_grad_definition, {&y, &g}, out);
  return out;
}

}  // namespace detail

Tensor scalar(double value, DType dtype) { return detail::scalar_of("scalar", value, dtype); }

// ---- operators --------------------------------------------------------------------------

Tensor operator+(const Tensor& x, const Tensor& y) { return add(x, y); }
Tensor operator-(const Tensor& x, const Tensor& y) { return subtract(x, y); }
Tensor operator*(const Tensor& x, const Tensor& y) { return multiply(x, y); }
Tensor operator/(const Tensor& x, const Tensor& y) { return divide(x, y); }
Tensor operator-(const Tensor& x) { return negative(x); }
Tensor operator+(const Tensor& x, double y) { return add(x, scalar_operand("add", x, y)); }
Tensor operator-(const Tensor& x, double y) { return subtract(x, scalar_operand("subtract", x, y)); }
Tensor operator*(const Tensor& x, double y) { return multiply(x, scalar_operand("multiply", x, y)); }
Tensor operator/(const Tensor& x, double y) { return divide(x, scalar_operand("divide", x, y)); }
Tensor operator+(double x, const Tensor& y) { return add(scalar_operand("add", y, x), y); }
Tensor operator-(double x, const Tensor& y) { return subtract(scalar_operand("subtract", y, x), y); }
Tensor operator*(double x, const Tensor& y) { return multiply(scalar_operand("multiply", y, x), y); }
Tensor operator/(double x, const Tensor& y) { return divide(scalar_operand("divide", y, x), y); }

namespace detail {

void register_math_ops(OpRegistrar& registry) { registry.add({&add_op, &subtract_op, &multiply_op, &divide_op, &negative_op, &square_op, &sqrt_op, &exp_op, &log_op, &tanh_op, &tanh_grad_definition, &pow_op, &maximum_op, &minimum_op}); }

}  // namespace detail

}  // namespace tapegrad
