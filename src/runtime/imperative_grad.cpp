// The backward walk. Iterative throughout: a chain of a million ops must not touch the
// call stack depth.
#include "runtime/imperative_grad.hpp"

#include <algorithm>
#include <memory>

#include "runtime/error_context.hpp"
#include "runtime/id_map.hpp"
#include "runtime/vspace.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {
namespace {

constexpr BackwardPlan::Slot kNoSlot = BackwardPlan::kNoSlot;

std::string shapes_message(const OpEntry& e, std::size_t input, const Tensor& grad) {
  return "the gradient of '" + std::string(e.op->name) + "' for input " + std::to_string(input) +
         " has shape " + shape_to_string(grad.shape()) + " and dtype " +
         dtype_name(grad.dtype()) + ", but the input has shape " +
         shape_to_string(e.inputs()[input].full_shape()) + " and dtype " +
         dtype_name(e.inputs()[input].dtype());
}

void check_input_gradient(const OpEntry& e, std::size_t i, const GradientValue& g) {
  if (g.is_sparse()) {
    if (g.sparse().dense_shape != e.inputs()[i].full_shape()) {
      throw InvalidArgument("imperative_grad: the sparse gradient of '" + std::string(e.op->name) +
                            "' for input " + std::to_string(i) + " has dense shape " +
                            shape_to_string(g.sparse().dense_shape) + ", but the input has shape " +
                            shape_to_string(e.inputs()[i].full_shape()));
    }
    return;
  }
  const Tensor& d = g.dense();
  if (d.dtype() != e.inputs()[i].dtype() || !e.inputs()[i].same_shape(d)) {
    throw InvalidArgument("imperative_grad: " + shapes_message(e, i, d));
  }
}

// The entry's kept tensors, one per input (output), undefined where not kept: moved out of the
// entry when it is used for the last time, so they die right after its gradient call.
void gather_saved(OpEntry& e, bool take, std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  auto gather = [take](Tensor* saved, std::size_t n, std::vector<Tensor>& out) {
    out.resize(n);
    if (saved == nullptr) return;
    for (std::size_t i = 0; i < n; ++i) out[i] = take ? std::move(saved[i]) : saved[i];
  };
  gather(e.saved_inputs(), e.n_inputs, inputs);
  gather(e.saved_outputs(), e.n_outputs, outputs);
}

// How an entry is differentiated, resolved when the walk reaches it: its custom backward, its
// definition's rule, or a user primitive's registered gradient (which may have been
// registered after the op was recorded).
struct Differentiation {
  GradientKind kind;
  const SparseGradientFunction* custom = nullptr;
  const UserGradient* user = nullptr;
};

Differentiation differentiation_of(const OpEntry& e) {
  if (const SparseGradientFunction* custom = e.custom_backward()) {
    return {GradientKind::Rule, custom, nullptr};
  }
  if (e.op->kind != GradientKind::Registered) return {e.op->kind, nullptr, nullptr};
  const UserGradient* user = registered_gradient(*e.op);
  if (user == nullptr) return {GradientKind::Registered, nullptr, nullptr};  // none: an error
  return {user->not_differentiable ? GradientKind::NotDifferentiable : GradientKind::Rule, nullptr,
          user};
}

std::vector<GradientValue> call_gradient(const OpEntry& e, const Differentiation& how,
                                         const std::vector<bool>& needs,
                                         const std::vector<Tensor>& saved_inputs,
                                         const std::vector<Tensor>& saved_outputs,
                                         const std::vector<Tensor>& out_grads) {
  OpContext ctx(e, needs, saved_inputs, saved_outputs);
  if (how.custom != nullptr) return (*how.custom)(ctx, out_grads);
  if (how.user == nullptr) return e.op->gradient(ctx, out_grads);
  if (how.user->sparse) return how.user->sparse(ctx, out_grads);
  std::vector<Tensor> dense = how.user->dense(ctx, out_grads);
  return std::vector<GradientValue>(dense.begin(), dense.end());
}

// The gradients that have reached one tensor. Dense ones are summed as they arrive, so a
// tensor used 10^5 times holds one running sum, not 10^5 gradients; sparse ones (row slices)
// wait in a list until the sum is asked for. Most tensors get exactly one dense gradient,
// kept inline (24 bytes a slot).
class GradientList {
 public:
  bool empty() const { return !dense_.defined() && !rest_; }
  void push(GradientValue g) {
    if (!g.is_sparse()) {
      // The same additions, in the same order, as summing the list at the end.
      dense_ = dense_.defined() ? add(dense_, g.dense()) : g.dense();
      return;
    }
    if (!rest_) rest_ = std::make_unique<std::vector<GradientValue>>();
    rest_->push_back(std::move(g));
  }
  // The sum, leaving the list holding just that sum.
  GradientValue sum() {
    if (!rest_) return GradientValue(dense_);
    std::vector<GradientValue> all;
    all.reserve(rest_->size() + 1);
    if (dense_.defined()) all.emplace_back(std::move(dense_));
    for (auto& g : *rest_) all.push_back(std::move(g));
    rest_.reset();
    dense_ = Tensor();
    GradientValue total = aggregate(all);
    if (total.is_sparse()) {
      rest_ = std::make_unique<std::vector<GradientValue>>();
      rest_->push_back(total);
    } else {
      dense_ = total.dense();
    }
    return total;
  }
  void clear() {
    dense_ = Tensor();
    rest_.reset();
  }

