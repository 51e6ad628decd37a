// What the reduce ops share around their kernels: recording with the normalised axes, and
// reading them back in a gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/recording.hpp"
#include "kernels/reduce_kernel.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad::detail {

// The attributes a reduction records: its normalised (sorted, non-negative) axes.
inline Attrs reduction_attrs(const std::vector<std::size_t>& axes, bool keepdims) {
  return Attrs()
      .set("axes", std::vector<std::int64_t>(axes.begin(), axes.end()))
      .set("keepdims", keepdims);
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
