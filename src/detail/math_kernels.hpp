// Forward-kernel helpers shared by the math and nn op families: validate, dispatch on the
// dtype, and run a scalar function elementwise into a fresh owned array.
#pragma once

#include <type_traits>

#include "detail/dispatch.hpp"
#include "detail/elementwise.hpp"
#include "detail/shape_util.hpp"

namespace tapegrad::detail {

// fn(a, b) -> T over the broadcast shape of x and y; both must share a numeric dtype.
template <class ScalarFn>
Tensor numeric_binary(const char* op, const Tensor& x, const Tensor& y, ScalarFn fn) {
  require_same_dtype(op, x, y);
  const Shape shape = broadcast_shapes(op, x, y);
  return dispatch_numeric(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Tensor(map_binary<T>(x.array<T>(), y.array<T>(), shape,
                                [&](T a, T b) { return static_cast<T>(fn(a, b)); }));
  });
}

// fn(v) -> T for float32/float64 x; InvalidArgument naming op and dtype otherwise.
template <class ScalarFn>
Tensor floating_unary(const char* op, const Tensor& x, ScalarFn fn) {
  require_defined(op, x);
  return dispatch_floating(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Tensor(map_unary<T>(x.array<T>(), [&](T v) { return static_cast<T>(fn(v)); }));
  });
}

// fn(v) -> T for float and integer x.
template <class ScalarFn>
Tensor numeric_unary(const char* op, const Tensor& x, ScalarFn fn) {
  require_defined(op, x);
  return dispatch_numeric(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Tensor(map_unary<T>(x.array<T>(), [&](T v) { return static_cast<T>(fn(v)); }));
  });
}

}  // namespace tapegrad::detail
