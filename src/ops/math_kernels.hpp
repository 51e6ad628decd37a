// Forward-kernel helpers of the elementwise ops (math, compare, nn): validate, dispatch on the
// dtype, and run a scalar function elementwise into a fresh owned array.
#pragma once

#include <algorithm>
#include <new>
#include <type_traits>

#include "kernels/dispatch.hpp"
#include "kernels/shape_util.hpp"
#include "ops/elementwise_tensors.hpp"
#include "runtime/operand_checks.hpp"

namespace tapegrad::detail {

// x and y share a numeric dtype (not bool): an InvalidArgument naming op, both shapes and
// both dtypes otherwise.
inline void require_numeric_operands(const char* op, const Tensor& x, const Tensor& y) {
  require_same_dtype(op, x, y);
  if (x.dtype() == DType::Bool) {
    throw InvalidArgument(
        describe(op, x, y) +
        ": dtype bool is not supported (expected float32, float64, int32 or int64)");
  }
}

// The NumPy broadcast of dimensions a and b into `out`, when they broadcast and the result
// holds at most 64 KiB of `element_bytes` elements; false otherwise (the caller then takes the
// checked path, which reports every error).
template <class A, class B>
bool small_broadcast_dims(const A& a, const B& b, std::size_t element_bytes,
                          xt::svector<std::size_t, 4>& out) {
  constexpr std::size_t kSmallBytes = std::size_t{1} << 16;
  const std::size_t rank = std::max(a.size(), b.size());
  out.resize(rank);
  std::size_t bytes = element_bytes;
  for (std::size_t i = 0; i < rank; ++i) {
    const std::size_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::size_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
    if (out[i] > kSmallBytes) return false;  // keeps the product below from overflowing
    bytes *= out[i];
    if (bytes > kSmallBytes) return false;
  }
  return true;
}

// fn(a, b) -> R over the broadcast shape of x and y, whose elements are T.
template <class R, class T, class ScalarFn>
Tensor broadcast_binary(const char* op, const Tensor& x, const Tensor& y, ScalarFn fn) {
  const KernelInput<T> a(x);
  const KernelInput<T> b(y);
  auto scalar_fn = [&](T u, T v) { return static_cast<R>(fn(u, v)); };
  // Equal shapes need no broadcast shape (and no allocation for one).
  if (a.shape() == b.shape()) return binary_tensor<R>(a, b, a.shape(), scalar_fn);
  // Small broadcasts (a bias row, a gate times a state): the shape in place, no Shape built.
  xt::svector<std::size_t, 4> dims;
  if (small_broadcast_dims(a.shape(), b.shape(), sizeof(R), dims)) {
    try {
      return binary_tensor<R>(a, b, dims, scalar_fn);
    } catch (const std::bad_alloc&) {
      throw_resource_exhausted(op, Shape(dims.begin(), dims.end()), dtype_of<R>::value);
    }
  }
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

struct NoVectorFunction {};

inline void require_activation_grad_operands(const char* op, const Tensor& y, const Tensor& g) {
  require_same_dtype(op, y, g);
  if (!is_floating(y.dtype())) {
    throw InvalidArgument(describe(op, y, g) + ": expected float32 or float64 operands");
  }
}

// fn(v) -> T elementwise over x, whose dtype must be in `accepted` (an InvalidArgument naming
// op, x's shape and dtype otherwise). `function`, when given (exp, log, tanh, sigmoid), computes
// arrays above kVectorMathAbove elements with kernels/vector_math.hpp.
template <DTypeSet accepted, class ScalarFn, class Vectorised = NoVectorFunction>
Tensor unary_kernel(const char* op, const Tensor& x, ScalarFn fn, Vectorised function = {}) {
  require_defined(op, x);
  return dispatch_in<accepted>(op, x, [&](auto zero) {
    using T = decltype(zero);
    auto scalar_fn = [&](T v) { return static_cast<T>(fn(v)); };
    if constexpr (std::is_same_v<Vectorised, VectorFunction> &&
                  (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
      return unary_tensor_vector_math(KernelInput<T>(x), scalar_fn, function);
    } else {
      return unary_tensor(KernelInput<T>(x), scalar_fn);
    }
  });
}

// body(a, b) with y and g read as KernelInput<T> of their floating dtype T, after the checks
// of a fused activation gradient's operands (one dtype, floating, one shape).
template <class Body>
Tensor with_activation_grad_operands(const char* op, const Tensor& y, const Tensor& g, Body body) {
  require_activation_grad_operands(op, y, g);
  return dispatch_floating(op, y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const KernelInput<T> a(y);
    const KernelInput<T> b(g);
    if (a.shape() != b.shape())
      throw InvalidArgument(describe(op, y, g) + ": the shapes must be equal");
    return body(a, b);
  });
}

// The kernel of the fused activation gradients (TanhGrad, ...: ops/internal_ops.hpp): fn(y, g)
// elementwise for y and g of one shape and floating dtype.
template <class ScalarFn>
Tensor activation_grad_kernel(const char* op, const Tensor& y, const Tensor& g, ScalarFn fn) {
  return with_activation_grad_operands(op, y, g, [&](const auto& a, const auto& b) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(a.data())>>;
    return binary_tensor<T>(a, b, a.shape(),
                            [&](T yv, T gv) { return static_cast<T>(fn(yv, gv)); });
  });
}

// A fused activation gradient g s(x) whose slope s is a vector_math function (GeluGrad:
// GeluSlope): s(x) rounded to the dtype, then times g; s by scalar_function up to
// kVectorMathAbove elements and by vector_math above, as the activation's forward chooses.
template <VectorFunction slope>
Tensor activation_grad_vector_math(const char* op, const Tensor& x, const Tensor& g) {
  return with_activation_grad_operands(op, x, g, [&](const auto& a, const auto& b) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(a.data())>>;
    const std::size_t n = a.size();
    if (n <= kVectorMathAbove) {
      return binary_tensor<T>(a, b, a.shape(), [](T xv, T gv) {
        return static_cast<T>(gv * scalar_function<slope>(xv));
      });
    }
    T* o = nullptr;
    Tensor out = new_tensor<T>(a.shape(), o);
    vector_math(slope, a.data(), o, n);
    const T* gradient = b.data();
    for (std::size_t i = 0; i < n; ++i) o[i] = gradient[i] * o[i];
    return out;
  });
}

}  // namespace tapegrad::detail
