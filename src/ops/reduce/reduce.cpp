// Reductions: reduce_sum, reduce_mean, reduce_prod, reduce_logsumexp (reduce_max and
// reduce_min are in reduce_extrema.cpp). Each op reads top to bottom: its definition, its
// forward, its gradient. Everything but the public functions has internal linkage (static,
// constexpr).
#include "tapegrad/ops/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/elementwise.hpp"
#include "kernels/int_arith.hpp"
#include "kernels/log_sum_exp.hpp"
#include "kernels/pairwise_sum.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "ops/reduce/reduce_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

// ---- Sum --------------------------------------------------------------------------------

// Linear: the same sum of the tangent.
static Tangents sum_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return detail::sum_over_reduced_axes(op, dx); });
}

// Fold rule: over leading axes, into more than one element, the eager kernel adds up to
// kPairwiseRowLeaf rows in order from zero (detail::sum_axes), with wrapping_add; more rows it
// adds pairwise, which no fold rule describes (rows() is then 0).
namespace {
struct SumRowsElement {
  template <class T>
  static T apply(T a, T b) {
    return detail::wrapping_add(a, b);
  }
};
}  // namespace
static std::size_t sum_rows(const Shape& input, const Attrs* attrs, const Shape& output) {
  if (attrs == nullptr || !attrs->has("axes") || num_elements(output) <= 1) return 0;
  const std::vector<std::int64_t>& axes = attrs->get_ints("axes");
  std::size_t rows = 1;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != static_cast<std::int64_t>(i) || i >= input.size()) return 0;
    rows *= input[i];
  }
  return axes.empty() || rows > detail::kPairwiseRowLeaf ? 0 : rows;
}
static constexpr detail::FoldRule sum_fold_rule{&detail::binary_elementwise<SumRowsElement>, 0.0,
                                                sum_rows};

static Grads sum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents sum_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(sum_op) = detail::with_fold(
    detail::differentiable_op("Sum", sum_gradient, KeepSet::none(), KeepSet::none(), sum_tangent,
                              detail::batch_reduction<&tapegrad::reduce_sum>),
    sum_fold_rule);

// Summed pairwise (kernels/pairwise_sum.hpp): the error grows with log(n), not n. Integer
// sums wrap, so they are exact in any order.
Tensor reduce_sum(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const auto ax = detail::checked_reduction_axes("reduce_sum", x, axes);
  Tensor out = detail::dispatch_numeric("reduce_sum", x, [&](auto zero) {
    using T = decltype(zero);
    return Tensor(detail::sum_axes<T>(detail::KernelInput<T>(x), ax, keepdims));
  });
  detail::record(sum_op, {&x}, out, [&] { return detail::reduction_attrs(ax, keepdims); });
  return out;
}

static Grads sum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::broadcast_to_input(op, g[0])};
}

// ---- Mean -------------------------------------------------------------------------------

static Tangents mean_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return reduce_mean(dx, detail::reduction_axes(op), op.attrs().get_bool("keepdims"));
  });
}

static Grads mean_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents mean_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(mean_op) =
    detail::differentiable_op("Mean", mean_gradient, KeepSet::none(), KeepSet::none(), mean_tangent,
                              detail::batch_reduction<&tapegrad::reduce_mean>);

Tensor reduce_mean(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const auto ax = detail::checked_reduction_axes("reduce_mean", x, axes);
  const std::size_t count = detail::reduced_count(x.shape(), ax);
  Tensor out = detail::dispatch_numeric("reduce_mean", x, [&](auto zero) {
    using T = decltype(zero);
    // The same sum as reduce_sum: a mean is bit for bit reduce_sum / count.
    auto sum = detail::sum_axes<T>(detail::KernelInput<T>(x), ax, keepdims);
    // An empty reduction is 0/0: NaN for floats (NumPy, TF); 0 for integers. Integers: the
    // wrapped sum divided in int64, where the count (<= 2^63 - 1) never becomes 0 or -1.
    for (auto& v : sum) {
      if constexpr (std::is_floating_point_v<T>) {
        v = static_cast<T>(v / static_cast<T>(count));
      } else {
        v = count == 0
                ? T(0)
                : static_cast<T>(static_cast<std::int64_t>(v) / static_cast<std::int64_t>(count));
      }
    }
    return Tensor(std::move(sum));
  });
  detail::record(mean_op, {&x}, out, [&] { return detail::reduction_attrs(ax, keepdims); });
  return out;
}

