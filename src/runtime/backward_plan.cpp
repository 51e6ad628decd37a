// plan_backward in three passes. The first is the only one that runs while the tape's id map
// exists, so it allocates as little as it can (a bit per op and the array the plan's slots are
// later compacted into); every id lookup happens there, once per input of a reached op.
#include "runtime/backward_plan.hpp"

#include <algorithm>

#include "runtime/floating_dtype.hpp"
#include "runtime/id_map.hpp"
#include "runtime/op_registry.hpp"

namespace tapegrad::detail {
namespace {

using Slot = BackwardPlan::Slot;

// The ops reachable backwards from the targets, and for each of them (ascending op id) a
// block of its inputs' producing ops (-1 for none) followed by room for its outputs' slots.
struct Reach {
  std::vector<bool> reached;                   // per op
  std::vector<std::int32_t> blocks;            // becomes the plan's slots, compacted in place
  std::vector<std::int32_t> target_producers;  // per target
  std::size_t ops = 0;                         // reached
  std::size_t outputs = 0;                     // of the reached ops
};

bool is_stopped(const std::vector<std::uint64_t>& stop_ids, std::uint64_t id) {
  return !stop_ids.empty() && std::binary_search(stop_ids.begin(), stop_ids.end(), id);
}

// An op no gradient crosses (StopGradient, comparisons, argmax, a user op marked
// not_differentiable): it ends every path through it. Were it a step, its outputs would get
// slots and the ops using them would be called with gradients that can reach no source (TF
// never calls those). A custom backward overrides the registry, as in differentiation_of.
bool cuts_paths(const OpEntry& e) {
  if (e.custom_backward() != nullptr) return false;
  if (e.op->kind == GradientKind::NotDifferentiable) return true;
  if (e.op->kind != GradientKind::Registered) return false;
  const UserGradient* user = registered_gradient(*e.op);
  return user != nullptr && user->not_differentiable;
}

Reach reach_from_targets(TapeImpl& tape, const std::vector<Tensor>& targets, std::size_t n_ops,
                         const std::vector<std::uint64_t>& stop_ids) {
  // A stopped tensor counts as produced by no op: nothing behind it is reached through it.
  auto producer_op = [&](std::uint64_t id) -> std::int32_t {
    if (is_stopped(stop_ids, id)) return -1;
    const std::int32_t* producer = tape.producer(id);
    if (producer == nullptr || *producer == kWatched) return -1;
    return static_cast<std::size_t>(*producer) < n_ops ? *producer : -1;
  };
  Reach r;
  r.reached.assign(n_ops, false);
  for (const auto& t : targets) {
    const std::int32_t op = producer_op(t.id());
    r.target_producers.push_back(op);
    if (op >= 0) r.reached[static_cast<std::size_t>(op)] = true;
  }
  // Op ids are a topological order (a producer precedes its users), so one descending sweep
  // from the last target's producer finds every reached op. Blocks are written back to front
  // and the array reversed once. Its room is reserved first, for every op up to that
  // producer: exact when all of them are reached, and never the doubling of a growing vector
  // while the id map still exists (the backward pass's peak).
  std::size_t end = 0;
  for (const std::int32_t op : r.target_producers) {
    end = std::max(end, static_cast<std::size_t>(op + 1));
  }
  std::size_t room = 0;
  for (std::size_t op = 0; op < end; ++op) {
    const OpEntry& e = tape.entry(static_cast<std::int64_t>(op));
    room += e.n_inputs + e.n_outputs;
  }
  r.blocks.reserve(room);
  for (std::size_t op = end; op-- > 0;) {
    if (!r.reached[op]) continue;
    const OpEntry& e = tape.entry(static_cast<std::int64_t>(op));
    ++r.ops;
    r.outputs += e.n_outputs;
    for (std::size_t j = 0; j < e.n_outputs; ++j) r.blocks.push_back(kNoSlot);
    const RecordedTensors inputs = e.inputs();
    // Nothing is reached through a path-cutting op or an integer or bool input: the ops behind
    // them could receive no gradient, and would otherwise become steps that the walk pops
    // (asking for a gradient function they may not have).
    const bool cut = cuts_paths(e);
    for (std::size_t i = inputs.size(); i-- > 0;) {
      const std::int32_t producer =
          cut || !floating(inputs[i].dtype()) ? -1 : producer_op(inputs[i].id);
      r.blocks.push_back(producer);
      if (producer >= 0 && static_cast<std::size_t>(producer) < op) {
        r.reached[static_cast<std::size_t>(producer)] = true;
      }
    }
  }
  std::reverse(r.blocks.begin(), r.blocks.end());
  return r;
}

// The index of output `id` of an entry, without scanning its outputs in the usual cases (an
// op with 10^4 outputs whose users each look one up must not cost 10^8): output ids of one op
// are usually consecutive, so the offset from the first output's id is tried first; ids come
// in per-thread blocks, so where a block boundary breaks that, the output after the one found
// last in the same entry is tried (users such as concat take the outputs in order).
class OutputFinder {
 public:
  std::size_t find(const OpEntry& e, std::uint64_t id) {
    const RecordedTensors outputs = e.outputs();
    const std::uint64_t guess = id - outputs[0].id;
    if (guess < outputs.size() && outputs[guess].id == id) return guess;
    if (&e == last_ && next_ < outputs.size() && outputs[next_].id == id) return found(e, next_);
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      if (outputs[j].id == id) return found(e, j);
    }
    return outputs.size();
  }

 private:
  std::size_t found(const OpEntry& e, std::size_t j) {
    last_ = &e;
    next_ = j + 1;
    return j;
  }
  const OpEntry* last_ = nullptr;
  std::size_t next_ = 0;
};

}  // namespace

