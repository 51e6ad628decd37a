// What the reduce ops share around their kernels: recording with the normalised axes, and
// reading them back in a gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/recording.hpp"
#include "kernels/reduce_kernel.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad::detail {

// Records a reduction of x with its normalised (sorted, non-negative) axes.
inline void record_reduction(const OpSlot& op, const Tensor& x, const Tensor& out,
                             const std::vector<std::size_t>& axes, bool keepdims) {
  if (!any_tape_active()) return;
  Attrs attrs;
  attrs.set("axes", std::vector<std::int64_t>(axes.begin(), axes.end())).set("keepdims", keepdims);
  const Tensor* in = &x;
  record_on_tapes(op, &in, 1, &out, 1, attrs);
}

inline std::vector<std::size_t> reduction_axes(const OpContext& ctx) {
  const auto& a = ctx.attrs().get_ints("axes");
  return std::vector<std::size_t>(a.begin(), a.end());
}

// The input's shape with the reduced axes kept as 1.
inline Shape reduction_kept_shape(const OpContext& ctx) {
  return keepdims_shape(ctx.input_shape(0), reduction_axes(ctx));
}

// A tensor of the reduction's output shape (keepdims or not), reshaped to the kept shape and
// broadcast over the reduced axes to the input's shape. Differentiable.
inline Tensor broadcast_to_input(const OpContext& ctx, const Tensor& reduced) {
  const Shape kept = reduction_kept_shape(ctx);
  return broadcast_to(reshape(reduced, std::vector<std::int64_t>(kept.begin(), kept.end())),
                      ctx.input_shape(0));
}

}  // namespace tapegrad::detail
