// Forward-kernel helpers of the elementwise ops (math, compare, nn): validate, dispatch on the
// dtype, and run a scalar function elementwise into a fresh owned array.
#pragma once

#include <type_traits>

#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/shape_util.hpp"

namespace tapegrad::detail {

// x and y share a numeric dtype (not bool): an InvalidArgument naming op, both shapes and
// both dtypes otherwise.
inline void require_numeric_operands(const char* op, const Tensor& x, const Tensor& y) {
  require_same_dtype(op, x, y);
  if (x.dtype() == DType::Bool) {
    throw InvalidArgument(describe(op, x, y) +
                          ": dtype bool is not supported (expected float32, float64, int32 or int64)");
  }
}

// fn(a, b) -> R over the broadcast shape of x and y, whose elements are T.
template <class R, class T, class ScalarFn>
Tensor broadcast_binary(const char* op, const Tensor& x, const Tensor& y, ScalarFn fn) {
  const auto& a = x.array<T>();
  const auto& b = y.array<T>();
  auto scalar_fn = [&](T u, T v) { return static_cast<R>(fn(u, v)); };
  // Equal shapes need no broadcast shape (and no allocation for one).
  if (a.shape() == b.shape()) return binary_tensor<R>(a, b, a.shape(), scalar_fn);
  const Shape shape = broadcast_shapes(op, x, y);
  return with_allocation_check(op, shape, dtype_of<R>::value,
                               [&] { return binary_tensor<R>(a, b, shape, scalar_fn); });
}

// fn(a, b) -> T over the broadcast shape of x and y; both must share a numeric dtype.
template <class ScalarFn>
Tensor numeric_binary(const char* op, const Tensor& x, const Tensor& y, ScalarFn fn) {
  require_numeric_operands(op, x, y);
  return dispatch_numeric(op, x, [&](auto zero) {
    using T = decltype(zero);
    return broadcast_binary<T, T>(op, x, y, fn);
  });
}

struct NoExpression {};

// fn(v) -> T elementwise over x, whose dtype must be in `accepted` (an InvalidArgument naming
// op, x's shape and dtype otherwise). `expression`, when given, computes a large array at once
// (an xtensor expression, which xsimd vectorises): exp, log, tanh.
template <DTypeSet accepted, class ScalarFn, class Expression = NoExpression>
Tensor unary_kernel(const char* op, const Tensor& x, ScalarFn fn, Expression expression = {}) {
  require_defined(op, x);
  return dispatch_in<accepted>(op, x, [&](auto zero) {
    using T = decltype(zero);
    auto scalar_fn = [&](T v) { return static_cast<T>(fn(v)); };
    if constexpr (std::is_same_v<Expression, NoExpression>) {
      return unary_tensor(x.array<T>(), scalar_fn);
    } else {
      return unary_tensor_vectorised(x.array<T>(), scalar_fn, expression);
    }
  });
}

// fn(v) -> T for float32/float64 x, or for float and integer x.
template <class ScalarFn>
Tensor floating_unary(const char* op, const Tensor& x, ScalarFn fn) {
  return unary_kernel<DTypeSet::Floating>(op, x, fn);
}
template <class ScalarFn>
Tensor numeric_unary(const char* op, const Tensor& x, ScalarFn fn) {
  return unary_kernel<DTypeSet::Numeric>(op, x, fn);
}

// Fused activation gradients (TF's TanhGrad, SigmoidGrad): g * (1 - y^2) and g * y * (1 - y)
// for y and g of one shape, each differentiable.
Tensor tanh_grad_op(const Tensor& y, const Tensor& g);
Tensor sigmoid_grad_op(const Tensor& y, const Tensor& g);

// The kernel both share: fn(y, g) elementwise for y and g of one shape and floating dtype.
template <class ScalarFn>
Tensor activation_grad_kernel(const char* op, const Tensor& y, const Tensor& g, ScalarFn fn) {
  require_same_dtype(op, y, g);
  if (!is_floating(y.dtype())) {
    throw InvalidArgument(describe(op, y, g) + ": expected float32 or float64 operands");
  }
  return dispatch_floating(op, y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto& a = y.array<T>();
    const auto& b = g.array<T>();
    if (a.shape() != b.shape()) throw InvalidArgument(describe(op, y, g) + ": the shapes must be equal");
    return binary_tensor<T>(a, b, a.shape(), [&](T yv, T gv) { return static_cast<T>(fn(yv, gv)); });
  });
}

}  // namespace tapegrad::detail
