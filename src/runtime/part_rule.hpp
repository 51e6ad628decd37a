// What an op tells a Function when its parts are consecutive runs of a whole's elements: a
// split along an axis with only 1s before it (the whole is its input, the parts its outputs),
// or a concat along such an axis (the whole is its output, the parts its inputs). A fused loop
// of elementwise ops then reads a split's part in place, at its offset into the input
// (runtime/fused_elementwise.cpp), or writes a concat's part straight into the concat's output
// (plan_arena in function_plan.cpp), and the op itself does not run. GradBench's lstm splits each
// step's gates this way, and its gradient joins them again: thousands of ops a call.
#pragma once

#include <cstddef>
#include <vector>

#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

struct PartRule {
  // Where each part starts in the whole's row-major elements, given the whole's shape, the
  // op's attributes and the parts' shapes: `starts` gets one offset per part. False when the
  // parts are not runs of the whole's elements (along a later axis of a tensor with more than
  // one row). All parts at once: a split of an LSTM's 1,024 steps asked part by part summed
  // the sizes before each, half a million times per plan.
  bool (*starts)(const Shape& whole, const Attrs* attrs, const std::vector<Shape>& parts,
                 std::vector<std::size_t>& starts);
};

}  // namespace tapegrad::detail
