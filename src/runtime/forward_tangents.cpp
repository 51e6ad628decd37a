// The recording hook of forward mode: an op's output tangents, from its forward rule or from
// the transpose of its gradient (TF forwardprop's generic fallback).
#include <string>
#include <unordered_set>

#include "runtime/forward_accumulator.hpp"
#include "runtime/forward_context.hpp"
#include "runtime/imperative_grad.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/tape_stack.hpp"
#include "runtime/warn.hpp"
#include "tapegrad/errors.hpp"

namespace tapegrad::detail {

namespace {

thread_local bool generic_fallback_forced = false;

// A bare tape recording on this thread for one scope.
class ScopedTape {
 public:
  explicit ScopedTape(TapeImpl& tape) : tape_(tape) { push_tape(&tape_); }
  ~ScopedTape() { pop_tape(&tape_); }
  ScopedTape(const ScopedTape&) = delete;
  ScopedTape& operator=(const ScopedTape&) = delete;

 private:
  TapeImpl& tape_;
};

// The JVP as the transpose of the VJP. With u a (zero) cotangent of the outputs, the VJP
// g(u) = J^T u is linear in u, so d/du <g(u), t> = J t: the output tangents are one gradient of
// <g(u), t> with respect to u. g is computed by the op's own gradient rule on a private tape
// holding the op alone, while a second private tape watches u; every op involved is a tapegrad
// op, so outer tapes and older accumulators observe the whole computation.
std::vector<Tensor> transposed_gradient_tangents(const OpDefinition& op, OpInputs inputs,
                                                 OpOutputs outputs, const Attrs* attrs,
                                                 const SparseGradientFunction* custom_backward,
                                                 const std::vector<Tensor>& input_tangents) {
  std::vector<Tensor> output_tangents(outputs.size());
  TapeImpl op_tape(/*persistent=*/false, /*watch_accessed_variables=*/false);
  // An input used twice (x * x) is one source: its gradient already sums both uses.
  std::vector<TensorMeta> sources;
  std::vector<Tensor> source_tangents;
  std::unordered_set<std::uint64_t> seen;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!input_tangents[i].defined() || !seen.insert(inputs[i].id()).second) continue;
    op_tape.watch(inputs[i]);
    sources.push_back({inputs[i].id(), inputs[i].dtype(), inputs[i].shape()});
    source_tangents.push_back(input_tangents[i]);
  }
  op_tape.record(op, inputs, outputs, attrs, custom_backward);

  TapeImpl u_tape(/*persistent=*/false, /*watch_accessed_variables=*/false);
  std::vector<Tensor> targets;
  std::vector<Tensor> cotangents;
  std::vector<std::size_t> target_outputs;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (!is_floating(outputs[j].dtype())) continue;
    Tensor u = zeros(outputs[j].shape(), outputs[j].dtype());
    u_tape.watch(u);
    targets.push_back(outputs[j]);
    cotangents.push_back(std::move(u));
    target_outputs.push_back(j);
  }
  if (targets.empty()) return output_tangents;

  // g(u), one gradient per source, recorded on u_tape.
  std::vector<Tensor> vjp;
  std::vector<Tensor> vjp_tangents;
  {
    ScopedTape recording(u_tape);
    const std::vector<GradientValue> values =
        imperative_grad(op_tape, targets, sources, cotangents, UnconnectedGradients::None);
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (!values[k].defined()) continue;
      vjp.push_back(values[k].to_dense());
      vjp_tangents.push_back(source_tangents[k]);
    }
  }
  std::vector<TensorMeta> cotangent_sources;
  for (const Tensor& u : cotangents) cotangent_sources.push_back({u.id(), u.dtype(), u.shape()});
  if (vjp.empty()) {
    // No input's gradient is defined: the outputs do not move with the inputs.
    for (std::size_t k = 0; k < targets.size(); ++k) {
      output_tangents[target_outputs[k]] = zeros(targets[k].shape(), targets[k].dtype());
    }
    return output_tangents;
  }
  // d/du of sum_k <g_k(u), t_k>: the tangents enter as the output gradients of the g_k.
  const std::vector<GradientValue> tangents =
      imperative_grad(u_tape, vjp, cotangent_sources, vjp_tangents, UnconnectedGradients::Zero);
  for (std::size_t k = 0; k < tangents.size(); ++k) {
    output_tangents[target_outputs[k]] = tangents[k].to_dense();
  }
  return output_tangents;
}

