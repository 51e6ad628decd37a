// What the runtime knows of one op type: its name, its gradient rule, and which of its inputs
// and outputs that rule reads. Built-in ops declare theirs as `constexpr` constants beside the
// op's forward, in their family file (src/ops/), each with TAPEGRAD_BUILTIN_OP, which also
// registers it; user primitives get one from the registry (register_gradient,
// record_operation, custom_gradient).
//
// A built-in definition is constant-initialised data: no static-initialisation order, no lazy
// slot, no lock on the recording path (only its registration runs at start-up). The tape
// stores a pointer to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "runtime/elementwise_rule.hpp"
#include "runtime/fold_rule.hpp"
#include "runtime/gather_rule.hpp"
#include "runtime/part_rule.hpp"
#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad::detail {

// Which inputs (or outputs) a gradient rule reads: all, none, or those whose bit is set
// (indices up to 63; a rule that reads a higher one keeps all).
class KeepSet {
 public:
  static constexpr KeepSet all() { return KeepSet(true, 0); }
  static constexpr KeepSet none() { return KeepSet(false, 0); }
  static constexpr KeepSet only(std::initializer_list<std::size_t> indices) {
    std::uint64_t mask = 0;
    for (std::size_t i : indices) {
      if (i >= 64) return all();
      mask |= std::uint64_t{1} << i;
    }
    return KeepSet(false, mask);
  }
  // The public Keep of register_gradient.
  static KeepSet from(const Keep& keep);

  constexpr bool keeps(std::size_t index) const {
    return every_ || (index < 64 && ((mask_ >> index) & 1U) != 0);
  }

 private:
  constexpr KeepSet(bool every, std::uint64_t mask) : every_(every), mask_(mask) {}
  bool every_;
  std::uint64_t mask_;
};

// (the op as recorded, one gradient per output) -> one gradient per input, each undefined
// where there is none. Written with tapegrad's differentiable ops only, so that an outer tape
// records it (higher-order derivatives).
using GradientRule = std::vector<GradientValue> (*)(const OpContext& op,
                                                    const std::vector<Tensor>& output_gradients);

// What a forward rule sees of the op it differentiates: see runtime/forward_context.hpp.
struct ForwardContext;

// (the op as it ran, one tangent per input, undefined where the input carries none) -> one
// tangent per output (undefined: none). Written with tapegrad's differentiable ops only, so
// tapes and outer accumulators observe it. An op without one gets TF's generic fallback
// (the transpose of its gradient rule: runtime/forward_tangents.cpp).
using ForwardRule = std::vector<Tensor> (*)(const ForwardContext& op,
                                            const std::vector<Tensor>& input_tangents);

// What a batching rule sees of the op it vectorizes: see runtime/batching_context.hpp.
struct BatchingContext;

// (the op as traced on one example, its inputs of which some carry an extra leading batch axis
// of size B) -> its outputs, each with the leading batch axis, computed by one call of the
// batched kernel. Written with tapegrad ops, so that tapes and accumulators observe it. Generic
// makers for the common shapes of rule are in ops/batching_support.hpp. An op without one
// makes vectorized_map fall back to a loop (derivatives/vectorize.cpp).
using BatchingRule = std::vector<Tensor> (*)(const BatchingContext& op,
                                             const std::vector<Tensor>& inputs);

// What a replay rule sees of the op it runs again, and what it returns: see
// runtime/replay_context.hpp.
struct ReplayContext;
class ReplayOutputs;

// (the op as traced, new inputs of the traced shapes and dtypes) -> its outputs, computed as
// the op's own forward computes them (the same kernel: a Function replayed without
// optimisation equals the eager call bit for bit). It may call the op's public function: a
// replay runs with nothing observing the thread, so nothing records. A Function whose trace
// holds an op without one runs eagerly (runtime/function.cpp).
using ReplayRule = ReplayOutputs (*)(const ReplayContext& op, const std::vector<Tensor>& inputs);

// What a structure rule sees of the op it vectorizes, and the batched values it takes and
// gives (dense, or diagonal): see runtime/batching_context.hpp.
struct StructureContext;
struct StructuredValue;

