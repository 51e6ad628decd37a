// What an op's forward-mode rule (OpDefinition::forward_rule) sees of the op it differentiates.
#pragma once

#include "runtime/op_definition.hpp"
#include "runtime/recording.hpp"

namespace tapegrad::detail {

// The op as it just ran: its definition and attributes (OpView), its inputs and outputs.
struct ForwardContext : OpView {
  OpInputs inputs;
  OpOutputs outputs;
};

// The op's forward rule, as forward mode asks for it: a built-in op's own (null when it has
// none), or, for a user primitive, the one that runs its published rule
// (register_forward_rule; null while none is published). runtime/user_rules.cpp.
ForwardRule forward_rule_of(const OpDefinition& op);

// While one lives, this thread's accumulators ignore forward rules and use the generic
// fallback (the transpose of the gradient rule): the tests compare the two through it.
class ForceGenericForwardFallback {
 public:
  ForceGenericForwardFallback();
  ~ForceGenericForwardFallback();
  ForceGenericForwardFallback(const ForceGenericForwardFallback&) = delete;
  ForceGenericForwardFallback& operator=(const ForceGenericForwardFallback&) = delete;

 private:
  bool previous_;
};

}  // namespace tapegrad::detail