BackwardPlan plan_backward(TapeImpl& tape, const std::vector<Tensor>& targets,
                           const std::vector<TensorMeta>& sources, bool forget_producers,
                           const std::vector<std::uint64_t>& stop_ids) {
  BackwardPlan plan;
  plan.sources = sources;
  const std::size_t n_ops = tape.num_entries();

  // 1. Reachability and every lookup, then the id map may go.
  Reach reach = reach_from_targets(tape, targets, n_ops, stop_ids);
  if (forget_producers) tape.forget_producers();

  // 2. Slots for the sources first, so that is_source() is a comparison.
  plan.producer_step.reserve(sources.size() + reach.outputs);
  plan.steps.reserve(reach.ops);
  plan.pending.reserve(reach.ops);
  IdMap<Slot> source_slot;
  // Most ids the passes below ask about are not sources: the range of the sources' ids
  // answers most of them without hashing.
  std::uint64_t lowest_source = UINT64_MAX;
  std::uint64_t highest_source = 0;
  auto find_source = [&](std::uint64_t id) -> const Slot* {
    if (id < lowest_source || id > highest_source) return nullptr;
    return source_slot.find(id);
  };
  auto new_slot = [&](std::int32_t producer) {
    plan.producer_step.push_back(producer);
    return static_cast<Slot>(plan.producer_step.size() - 1);
  };
  for (const auto& s : sources) {
    if (!floating(s.dtype)) continue;
    auto [slot, inserted] = source_slot.try_emplace(s.id, kNoSlot);
    if (inserted) *slot = new_slot(-1);
    lowest_source = std::min(lowest_source, s.id);
    highest_source = std::max(highest_source, s.id);
  }
  plan.num_source_slots = plan.producer_step.size();
  plan.source_uses.assign(plan.num_source_slots, 0);

  // 3. Of the reached ops, the steps: ops with an input that leads to a source, decided in one
  //    ascending pass (a producer's step exists before its users ask for it). Each step's block
  //    is compacted in place (the pass writes no further than it has read), its input slots
  //    counted as uses of their producers' outputs, and its outputs given slots.
  plan.slots = std::move(reach.blocks);
  std::vector<std::int32_t> step_of_op(n_ops, -1);
  OutputFinder output_index;
  auto slot_of = [&](std::uint64_t id, std::int32_t producer, std::size_t user) -> Slot {
    if (producer >= 0 && static_cast<std::size_t>(producer) < user) {
      const std::int32_t step = step_of_op[static_cast<std::size_t>(producer)];
      if (step >= 0) {
        const BackwardPlan::Step& p = plan.steps[static_cast<std::size_t>(step)];
        const OpEntry& e = tape.entry(p.op_id);
        const std::size_t j = output_index.find(e, id);
        if (j < e.n_outputs) return plan.output_slots(p, e)[j];
      }
    }
    const Slot* source = find_source(id);  // a leaf, or an output of a non-step
    return source != nullptr ? *source : kNoSlot;
  };
  std::size_t n_slots = 0;
  std::size_t read = 0;
  for (std::size_t op = 0; op < n_ops; ++op) {
    if (!reach.reached[op]) continue;
    const OpEntry& e = tape.entry(static_cast<std::int64_t>(op));
    const RecordedTensors inputs = e.inputs();
    const RecordedTensors outputs = e.outputs();
    const std::size_t first = n_slots;
    bool relevant = false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::int32_t producer = plan.slots[read + i];
      const Slot s = floating(inputs[i].dtype()) ? slot_of(inputs[i].id, producer, op) : kNoSlot;
      plan.slots[first + i] = s;
      relevant = relevant || s != kNoSlot;
    }
    read += inputs.size() + outputs.size();
    if (!relevant || cuts_paths(e)) continue;
    const auto step = static_cast<std::int32_t>(plan.steps.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Slot s = plan.slots[first + i];
      if (s == kNoSlot) continue;
      const std::int32_t producer = plan.producer_step[static_cast<std::size_t>(s)];
      if (producer >= 0) {
        ++plan.pending[static_cast<std::size_t>(producer)];
      } else {
        ++plan.source_uses[static_cast<std::size_t>(s)];
      }
    }
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      Slot s = kNoSlot;
      // A stopped output keeps no slot here: what reaches it (as a source) stays there.
      if (floating(outputs[j].dtype()) && !is_stopped(stop_ids, outputs[j].id)) {
        const Slot* source = find_source(outputs[j].id);
        if (source != nullptr) {
          s = *source;
          plan.producer_step[static_cast<std::size_t>(s)] = step;
        } else {
          s = new_slot(step);
        }
      }
      plan.slots[first + inputs.size() + j] = s;
    }
    step_of_op[op] = step;
    // Written in place: a Step built on the stack and copied is read back as one 8-byte load
    // of two 4-byte stores, a store-forwarding stall on every step.
    BackwardPlan::Step& written = plan.steps.emplace_back();
    written.op_id = static_cast<std::uint32_t>(op);
    written.first = static_cast<std::uint32_t>(first);
    plan.pending.push_back(0);
    n_slots = first + inputs.size() + outputs.size();
  }
  plan.slots.resize(n_slots);

  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Tensor& t = targets[i];
    plan.target_slots.push_back(
        floating(t.dtype()) ? slot_of(t.id(), reach.target_producers[i], n_ops) : kNoSlot);
  }
  for (const auto& s : sources) {
    const Slot* slot = floating(s.dtype) ? find_source(s.id) : nullptr;
    plan.source_slots.push_back(slot != nullptr ? *slot : kNoSlot);
  }
  return plan;
}

}  // namespace tapegrad::detail
