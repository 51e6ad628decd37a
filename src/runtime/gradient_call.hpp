// The walk's "call and check" stage: one op's gradient rule called on its summed output
// gradients, and what it returns checked against the op's inputs.
#pragma once

#include <vector>

#include "runtime/backward_plan.hpp"
#include "runtime/vspace.hpp"

namespace tapegrad::detail {

// How an entry is differentiated, resolved when the walk reaches it: its custom backward, its
// definition's rule, or a user primitive's registered gradient (which may have been
// registered after the op was recorded).
struct Differentiation {
  GradientKind kind;
  const SparseGradientFunction* custom = nullptr;
  const UserGradient* user = nullptr;
};

// LookupError naming the op when it is a user primitive with no gradient registered (neither a
// gradient nor not_differentiable).
Differentiation differentiation_of(const OpEntry& e);

// What one call reads and returns. The walk keeps one of these for the whole run, so that a
// step reuses the vectors' capacity instead of allocating.
struct CallBuffers {
  std::vector<Tensor> output_gradients;  // one per output: the summed gradients, or undefined
  std::vector<bool> needs;               // one per input: a source depends on it
  std::vector<Tensor> saved_inputs;      // the entry's kept tensors, undefined where not kept
  std::vector<Tensor> saved_outputs;
  std::vector<GradientValue> input_gradients;  // the result: one per input

  // Drops what the call read (the kept tensors and the output gradients die here when the
  // walk held the last reference). The vectors keep their length: the next op, most often of
  // the same arity, then resizes nothing.
  void release_call_inputs() {
    for (auto* v : {&saved_inputs, &saved_outputs, &output_gradients}) {
      for (Tensor& t : *v) t = Tensor();
    }
  }
};

// For an op of kind Rule whose outputs received some gradient: zeros (vspace.zeros) for its
// floating outputs that received none, the kept tensors gathered (moved out of the entry when
// `take_saved`, so that they die with the call), the rule called, and its result checked: one
// gradient per input, each one a source needs of its input's shape and dtype. An error thrown
// inside the rule comes back with "gradient of <op>: " before its message.
void call_and_check(OpEntry& e, const Differentiation& how, const BackwardPlan::Slot* input_slots,
                    bool take_saved, const VSpace& vspace, CallBuffers& buffers);

}  // namespace tapegrad::detail
