// The backward walk over a tape (TF: imperative_grad / tape.h ComputeGradient).
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/tape.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad::detail {

// One gradient per source: d(sum of targets weighted by output_gradients)/d(source).
// `output_gradients` is empty or has one entry per target (undefined = ones). Sources are
// described by id, dtype and shape (a Variable's source is its handle). On a non-persistent
// tape each entry's saved tensors are released as soon as the walk has used it.
std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected);

// The part of a walk that depends only on the tape, the targets and the sources, not on the
// output gradients: which ops lead from a source to a target, and how many uses each tensor
// has. Built once and run many times by a Jacobian (one run per row). Tensors that take part
// in the walk are numbered densely ("slots") so a run indexes vectors instead of hashing ids.
struct BackwardPlan {
  using Slot = std::int32_t;
  static constexpr Slot kNoSlot = -1;
  // A step's input slots are slots[first, first + its entry's n_inputs) (kNoSlot where no
  // gradient is wanted), its output slots the n_outputs after them (kNoSlot where none can
  // arrive).
  struct Step {  // 8 bytes: a plan has one per op on the path
    std::uint32_t op_id;
    std::uint32_t first;
  };
  const Slot* input_slots(const Step& s) const { return slots.data() + s.first; }
  const Slot* output_slots(const Step& s, const OpEntry& e) const {
    return slots.data() + s.first + e.n_inputs;
  }
  std::vector<Step> steps;                 // ascending op id (recording order)
  std::vector<Slot> slots;                 // every step's input then output slots
  std::vector<std::uint32_t> uses;         // per slot: uses by steps
  std::vector<std::int32_t> producer_step; // per slot: the step producing it, or -1
  std::vector<bool> is_source;             // per slot: its gradient is kept for the caller
  std::vector<Slot> target_slots;          // per target; kNoSlot for a non-floating one
  std::vector<Slot> source_slots;          // per source; kNoSlot when unconnected
  std::vector<TensorMeta> sources;
};

// `forget_producers`: free the tape's id map as soon as the plan has done its lookups (for
// the only walk of a non-persistent tape).
BackwardPlan plan_backward(TapeImpl& tape, const std::vector<Tensor>& targets,
                           const std::vector<TensorMeta>& sources, bool forget_producers = false);

// Runs a plan made on this tape for these targets. `release_entries`: drop each entry's
// saved tensors once used (only for the last run on a non-persistent tape).
std::vector<GradientValue> run_backward(TapeImpl& tape, const BackwardPlan& plan,
                                        const std::vector<Tensor>& targets,
                                        const std::vector<Tensor>& output_gradients,
                                        UnconnectedGradients unconnected, bool release_entries);

}  // namespace tapegrad::detail
