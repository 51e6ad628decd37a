// Reductions: forward kernels and gradients side by side.
#include "tapegrad/ops/reduce.hpp"

#include "detail/dispatch.hpp"
#include "detail/recording.hpp"
#include "detail/reduce_kernel.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

using detail::OpSlot;
using Grads = std::vector<GradientValue>;

namespace {

std::vector<std::int64_t> to_int64(const std::vector<std::size_t>& v) {
  return std::vector<std::int64_t>(v.begin(), v.end());
}

std::vector<std::size_t> axes_attr(const OpContext& ctx) {
  const auto& a = ctx.attrs().get_ints("axes");
  return std::vector<std::size_t>(a.begin(), a.end());
}

std::vector<std::int64_t> signed_shape(const Shape& s) { return to_int64(s); }

// The incoming gradient, put back in the input's shape by broadcasting over reduced axes.
Tensor broadcast_back(const OpContext& ctx, const Tensor& g) {
  const Shape kept = detail::keepdims_shape(ctx.input_shape(0), axes_attr(ctx));
  return broadcast_to(reshape(g, signed_shape(kept)), ctx.input_shape(0));
}

std::size_t reduced_count(const OpContext& ctx) {
  std::size_t n = 1;
  for (auto a : axes_attr(ctx)) n *= ctx.input_shape(0)[a];
  return n;
}

Grads sum_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {broadcast_back(ctx, g[0])};
}

Grads mean_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const double n = static_cast<double>(reduced_count(ctx));
  return {divide(broadcast_back(ctx, g[0]), scalar(n, g[0].dtype()))};
}

const OpSlot& sum_op() {
  static const OpSlot& op = detail::define_op("Sum", sum_grad, Keep::none(), Keep::none());
  return op;
}
const OpSlot& mean_op() {
  static const OpSlot& op = detail::define_op("Mean", mean_grad, Keep::none(), Keep::none());
  return op;
}

void record_reduction(const OpSlot& op, const Tensor& x, const Tensor& out,
                      const std::vector<std::size_t>& axes, bool keepdims) {
  if (!detail::any_tape_active()) return;
  Attrs attrs;
  attrs.set("axes", to_int64(axes)).set("keepdims", keepdims);
  const Tensor* in = &x;
  detail::record_on_tapes(op, &in, 1, &out, 1, attrs);
}

}  // namespace

Tensor reduce_sum(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::require_defined("reduce_sum", x);
  const auto ax = detail::normalize_axes("reduce_sum", axes, x.shape());
  Tensor out = detail::dispatch_numeric("reduce_sum", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Tensor(detail::reduce_axes<T>(x.array<T>(), ax, keepdims, T(0),
                                         [](T acc, T v) { return static_cast<T>(acc + v); }));
  });
  record_reduction(sum_op(), x, out, ax, keepdims);
  return out;
}

Tensor reduce_mean(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::require_defined("reduce_mean", x);
  const auto ax = detail::normalize_axes("reduce_mean", axes, x.shape());
  std::size_t count = 1;
  for (auto a : ax) count *= x.shape()[a];
  Tensor out = detail::dispatch_numeric("reduce_mean", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    auto sum = detail::reduce_axes<T>(x.array<T>(), ax, keepdims, T(0),
                                      [](T acc, T v) { return static_cast<T>(acc + v); });
    // An empty reduction is 0/0: NaN for floats (NumPy, TF); 0 for integers.
    for (auto& v : sum) {
      if constexpr (std::is_floating_point_v<T>) {
        v = static_cast<T>(v / static_cast<T>(count));
      } else {
        v = count == 0 ? T(0) : static_cast<T>(v / static_cast<T>(count));
      }
    }
    return Tensor(std::move(sum));
  });
  record_reduction(mean_op(), x, out, ax, keepdims);
  return out;
}

}  // namespace tapegrad
