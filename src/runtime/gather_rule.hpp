// What a gather tells a Function so that a fused loop of elementwise ops can read the gather's
// output straight from its params, a block at a time, instead of from a tensor the gather
// writes first (runtime/fused_elementwise.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

struct GatherRule {
  // The rows of params along `axis` the output reads, in the order of indices' elements,
  // checked as the op checks them (the same InvalidArgument otherwise).
  std::vector<std::int64_t> (*rows)(const Tensor& params, const Tensor& indices, std::size_t axis);
};

}  // namespace tapegrad::detail