bool is_user_primitive_without_rule(const OpDefinition& op,
                                    const SparseGradientFunction* custom_backward) {
  return op.kind == GradientKind::Registered && forward_rule_of(op) == nullptr &&
         (custom_backward == nullptr || !*custom_backward);
}

std::vector<Tensor> output_tangents_of(const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
                                       const Attrs* attrs,
                                       const SparseGradientFunction* custom_backward,
                                       const std::vector<Tensor>& input_tangents) {
  const bool has_custom_backward = custom_backward != nullptr && *custom_backward;
  const ForwardRule forward_rule = forward_rule_of(op);
  if (forward_rule != nullptr && !has_custom_backward && !generic_fallback_forced) {
    return forward_rule(ForwardContext{{op, attrs}, inputs, outputs}, input_tangents);
  }
  if (!has_custom_backward) {
    if (op.kind == GradientKind::NotDifferentiable) return std::vector<Tensor>(outputs.size());
    if (op.kind == GradientKind::Identity) return {input_tangents.at(0)};
    if (op.kind == GradientKind::Registered) {
      const UserGradient* user = registered_gradient(op);
      if (user == nullptr) {
        // TF raises here too: the fallback needs the gradient now, not at gradient() time.
        throw LookupError(std::string("ForwardAccumulator: op '") + op.name +
                          "' has no forward rule and no registered gradient, so its output "
                          "tangents cannot be computed; register its gradient with "
                          "register_gradient (or mark it with not_differentiable) before running "
                          "it while an accumulator watches its inputs");
      }
      if (user->not_differentiable) return std::vector<Tensor>(outputs.size());
    }
  }
  if (is_user_primitive_without_rule(op, custom_backward)) {
    warn_once(std::string("forward-fallback-") + op.name,
              std::string("ForwardAccumulator: op '") + op.name +
                  "' has no forward rule; its tangents use the generic fallback (the transpose "
                  "of its gradient, a few backward computations per call)");
  }
  return transposed_gradient_tangents(op, inputs, outputs, attrs, custom_backward, input_tangents);
}

// A forward rule's result must fit the op's outputs.
void check_rule_result(const OpDefinition& op, OpOutputs outputs,
                       const std::vector<Tensor>& tangents) {
  if (tangents.size() != outputs.size()) {
    throw InvalidArgument(std::string("ForwardAccumulator: the forward rule of '") + op.name +
                          "' returned " + std::to_string(tangents.size()) + " tangents for " +
                          std::to_string(outputs.size()) + " outputs");
  }
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (!tangents[j].defined()) continue;
    if (tangents[j].shape() != outputs[j].shape() || tangents[j].dtype() != outputs[j].dtype()) {
      throw InvalidArgument(
          std::string("ForwardAccumulator: the tangent of output ") + std::to_string(j) + " of '" +
          op.name + "' has shape " + shape_to_string(tangents[j].shape()) + " and dtype " +
          dtype_name(tangents[j].dtype()) + ", but the output has shape " +
          shape_to_string(outputs[j].shape()) + " and dtype " + dtype_name(outputs[j].dtype()));
    }
  }
}

}  // namespace

ForceGenericForwardFallback::ForceGenericForwardFallback() : previous_(generic_fallback_forced) {
  generic_fallback_forced = true;
}
ForceGenericForwardFallback::~ForceGenericForwardFallback() { generic_fallback_forced = previous_; }

void accumulate_tangents(const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
                         const Attrs* attrs, const SparseGradientFunction* custom_backward) {
  if (!any_input_carries_tangent(inputs)) return;
  // Oldest first: an older accumulator must know the outputs' tangents before a newer one's
  // tangent computation (which it observes) reads those outputs.
  for (const auto& accumulator : observing_accumulators()) {
    std::vector<Tensor> input_tangents(inputs.size());
    bool any_tangent = false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!is_floating(inputs[i].dtype())) continue;
      if (const Tensor* t = accumulator->tangent(inputs[i].id())) {
        input_tangents[i] = *t;
        any_tangent = true;
      }
    }
    if (!any_tangent) continue;
    std::vector<Tensor> tangents;
    {
      PauseAccumulators pause(accumulator.get());
      tangents = output_tangents_of(op, inputs, outputs, attrs, custom_backward, input_tangents);
    }
    check_rule_result(op, outputs, tangents);
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      if (tangents[j].defined() && is_floating(outputs[j].dtype())) {
        accumulator->tangents[outputs[j].id()] = std::move(tangents[j]);
      }
    }
  }
}

}  // namespace tapegrad::detail