// (the op as traced on one example, its batched inputs: at least one diagonal, the others
// constants, which `constants` holds where `values` is empty) -> its outputs, each diagonal or
// dense, or nothing when the op needs its inputs as dense batches (its batching rule then runs).
// The vectorized Jacobian keeps the identity seed's linear descendants diagonal through the ops
// that have one. Written with tapegrad ops; row b of what it returns must be what the op's
// forward computes on row b of its inputs, with the same scalar operations (the loop's result,
// bit for bit).
using StructureRule = std::optional<std::vector<StructuredValue>> (*)(
    const StructureContext& op, const std::vector<StructuredValue>& values,
    const std::vector<Tensor>& constants);

// A batching rule and the replay of the same forward, made together by the generic makers of
// ops/batching_support.hpp (batch_unary<&tapegrad::exp> gives both).
struct GenericRules {
  BatchingRule batching;
  ReplayRule replay;
};

enum class GradientKind : std::uint8_t {
  Rule,               // `gradient` below
  NotDifferentiable,  // inputs get undefined gradients (TF: ops.NotDifferentiable)
  Identity,           // one input, one output, gradient = output gradient (sparse passed on)
  Registered,         // a user primitive: looked up in the registry when gradient() runs
};

struct OpDefinition {
  const char* name;
  GradientKind kind;
  GradientRule gradient;  // set when kind == Rule
  KeepSet keep_inputs;
  KeepSet keep_outputs;
  ForwardRule forward_rule = nullptr;    // null: the generic fallback
  BatchingRule batching_rule = nullptr;  // null: vectorized_map loops over the batch
  ReplayRule replay_rule = nullptr;      // null: a Function that traces the op runs eagerly
  // Set on elementwise ops: a Function computes runs of them in one loop (null: the op runs
  // on its own).
  const ElementwiseRule* elementwise_rule = nullptr;
  // Set on the linear ops a diagonal batch passes through (null: the vectorized Jacobian
  // makes the batch dense before the op).
  StructureRule structure_rule = nullptr;
  // Set on gather: a Function's fused loop may read the op's output from its params (null:
  // the op writes its output).
  const GatherRule* gather_rule = nullptr;
  // Set on split: a Function's fused loop may read an output that is one run of the input's
  // elements in place (null: the op makes its outputs).
  const PartRule* part_rule = nullptr;
  // Set on concat: a Function's fused loop may write an input that is one run of the output's
  // elements straight into it (null: the op copies its inputs).
  const PartRule* join_rule = nullptr;
  // Set on reduce_sum: a Function may compute a fold of whole rows as a loop (null: the op
  // runs on its own).
  const FoldRule* fold_rule = nullptr;
};

// The shapes a built-in definition takes.
constexpr OpDefinition differentiable_op(const char* name, GradientRule gradient,
                                         KeepSet keep_inputs, KeepSet keep_outputs) {
  return OpDefinition{name, GradientKind::Rule, gradient, keep_inputs, keep_outputs};
}
// The same with its forward-mode rule (what an accumulator uses instead of the fallback).
constexpr OpDefinition differentiable_op(const char* name, GradientRule gradient,
                                         KeepSet keep_inputs, KeepSet keep_outputs,
                                         ForwardRule forward_rule) {
  return OpDefinition{name, GradientKind::Rule, gradient, keep_inputs, keep_outputs, forward_rule};
}
// The same with its batching rule (what vectorized_map uses instead of a loop).
constexpr OpDefinition differentiable_op(const char* name, GradientRule gradient,
                                         KeepSet keep_inputs, KeepSet keep_outputs,
                                         ForwardRule forward_rule, BatchingRule batching_rule) {
  return OpDefinition{name,         GradientKind::Rule, gradient,     keep_inputs,
                      keep_outputs, forward_rule,       batching_rule};
}
// The same with a generic maker's batching rule and replay rule.
constexpr OpDefinition differentiable_op(const char* name, GradientRule gradient,
                                         KeepSet keep_inputs, KeepSet keep_outputs,
                                         ForwardRule forward_rule, GenericRules rules) {
  return OpDefinition{name,         GradientKind::Rule, gradient,       keep_inputs,
                      keep_outputs, forward_rule,       rules.batching, rules.replay};
}
constexpr OpDefinition not_differentiable_op(const char* name, GenericRules rules) {
  return OpDefinition{name,
                      GradientKind::NotDifferentiable,
                      nullptr,
                      KeepSet::none(),
                      KeepSet::none(),
                      nullptr,
                      rules.batching,
                      rules.replay};
}
constexpr OpDefinition identity_gradient_op(const char* name, GenericRules rules) {
  return OpDefinition{
      name,    GradientKind::Identity, nullptr,     KeepSet::none(), KeepSet::none(),
      nullptr, rules.batching,         rules.replay};
}
constexpr OpDefinition not_differentiable_op(const char* name,
                                             BatchingRule batching_rule = nullptr) {
  return not_differentiable_op(name, GenericRules{batching_rule, nullptr});
}
constexpr OpDefinition identity_gradient_op(const char* name,
                                            BatchingRule batching_rule = nullptr) {
  return identity_gradient_op(name, GenericRules{batching_rule, nullptr});
}