static Grads mean_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const double n =
      static_cast<double>(detail::reduced_count(op.input_shape(0), detail::reduction_axes(op)));
  // Divided before the broadcast (the same values): one pass over the input's size, not two.
  return {detail::broadcast_to_input(op, divide(g[0], scalar(n, g[0].dtype())))};
}

// ---- Prod -------------------------------------------------------------------------------

static Grads prod_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents prod_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(prod_op) =
    detail::differentiable_op("Prod", prod_gradient, KeepSet::all(), KeepSet::all(), prod_tangent,
                              detail::batch_reduction<&tapegrad::reduce_prod>);

Tensor reduce_prod(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const auto ax = detail::checked_reduction_axes("reduce_prod", x, axes);
  return detail::folding_reduction(prod_op, "reduce_prod", x, ax, keepdims, [](auto zero) {
    using T = decltype(zero);
    return detail::Fold{T(1), [](T acc, T v) { return detail::wrapping_mul(acc, v); }};
  });
}

// Where x is zero, per reduced group, as tapegrad ops (equal, cast, reduce_sum): never read
// from x in C++, so that a vectorized_map trace sees the pattern as the ops' outputs (one per
// slice), not as a constant. The pattern is piecewise constant in x and the comparisons are not
// differentiable, so the gradient is differentiable through the rest only.
namespace {
struct ZeroPattern {
  Tensor is_zero;      // x's shape: 1 where x == 0
  Tensor is_nonzero;   // x's shape: 1 - is_zero
  Tensor no_zero;      // kept shape: 1 where the group has no zero
  Tensor single_zero;  // kept shape: 1 where the group has exactly one zero
};
}  // namespace

static ZeroPattern zero_pattern(const Tensor& x, const std::vector<std::size_t>& axes) {
  const std::vector<int> int_axes(axes.begin(), axes.end());
  const DType dtype = x.dtype();
  const Tensor zero = scalar(0.0, dtype);
  ZeroPattern p;
  p.is_zero = cast(equal(x, zero), dtype);
  p.is_nonzero = cast(not_equal(x, zero), dtype);
  const Tensor zeros_per_group = reduce_sum(p.is_zero, int_axes, /*keepdims=*/true);
  p.no_zero = cast(equal(zeros_per_group, zero), dtype);
  p.single_zero = cast(equal(zeros_per_group, scalar(1.0, dtype)), dtype);
  return p;
}

// d prod / d x_i = product of the other elements of x_i's group. Without zeros that is
// prod / x_i. With zeros, let x' be x with its zeros replaced by a constant 1 and p' the
// product of x' over the group. In a group with exactly one zero z, the zero gets p' and
// every other x_i gets z * p' / x'_i: numerically 0, but with the right derivative with
// respect to z. In a group with two or more zeros every element gets 0. Nothing divides by
// zero, and with one zero per group the gradient is exact to second order (with more it is
// exact to first order only). This is x' and those factors but p'.
namespace {
struct ZeroAwareFactors {
  Tensor nonzero_x;    // x'
  Tensor others;       // p', kept shape
  Tensor coefficient;  // x's shape: the partial derivative is p' * coefficient
};
}  // namespace

static ZeroAwareFactors zero_aware_factors(const Tensor& x, const std::vector<std::size_t>& axes,
                                           const ZeroPattern& zeros) {
  const std::vector<int> int_axes(axes.begin(), axes.end());
  const Shape& shape = x.shape();
  ZeroAwareFactors f;
  f.nonzero_x = add(multiply(x, zeros.is_nonzero), zeros.is_zero);
  f.others = reduce_prod(f.nonzero_x, int_axes, /*keepdims=*/true);
  const Tensor the_zero = reduce_sum(multiply(x, zeros.is_zero), int_axes, /*keepdims=*/true);
  const Tensor single_zero_coefficient =
      add(zeros.is_zero,
          divide(multiply(zeros.is_nonzero, broadcast_to(the_zero, shape)), f.nonzero_x));
  f.coefficient = add(divide(broadcast_to(zeros.no_zero, shape), f.nonzero_x),
                      multiply(broadcast_to(zeros.single_zero, shape), single_zero_coefficient));
  return f;
}

