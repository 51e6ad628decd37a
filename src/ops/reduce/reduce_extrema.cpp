// reduce_max and reduce_min: one section, one gradient rule. Everything but the public
// functions has internal linkage (static, constexpr).
#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/elementwise.hpp"
#include "kernels/extremum.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "ops/reduce/reduce_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/indexing.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

// ---- Max, Min ---------------------------------------------------------------------------

static Grads extremum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents extremum_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(max_op) =
    detail::differentiable_op("Max", extremum_gradient, KeepSet::all(), KeepSet::all(),
                              extremum_tangent, detail::batch_reduction<&tapegrad::reduce_max>);
TAPEGRAD_BUILTIN_OP(min_op) =
    detail::differentiable_op("Min", extremum_gradient, KeepSet::all(), KeepSet::all(),
                              extremum_tangent, detail::batch_reduction<&tapegrad::reduce_min>);

// The larger (IsMax) or smaller of acc and v; a NaN wins and stays, as in TF. One select, no
// branch: the fold is exactly associative, so the kernel interleaves accumulators.
template <bool IsMax, class T>
static T pick(T acc, T v) {
  return detail::replaces_extremum<IsMax>(v, acc) ? v : acc;
}

// The fold as reduce_axes takes it, with a contiguous run folded in eight independent lanes:
// max/min as plain selects the compiler turns into vector max/min, NaNs only flagged (a
// compare and a select, no branch), and on a NaN the run's first NaN returned, as the scalar fold
// would. Ties between lanes are equal values, so the lanes give the scalar fold's value (up to the
// sign of a zero maximum, which neither order specifies).
namespace {
template <bool IsMax, class T>
struct ExtremumFold {
  T operator()(T acc, T v) const { return pick<IsMax>(acc, v); }

  T run(const T* b, std::size_t count, T init) const {
    constexpr std::size_t kLanes = 8;
    if (count < 2 * kLanes) {  // short runs (row extrema of narrow matrices): no lane set-up
      T acc = init;
      for (std::size_t j = 0; j < count; ++j) acc = pick<IsMax>(acc, b[j]);
      return acc;
    }
    T lane[kLanes];
    T nan_seen[kLanes];
    for (std::size_t k = 0; k < kLanes; ++k) {
      lane[k] = init;
      nan_seen[k] = T(0);
    }
    std::size_t j = 0;
    for (; j + kLanes <= count; j += kLanes) {
      // Kept a loop over the lanes (not unrolled into scalars) so the vectoriser takes it.
#pragma GCC unroll 1
      for (std::size_t k = 0; k < kLanes; ++k) {
        const T v = b[j + k];
        lane[k] = (IsMax ? v > lane[k] : v < lane[k]) ? v : lane[k];
        if constexpr (std::is_floating_point_v<T>) nan_seen[k] = v != v ? T(1) : nan_seen[k];
      }
    }
    T acc = init;
    for (std::size_t k = 0; k < kLanes; ++k) acc = pick<IsMax>(acc, lane[k]);
    for (; j < count; ++j) acc = pick<IsMax>(acc, b[j]);
    if constexpr (std::is_floating_point_v<T>) {
      T nans = T(0);
      for (std::size_t k = 0; k < kLanes; ++k) nans += nan_seen[k];
      if (nans != T(0) || acc != acc || init != init) {
        if (init != init) return init;
        for (std::size_t i = 0; i < count; ++i) {
          if (b[i] != b[i]) return b[i];
        }
      }
    }
    return acc;
  }
};
}  // namespace

template <bool IsMax>
static Tensor reduce_extremum(const char* function, const OpDefinition& op, const Tensor& x,
                              const std::vector<int>& axes, bool keepdims) {
  const auto ax = detail::checked_reduction_axes(function, x, axes);
  if (detail::reduced_count(x.shape(), ax) == 0 &&
      num_elements(detail::reduced_shape(x.shape(), ax)) != 0) {
    throw InvalidArgument(detail::describe(function, x) + ": the reduction over axes " +
                          detail::ints_to_string(axes) + " is empty, and an empty set has no " +
                          (IsMax ? "maximum" : "minimum"));
  }
  return detail::folding_reduction(op, function, x, ax, keepdims, [](auto zero) {
    using T = decltype(zero);
    // Floats start from -inf (+inf): from the most negative finite value, a group of -infs
    // had that value as its maximum, which no element equals (its gradient was 0 / 0).
    T init = IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      init = IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    }
    return detail::Fold{init, ExtremumFold<IsMax, T>{}, true};
  });
}

Tensor reduce_max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum<true>("reduce_max", max_op, x, axes, keepdims);
}

Tensor reduce_min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum<false>("reduce_min", min_op, x, axes, keepdims);
}

// ---- ExtremumGrad ------------------------------------------------------------------------
// ExtremumGrad(x, extremum, g): each group's g split evenly over the elements of x equal to
// the group's extremum (TF's even split of ties), 0 elsewhere; a group whose extremum is NaN
// has no tie and gets NaN (TF's 0 / 0). Linear in g. The ties are found inside the kernel,
// never handed to a rule: a pattern read from x outside an op would be a constant of a
// vectorized_map trace. x and the extremum get no gradient (the pattern is piecewise
// constant in x), so the rule is exact to any order away from ties.

