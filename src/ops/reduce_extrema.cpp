// reduce_max and reduce_min: forward kernels and gradients side by side.
#include <limits>

#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "ops/op_support.hpp"
#include "ops/reduce_support.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

using detail::KeepSet;
using detail::OpDefinition;
using Grads = std::vector<GradientValue>;

namespace {

// 1 / (number of ties) where x equals its group's extremum, 0 elsewhere. The pattern of
// extrema is piecewise constant in x, so it is computed outside the tape: a constant for
// every gradient, which keeps the gradient linear in the incoming gradient and exact to any
// order away from ties.
Tensor tie_weights(const Tensor& x, const Tensor& extremum, const OpContext& ctx) {
  const auto axes = detail::reduction_axes(ctx);
  const Shape kept = detail::reduction_kept_shape(ctx);
  return detail::dispatch_floating(ctx.op_type().c_str(), x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> target = extremum.array<T>();
    target.reshape(kept);
    const auto is_extremum = detail::map_binary<T>(
        x.array<T>(), target, x.shape(), [](T v, T e) { return v == e ? T(1) : T(0); });
    const auto ties = detail::reduce_axes<T>(is_extremum, axes, /*keepdims=*/true, T(0),
                                             [](T acc, T v) { return acc + v; });
    return Tensor(detail::map_binary<T>(is_extremum, ties, x.shape(),
                                        [](T hit, T count) { return hit / count; }));
  });
}

Grads extremum_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Tensor& x = ctx.inputs()[0];
  return {multiply(detail::broadcast_to_input(ctx, g[0]), tie_weights(x, ctx.outputs()[0], ctx))};
}

constexpr OpDefinition max_op =
    detail::differentiable_op("Max", extremum_grad, KeepSet::all(), KeepSet::all());
constexpr OpDefinition min_op =
    detail::differentiable_op("Min", extremum_grad, KeepSet::all(), KeepSet::all());

// Takes the larger (is_max) or smaller element; a NaN wins and stays, as in TF.
template <class T>
struct Pick {
  bool is_max;
  T operator()(T acc, T v) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (acc != acc) return acc;
      if (v != v) return v;
    }
    return (is_max ? v > acc : v < acc) ? v : acc;
  }
};

Tensor reduce_extremum(const char* op, const OpDefinition& definition, bool is_max, const Tensor& x,
                       const std::vector<int>& axes, bool keepdims) {
  detail::require_defined(op, x);
  const auto ax = detail::normalize_axes(op, axes, x);
  std::size_t count = 1;
  for (auto a : ax) count *= x.shape()[a];
  if (count == 0 && num_elements(detail::reduced_shape(x.shape(), ax)) != 0) {
    throw InvalidArgument(detail::describe(op, x) + ": the reduction over axes " +
                          detail::ints_to_string(axes) + " is empty, and an empty set has no " +
                          (is_max ? "maximum" : "minimum"));
  }
  Tensor out = detail::dispatch_numeric(op, x, [&](auto zero) {
    using T = decltype(zero);
    const T init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    return Tensor(detail::reduce_axes<T>(x.array<T>(), ax, keepdims, init, Pick<T>{is_max}));
  });
  detail::record(definition, {&x}, out, [&] { return detail::reduction_attrs(ax, keepdims); });
  return out;
}

}  // namespace

Tensor reduce_max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum("reduce_max", max_op, true, x, axes, keepdims);
}

Tensor reduce_min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum("reduce_min", min_op, false, x, axes, keepdims);
}

namespace detail {

void register_reduce_extrema_ops(OpRegistrar& registry) { registry.add({&max_op, &min_op}); }

}  // namespace detail

}  // namespace tapegrad
