// What a reduction tells a Function when it folds whole rows of its input in order: a sum over
// leading axes adds up to 32 rows of its input (each of the output's size) one after the other,
// starting from zero, as its eager kernel does (kernels/pairwise_sum.hpp). A Function's replay then
// computes it as one loop of the fold's scalar function over the rows, each read in place at
// its offset, with no op of its own to dispatch, and its input and output may stay in the
// replay's arena. GradBench's lstm sums each step's two gate rows this way in its gradient.
#pragma once

#include <cstddef>

#include "runtime/elementwise_rule.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

struct FoldRule {
  // A binary rule with the eager fold's arithmetic: out = combine(out, row) for each row.
  const ElementwiseRule* combine;
  double init;  // where each output element starts
  // How many rows the input folds into the output, given the input's shape, the op's
  // attributes and the output's shape; 0 when the op folds some other way (other axes, more
  // rows than it adds in order, or into a single element, which the eager kernel sums in
  // interleaved partial sums).
  std::size_t (*rows)(const Shape& input, const Attrs* attrs, const Shape& output);
};

}  // namespace tapegrad::detail
