// cast: dtype conversion. Its definition, forward and gradient read top to bottom.
#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/int_arith.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

// ---- Cast -------------------------------------------------------------------------------

// Batched: the same conversion of the whole batch.
static std::vector<Tensor> cast_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& in) {
  return {cast(in[0], op.output_dtypes[0])};
}
static detail::ReplayOutputs cast_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& in) {
  return {cast(in[0], op.output_dtypes[0])};
}

static std::vector<GradientValue> cast_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents cast_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(cast_op) = detail::with_replay(
    detail::differentiable_op("Cast", cast_gradient, detail::KeepSet::none(),
                              detail::KeepSet::none(), cast_tangent, cast_batched),
    cast_replay);

// Float -> integer saturates and maps NaN to 0 (no undefined behaviour); see int_arith.hpp.
template <class To, class From>
static To convert(From value) {
  return detail::saturating_cast<To, From>(value);
}

Tensor cast(const Tensor& x, DType dtype) {
  detail::require_defined("cast", x);
  if (x.dtype() == dtype) return x;  // tensors are immutable: the same handle is a faithful cast
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto from_zero) {
    using From = decltype(from_zero);
    return detail::dispatch_any(dtype, [&](auto to_zero) {
      using To = decltype(to_zero);
      return Tensor(detail::map_unary<To>(detail::KernelInput<From>(x),
                                          [](From v) { return convert<To, From>(v); }));
    });
  });
  // A cast to or from an integer or bool dtype has no gradient (TF): no tape records it (an
  // integer input is never watched, an integer output never differentiated), but a
  // vectorized_map trace must see it.
  detail::record(cast_op, {&x}, out);
  return out;
}

// Linear: the tangent converted to the output's float dtype.
static Tangents cast_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return cast(dx, op.outputs[0].dtype()); });
}

// Only float -> float casts are recorded, so the gradient always converts back between
// float dtypes.
static std::vector<GradientValue> cast_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {cast(g[0], op.input_dtype(0))};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(cast)
