// The backward walk. Iterative throughout: a chain of a million ops must not touch the
// call stack depth.
#include "detail/imperative_grad.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "detail/vspace.hpp"

namespace tapegrad::detail {
namespace {

struct WalkOp {
  std::int64_t op_id;
  std::size_t pending_outputs = 0;  // outputs that some op not yet run still uses
};

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

std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  const bool release_as_used = !tape.persistent();

  // 1. What the targets reach, and of that, what leads to a source.
  std::unordered_map<std::uint64_t, std::int64_t> producer;
  const std::vector<std::int64_t> reached = reachable_ops(tape, targets, producer);

  std::unordered_set<std::uint64_t> leads_to_source;
  std::unordered_set<std::uint64_t> source_ids;
  for (const auto& s : sources) {
    source_ids.insert(s.id);
    if (is_floating(s.dtype)) leads_to_source.insert(s.id);
  }
  std::vector<WalkOp> walk;
  for (std::int64_t op_id : reached) {
    const OpEntry& e = tape.entry(op_id);
    const bool relevant = std::any_of(e.inputs.begin(), e.inputs.end(), [&](const TensorMeta& in) {
      return is_floating(in.dtype) && leads_to_source.count(in.id) != 0;
    });
    if (!relevant) continue;
    walk.push_back(WalkOp{op_id});
    for (const auto& out : e.outputs) leads_to_source.insert(out.id);
  }
  std::unordered_map<std::int64_t, std::size_t> walk_index;
  for (std::size_t i = 0; i < walk.size(); ++i) walk_index.emplace(walk[i].op_id, i);

  // 2. Pending counts: the uses of each tensor by ops still to run, and for each op, how
  //    many of its outputs still have such uses.
  std::unordered_map<std::uint64_t, std::size_t> uses;
  for (const auto& w : walk) {
    for (const auto& in : tape.entry(w.op_id).inputs) {
      if (is_floating(in.dtype) && leads_to_source.count(in.id)) ++uses[in.id];
    }
  }
  for (auto& w : walk) {
    for (const auto& out : tape.entry(w.op_id).outputs) {
      auto it = uses.find(out.id);
      if (it != uses.end()) ++w.pending_outputs;
    }
  }

  // 3. Seed the targets (targets are summed; the default output gradient is ones).
  std::unordered_map<std::uint64_t, std::vector<GradientValue>> grads;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Tensor& t = targets[i];
    if (!is_floating(t.dtype())) continue;
    Tensor seed = i < output_gradients.size() && output_gradients[i].defined()
                      ? output_gradients[i]
                      : vspace_ones(t.shape(), t.dtype());
    grads[t.id()].emplace_back(std::move(seed));
  }

  std::vector<std::size_t> ready;
  for (std::size_t i = walk.size(); i-- > 0;) {
    if (walk[i].pending_outputs == 0) ready.push_back(i);
  }

  // 4. Run ready ops until none is left.
  std::vector<Tensor> out_grads;
  std::vector<bool> needs;
  while (!ready.empty()) {
    const std::int64_t op_id = walk[ready.back()].op_id;
    ready.pop_back();
    OpEntry& e = tape.entry(op_id);  // a deque element: stable if the walk records new ops

    out_grads.assign(e.outputs.size(), Tensor());
    bool any_gradient = false;
    for (std::size_t j = 0; j < e.outputs.size(); ++j) {
      auto it = grads.find(e.outputs[j].id);
      if (it == grads.end() || it->second.empty()) continue;
      GradientValue sum = aggregate(it->second);
      out_grads[j] = sum.to_dense();
      any_gradient = true;
      if (source_ids.count(e.outputs[j].id)) {
        it->second.assign(1, std::move(sum));  // kept for the caller
      } else {
        grads.erase(it);
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
        needs[i] = is_floating(e.inputs[i].dtype) && leads_to_source.count(e.inputs[i].id) != 0;
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
      const TensorMeta& in = e.inputs[i];
      if (!is_floating(in.dtype) || leads_to_source.count(in.id) == 0) continue;
      if (i < in_grads.size() && in_grads[i].defined()) {
        check_input_gradient(e, i, in_grads[i]);
        grads[in.id].push_back(std::move(in_grads[i]));
      }
      auto u = uses.find(in.id);
      if (--u->second != 0) continue;
      auto p = producer.find(in.id);
      if (p == producer.end()) continue;
      auto w = walk_index.find(p->second);
      if (w != walk_index.end() && --walk[w->second].pending_outputs == 0) ready.push_back(w->second);
    }
    if (release_as_used) tape.release(op_id);
  }

  // 5. The sources' gradients.
  std::vector<GradientValue> result;
  result.reserve(sources.size());
  for (const auto& s : sources) {
    auto it = grads.find(s.id);
    if (is_floating(s.dtype) && it != grads.end() && !it->second.empty()) {
      result.push_back(aggregate(it->second));
      it->second.assign(1, result.back());  // a source named twice gets it twice
    } else if (unconnected == UnconnectedGradients::Zero) {
      result.emplace_back(zeros(s.shape, s.dtype));
    } else {
      result.emplace_back();
    }
  }
  return result;
}

}  // namespace tapegrad::detail
