// Elementwise arithmetic and unary math: forward kernels and gradients side by side.
#include "tapegrad/ops/math.hpp"

#include <cmath>

#include <xtensor/xmath.hpp>

#include "detail/dispatch.hpp"
#include "detail/elementwise.hpp"
#include "detail/recording.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

using detail::OpSlot;
using Grads = std::vector<GradientValue>;

namespace {

// ---- shared forward helpers -------------------------------------------------------------

template <class ScalarFn>
Tensor numeric_binary(const char* op, const Tensor& x, const Tensor& y, ScalarFn fn) {
  detail::require_same_dtype(op, x, y);
  return detail::dispatch_numeric(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto& a = x.array<T>();
    const auto& b = y.array<T>();
    auto scalar_fn = [&](T u, T v) { return static_cast<T>(fn(u, v)); };
    if (a.shape() == b.shape()) return detail::binary_tensor<T>(a, b, a.shape(), scalar_fn);
    return detail::binary_tensor<T>(a, b, detail::broadcast_shapes(op, x, y), scalar_fn);
  });
}

template <class ScalarFn>
Tensor floating_unary(const char* op, const Tensor& x, ScalarFn fn) {
  detail::require_defined(op, x);
  return detail::dispatch_floating(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor(x.array<T>(), [&](T v) { return static_cast<T>(fn(v)); });
  });
}

// ---- gradients --------------------------------------------------------------------------

Grads add_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = unbroadcast(g[0], ctx.input_shape(0));
  if (ctx.needs_gradient(1)) r[1] = unbroadcast(g[0], ctx.input_shape(1));
  return r;
}

Grads subtract_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  Grads r(2);
  if (ctx.needs_gradient(0)) r[0] = unbroadcast(g[0], ctx.input_shape(0));
  if (ctx.needs_gradient(1)) r[1] = unbroadcast(negative(g[0]), ctx.input_shape(1));
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

Grads tanh_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& y = ctx.outputs()[0];
  return {multiply(g[0], subtract(scalar(1.0, y.dtype()), multiply(y, y)))};
}

// ---- op slots (defined once, on first use) ----------------------------------------------

const OpSlot& add_op() {
  static const OpSlot& op = detail::define_op("Add", add_grad, Keep::none(), Keep::none());
  return op;
}
const OpSlot& subtract_op() {
  static const OpSlot& op = detail::define_op("Sub", subtract_grad, Keep::none(), Keep::none());
  return op;
}
const OpSlot& multiply_op() {
  static const OpSlot& op = detail::define_op("Mul", multiply_grad, Keep::all(), Keep::none());
  return op;
}
const OpSlot& divide_op() {
  static const OpSlot& op = detail::define_op("RealDiv", divide_grad, Keep::all(), Keep::none());
  return op;
}
const OpSlot& negative_op() {
  static const OpSlot& op = detail::define_op("Neg", negative_grad, Keep::none(), Keep::none());
  return op;
}
const OpSlot& square_op() {
  static const OpSlot& op = detail::define_op("Square", square_grad, Keep::all(), Keep::none());
  return op;
}
const OpSlot& sqrt_op() {
  static const OpSlot& op = detail::define_op("Sqrt", sqrt_grad, Keep::none(), Keep::all());
  return op;
}
const OpSlot& exp_op() {
  static const OpSlot& op = detail::define_op("Exp", exp_grad, Keep::none(), Keep::all());
  return op;
}
const OpSlot& log_op() {
  static const OpSlot& op = detail::define_op("Log", log_grad, Keep::all(), Keep::none());
  return op;
}
const OpSlot& tanh_op() {
  static const OpSlot& op = detail::define_op("Tanh", tanh_grad, Keep::none(), Keep::all());
  return op;
}

template <class T>
T checked_int_divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) throw InvalidArgument("divide: integer division by zero");
  }
  return a / b;
}

}  // namespace

// ---- forward ops ------------------------------------------------------------------------