static Grads extremum_grad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents extremum_grad_tangent(const ForwardContext& op, const Tangents& tangents);
// Every input with the batch axis (an unbatched one broadcast), the axes shifted past it.
static std::vector<Tensor> extremum_grad_batched(const detail::BatchingContext& op,
                                                 const std::vector<Tensor>& inputs) {
  std::vector<std::size_t> axes;
  for (std::int64_t a : op.attrs().get_ints("axes"))
    axes.push_back(static_cast<std::size_t>(a) + 1);
  return {detail::extremum_grad(detail::with_batch_axis(op, inputs, 0),
                                detail::with_batch_axis(op, inputs, 1),
                                detail::with_batch_axis(op, inputs, 2), axes)};
}
static detail::ReplayOutputs extremum_grad_replay(const detail::ReplayContext& op,
                                                  const std::vector<Tensor>& inputs) {
  const auto& recorded = op.attrs().get_ints("axes");
  return {detail::extremum_grad(inputs[0], inputs[1], inputs[2],
                                std::vector<std::size_t>(recorded.begin(), recorded.end()))};
}
TAPEGRAD_BUILTIN_OP(extremum_grad_op) = detail::with_replay(
    detail::differentiable_op("ExtremumGrad", extremum_grad_gradient, KeepSet::only({0, 1}),
                              KeepSet::none(), extremum_grad_tangent, extremum_grad_batched),
    extremum_grad_replay);

Tensor detail::extremum_grad(const Tensor& x, const Tensor& extremum, const Tensor& g,
                             const std::vector<std::size_t>& axes) {
  const char* op = "extremum_grad";
  const auto described = [&] { return describe(op, {{"x", x}, {"extremum", extremum}, {"g", g}}); };
  require_defined(op, x);
  require_defined(op, extremum);
  require_defined(op, g);
  const Shape kept = keepdims_shape(x.shape(), axes);
  if (!is_floating(x.dtype()) || extremum.dtype() != x.dtype() || g.dtype() != x.dtype() ||
      extremum.size() != num_elements(kept) || g.size() != num_elements(kept)) {
    throw InvalidArgument(described() +
                          ": needs floating x, and extremum and g of x's dtype "
                          "with one element per group, " +
                          shape_to_string(kept));
  }
  Tensor out = dispatch_floating(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = allocate_array<T>(op, x.shape());
    T* dx = result.data();
    const T* cells = kernel_data<T>(extremum);
    const T* grad = kernel_data<T>(g);
    const std::size_t groups = num_elements(kept);
    std::vector<std::size_t> ties;
    std::vector<std::size_t> tie_groups;
    std::vector<std::size_t> per_group(groups, 0);
    // One read of x: usually one tie per group, so nothing x-sized but dx is written.
    for_each_equal_to_cell(kernel_array<T>(x), cells, kept, [&](std::size_t i, std::size_t cell) {
      ties.push_back(i);
      tie_groups.push_back(cell);
      ++per_group[cell];
    });
    std::fill_n(dx, x.size(), T(0));
    for (std::size_t t = 0; t < ties.size(); ++t) {
      const std::size_t count = per_group[tie_groups[t]];
      dx[ties[t]] =
          count == 1 ? grad[tie_groups[t]] : grad[tie_groups[t]] * (T(1) / static_cast<T>(count));
    }
    if (std::none_of(per_group.begin(), per_group.end(), [](std::size_t c) { return c == 0; })) {
      return Tensor(std::move(result));
    }
    // A NaN extremum: its whole group gets g * (0 / 0).
    xt::xarray<T> missing = xt::zeros<T>(kept);
    for (std::size_t c = 0; c < groups; ++c) {
      if (per_group[c] == 0) missing.data()[c] = grad[c] * (T(0) / T(0));
    }
    const xt::xarray<T> found = result;
    binary_loop<T>(found, missing, x.shape(), x.size(), dx, [](T v, T m) { return v + m; });
    return Tensor(std::move(result));
  });
  record(extremum_grad_op, {&x, &extremum, &g}, out,
         [&] { return Attrs().set("axes", std::vector<std::int64_t>(axes.begin(), axes.end())); });
  return out;
}

static std::vector<std::size_t> recorded_axes(const Attrs& attrs) {
  const auto& a = attrs.get_ints("axes");
  return std::vector<std::size_t>(a.begin(), a.end());
}

// The transpose in g: each group's sum of h times its ties' weights (ExtremumGrad of ones).
static Tensor sum_over_ties(const Tensor& x, const Tensor& extremum, const Tensor& h,
                            const std::vector<std::size_t>& axes) {
  const Tensor weights = detail::extremum_grad(x, extremum, ones_like(extremum), axes);
  const std::vector<int> int_axes(axes.begin(), axes.end());
  return reshape(reduce_sum(multiply(h, weights), int_axes, /*keepdims=*/true),
                 detail::signed_shape(extremum.shape()));
}

static Grads extremum_grad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {GradientValue(), GradientValue(),
          sum_over_ties(op.inputs()[0], op.inputs()[1], g[0], recorded_axes(op.attrs()))};
}

static Tangents extremum_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[2].defined()) return {Tensor()};
  return {
      detail::extremum_grad(op.inputs[0], op.inputs[1], tangents[2], recorded_axes(op.attrs()))};
}

// ---- the gradient and tangent of Max and Min ----------------------------------------------

// The tangent of the extremum: the tie-weighted mean of the tied elements' tangents.
static Tangents extremum_tangent(const ForwardContext& op, const Tangents& tangents) {
  const auto axes = detail::reduction_axes(op);
  const std::vector<std::size_t> sorted_axes(axes.begin(), axes.end());
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return sum_over_ties(op.inputs[0], op.outputs[0], dx, sorted_axes);
  });
}

static Grads extremum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::extremum_grad(op.inputs()[0], op.outputs()[0], g[0], detail::reduction_axes(op))};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(reduce_extrema)
