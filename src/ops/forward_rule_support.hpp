// What the op families' forward-mode rules share (OpDefinition::forward_rule): the rule's
// signature and the fitting of a tangent to the output it belongs to.
#pragma once

#include <initializer_list>
#include <vector>

#include "runtime/forward_context.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad {

using detail::ForwardContext;
using Tangents = std::vector<Tensor>;

}  // namespace tapegrad

namespace tapegrad::detail {

// The tangent of output j from the sum of the defined terms (an input without a tangent
// contributes none): broadcast to the output's shape, zeros when no term is defined (the
// output is floating and some input carries a tangent, so it has one, as in the fallback).
inline Tensor output_tangent(const ForwardContext& op, std::size_t j,
                             std::initializer_list<Tensor> terms) {
  Tensor sum;
  for (const Tensor& term : terms) {
    if (!term.defined()) continue;
    sum = sum.defined() ? add(sum, term) : term;
  }
  const Tensor& out = op.outputs[j];
  if (!sum.defined()) return zeros(out.shape(), out.dtype());
  return sum.shape() == out.shape() ? sum : broadcast_to(sum, out.shape());
}

// Each input's tangent, zeros of the input's shape where it has none (for ops that take
// every input's tangent at once: concat, pack).
inline std::vector<Tensor> tangents_or_zeros(const ForwardContext& op, const Tangents& tangents) {
  std::vector<Tensor> out;
  out.reserve(tangents.size());
  for (std::size_t i = 0; i < tangents.size(); ++i) {
    const Tensor& x = op.inputs[i];
    out.push_back(tangents[i].defined() ? tangents[i] : zeros(x.shape(), x.dtype()));
  }
  return out;
}

// f(t) where the tangent t is defined, undefined where it is not.
template <class F>
Tensor if_defined(const Tensor& t, F f) {
  return t.defined() ? f(t) : Tensor();
}

// The one tangent of a one-input, one-output op: f(t) for the input's tangent t.
template <class F>
Tangents unary_tangent(const ForwardContext& op, const Tangents& tangents, F f) {
  return {output_tangent(op, 0, {if_defined(tangents[0], f)})};
}

// The tangent of a fused activation gradient F(y, g) = g s'(y) (TanhGrad, SoftplusGrad, ...):
// dF = F(y, dg) + dy g s''(y), with `g_times_ds`(y, g) = g s''(y); the forward-mode side of
// op_support.hpp's fused_activation_gradient.
inline Tangents fused_activation_tangent(const ForwardContext& op, const Tangents& tangents,
                                         Tensor (*fused)(const Tensor&, const Tensor&),
                                         Tensor (*g_times_ds)(const Tensor&, const Tensor&)) {
  const Tensor& y = op.inputs[0];
  const Tensor& g = op.inputs[1];
  const Tensor from_y =
      if_defined(tangents[0], [&](const Tensor& dy) { return multiply(dy, g_times_ds(y, g)); });
  const Tensor from_g = if_defined(tangents[1], [&](const Tensor& dg) { return fused(y, dg); });
  return {output_tangent(op, 0, {from_y, from_g})};
}

}  // namespace tapegrad::detail
