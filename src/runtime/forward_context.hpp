// What an op's forward-mode rule (OpDefinition::forward_rule) sees of the op it differentiates.
#pragma once

#include "runtime/op_definition.hpp"
#include "runtime/recording.hpp"

namespace tapegrad::detail {

// The op as it just ran: its inputs, outputs and attributes (null when it has none). Lives for
// the rule's call only.
struct ForwardContext {
  const OpDefinition& op;
  OpInputs inputs;
  OpOutputs outputs;
  const Attrs* attrs;
};

}  // namespace tapegrad::detail
