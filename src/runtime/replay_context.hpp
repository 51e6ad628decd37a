// What an op's replay rule (OpDefinition::replay_rule) sees of the op it runs again.
#pragma once

#include <vector>

#include "runtime/op_definition.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The op as a Function traced it: its recorded attributes and its outputs' shapes and dtypes
// (a replay's inputs have the traced shapes and dtypes, so its outputs have these). Lives for
// the rule's call only.
struct ReplayContext {
  const OpDefinition& op;
  const Attrs* attrs;  // null when the op recorded none
  const std::vector<Shape>& output_shapes;
  const std::vector<DType>& output_dtypes;

  // The attributes (an empty set when the op recorded none).
  const Attrs& attributes() const {
    static const Attrs none;
    return attrs != nullptr ? *attrs : none;
  }
};

}  // namespace tapegrad::detail
