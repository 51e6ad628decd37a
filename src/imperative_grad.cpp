// The backward walk. Iterative throughout: a chain of a million ops must not touch the
// call stack depth.
#include "detail/imperative_grad.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "detail/vspace.hpp"

namespace tapegrad::detail {
namespace {

// The ops reachable backwards from the targets, ascending by op id (recording order, which
// is a topological order: an op's inputs were recorded before it).
std::vector<std::int64_t> reachable_ops(TapeImpl& tape, const std::vector<Tensor>& targets,
                                        std::unordered_map<std::uint64_t, std::int64_t>& producer) {
  const auto& tensor_tape = tape.tensor_tape();
  std::vector<std::int64_t> ops;
  std::unordered_set<std::int64_t> visited_ops;
  std::unordered_set<std::uint64_t> seen;
  std::vector<std::uint64_t> stack;
  for (const auto& t : targets) {
    if (seen.insert(t.id()).second) stack.push_back(t.id());
  }
  while (!stack.empty()) {
    const std::uint64_t id = stack.back();
    stack.pop_back();
    auto it = tensor_tape.find(id);
    if (it == tensor_tape.end() || it->second == kWatched) continue;
    const std::int64_t op_id = it->second;
    producer.emplace(id, op_id);
    if (!visited_ops.insert(op_id).second) continue;
    ops.push_back(op_id);
    for (const auto& in : tape.entry(op_id).inputs) {
      if (seen.insert(in.id).second) stack.push_back(in.id);
    }
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

std::string shapes_message(const OpEntry& e, std::size_t input, const Tensor& grad) {
  return "the gradient of '" + e.op->name() + "' for input " + std::to_string(input) +
         " has shape " + shape_to_string(grad.shape()) + " and dtype " +
         dtype_name(grad.dtype()) + ", but the input has shape " +
         shape_to_string(e.inputs[input].shape) + " and dtype " +
         dtype_name(e.inputs[input].dtype);
}

void check_input_gradient(const OpEntry& e, std::size_t i, const GradientValue& g) {
  if (g.is_sparse()) {
    if (g.sparse().dense_shape != e.inputs[i].shape) {
      throw InvalidArgument("imperative_grad: the sparse gradient of '" + e.op->name() +
                            "' for input " + std::to_string(i) + " has dense shape " +
                            shape_to_string(g.sparse().dense_shape) + ", but the input has shape " +
                            shape_to_string(e.inputs[i].shape));
    }
    return;
  }
  const Tensor& d = g.dense();
  if (d.shape() != e.inputs[i].shape || d.dtype() != e.inputs[i].dtype) {
    throw InvalidArgument("imperative_grad: " + shapes_message(e, i, d));
  }
}

std::vector<GradientValue> call_gradient(const OpEntry& e, const GradientSpec* spec,
                                         const std::vector<bool>& needs,
                                         const std::vector<Tensor>& out_grads) {
  OpContext ctx(e, needs);
  if (e.custom_backward) return e.custom_backward(ctx, out_grads);
  if (spec->sparse) return spec->sparse(ctx, out_grads);
  std::vector<Tensor> dense = spec->dense(ctx, out_grads);
  return std::vector<GradientValue>(dense.begin(), dense.end());
}

}  // namespace

BackwardPlan plan_backward(TapeImpl& tape, const std::vector<Tensor>& targets,
                           const std::vector<TensorMeta>& sources) {
  BackwardPlan plan;
  plan.sources = sources;

  // 1. What the targets reach, and of that, what leads to a source. Slots are handed out
  //    to every tensor a gradient can be stored for: targets, sources, and the floating
  //    inputs and outputs of the steps.
  std::unordered_map<std::uint64_t, std::int64_t> producer;
  const std::vector<std::int64_t> reached = reachable_ops(tape, targets, producer);

  std::unordered_map<std::uint64_t, std::ptrdiff_t> slot_of;
  auto slot = [&](std::uint64_t id) {
    auto [it, inserted] = slot_of.emplace(id, static_cast<std::ptrdiff_t>(slot_of.size()));
    if (inserted) {
      plan.uses.push_back(0);
      plan.producer_step.push_back(BackwardPlan::kNoSlot);
      plan.is_source.push_back(false);
    }
    return it->second;
  };
  auto existing_slot = [&](std::uint64_t id) {
    auto it = slot_of.find(id);
    return it == slot_of.end() ? BackwardPlan::kNoSlot : it->second;
  };

  std::unordered_set<std::uint64_t> leads_to_source;
  for (const auto& s : sources) {
    if (is_floating(s.dtype)) leads_to_source.insert(s.id);
  }
  for (std::int64_t op_id : reached) {
    const OpEntry& e = tape.entry(op_id);
    const bool relevant = std::any_of(e.inputs.begin(), e.inputs.end(), [&](const TensorMeta& in) {
      return is_floating(in.dtype) && leads_to_source.count(in.id) != 0;
    });
    if (!relevant) continue;
    BackwardPlan::Step step{op_id, {}, {}, 0};
    step.input_slots.reserve(e.inputs.size());
    for (const auto& in : e.inputs) {
      const bool wanted = is_floating(in.dtype) && leads_to_source.count(in.id) != 0;
      step.input_slots.push_back(wanted ? slot(in.id) : BackwardPlan::kNoSlot);
    }
    plan.steps.push_back(std::move(step));
    for (const auto& out : e.outputs) leads_to_source.insert(out.id);
  }

  // 2. Pending counts: the uses of each tensor by steps, and for each step, how many of its
  //    outputs have such uses (those must all be complete before it runs).
  for (const auto& step : plan.steps) {
    for (std::ptrdiff_t s : step.input_slots) {
      if (s != BackwardPlan::kNoSlot) ++plan.uses[static_cast<std::size_t>(s)];
    }
  }
  for (const auto& t : targets) {
    if (is_floating(t.dtype())) slot(t.id());
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    auto& step = plan.steps[i];
    const OpEntry& e = tape.entry(step.op_id);
    step.output_slots.reserve(e.outputs.size());
    for (const auto& out : e.outputs) {
      const std::ptrdiff_t s = is_floating(out.dtype) ? existing_slot(out.id) : BackwardPlan::kNoSlot;
      step.output_slots.push_back(s);
      if (s == BackwardPlan::kNoSlot) continue;
      plan.producer_step[static_cast<std::size_t>(s)] = static_cast<std::ptrdiff_t>(i);
      if (plan.uses[static_cast<std::size_t>(s)] != 0) ++step.pending_outputs;
    }
  }
  for (const auto& t : targets) {
    plan.target_slots.push_back(is_floating(t.dtype()) ? existing_slot(t.id())
                                                       : BackwardPlan::kNoSlot);
  }
  for (const auto& s : sources) {
    const std::ptrdiff_t k = is_floating(s.dtype) ? existing_slot(s.id) : BackwardPlan::kNoSlot;
    plan.source_slots.push_back(k);
    if (k != BackwardPlan::kNoSlot) plan.is_source[static_cast<std::size_t>(k)] = true;
  }
  return plan;
}

std::vector<GradientValue> run_backward(TapeImpl& tape, const BackwardPlan& plan,
                                        const std::vector<Tensor>& targets,
                                        const std::vector<Tensor>& output_gradients,
                                        UnconnectedGradients unconnected, bool release_entries) {
  std::vector<std::size_t> uses = plan.uses;
  std::vector<std::size_t> pending(plan.steps.size());
  for (std::size_t i = 0; i < plan.steps.size(); ++i) pending[i] = plan.steps[i].pending_outputs;

  // 3. Seed the targets (targets are summed; the default output gradient is ones).
  std::vector<std::vector<GradientValue>> grads(uses.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const std::ptrdiff_t s = plan.target_slots[i];
    if (s == BackwardPlan::kNoSlot) continue;
    const Tensor& t = targets[i];
    Tensor seed = i < output_gradients.size() && output_gradients[i].defined()
                      ? output_gradients[i]
                      : vspace_ones(t.shape(), t.dtype());
    grads[static_cast<std::size_t>(s)].emplace_back(std::move(seed));
  }

  std::vector<std::size_t> ready;
  for (std::size_t i = plan.steps.size(); i-- > 0;) {
    if (pending[i] == 0) ready.push_back(i);
  }

  // 4. Run ready steps until none is left.
  std::vector<Tensor> out_grads;
  std::vector<bool> needs;
  while (!ready.empty()) {
    const BackwardPlan::Step& step = plan.steps[ready.back()];
    ready.pop_back();
    OpEntry& e = tape.entry(step.op_id);  // a deque element: stable if the walk records new ops

    out_grads.assign(e.outputs.size(), Tensor());
    bool any_gradient = false;
    for (std::size_t j = 0; j < e.outputs.size(); ++j) {
      const std::ptrdiff_t s = step.output_slots[j];
      if (s == BackwardPlan::kNoSlot) continue;
      auto& list = grads[static_cast<std::size_t>(s)];
      if (list.empty()) continue;
      GradientValue sum = aggregate(list);
      out_grads[j] = sum.to_dense();
      any_gradient = true;
      if (plan.is_source[static_cast<std::size_t>(s)]) {
        list.assign(1, std::move(sum));  // kept for the caller
      } else {
        std::vector<GradientValue>().swap(list);
      }
    }

    const GradientSpec* spec = e.custom_backward ? nullptr : e.op->spec();
    if (!e.custom_backward && spec == nullptr) {
      throw LookupError("No gradient defined for operation '" + e.op->name() +
                        "' (op type: " + e.op->name() +
                        "): register one with register_gradient, or mark it with "
                        "not_differentiable");
    }
    std::vector<GradientValue> in_grads;
    if (any_gradient && (spec == nullptr || !spec->not_differentiable)) {
      for (std::size_t j = 0; j < e.outputs.size(); ++j) {
        if (!out_grads[j].defined() && is_floating(e.outputs[j].dtype)) {
          out_grads[j] = vspace_zeros(e.outputs[j].shape, e.outputs[j].dtype);
        }
      }
      needs.assign(e.inputs.size(), false);
      for (std::size_t i = 0; i < e.inputs.size(); ++i) {
        needs[i] = step.input_slots[i] != BackwardPlan::kNoSlot;
      }
      in_grads = call_gradient(e, spec, needs, out_grads);
      if (in_grads.size() != e.inputs.size()) {
        throw InvalidArgument("imperative_grad: the gradient function of '" + e.op->name() +
                              "' returned " + std::to_string(in_grads.size()) +
                              " gradients, expected " + std::to_string(e.inputs.size()) +
                              " (one per input)");
      }
    }

    for (std::size_t i = 0; i < e.inputs.size(); ++i) {
      const std::ptrdiff_t s = step.input_slots[i];
      if (s == BackwardPlan::kNoSlot) continue;
      const auto slot = static_cast<std::size_t>(s);
      if (i < in_grads.size() && in_grads[i].defined()) {
        check_input_gradient(e, i, in_grads[i]);
        grads[slot].push_back(std::move(in_grads[i]));
      }
      if (--uses[slot] != 0) continue;
      const std::ptrdiff_t producer = plan.producer_step[slot];
      if (producer != BackwardPlan::kNoSlot &&
          --pending[static_cast<std::size_t>(producer)] == 0) {
        ready.push_back(static_cast<std::size_t>(producer));
      }
    }
    if (release_entries) tape.release(step.op_id);
  }

  // 5. The sources' gradients.
  std::vector<GradientValue> result;
  result.reserve(plan.sources.size());
  for (std::size_t k = 0; k < plan.sources.size(); ++k) {
    const std::ptrdiff_t s = plan.source_slots[k];
    if (s != BackwardPlan::kNoSlot && !grads[static_cast<std::size_t>(s)].empty()) {
      auto& list = grads[static_cast<std::size_t>(s)];
      result.push_back(aggregate(list));
      list.assign(1, result.back());  // a source named twice gets it twice
    } else if (unconnected == UnconnectedGradients::Zero) {
      result.emplace_back(zeros(plan.sources[k].shape, plan.sources[k].dtype));
    } else {
      result.emplace_back();
    }
  }
  return result;
}

std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  const BackwardPlan plan = plan_backward(tape, targets, sources);
  return run_backward(tape, plan, targets, output_gradients, unconnected, !tape.persistent());
}

}  // namespace tapegrad::detail
