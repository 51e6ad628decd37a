// What the math family's files share: the forwards of its elementwise ops (one line each), the
// scalar operands of the binary ops, the rules of an op given by its slope, zero rules, the sum
// of a broadcast gradient back to an input's shape, constants of an operand's dtype, and
// computing in double for the float types.
#pragma once

#include <cstddef>
#include <vector>

#include "ops/forward_rule_support.hpp"
#include "ops/math_kernels.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {

// The scalar operand of `x (op) value` or `value (op) x`: a rank-0 tensor of x's dtype, which
// must hold `value` exactly (int32 * 0.5 is rejected, as TF rejects it, instead of silently
// multiplying by 0). InvalidArgument naming `op`, x's shape and dtype and the value otherwise.
Tensor scalar_operand(const char* op, const Tensor& x, double value);

// The forward of a two-input elementwise op over float and integer dtypes, recorded as `op`:
// `function` is its public name (for errors), `kernel` maps one pair of elements. The operands
// must share a dtype and broadcast (NumPy).
template <class Kernel>
Tensor numeric_binary_op(const OpDefinition& op, const char* function, const Tensor& x,
                         const Tensor& y, Kernel kernel) {
  Tensor out = numeric_binary(function, x, y, kernel);
  record(op, {&x, &y}, out);
  return out;
}

// The forward of a one-input floating op (exp, log, tanh, sigmoid, erf, the activations) that
// kernels/vector_math.hpp computes for large inputs and scalar_function for small ones.
template <VectorFunction vectorised>
Tensor vectorised_floating_unary_op(const OpDefinition& op, const char* function, const Tensor& x) {
  return unary_op<DTypeSet::Floating>(
      op, function, x, [](auto v) { return scalar_function<vectorised>(v); }, vectorised);
}

// The rules of an elementwise op y = f(x) whose derivative f'(x) = Slope(x) is written in
// tapegrad ops (so that it differentiates again): the gradient g f'(x) and the tangent
// dx f'(x). The op keeps its input (KeepSet::all() for inputs, none for outputs).
template <Tensor (*Slope)(const Tensor& x)>
std::vector<GradientValue> slope_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], Slope(op.inputs()[0]))};
}
template <Tensor (*Slope)(const Tensor& x)>
std::vector<Tensor> slope_tangent(const ForwardContext& op, const std::vector<Tensor>& tangents) {
  const Tensor& x = op.inputs[0];
  return unary_tangent(op, tangents, [&](const Tensor& dx) { return multiply(dx, Slope(x)); });
}

// The rules of a piecewise-constant op (sign, floor, ceil, round): a zero gradient and a zero
// tangent, not none (TF registers zeros, so such an op in a loss leaves the sources connected).
inline std::vector<GradientValue> zero_gradient(const OpContext& op, const std::vector<Tensor>&) {
  return {zeros(op.input_shape(0), op.input_dtype(0))};
}
inline std::vector<Tensor> zero_tangent(const ForwardContext& op,
                                        const std::vector<Tensor>& tangents) {
  return unary_tangent(op, tangents,
                       [](const Tensor& dx) { return zeros(dx.shape(), dx.dtype()); });
}

// A rank-0 tensor of `value` in x's dtype, for the constants of a rule written in ops.
inline Tensor constant_like(double value, const Tensor& x) { return scalar(value, x.dtype()); }

// An elementwise kernel computing f in double and rounding to the element's floating type.
template <class F>
auto in_double(F f) {
  return [f](auto v) { return static_cast<decltype(v)>(f(static_cast<double>(v))); };
}

}  // namespace tapegrad::detail
