// What the reduce ops share around their kernel: checking and normalising the axes, the forward
// of a reduction that folds each group, recording with the normalised axes, and reading them
// back in a gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/reduce_kernel.hpp"
#include "runtime/forward_context.hpp"
#include "runtime/operand_checks.hpp"
#include "runtime/recording.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad::detail {

// x's reduction axes for `function`: empty = all; sorted and non-negative. InvalidArgument
// naming the function when x is undefined or an axis is out of range or repeated.
inline std::vector<std::size_t> checked_reduction_axes(const char* function, const Tensor& x,
                                                       const std::vector<int>& axes) {
  require_defined(function, x);
  return normalize_axes(function, axes, x);
}

// The attributes a reduction records: its normalised (sorted, non-negative) axes.
inline Attrs reduction_attrs(const std::vector<std::size_t>& axes, bool keepdims) {
  return Attrs()
      .set("axes", std::vector<std::int64_t>(axes.begin(), axes.end()))
      .set("keepdims", keepdims);
}

// How a reduction folds a group: out = combine(out, v) from `init`; `reorderable` when
// combine is exactly associative and commutative (the kernel may then interleave accumulators).
template <class T, class Combine>
struct Fold {
  T init;
  Combine combine;
  bool reorderable = false;
};
template <class T, class Combine>
Fold(T, Combine) -> Fold<T, Combine>;
template <class T, class Combine>
Fold(T, Combine, bool) -> Fold<T, Combine>;

// The forward of a reduction over the normalised `axes` of x (numeric dtypes), recorded as
// `op`: `make_fold(T{})` gives the Fold for element type T.
template <class MakeFold>
Tensor folding_reduction(const OpDefinition& op, const char* function, const Tensor& x,
                         const std::vector<std::size_t>& axes, bool keepdims, MakeFold make_fold) {
  Tensor out = dispatch_numeric(function, x, [&](auto zero) {
    using T = decltype(zero);
    const auto fold = make_fold(zero);
    return Tensor(reduce_axes<T>(KernelInput<T>(x), axes, keepdims, fold.init, fold.combine,
                                 fold.reorderable));
  });
  record(op, {&x}, out, [&] { return reduction_attrs(axes, keepdims); });
  return out;
}

// The gradient of reduce_max / reduce_min over the sorted, non-negative `axes` of x
// (recorded as ExtremumGrad): each group's g (extremum and g: one element per group, the
// reduction's output with or without keepdims) split evenly over the elements of x equal to
// the group's extremum, 0 elsewhere, NaN over a group whose extremum is NaN. x's shape; linear
// in g. InvalidArgument naming extremum_grad and the shapes when they do not fit.
Tensor extremum_grad(const Tensor& x, const Tensor& extremum, const Tensor& g,
                     const std::vector<std::size_t>& axes);

// In a gradient rule: the axes the reduction recorded.
inline std::vector<std::size_t> reduction_axes(const OpContext& op) {
  const auto& a = op.attrs().get_ints("axes");
  return std::vector<std::size_t>(a.begin(), a.end());
}

// The input's shape with the reduced axes kept as 1.
inline Shape reduction_kept_shape(const OpContext& op) {
  return keepdims_shape(op.input_shape(0), reduction_axes(op));
}

// A tensor of the reduction's output shape (keepdims or not), reshaped to the kept shape: an
// operand that a binary op with an input-shaped one broadcasts as it goes, with no input-sized
// copy. Differentiable.
inline Tensor with_kept_axes(const OpContext& op, const Tensor& reduced) {
  const Shape kept = reduction_kept_shape(op);
  return reshape(reduced, std::vector<std::int64_t>(kept.begin(), kept.end()));
}

// The same broadcast over the reduced axes to the input's shape (a gradient must have it).
// Differentiable.
inline Tensor broadcast_to_input(const OpContext& op, const Tensor& reduced) {
  return broadcast_to(with_kept_axes(op, reduced), op.input_shape(0));
}

// In a forward rule: the axes the reduction recorded, as the public ops take them.
inline std::vector<int> reduction_axes(const ForwardContext& op) {
  const auto& a = op.attrs().get_ints("axes");
  return std::vector<int>(a.begin(), a.end());
}

// In a forward rule: sum(t) over the reduction's groups, in the output's shape. Differentiable.
inline Tensor sum_over_reduced_axes(const ForwardContext& op, const Tensor& t) {
  return reduce_sum(t, reduction_axes(op), op.attrs().get_bool("keepdims"));
}

// In a forward rule: the output with the reduced axes kept as 1 (see with_kept_axes).
inline Tensor output_with_kept_axes(const ForwardContext& op) {
  const auto axes = reduction_axes(op);
  const Shape kept =
      keepdims_shape(op.inputs[0].shape(), std::vector<std::size_t>(axes.begin(), axes.end()));
  return reshape(op.outputs[0], std::vector<std::int64_t>(kept.begin(), kept.end()));
}

}  // namespace tapegrad::detail