 private:
  Tensor dense_;                                       // the dense gradients' running sum
  std::unique_ptr<std::vector<GradientValue>> rest_;  // sparse gradients
};

// The sum of a complete gradient list after the tape's hooks on `id` ran on it; the list
// keeps that result (sum() already leaves it holding the sum when no hook is on `id`).
GradientValue hooked_sum(const TapeImpl& tape, std::uint64_t id, GradientList& list) {
  GradientValue g = list.sum();
  if (tape.hooks().run(id, g)) {
    list.clear();
    list.push(g);
  }
  return g;
}

[[noreturn]] void throw_no_gradient(const OpEntry& e) {
  throw LookupError("No gradient defined for operation '" + std::string(e.op->name) + "' (op type: " +
                    std::string(e.op->name) +
                    "): register one with register_gradient, or mark it with not_differentiable");
}

}  // namespace

BackwardPlan plan_backward(TapeImpl& tape, const std::vector<Tensor>& targets,
                           const std::vector<TensorMeta>& sources, bool forget_producers) {
  using Slot = BackwardPlan::Slot;
  BackwardPlan plan;
  plan.sources = sources;
  // Ops recorded while the plan runs (a persistent tape recording its own backward) are
  // never part of it.
  const std::size_t n_ops = tape.num_entries();

  auto producer_op = [&](std::uint64_t id) -> std::int32_t {
    const std::int32_t* producer = tape.producer(id);
    if (producer == nullptr || *producer == kWatched) return -1;
    return static_cast<std::size_t>(*producer) < n_ops ? *producer : -1;
  };

  // 1. The ops reachable backwards from the targets (a bit per op: this runs while the id map
  //    still exists, so it must stay small). A tensor id may be pushed more than once (once
  //    per use); its producer is visited once.
  std::vector<bool> reached(n_ops, false);
  std::size_t reached_ops = 0;
  std::size_t reached_outputs = 0;
  std::size_t reached_tensors = 0;
  {
    std::vector<std::uint64_t> stack;
    for (const auto& t : targets) stack.push_back(t.id());
    while (!stack.empty()) {
      const std::uint64_t id = stack.back();
      stack.pop_back();
      const std::int32_t op = producer_op(id);
      if (op < 0 || reached[static_cast<std::size_t>(op)]) continue;
      reached[static_cast<std::size_t>(op)] = true;
      const OpEntry& e = tape.entry(op);
      ++reached_ops;
      reached_outputs += e.n_outputs;
      reached_tensors += e.n_inputs + e.n_outputs;
      for (const auto& in : e.inputs()) stack.push_back(in.id);
    }
  }

  // 2. The id lookups the plan needs, done now so that a non-persistent tape can free its id
  //    map before the plan's other arrays exist (the backward pass then stays below the
  //    forward's peak): each reached op's inputs' producers, written where their slots will
  //    go (ascending op order, each op's inputs then its outputs), and the targets' producers.
  plan.slots.reserve(reached_tensors);
  for (std::size_t op = 0; op < n_ops; ++op) {
    if (!reached[op]) continue;
    const OpEntry& e = tape.entry(static_cast<std::int64_t>(op));
    for (const auto& in : e.inputs()) plan.slots.push_back(producer_op(in.id));
    plan.slots.resize(plan.slots.size() + e.n_outputs, BackwardPlan::kNoSlot);
  }
  std::vector<std::int32_t> target_producers;
  for (const auto& t : targets) target_producers.push_back(producer_op(t.id()));
  if (forget_producers) tape.forget_producers();

  // Per op: its step index, or -1.
  std::vector<std::int32_t> step_of_op(n_ops, -1);
  plan.steps.reserve(reached_ops);
  plan.uses.reserve(reached_outputs + sources.size());
  plan.producer_step.reserve(reached_outputs + sources.size());
  plan.is_source.reserve(reached_outputs + sources.size());

  // 3. Of the reached ops, the steps: ops with an input that leads to a source. Op ids are a
  //    topological order, so one ascending pass decides it, compacting the slots array in
  //    place (it writes no further than it has read). Every tensor that leads to a source gets
  //    a slot, a dense index that runs use instead of ids: sources from a small map, op
  //    outputs from their producing step's output slots.
  IdMap<Slot> source_slot;
  auto new_slot = [&]() {
    plan.uses.push_back(0);
    plan.producer_step.push_back(-1);
    plan.is_source.push_back(false);
    return static_cast<Slot>(plan.uses.size() - 1);
  };
  for (const auto& s : sources) {
    if (!is_floating(s.dtype)) continue;
    auto [slot, inserted] = source_slot.try_emplace(s.id, BackwardPlan::kNoSlot);
    if (inserted) *slot = new_slot();
    plan.is_source[static_cast<std::size_t>(*slot)] = true;
  }
  // The slot of tensor `id`, produced by op `producer` (or -1).
  auto slot_of = [&](std::uint64_t id, std::int32_t producer) -> Slot {
    if (const Slot* s = source_slot.find(id)) return *s;
    if (producer < 0) return BackwardPlan::kNoSlot;
    const std::int32_t step = step_of_op[static_cast<std::size_t>(producer)];
    if (step < 0) return BackwardPlan::kNoSlot;
    const OpEntry& p = tape.entry(producer);
    const RecordedTensors outputs = p.outputs();
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      if (outputs[j].id == id) return plan.output_slots(plan.steps[static_cast<std::size_t>(step)], p)[j];
    }
    return BackwardPlan::kNoSlot;
  };
  std::size_t n_steps = 0;
  std::size_t n_slots = 0;
  std::size_t read_first = 0;
  for (std::size_t op = 0; op < n_ops; ++op) {
    if (!reached[op]) continue;
    const OpEntry& e = tape.entry(static_cast<std::int64_t>(op));
    const RecordedTensors inputs = e.inputs();
    const RecordedTensors outputs = e.outputs();
    const std::size_t read = read_first;
    read_first += inputs.size() + outputs.size();
    const std::size_t first = n_slots;
    bool relevant = false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::int32_t producer = plan.slots[read + i];
      const Slot s = is_floating(inputs[i].dtype()) ? slot_of(inputs[i].id, producer)
                                                    : BackwardPlan::kNoSlot;
      plan.slots[first + i] = s;
      relevant = relevant || s != BackwardPlan::kNoSlot;
    }
    if (!relevant) continue;
    const auto step_index = static_cast<std::int32_t>(n_steps);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Slot s = plan.slots[first + i];
      if (s != BackwardPlan::kNoSlot) ++plan.uses[static_cast<std::size_t>(s)];
    }
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      Slot s = BackwardPlan::kNoSlot;
      if (is_floating(outputs[j].dtype())) {
        const Slot* source = source_slot.find(outputs[j].id);
        s = source != nullptr ? *source : new_slot();
        plan.producer_step[static_cast<std::size_t>(s)] = step_index;
      }
      plan.slots[first + inputs.size() + j] = s;
    }
    step_of_op[op] = step_index;
    plan.steps.push_back(BackwardPlan::Step{static_cast<std::uint32_t>(op),
                                            static_cast<std::uint32_t>(first)});
    ++n_steps;
    n_slots = first + inputs.size() + outputs.size();
  }
  plan.slots.resize(n_slots);

  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Tensor& t = targets[i];
    plan.target_slots.push_back(is_floating(t.dtype()) ? slot_of(t.id(), target_producers[i])
                                                       : BackwardPlan::kNoSlot);
  }
  for (const auto& s : sources) {
    const Slot* slot = is_floating(s.dtype) ? source_slot.find(s.id) : nullptr;
    plan.source_slots.push_back(slot != nullptr ? *slot : BackwardPlan::kNoSlot);
  }
  return plan;
}

