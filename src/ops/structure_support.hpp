// What the ops' structure rules (OpDefinition::structure_rule, runtime/batching_context.hpp)
// share: their results, the broadcast test of a constant operand, and the one rule of every
// fused activation gradient:
//
//   structure_fused_activation<&detail::tanh_grad_op>   F(y, g) linear in g: F(y, d) with y
//                                                       constant and g diagonal
//
// e.g.  TAPEGRAD_BUILTIN_OP(negative_op) = detail::with_structure(
//           detail::differentiable_op("Neg", ...), negative_structured);
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/batching_context.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

using StructuredOutputs = std::optional<std::vector<StructuredValue>>;

// One output, kept diagonal: `d` has the output's example shape.
inline StructuredOutputs diagonal_output(Tensor d) {
  return std::vector<StructuredValue>{StructuredValue{Tensor(), std::move(d)}};
}

// One output as a dense batch ([B] ++ the output's example shape).
inline StructuredOutputs dense_output(Tensor dense) {
  return std::vector<StructuredValue>{StructuredValue{std::move(dense), Tensor()}};
}

// Whether the constant `c` broadcasts into `shape` without changing it.
inline bool fits_into(const Tensor& c, const Shape& shape) {
  if (c.rank() > shape.size()) return false;
  const std::size_t lead = shape.size() - c.rank();
  for (std::size_t i = 0; i < c.rank(); ++i) {
    if (c.shape()[i] != 1 && c.shape()[i] != shape[lead + i]) return false;
  }
  return true;
}

// A fused activation gradient F(y, g) = g s(y) (ops/internal_ops.hpp) is linear in g: with y
// constant and g diagonal (row b is e_b d[b]), row b of the output is e_b F(y, d)[b], so F of
// the diagonal is the output's diagonal.
template <Tensor (*Fused)(const Tensor&, const Tensor&)>
StructuredOutputs fused_activation_structured(const StructureContext&,
                                              const std::vector<StructuredValue>& values,
                                              const std::vector<Tensor>& constants) {
  if (values[0].is_diagonal() || !values[1].is_diagonal() ||
      constants[0].shape() != values[1].diagonal.shape()) {
    return std::nullopt;
  }
  return diagonal_output(Fused(constants[0], values[1].diagonal));
}
template <Tensor (*Fused)(const Tensor&, const Tensor&)>
inline constexpr StructureRule structure_fused_activation = &fused_activation_structured<Fused>;

}  // namespace tapegrad::detail
