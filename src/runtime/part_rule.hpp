// What an op whose outputs are consecutive runs of its input's elements tells a Function (a
// split along an axis with only 1s before it): a fused loop of elementwise ops then reads such
// an output in place, at its offset into the input, and the op itself does not run
// (runtime/fused_elementwise.cpp). GradBench's lstm splits each step's gates and its
// sequences of gates this way: a thousand views a call, each a tensor handle made and freed.
#pragma once

#include <cstddef>
#include <vector>

#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

struct PartRule {
  static constexpr std::size_t kNotAPart = static_cast<std::size_t>(-1);
  // Where output `j` starts in the input's row-major elements, given the input's shape, the
  // op's attributes and its outputs' shapes; kNotAPart when its elements are not one run of
  // the input's (a split along a later axis of a tensor with more than one row).
  std::size_t (*offset)(const Shape& input, const Attrs* attrs, const std::vector<Shape>& outputs,
                        std::size_t j);
};

}  // namespace tapegrad::detail
