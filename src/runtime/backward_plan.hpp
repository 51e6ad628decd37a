// The walk's first stage (TF: tape.h's PrepareBackprop): which recorded ops lie between the
// targets and the sources, how the tensors on that path are numbered, and how many gradients
// each op waits for before it may run.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/tape.hpp"

namespace tapegrad::detail {

// Built once and run many times by a Jacobian (one run per row). Tensors that take part in the
// walk are numbered densely ("slots") so that a run indexes vectors instead of hashing ids; the
// sources' slots come first.
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
  std::size_t num_slots() const { return producer_step.size(); }
  bool is_source(Slot s) const { return static_cast<std::size_t>(s) < num_source_slots; }

  std::vector<Step> steps;                  // ascending op id (recording order)
  std::vector<Slot> slots;                  // every step's input then output slots
  std::vector<std::int32_t> producer_step;  // per slot: the step producing it, or -1
  // Per step: the gradients its outputs still wait for, one per use of one of its outputs by
  // a step (TF: the op_missing_count). The step is ready at zero.
  std::vector<std::uint32_t> pending;
  // Per source slot: its uses by steps. A leaf's gradient is complete (its hooks may run) when
  // its last user has passed it on.
  std::vector<std::uint32_t> source_uses;
  std::size_t num_source_slots = 0;  // slots [0, num_source_slots) are the sources'
  std::vector<Slot> target_slots;    // per target; kNoSlot for a non-floating one
  std::vector<Slot> source_slots;    // per source; kNoSlot when unconnected
  std::vector<TensorMeta> sources;
};

// "No slot", for the files that walk a plan.
inline constexpr BackwardPlan::Slot kNoSlot = BackwardPlan::kNoSlot;

// `forget_producers`: free the tape's id map as soon as the plan has done its lookups (for the
// only walk of a non-persistent tape). Ops recorded after the call (a persistent tape recording
// its own backward) are never part of the plan. `stop_ids` (sorted): tensors treated as
// constants (TF's stop_gradients): the gradient reaching one is not passed to its producer; a
// source among them still receives it.
BackwardPlan plan_backward(TapeImpl& tape, const std::vector<Tensor>& targets,
                           const std::vector<TensorMeta>& sources, bool forget_producers = false,
                           const std::vector<std::uint64_t>& stop_ids = {});

}  // namespace tapegrad::detail