// dz = sum(dx * d prod / dx) over each group, through the zero-aware factors below.
static Tangents prod_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const auto axes = detail::reduction_axes(op);
  const std::vector<std::size_t> sorted_axes(axes.begin(), axes.end());
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    const ZeroPattern zeros = zero_pattern(x, sorted_axes);
    const ZeroAwareFactors f = zero_aware_factors(x, sorted_axes, zeros);
    const Tensor partials = multiply(broadcast_to(f.others, x.shape()), f.coefficient);
    return detail::sum_over_reduced_axes(op, multiply(partials, dx));
  });
}

static Grads prod_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const auto axes = detail::reduction_axes(op);
  const ZeroPattern zeros = zero_pattern(x, axes);
  const ZeroAwareFactors f = zero_aware_factors(x, axes, zeros);
  const Shape kept = detail::reduction_kept_shape(op);
  const Tensor scale = broadcast_to(
      multiply(reshape(g[0], std::vector<std::int64_t>(kept.begin(), kept.end())), f.others),
      x.shape());
  return {multiply(scale, f.coefficient)};
}

// ---- ReduceLogSumExp --------------------------------------------------------------------

static Grads logsumexp_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents logsumexp_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(logsumexp_op) = detail::differentiable_op(
    "ReduceLogSumExp", logsumexp_gradient, KeepSet::all(), KeepSet::all(), logsumexp_tangent,
    detail::batch_reduction<&tapegrad::reduce_logsumexp>);

Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const auto ax = detail::checked_reduction_axes("reduce_logsumexp", x, axes);
  Tensor out = detail::dispatch_floating("reduce_logsumexp", x, [&](auto zero) {
    using T = decltype(zero);
    const auto& a = detail::kernel_array<T>(x);
    const Shape shape = x.shape();
    bool trailing = true;
    for (std::size_t i = 0; i < ax.size(); ++i) {
      trailing = trailing && ax[i] == shape.size() - ax.size() + i;
    }
    if (trailing) {
      // Contiguous groups (trailing axes, or all): kernels/log_sum_exp.hpp, SIMD exp above
      // 32 elements. The same special groups as below: all -inf gives -inf, a +inf +inf, a
      // NaN NaN.
      const std::size_t n = detail::reduced_count(shape, ax);
      xt::xarray<T> result = xt::empty<T>(detail::keepdims_shape(shape, ax));
      std::vector<T> scratch(detail::log_sum_exp_scratch(n));
      for (std::size_t k = 0; k < result.size(); ++k) {
        result.data()[k] = detail::log_sum_exp_row(a.data() + k * n, n, scratch.data());
      }
      if (!keepdims) result.reshape(detail::reduced_shape(shape, ax));
      return Tensor(std::move(result));
    }
    // Shift by the group maximum so exp never overflows; an infinite maximum (all -inf, or
    // a +inf) is not a usable shift, so those groups are not shifted (as TF).
    auto shift =
        detail::reduce_axes<T>(a, ax, /*keepdims=*/true, -std::numeric_limits<T>::infinity(),
                               [](T acc, T v) { return v > acc ? v : acc; });
    for (auto& m : shift) {
      if (!std::isfinite(m)) m = T(0);
    }
    const auto shifted_exp =
        detail::map_binary<T>(a, shift, shape, [](T v, T m) { return std::exp(v - m); });
    const auto sums = detail::sum_axes<T>(shifted_exp, ax, /*keepdims=*/true);
    xt::xarray<T> result =
        detail::map_binary<T>(sums, shift, Shape(sums.shape().begin(), sums.shape().end()),
                              [](T s, T m) { return std::log(s) + m; });
    if (!keepdims) result.reshape(detail::reduced_shape(shape, ax));
    return Tensor(std::move(result));
  });
  detail::record(logsumexp_op, {&x}, out, [&] { return detail::reduction_attrs(ax, keepdims); });
  return out;
}

// dz = sum(softmax * dx) over each group, softmax = exp(x - lse).
static Tangents logsumexp_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    const Tensor softmax = exp(subtract(op.inputs[0], detail::output_with_kept_axes(op)));
    return detail::sum_over_reduced_axes(op, multiply(softmax, dx));
  });
}

// d lse / d x = exp(x - lse): a softmax over the reduced axes. Reading lse from the output
// keeps it differentiable for higher orders. lse and g broadcast inside the subtract and the
// multiply, not as copies of x's size first.
static Grads logsumexp_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor softmax = exp(subtract(x, detail::with_kept_axes(op, op.outputs()[0])));
  return {multiply(detail::with_kept_axes(op, g[0]), softmax)};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(reduce)