namespace {

// The gradient lists of the slots that have one now: a slot holds an index into a pool whose
// freed lists are reused, so a long chain has a handful of lists, not one per tensor.
class GradientSlots {
 public:
  explicit GradientSlots(std::size_t n_slots) : index_(n_slots, kNone) {}
  GradientList* find(std::size_t slot) {
    const std::int32_t i = index_[slot];
    return i == kNone ? nullptr : &pool_[static_cast<std::size_t>(i)];
  }
  GradientList& get(std::size_t slot) {
    if (index_[slot] == kNone) {
      if (free_.empty()) {
        index_[slot] = static_cast<std::int32_t>(pool_.size());
        pool_.emplace_back();
      } else {
        index_[slot] = free_.back();
        free_.pop_back();
      }
    }
    return pool_[static_cast<std::size_t>(index_[slot])];
  }
  void drop(std::size_t slot) {
    const std::int32_t i = index_[slot];
    if (i == kNone) return;
    pool_[static_cast<std::size_t>(i)].clear();
    free_.push_back(i);
    index_[slot] = kNone;
  }

 private:
  static constexpr std::int32_t kNone = -1;
  std::vector<std::int32_t> index_;
  // A reference into it is used only until the next get(): nothing in between adds lists.
  std::vector<GradientList> pool_;
  std::vector<std::int32_t> free_;
};

// A step may run once every output that a later step uses has all its gradients.
bool outputs_complete(const BackwardPlan& plan, const BackwardPlan::Step& step, const OpEntry& e,
                      const std::vector<std::uint32_t>& uses) {
  const BackwardPlan::Slot* outputs = plan.output_slots(step, e);
  for (std::size_t j = 0; j < e.n_outputs; ++j) {
    if (outputs[j] != BackwardPlan::kNoSlot && uses[static_cast<std::size_t>(outputs[j])] != 0) {
      return false;
    }
  }
  return true;
}

std::vector<GradientValue> run(TapeImpl& tape, const BackwardPlan& plan,
                               std::vector<std::uint32_t> uses, const std::vector<Tensor>& targets,
                               const std::vector<Tensor>& output_gradients,
                               UnconnectedGradients unconnected, bool release_entries) {
  // Seed the targets (targets are summed; the default output gradient is ones).
  GradientSlots grads(uses.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const BackwardPlan::Slot s = plan.target_slots[i];
    if (s == kNoSlot) continue;
    const Tensor& t = targets[i];
    grads.get(static_cast<std::size_t>(s))
        .push(i < output_gradients.size() && output_gradients[i].defined()
                  ? output_gradients[i]
                  : vspace_ones(t.shape(), t.dtype()));
  }

  std::vector<std::size_t> ready;
  for (std::size_t i = plan.steps.size(); i-- > 0;) {
    const BackwardPlan::Step& step = plan.steps[i];
    if (outputs_complete(plan, step, tape.entry(step.op_id), uses)) ready.push_back(i);
  }

  std::vector<Tensor> out_grads;
  std::vector<bool> needs;
  std::vector<GradientValue> in_grads;
  std::vector<Tensor> saved_inputs;
  std::vector<Tensor> saved_outputs;
  while (!ready.empty()) {
    const BackwardPlan::Step& step = plan.steps[ready.back()];
    ready.pop_back();
    OpEntry& e = tape.entry(step.op_id);  // a deque element: stable if the walk records new ops
    const RecordedTensors inputs = e.inputs();
    const RecordedTensors outputs = e.outputs();
    const BackwardPlan::Slot* input_slots = plan.input_slots(step);
    const BackwardPlan::Slot* output_slots = plan.output_slots(step, e);
    const Differentiation how = differentiation_of(e);
    if (how.kind == GradientKind::Registered) throw_no_gradient(e);

    // The outputs' gradients, each summed; sources keep theirs for the caller.
    out_grads.assign(outputs.size(), Tensor());
    GradientValue passed_through;
    bool any_gradient = false;
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      const BackwardPlan::Slot s = output_slots[j];
      if (s == kNoSlot) continue;
      GradientList* list = grads.find(static_cast<std::size_t>(s));
      if (list == nullptr || list->empty()) continue;
      any_gradient = true;
      const GradientValue sum =
          tape.has_hooks() ? hooked_sum(tape, outputs[j].id, *list) : list->sum();
      if (how.kind == GradientKind::Identity && sum.is_sparse()) {
        passed_through = sum;  // keeps a row-sparse gradient sparse (variable reads)
      } else {
        out_grads[j] = sum.to_dense();
      }
      if (!plan.is_source[static_cast<std::size_t>(s)]) grads.drop(static_cast<std::size_t>(s));
    }
    in_grads.clear();
    if (passed_through.defined()) {
      in_grads.push_back(std::move(passed_through));
    } else if (any_gradient && how.kind == GradientKind::Identity) {
      in_grads.push_back(GradientValue(out_grads[0]));
    } else if (any_gradient && how.kind == GradientKind::Rule) {
      for (std::size_t j = 0; j < outputs.size(); ++j) {
        if (!out_grads[j].defined() && is_floating(outputs[j].dtype())) {
          out_grads[j] = vspace_zeros(outputs[j].full_shape(), outputs[j].dtype());
        }
      }
      needs.assign(inputs.size(), false);
      for (std::size_t i = 0; i < inputs.size(); ++i) needs[i] = input_slots[i] != kNoSlot;
      gather_saved(e, release_entries, saved_inputs, saved_outputs);
      try {
        in_grads = call_gradient(e, how, needs, saved_inputs, saved_outputs, out_grads);
      } catch (...) {
        // An error deep inside names an inner op ("matrix_inverse: ..."): say which op's
        // gradient was being computed first.
        rethrow_with_context("gradient of " + std::string(e.op->name) + ": ");
      }
      if (in_grads.size() != inputs.size()) {
        throw InvalidArgument("imperative_grad: the gradient function of '" + std::string(e.op->name) +
                              "' returned " + std::to_string(in_grads.size()) +
                              " gradients, expected " + std::to_string(inputs.size()) +
                              " (one per input)");
      }
    }
    // What the call read dies now, before the next step allocates: the kept tensors (when this
    // was the entry's last use) and the output gradients.
    saved_inputs.clear();
    saved_outputs.clear();
    out_grads.clear();
    if (release_entries) tape.release(step.op_id);

    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const BackwardPlan::Slot s = input_slots[i];
      if (s == kNoSlot) continue;
      const auto slot = static_cast<std::size_t>(s);
      if (i < in_grads.size() && in_grads[i].defined()) {
        check_input_gradient(e, i, in_grads[i]);
        grads.get(slot).push(std::move(in_grads[i]));
      }
      if (--uses[slot] != 0) continue;
      const std::int32_t producer = plan.producer_step[slot];
      if (producer < 0) {
        GradientList* leaf = tape.has_hooks() ? grads.find(slot) : nullptr;
        if (leaf != nullptr && !leaf->empty()) {
          hooked_sum(tape, inputs[i].id, *leaf);  // a leaf's gradient is complete
        }
        continue;
      }
      const BackwardPlan::Step& p = plan.steps[static_cast<std::size_t>(producer)];
      if (outputs_complete(plan, p, tape.entry(p.op_id), uses)) {
        ready.push_back(static_cast<std::size_t>(producer));
      }
    }
    in_grads.clear();
  }

  // The sources' gradients.
  std::vector<GradientValue> result;
  result.reserve(plan.sources.size());
  for (std::size_t k = 0; k < plan.sources.size(); ++k) {
    const BackwardPlan::Slot s = plan.source_slots[k];
    GradientList* list = s != kNoSlot ? grads.find(static_cast<std::size_t>(s)) : nullptr;
    if (list != nullptr && !list->empty()) {
      result.push_back(list->sum());
    } else if (unconnected == UnconnectedGradients::Zero) {
      result.emplace_back(zeros(plan.sources[k].shape, plan.sources[k].dtype));
    } else {
      result.emplace_back();
    }
  }
  return result;
}

}  // namespace

std::vector<GradientValue> run_backward(TapeImpl& tape, const BackwardPlan& plan,
                                        const std::vector<Tensor>& targets,
                                        const std::vector<Tensor>& output_gradients,
                                        UnconnectedGradients unconnected, bool release_entries) {
  return run(tape, plan, plan.uses, targets, output_gradients, unconnected, release_entries);
}

std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  const bool last_use = !tape.persistent();
  BackwardPlan plan = plan_backward(tape, targets, sources, /*forget_producers=*/last_use);
  // The plan runs once: its use counts are consumed in place rather than copied.
  std::vector<std::uint32_t> uses = std::move(plan.uses);
  return run(tape, plan, std::move(uses), targets, output_gradients, unconnected, last_use);
}

}  // namespace tapegrad::detail
