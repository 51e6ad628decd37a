// How the runtime builds the public OpContext (tapegrad/registry.hpp), whose constructors are
// private: from a tape entry for a gradient function, or from a RuleOpView for a user
// primitive's forward, batching or structure rule (runtime/user_rules.cpp).
#pragma once

#include <vector>

#include "runtime/op_definition.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// What a rule other than the gradient sees of its op: the op, its recorded attributes, and its
// inputs' and outputs' shapes and dtypes (one example's, with no batch axis, in a batching or
// structure rule). Lives for the rule's call only.
struct RuleOpView {
  const OpDefinition& op;
  const Attrs* attrs;  // null when the op recorded none
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
};

// The one place an OpContext is built. The vectors are held by reference: they must outlive
// the context.
class OpContextFactory {
 public:
  static OpContext make(const OpEntry& e, const std::vector<bool>& needs,
                        const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    return OpContext(e, needs, inputs, outputs);
  }
  static OpContext make(const RuleOpView& view, const std::vector<bool>& needs,
                        const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    return OpContext(view, needs, inputs, outputs);
  }
};

}  // namespace tapegrad::detail