Tensor add(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("add", x, y, [](auto a, auto b) { return a + b; });
  detail::maybe_record(add_op(), {&x, &y}, out);
  return out;
}

Tensor subtract(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("subtract", x, y, [](auto a, auto b) { return a - b; });
  detail::maybe_record(subtract_op(), {&x, &y}, out);
  return out;
}

Tensor multiply(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("multiply", x, y, [](auto a, auto b) { return a * b; });
  detail::maybe_record(multiply_op(), {&x, &y}, out);
  return out;
}

Tensor divide(const Tensor& x, const Tensor& y) {
  Tensor out = numeric_binary("divide", x, y, [](auto a, auto b) { return checked_int_divide(a, b); });
  detail::maybe_record(divide_op(), {&x, &y}, out);
  return out;
}

Tensor negative(const Tensor& x) {
  detail::require_defined("negative", x);
  Tensor out = detail::dispatch_numeric("negative", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor(x.array<T>(), [](T v) { return static_cast<T>(-v); });
  });
  detail::maybe_record(negative_op(), {&x}, out);
  return out;
}

Tensor square(const Tensor& x) {
  detail::require_defined("square", x);
  Tensor out = detail::dispatch_numeric("square", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor(x.array<T>(), [](T v) { return static_cast<T>(v * v); });
  });
  detail::maybe_record(square_op(), {&x}, out);
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = floating_unary("sqrt", x, [](auto v) { return std::sqrt(v); });
  detail::maybe_record(sqrt_op(), {&x}, out);
  return out;
}

Tensor exp(const Tensor& x) {
  detail::require_defined("exp", x);
  Tensor out = detail::dispatch_floating("exp", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor_vectorised(
        x.array<T>(), [](T v) { return std::exp(v); }, [](const auto& a) { return xt::exp(a); });
  });
  detail::maybe_record(exp_op(), {&x}, out);
  return out;
}

Tensor log(const Tensor& x) {
  detail::require_defined("log", x);
  Tensor out = detail::dispatch_floating("log", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor_vectorised(
        x.array<T>(), [](T v) { return std::log(v); }, [](const auto& a) { return xt::log(a); });
  });
  detail::maybe_record(log_op(), {&x}, out);
  return out;
}

Tensor tanh(const Tensor& x) {
  detail::require_defined("tanh", x);
  Tensor out = detail::dispatch_floating("tanh", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::unary_tensor_vectorised(
        x.array<T>(), [](T v) { return std::tanh(v); }, [](const auto& a) { return xt::tanh(a); });
  });
  detail::maybe_record(tanh_op(), {&x}, out);
  return out;
}

Tensor scalar(double value, DType dtype) { return fill({}, value, dtype); }

// ---- operators --------------------------------------------------------------------------

Tensor operator+(const Tensor& x, const Tensor& y) { return add(x, y); }
Tensor operator-(const Tensor& x, const Tensor& y) { return subtract(x, y); }
Tensor operator*(const Tensor& x, const Tensor& y) { return multiply(x, y); }
Tensor operator/(const Tensor& x, const Tensor& y) { return divide(x, y); }
Tensor operator-(const Tensor& x) { return negative(x); }
Tensor operator+(const Tensor& x, double y) { return add(x, scalar(y, x.dtype())); }
Tensor operator-(const Tensor& x, double y) { return subtract(x, scalar(y, x.dtype())); }
Tensor operator*(const Tensor& x, double y) { return multiply(x, scalar(y, x.dtype())); }
Tensor operator/(const Tensor& x, double y) { return divide(x, scalar(y, x.dtype())); }
Tensor operator+(double x, const Tensor& y) { return add(scalar(x, y.dtype()), y); }
Tensor operator-(double x, const Tensor& y) { return subtract(scalar(x, y.dtype()), y); }
Tensor operator*(double x, const Tensor& y) { return multiply(scalar(x, y.dtype()), y); }
Tensor operator/(double x, const Tensor& y) { return divide(scalar(x, y.dtype()), y); }

}  // namespace tapegrad
