// reduce_max and reduce_min: one section, one gradient rule. Everything but the public
// functions has internal linkage (static, constexpr).
#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/elementwise.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "ops/reduce_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/indexing.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"
#include "ops/batching_support.hpp"

namespace tapegrad {

// ---- Max, Min ---------------------------------------------------------------------------

static Grads extremum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents extremum_tangent(const ForwardContext& op, const Tangents& tangents);
constexpr OpDefinition max_op =
    detail::differentiable_op("Max", extremum_gradient, KeepSet::all(), KeepSet::all(),
                              extremum_tangent, detail::batch_reduction<&tapegrad::reduce_max>);
constexpr OpDefinition min_op =
    detail::differentiable_op("Min", extremum_gradient, KeepSet::all(), KeepSet::all(),
                              extremum_tangent, detail::batch_reduction<&tapegrad::reduce_min>);

// The larger (IsMax) or smaller of acc and v; a NaN wins and stays, as in TF. One select, no
// branch: the fold is exactly associative, so the kernel interleaves accumulators.
template <bool IsMax, class T>
static T pick(T acc, T v) {
  const bool better = IsMax ? v > acc : v < acc;
  if constexpr (std::is_floating_point_v<T>) {
    return (acc == acc) & (better | (v != v)) ? v : acc;
  } else {
    return better ? v : acc;
  }
}

// The fold as reduce_axes takes it, with a contiguous run folded in eight independent lanes:
// max/min as plain selects the compiler turns into vector max/min, NaNs only flagged (a
// compare and a select, no branch), and on a NaN the run's first NaN returned, as the scalar fold would.
// Ties between lanes are equal values, so the lanes give the scalar fold's value (up to the
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
    const T init = IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    return detail::Fold{init, ExtremumFold<IsMax, T>{}, true};
  });
}

Tensor reduce_max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum<true>("reduce_max", max_op, x, axes, keepdims);
}

Tensor reduce_min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum<false>("reduce_min", min_op, x, axes, keepdims);
}

// 1 / (number of ties) where x equals its group's extremum, 0 elsewhere. The pattern of
// extrema is piecewise constant in x, so it is computed outside the tape: a constant for
// every gradient, which keeps the gradient linear in the incoming gradient and exact to any
// order away from ties.
static Tensor tie_weights(const char* op_type, const Tensor& x, const Tensor& extremum,
                          const std::vector<std::size_t>& axes) {
  const Shape kept = detail::keepdims_shape(x.shape(), axes);
  return detail::dispatch_floating(op_type, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> target = extremum.array<T>();
    target.reshape(kept);
    // One array of x's size: the indicator, divided in place by its group's count of ties
    // (skipped when there is no tie, the usual case: every count is 1).
    auto weights = detail::map_binary<T>(x.array<T>(), target, x.shape(),
                                         [](T v, T e) { return v == e ? T(1) : T(0); });
    // Whole-number sums: exact in any order.
    const auto ties = detail::reduce_axes<T>(weights, axes, /*keepdims=*/true, T(0),
                                             [](T acc, T v) { return acc + v; }, true);
    if (std::any_of(ties.begin(), ties.end(), [](T count) { return count != T(1); })) {
      detail::binary_loop<T>(weights, ties, x.shape(), weights.size(), weights.data(),
                             [](T hit, T count) { return hit / count; });
    }
    return Tensor(std::move(weights));
  });
}

// The tangent of the extremum: the tie-weighted mean of the tied elements' tangents.
static Tangents extremum_tangent(const ForwardContext& op, const Tangents& tangents) {
  const auto axes = detail::reduction_axes(op);
  const std::vector<std::size_t> sorted_axes(axes.begin(), axes.end());
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    const Tensor weights = tie_weights(op.op.name, op.inputs[0], op.outputs[0], sorted_axes);
    return detail::sum_over_reduced_axes(op, multiply(weights, dx));
  });
}

