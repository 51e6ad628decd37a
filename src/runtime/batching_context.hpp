// What an op's batching rule (OpDefinition::batching_rule) and structure rule (structure_rule)
// see of the op they vectorize.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/op_definition.hpp"
#include "runtime/replay_context.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// [batch] ++ an example's shape: a value of vectorized_map's replay.
inline Shape with_batch_axis(std::size_t batch, const Shape& example) {
  Shape shape{batch};
  shape.insert(shape.end(), example.begin(), example.end());
  return shape;
}

// The op as it ran on one example (a slice of the batch): its definition and attributes
// (OpView), and which of the inputs handed to the rule now carry the extra leading batch axis
// of size `batch_size` (the others are the example's own values, shared by every row).
struct BatchingContext : OpView {
  const std::vector<bool>& batched;  // one per input
  std::size_t batch_size;
  const std::vector<Shape>& output_shapes;  // the outputs of one example (no batch axis)
  const std::vector<DType>& output_dtypes;

  bool is_batched(std::size_t input) const { return batched[input]; }
  // [batch_size] ++ the example shape of output j.
  Shape batched_output_shape(std::size_t j) const;
};

// The op's batching rule, as vectorized_map asks for it: a built-in op's own (null when it has
// none), or, for a user primitive, the one that runs its published rule
// (register_batching_rule; null while none is published). runtime/user_rules.cpp.
BatchingRule batching_rule_of(const OpDefinition& op);

// What a batching rule throws when the op has no batched form for these inputs (an output
// whose size depends on each row's values): vectorized_map then loops over the batch (with one
// warning), or rethrows it when fallback_to_loop is false. The message names the op.
class NotBatchable : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// The vectorized Jacobian's seed is the identity: row b of the batch is e_b (one-hot at flat
// position b of the example). Through the linear ops of a backward walk such a batch stays
// "diagonal": row b is e_b scaled by d[b] for one example-shaped tensor d. The replay keeps
// those values as d alone (n elements instead of n^2) while the ops' structure rules allow it,
// and builds the dense batch only when an op needs it: an elementwise chain then costs a few
// n-element ops instead of n^2-element ones, and a matrix times a diagonal batch is a scaled
// copy of the matrix instead of a matrix product (the Jacobian of tanh(W x) is (1 - y^2) W,
// computed as such).

// A batched value during a replay: `dense` ([B] ++ example), or, when `diagonal` is defined,
// the batch whose row b is e_b * diagonal[b] (diagonal: the example's shape, B =
// diagonal.size()). A diagonal value may keep its dense batch too, once something built it.
struct StructuredValue {
  Tensor dense;
  Tensor diagonal;
  bool is_diagonal() const { return diagonal.defined(); }
};

// The op as it ran on one example: the view of the traced op a replay rule gets (its recorded
// attributes, its outputs' shapes and dtypes, with no batch axis: a diagonal output has exactly
// these). A type of its own only so that op_definition.hpp can declare it. Lives for the
// rule's call only.
struct StructureContext : ReplayContext {};

// The op's structure rule, as the vectorized Jacobian asks for it: a built-in op's own, or, for a
// user primitive, the one that runs its published rule (register_structure_rule); null when
// there is none (yet). runtime/user_rules.cpp.
StructureRule structure_rule_of(const OpDefinition& op);

}  // namespace tapegrad::detail
