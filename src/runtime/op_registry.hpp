// The registry of op types: every built-in op, registered by its TAPEGRAD_BUILTIN_OP when the
// program starts, and the user primitives (register_gradient, not_differentiable, record_operation,
// custom_gradient). Built-ins can be neither pre-empted nor replaced.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "runtime/op_definition.hpp"

namespace tapegrad::detail {

// A user primitive's gradient, published once (register_gradient and friends).
struct UserGradient {
  GradientFunction dense;         // register_gradient
  SparseGradientFunction sparse;  // register_sparse_gradient
  KeepSet keep_inputs = KeepSet::all();
  KeepSet keep_outputs = KeepSet::all();
  bool not_differentiable = false;
};

// A user op type: created on its first mention (recording or registering), never moved or
// freed, so tape entries point at it. Its gradient and other rules may be registered after it
// is recorded: the walk reads `gradient` when it runs, the other paths the rule they need
// (forward_rule_of in runtime/forward_context.hpp, batching_rule_of and structure_rule_of in
// runtime/batching_context.hpp). Each is published once.
struct RegisteredOp : OpDefinition {
  explicit RegisteredOp(std::string op_name);
  std::string name_storage;
  std::atomic<const UserGradient*> gradient{nullptr};
  std::atomic<const ForwardRuleFunction*> user_forward{nullptr};      // register_forward_rule
  std::atomic<const BatchingRuleFunction*> user_batching{nullptr};    // register_batching_rule
  std::atomic<const StructureRuleFunction*> user_structure{nullptr};  // register_structure_rule
};

// The definition named `op_type`: the built-in one, or the user op (created if new).
const OpDefinition& op_named(const std::string& op_type);
// The registered gradient of a user op, or null (none yet). Only for kind == Registered.
inline const UserGradient* registered_gradient(const OpDefinition& op) {
  return static_cast<const RegisteredOp&>(op).gradient.load(std::memory_order_acquire);
}
// Every built-in op, by name.
const std::vector<const OpDefinition*>& builtin_ops();

}  // namespace tapegrad::detail
