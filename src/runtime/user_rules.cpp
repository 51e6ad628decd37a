// A user primitive's forward, batching and structure rules (register_forward_rule and friends,
// tapegrad/registry.hpp) as the op's rules: each path asks for the op's rule through
// forward_rule_of, batching_rule_of or structure_rule_of, which give a built-in op's own rule
// and, for a user primitive with a published rule, the adapter below that calls it with the
// public OpContext and public types only.
#include <optional>
#include <string>
#include <vector>

#include "runtime/batching_context.hpp"
#include "runtime/forward_context.hpp"
#include "runtime/op_context_factory.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/op_trace.hpp"

namespace tapegrad::detail {
namespace {

const RegisteredOp& user_op_of(const OpDefinition& op) {
  return static_cast<const RegisteredOp&>(op);
}

// A user's code: a value it reads inside a vectorized_map trace is blamed on it (as a gradient
// function's is), unless a record_operation absorbs the read as the primitive's kernel.
void blame_reads_on(std::optional<ValueReaderScope>& reader, const char* rule,
                    const OpDefinition& op) {
  if (any_tracer_active()) reader.emplace(std::string("the ") + rule + " of '" + op.name + "'");
}

// One example's shape of input i: a batched input without its leading batch axis.
Shape example_shape(const Tensor& t, bool batched) {
  if (!batched || t.rank() == 0) return t.shape();
  return Shape(t.shape().begin() + 1, t.shape().end());
}

std::vector<Tensor> run_user_forward_rule(const ForwardContext& op,
                                          const std::vector<Tensor>& input_tangents) {
  const ForwardRuleFunction& fn = *user_op_of(op.op).user_forward.load(std::memory_order_acquire);
  RuleOpView view{op.op, op.recorded_attrs, {}, {}, {}, {}};
  std::vector<Tensor> inputs;
  std::vector<bool> carries_tangent;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    inputs.push_back(op.inputs[i]);
    view.input_shapes.push_back(op.inputs[i].shape());
    view.input_dtypes.push_back(op.inputs[i].dtype());
    carries_tangent.push_back(i < input_tangents.size() && input_tangents[i].defined());
  }
  std::vector<Tensor> outputs;
  for (std::size_t j = 0; j < op.outputs.size(); ++j) {
    outputs.push_back(op.outputs[j]);
    view.output_shapes.push_back(op.outputs[j].shape());
    view.output_dtypes.push_back(op.outputs[j].dtype());
  }
  const OpContext context = OpContextFactory::make(view, carries_tangent, inputs, outputs);
  std::optional<ValueReaderScope> reader;
  blame_reads_on(reader, "forward rule", op.op);
  return fn(context, input_tangents);
}

std::vector<Tensor> run_user_batching_rule(const BatchingContext& op,
                                           const std::vector<Tensor>& inputs) {
  const BatchingRuleFunction& fn = *user_op_of(op.op).user_batching.load(std::memory_order_acquire);
  RuleOpView view{op.op, op.recorded_attrs, {}, {}, op.output_shapes, op.output_dtypes};
  std::vector<int> batch_axes;
  std::vector<Tensor> unbatched;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const bool batched = op.is_batched(i);
    batch_axes.push_back(batched ? 0 : kNotBatched);
    unbatched.push_back(batched ? Tensor() : inputs[i]);
    view.input_shapes.push_back(example_shape(inputs[i], batched));
    view.input_dtypes.push_back(inputs[i].dtype());
  }
  const std::vector<bool> no_gradients(inputs.size(), false);
  const std::vector<Tensor> no_outputs(op.output_shapes.size());
  const OpContext context = OpContextFactory::make(view, no_gradients, unbatched, no_outputs);
  std::optional<ValueReaderScope> reader;
  blame_reads_on(reader, "batching rule", op.op);
  return fn(context, inputs, batch_axes);
}

std::optional<std::vector<StructuredValue>> run_user_structure_rule(
    const StructureContext& op, const std::vector<StructuredValue>& values,
    const std::vector<Tensor>& constants) {
  const StructureRuleFunction& fn =
      *user_op_of(op.op).user_structure.load(std::memory_order_acquire);
  RuleOpView view{op.op, op.recorded_attrs, {}, {}, op.output_shapes, op.output_dtypes};
  std::vector<Tensor> inputs;
  std::vector<bool> diagonal;
  std::vector<Tensor> unbatched;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const bool is_diagonal = values[i].is_diagonal();
    inputs.push_back(is_diagonal ? values[i].diagonal : constants[i]);
    diagonal.push_back(is_diagonal);
    unbatched.push_back(is_diagonal ? Tensor() : constants[i]);
    view.input_shapes.push_back(inputs.back().shape());
    view.input_dtypes.push_back(inputs.back().dtype());
  }
  const std::vector<bool> no_gradients(values.size(), false);
  const std::vector<Tensor> no_outputs(op.output_shapes.size());
  const OpContext context = OpContextFactory::make(view, no_gradients, unbatched, no_outputs);
  std::vector<Tensor> results;
  {
    std::optional<ValueReaderScope> reader;
    blame_reads_on(reader, "structure rule", op.op);
    results = fn(context, inputs, diagonal);
  }
  if (results.empty() && !op.output_shapes.empty()) return std::nullopt;  // declined
  // Each output in its example's rank is a diagonal; any other is taken as the dense batch
  // (the replay checks its shape, and names the op when it is neither).
  std::vector<StructuredValue> outputs(results.size());
  for (std::size_t j = 0; j < results.size(); ++j) {
    const bool is_diagonal = results[j].defined() && j < op.output_shapes.size() &&
                             results[j].rank() == op.output_shapes[j].size();
    (is_diagonal ? outputs[j].diagonal : outputs[j].dense) = std::move(results[j]);
  }
  return outputs;
}

}  // namespace

ForwardRule forward_rule_of(const OpDefinition& op) {
  if (op.kind != GradientKind::Registered) return op.forward_rule;
  return user_op_of(op).user_forward.load(std::memory_order_acquire) != nullptr
             ? &run_user_forward_rule
             : nullptr;
}

BatchingRule batching_rule_of(const OpDefinition& op) {
  if (op.kind != GradientKind::Registered) return op.batching_rule;
  return user_op_of(op).user_batching.load(std::memory_order_acquire) != nullptr
             ? &run_user_batching_rule
             : nullptr;
}

StructureRule structure_rule_of(const OpDefinition& op) {
  if (op.kind != GradientKind::Registered) return op.structure_rule;
  return user_op_of(op).user_structure.load(std::memory_order_acquire) != nullptr
             ? &run_user_structure_rule
             : nullptr;
}

}  // namespace tapegrad::detail