// Where x equals its group's extremum, found in one read of x: each tie's coordinates in x
// ([k, rank], int64), its group's flat offset in the kept shape ([k], int64), and each tie's
// weight 1 / (its group's count of ties). `every_group_hit` is false when some group has no
// tie (a NaN extremum): TF's 0 / 0 gradient, which only the dense rule reproduces.
namespace {
struct Ties {
  Tensor coordinates;
  Tensor groups;
  Tensor weights;
  std::size_t count = 0;
  bool any_shared = false;
  bool every_group_hit = true;
};
}  // namespace

static Ties find_ties(const char* op_type, const Tensor& x, const Tensor& extremum,
                      const Shape& kept) {
  return detail::dispatch_floating(op_type, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<std::size_t> offsets;
    std::vector<std::size_t> groups;
    std::vector<std::size_t> per_group(num_elements(kept), 0);
    detail::for_each_equal_to_cell(x.array<T>(), extremum.array<T>().data(), kept,
                                   [&](std::size_t i, std::size_t cell) {
                                     offsets.push_back(i);
                                     groups.push_back(cell);
                                     ++per_group[cell];
                                   });
    Ties ties;
    ties.count = offsets.size();
    ties.every_group_hit =
        std::none_of(per_group.begin(), per_group.end(), [](std::size_t c) { return c == 0; });
    ties.any_shared =
        std::any_of(per_group.begin(), per_group.end(), [](std::size_t c) { return c > 1; });
    const Shape& shape = x.shape();
    const std::size_t rank = shape.size();
    xt::xarray<std::int64_t> coordinates = xt::empty<std::int64_t>(Shape{ties.count, rank});
    xt::xarray<std::int64_t> group_ids = xt::empty<std::int64_t>(Shape{ties.count});
    xt::xarray<T> weights = xt::empty<T>(Shape{ties.count});
    for (std::size_t t = 0; t < ties.count; ++t) {
      std::size_t rest = offsets[t];
      for (std::size_t d = rank; d-- > 0;) {
        coordinates(t, d) = static_cast<std::int64_t>(rest % shape[d]);
        rest /= shape[d];
      }
      group_ids(t) = static_cast<std::int64_t>(groups[t]);
      weights(t) = T(1) / static_cast<T>(per_group[groups[t]]);
    }
    ties.coordinates = Tensor(std::move(coordinates));
    ties.groups = Tensor(std::move(group_ids));
    ties.weights = Tensor(std::move(weights));
    return ties;
  });
}

// g / (number of ties) at each tie of its group, 0 elsewhere (TF's even split). When ties are
// few (a reduction over runs of 4 or more elements, without many equal values) they are
// scattered into zeros: one read of x and one write of the result, where the dense form
// writes and reads an input-sized weights array. The ties and their weights are constants of
// x (piecewise constant), so both forms are linear in g, in tapegrad ops, to any order.
static Grads extremum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor& extremum = op.outputs()[0];
  const Shape kept = detail::reduction_kept_shape(op);
  const auto kept_dims = std::vector<std::int64_t>(kept.begin(), kept.end());
  const Ties ties = find_ties(op.op_type().c_str(), x, extremum, kept);
  if (ties.every_group_hit && ties.count > 0 && ties.count * 4 <= x.size()) {
    Tensor updates = gather(reshape(g[0], {-1}), ties.groups);
    if (ties.any_shared) updates = multiply(updates, ties.weights);
    return {scatter_nd(ties.coordinates, updates, x.shape())};
  }
  const Tensor weights = tie_weights(op.op_type().c_str(), x, extremum, detail::reduction_axes(op));
  // g in the kept shape broadcasts in the multiply: no input-sized copy of g.
  return {multiply(reshape(g[0], kept_dims), weights)};
}

namespace detail {

void register_reduce_extrema_ops(OpRegistrar& registry) { registry.add({&max_op, &min_op}); }

}  // namespace detail

}  // namespace tapegrad
