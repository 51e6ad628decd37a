// Comparisons (Bool results: nothing flows back through them, so they are not differentiable;
// recorded for vectorized_map's trace, never kept by a tape) and where, whose gradient
// routes the incoming gradient to the operand each element was taken from. Each op reads top to
// bottom: definition, forward, gradient.
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/math_kernels.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

// ---- Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual ----------------------------

TAPEGRAD_BUILTIN_OP(equal_op) =
    detail::not_differentiable_op("Equal", detail::batch_binary_broadcasting<&tapegrad::equal>);
TAPEGRAD_BUILTIN_OP(not_equal_op) = detail::not_differentiable_op(
    "NotEqual", detail::batch_binary_broadcasting<&tapegrad::not_equal>);
TAPEGRAD_BUILTIN_OP(less_op) =
    detail::not_differentiable_op("Less", detail::batch_binary_broadcasting<&tapegrad::less>);
TAPEGRAD_BUILTIN_OP(less_equal_op) = detail::not_differentiable_op(
    "LessEqual", detail::batch_binary_broadcasting<&tapegrad::less_equal>);
TAPEGRAD_BUILTIN_OP(greater_op) =
    detail::not_differentiable_op("Greater", detail::batch_binary_broadcasting<&tapegrad::greater>);
TAPEGRAD_BUILTIN_OP(greater_equal_op) = detail::not_differentiable_op(
    "GreaterEqual", detail::batch_binary_broadcasting<&tapegrad::greater_equal>);

template <class Predicate>
static Tensor compare_numeric(const OpDefinition& definition, const char* op, const Tensor& x,
                              const Tensor& y, Predicate pred) {
  detail::require_numeric_operands(op, x, y);
  Tensor out = detail::dispatch_numeric(op, x.dtype(), [&](auto zero) {
    return detail::broadcast_binary<bool, decltype(zero)>(op, x, y, pred);
  });
  detail::record(definition, {&x, &y}, out);
  return out;
}

// Equality also accepts Bool operands (TF: tf.equal on bool tensors).
template <class Predicate>
static Tensor compare_any(const OpDefinition& definition, const char* op, const Tensor& x,
                          const Tensor& y, Predicate pred) {
  detail::require_same_dtype(op, x, y);
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto zero) {
    return detail::broadcast_binary<bool, decltype(zero)>(op, x, y, pred);
  });
  detail::record(definition, {&x, &y}, out);
  return out;
}

Tensor equal(const Tensor& x, const Tensor& y) {
  return compare_any(equal_op, "equal", x, y, [](auto a, auto b) { return a == b; });
}

Tensor not_equal(const Tensor& x, const Tensor& y) {
  return compare_any(not_equal_op, "not_equal", x, y, [](auto a, auto b) { return a != b; });
}

Tensor less(const Tensor& x, const Tensor& y) {
  return compare_numeric(less_op, "less", x, y, [](auto a, auto b) { return a < b; });
}

Tensor less_equal(const Tensor& x, const Tensor& y) {
  return compare_numeric(less_equal_op, "less_equal", x, y, [](auto a, auto b) { return a <= b; });
}

Tensor greater(const Tensor& x, const Tensor& y) {
  return compare_numeric(greater_op, "greater", x, y, [](auto a, auto b) { return a > b; });
}

Tensor greater_equal(const Tensor& x, const Tensor& y) {
  return compare_numeric(greater_equal_op, "greater_equal", x, y,
                         [](auto a, auto b) { return a >= b; });
}

// ---- SelectV2 (where) ------------------------------------------------------------------

static Grads where_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents where_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(where_op) =
    detail::differentiable_op("SelectV2", where_gradient, KeepSet::only({0}), KeepSet::none(),
                              where_tangent, detail::batch_broadcasting<&tapegrad::where>);

static std::string describe_where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return detail::describe("where", {{"cond", cond}, {"a", a}, {"b", b}});
}

template <class T>
static xt::xarray<T> select_kernel(const xt::xarray<bool>& cond, const xt::xarray<T>& a,
                                   const xt::xarray<T>& b, const Shape& shape) {
  xt::xarray<T> out = xt::empty<T>(shape);
  const std::size_t n = out.size();
  const bool* pc = cond.data();
  const T* pa = a.data();
  const T* pb = b.data();
  T* o = out.data();
  if (cond.size() == n && a.size() == n && b.size() == n) {
    for (std::size_t i = 0; i < n; ++i) o[i] = pc[i] ? pa[i] : pb[i];
    return out;
  }
  // A full-shape selection against one scalar (ReLU's gradient: where(y > 0, g, 0)).
  if (cond.size() == n && a.size() == n && b.size() == 1) {
    const T v = pb[0];
    for (std::size_t i = 0; i < n; ++i) o[i] = pc[i] ? pa[i] : v;
    return out;
  }
  if (cond.size() == n && a.size() == 1 && b.size() == n) {
    const T v = pa[0];
    for (std::size_t i = 0; i < n; ++i) o[i] = pc[i] ? v : pb[i];
    return out;
  }
  const Shape cs(cond.shape().begin(), cond.shape().end());
  const Shape as(a.shape().begin(), a.shape().end());
  const Shape bs(b.shape().begin(), b.shape().end());
  detail::StridedCursor(shape, shape.size(), detail::broadcast_strides(cs, shape),
                        detail::broadcast_strides(as, shape), detail::broadcast_strides(bs, shape))
      .for_each(
          [&](std::size_t ic, std::size_t ia, std::size_t ib) { *o++ = pc[ic] ? pa[ia] : pb[ib]; });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::require_defined("where", cond);
  detail::require_defined("where", a);
  detail::require_defined("where", b);
  if (cond.dtype() != DType::Bool) {
    throw InvalidArgument(describe_where(cond, a, b) + ": cond must have dtype bool");
  }
  if (a.dtype() != b.dtype()) {
    throw InvalidArgument(describe_where(cond, a, b) +
                          ": a and b must have the same dtype (no implicit promotion; cast one)");
  }
  Shape shape;
  try {
    shape = detail::broadcast_shapes(
        "where", detail::broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  } catch (const InvalidArgument&) {
    throw InvalidArgument(describe_where(cond, a, b) + ": the shapes cannot be broadcast together");
  }
  Tensor out = detail::with_allocation_check("where", shape, a.dtype(), [&] {
    return detail::dispatch_any(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      return Tensor(select_kernel<T>(detail::kernel_array<bool>(cond), detail::kernel_array<T>(a),
                                     detail::kernel_array<T>(b), shape));
    });
  });
  detail::record(where_op, {&cond, &a, &b}, out);
  return out;
}

// Linear in a and b: the same selection between their tangents (0 for one without).
static Tangents where_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor zero = scalar(0.0, op.outputs[0].dtype());
  const Tensor& da = tangents[1].defined() ? tangents[1] : zero;
  const Tensor& db = tangents[2].defined() ? tangents[2] : zero;
  return {detail::output_tangent(op, 0, {where(op.inputs[0], da, db)})};
}

// TF2 SelectV2: a gets g where cond, b gets g elsewhere, each summed back to its own shape.
// cond is Bool and gets no gradient.
static Grads where_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& cond = op.inputs()[0];
  const Tensor zero = scalar(0.0, g[0].dtype());
  Grads r(3);
  if (op.needs_gradient(1)) r[1] = detail::sum_to_input(op, 1, where(cond, g[0], zero));
  if (op.needs_gradient(2)) r[2] = detail::sum_to_input(op, 2, where(cond, zero, g[0]));
  return r;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(compare)
