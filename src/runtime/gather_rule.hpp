// What a gather tells a Function so that a fused loop of elementwise ops can read the gather's
// output straight from its params, a block at a time, instead of from a tensor the gather
// writes first (runtime/fused_elementwise.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/shape_util.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

struct GatherRule {
  // The rows of params along `axis` the output reads, in the order of indices' elements, not
  // checked: the loop checks them (all before it, or each as a block reads it).
  IndexValues (*rows)(const Tensor& params, const Tensor& indices, std::size_t axis);
  // Throws the op's InvalidArgument for indices[k] (flat order), which lies outside the axis.
  void (*out_of_range)(const Tensor& params, const Tensor& indices, std::size_t axis,
                       std::size_t k);
};

}  // namespace tapegrad::detail