// `definition` with its replay rule (an op whose batching rule is written by hand).
constexpr OpDefinition with_replay(OpDefinition definition, ReplayRule replay) {
  definition.replay_rule = replay;
  return definition;
}

// `definition` with its elementwise rule (runtime/elementwise_rule.hpp).
constexpr OpDefinition with_elementwise(OpDefinition definition, const ElementwiseRule& rule) {
  definition.elementwise_rule = &rule;
  return definition;
}

// `definition` with its gather rule (runtime/gather_rule.hpp).
constexpr OpDefinition with_gather(OpDefinition definition, const GatherRule& rule) {
  definition.gather_rule = &rule;
  return definition;
}

// `definition` with its part rule (runtime/part_rule.hpp).
constexpr OpDefinition with_part(OpDefinition definition, const PartRule& rule) {
  definition.part_rule = &rule;
  return definition;
}

// `definition` with its join rule (runtime/part_rule.hpp).
constexpr OpDefinition with_join(OpDefinition definition, const PartRule& rule) {
  definition.join_rule = &rule;
  return definition;
}

// `definition` with its fold rule (runtime/fold_rule.hpp).
constexpr OpDefinition with_fold(OpDefinition definition, const FoldRule& rule) {
  definition.fold_rule = &rule;
  return definition;
}

// `definition` with its structure rule (runtime/batching_context.hpp).
constexpr OpDefinition with_structure(OpDefinition definition, StructureRule rule) {
  definition.structure_rule = rule;
  return definition;
}

// `*recorded`, or an empty set when the op recorded no attributes.
const Attrs& attrs_or_empty(const Attrs* recorded);

// What every built-in rule but the gradient sees of its op, read the same way whatever the rule:
// the definition and the recorded attributes. The forward, batching, replay and structure
// contexts extend it with what their rule adds (the gradient's OpContext, a public class that
// user primitives see too, has the same attrs()). Lives for the rule's call only.
struct OpView {
  const OpDefinition& op;
  const Attrs* recorded_attrs;  // null when the op recorded none

  // The attributes (an empty set when the op recorded none).
  const Attrs& attrs() const { return attrs_or_empty(recorded_attrs); }
};

// Adds one built-in definition to the registry (runtime/op_registry.cpp) during static
// initialisation; TAPEGRAD_BUILTIN_OP makes one beside each definition.
class BuiltinOpRegistration {
 public:
  explicit BuiltinOpRegistration(const OpDefinition& definition);
};

}  // namespace tapegrad::detail

// Defines and registers a built-in op: `TAPEGRAD_BUILTIN_OP(tan_op) = differentiable_op(...);`
// declares the constant, a static object that hands it to the registry when the program starts,
// and then the constant itself (constant-initialised, so the object can point at it first).
#define TAPEGRAD_BUILTIN_OP(variable)                                                       \
  extern const ::tapegrad::detail::OpDefinition variable;                                   \
  static const ::tapegrad::detail::BuiltinOpRegistration variable##_registration(variable); \
  constexpr ::tapegrad::detail::OpDefinition variable

// Ends every source file in src/ops/, at namespace scope: a function the registry calls, which
// keeps the file (and the registrations of its ops) in a program linked against the static
// library, where the linker would otherwise drop a file no code of the program calls. The
// build lists every such file for the registry (CMakeLists.txt, op_sources.inc); a file
// without the line fails to link, naming `op_source_<stem>`.
#define TAPEGRAD_OP_SOURCE(stem) \
  namespace tapegrad::detail {   \
  void op_source_##stem() {}     \
  }
