// The activations beyond relu/sigmoid/softplus (nn.cpp): leaky_relu, elu, selu, gelu (exact
// and tanh-approximated), silu, log_sigmoid, softsign, and the sparse softmax cross-entropy.
// Each op reads top to bottom: its definition, its forward, its rules. An activation's
// derivative is one slope function written in tapegrad ops, of its input (slope_gradient in
// math_support.hpp) or of its output (below), which gives its gradient and its forward rule and
// differentiates again. elu's and gelu's gradients are fused ops instead (EluGrad, GeluGrad,
// GeluTanhGrad: one kernel each, itself differentiable); their slopes in tapegrad ops remain,
// for the fused ops' batching rules on a fixed operand.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/log_sum_exp.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "ops/structure_support.hpp"
#include "runtime/new_tensor.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/indexing.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/nn.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

using detail::constant_like;

// The rules of an activation y = f(x) whose slope f'(x) = Slope(y) is a function of its output
// (ELU, SELU: TF's EluGrad, SeluGrad read the output too). The op keeps its output only.
template <Tensor (*Slope)(const Tensor& y)>
static Grads output_slope_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], Slope(op.outputs()[0]))};
}
template <Tensor (*Slope)(const Tensor& y)>
static Tangents output_slope_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& y = op.outputs[0];
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return multiply(dx, Slope(y)); });
}

// The rules of an activation whose gradient is one fused op F(v, g) (ops/internal_ops.hpp),
// v what it keeps: its output (EluGrad) or its input (GeluGrad).
enum class Kept { Input, Output };
template <detail::FusedGradient Fused, Kept kept>
static Grads fused_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {Fused(kept == Kept::Output ? op.outputs()[0] : op.inputs()[0], g[0])};
}
template <detail::FusedGradient Fused, Kept kept>
static Tangents fused_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& v = kept == Kept::Output ? op.outputs[0] : op.inputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) { return Fused(v, dx); });
}

// ---- LeakyRelu: x > 0 ? x : alpha x ------------------------------------------------------

static Grads leaky_relu_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents leaky_relu_tangent(const ForwardContext& op, const Tangents& tangents);
// Elementwise: the recorded alpha, on the whole batch.
static std::vector<Tensor> leaky_relu_batched(const detail::BatchingContext& op,
                                              const std::vector<Tensor>& inputs) {
  return {leaky_relu(inputs[0], op.attrs().get_double("alpha"))};
}
static detail::ReplayOutputs leaky_relu_replay(const detail::ReplayContext& op,
                                               const std::vector<Tensor>& inputs) {
  return {leaky_relu(inputs[0], op.attrs().get_double("alpha"))};
}
TAPEGRAD_BUILTIN_OP(leaky_relu_op) = detail::with_replay(
    detail::differentiable_op("LeakyRelu", leaky_relu_gradient, KeepSet::all(), KeepSet::none(),
                              leaky_relu_tangent, leaky_relu_batched),
    leaky_relu_replay);

// TF's tf.nn.leaky_relu: one formula for every alpha (above 1 or below 0 too, as TF's kernel
// now does, rather than max(alpha x, x)).
Tensor leaky_relu(const Tensor& x, double alpha) {
  const char* op = "leaky_relu";
  detail::require_defined(op, x);
  if (!std::isfinite(alpha)) {
    throw InvalidArgument(detail::describe(op, x) + ": alpha = " + std::to_string(alpha) +
                          " must be finite");
  }
  Tensor out = detail::unary_kernel<detail::DTypeSet::Floating>(
      op, x, [alpha](auto v) { return v > 0 ? v : static_cast<decltype(v)>(alpha * v); });
  detail::record(leaky_relu_op, {&x}, out, [&] { return Attrs().set("alpha", alpha); });
  return out;
}

// TF's LeakyReluGrad: g where x > 0, alpha g elsewhere (x = 0 included).
static Tensor leaky_relu_times_slope(const Tensor& x, double alpha, const Tensor& g) {
  return where(greater(x, constant_like(0.0, x)), g, multiply(g, constant_like(alpha, g)));
}

static Tangents leaky_relu_tangent(const ForwardContext& op, const Tangents& tangents) {
  const double alpha = op.attrs().get_double("alpha");
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return leaky_relu_times_slope(op.inputs[0], alpha, dx);
  });
}

static Grads leaky_relu_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {leaky_relu_times_slope(op.inputs()[0], op.attrs().get_double("alpha"), g[0])};
}

// ---- Elu: x < 0 ? e^x - 1 : x; slope y + 1 where y < 0, else 1 ----------------------------

static Grads elu_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents elu_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor elu_grad_fixed_y(const Tensor& y, const Tensor& g);
// One fused op (TF's EluGrad) from the kept output instead of four.
TAPEGRAD_BUILTIN_OP(elu_op) = detail::differentiable_op(
    "Elu", fused_gradient<&detail::elu_grad_op, Kept::Output>, KeepSet::none(), KeepSet::all(),
    fused_tangent<&detail::elu_grad_op, Kept::Output>, detail::batch_unary<&tapegrad::elu>);
TAPEGRAD_BUILTIN_OP(elu_grad_definition) = detail::with_structure(
    detail::differentiable_op(
        "EluGrad", elu_grad_gradient, KeepSet::all(), KeepSet::none(), elu_grad_tangent,
        detail::batch_fused_activation<&detail::elu_grad_op, &elu_grad_fixed_y>),
    detail::structure_fused_activation<&detail::elu_grad_op>);

Tensor elu(const Tensor& x) {
  // e^x - 1 below 0 (kernels/vector_math.hpp's elu_in; SIMD above 32 elements).
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Elu>(elu_op, "elu", x);
}

// g (y + 1) where y < 0, else g: a NaN output passes g, as the select of slopes did.
Tensor detail::elu_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel("EluGrad", y, g,
                                      [](auto yv, auto gv) { return yv < 0 ? gv * (yv + 1) : gv; });
  record(elu_grad_definition, {&y, &g}, out);
  return out;
}

// EluGrad's slope in y is 1 where y < 0, else 0: g s'(y) is g there, else 0.
static Tensor elu_g_times_ds(const Tensor& y, const Tensor& g) {
  return where(less(y, constant_like(0.0, y)), g, constant_like(0.0, g));
}

static Tangents elu_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::elu_grad_op, elu_g_times_ds);
}

static Grads elu_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::elu_grad_op, elu_g_times_ds);
}

// Batched g, fixed y: the slope once, broadcast.
static Tensor elu_grad_fixed_y(const Tensor& y, const Tensor& g) {
  const Tensor slope =
      where(less(y, constant_like(0.0, y)), add(y, constant_like(1.0, y)), constant_like(1.0, y));
  return multiply(g, slope);
}

// ---- Selu: scale (x < 0 ? alpha (e^x - 1) : x) with TF's (Klambauer et al.'s) constants -----

using detail::kSeluAlpha;  // kernels/vector_math.hpp, with SELU's scalar function
using detail::kSeluScale;

static Tensor selu_slope(const Tensor& y) {
  return where(less(y, constant_like(0.0, y)), add(y, constant_like(kSeluScale * kSeluAlpha, y)),
               constant_like(kSeluScale, y));
}
TAPEGRAD_BUILTIN_OP(selu_op) = detail::differentiable_op("Selu", output_slope_gradient<selu_slope>,
                                                         KeepSet::none(), KeepSet::all(),
                                                         output_slope_tangent<selu_slope>,
                                                         detail::batch_unary<&tapegrad::selu>);

Tensor selu(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Selu>(selu_op, "selu", x);
}

// ---- Gelu: x Phi(x); GeluTanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) --------------

using detail::kGeluCubic;  // kernels/vector_math.hpp, with the GELUs' scalar functions
using detail::kInvSqrt2Pi;
using detail::kSqrt2OverPi;
using detail::kSqrtHalf;

// Phi(x) + x phi(x).
static Tensor gelu_slope(const Tensor& x) {
  const Tensor cdf =
      multiply(constant_like(0.5, x),
               add(constant_like(1.0, x), erf(multiply(x, constant_like(kSqrtHalf, x)))));
  const Tensor pdf =
      multiply(constant_like(kInvSqrt2Pi, x), exp(multiply(constant_like(-0.5, x), square(x))));
  return add(cdf, multiply(x, pdf));
}

// GeluTanh's u = k (x + c x^3) as t = tanh u and du/dx = k (1 + 3 c x^2).
struct GeluTanhParts {
  Tensor t, du;
};
static GeluTanhParts gelu_tanh_parts(const Tensor& x) {
  const Tensor x2 = square(x);
  const Tensor u = multiply(constant_like(kSqrt2OverPi, x),
                            add(x, multiply(constant_like(kGeluCubic, x), multiply(x2, x))));
  const Tensor du =
      multiply(constant_like(kSqrt2OverPi, x),
               add(constant_like(1.0, x), multiply(constant_like(3 * kGeluCubic, x), x2)));
  return {tanh(u), du};
}

// 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx.
static Tensor gelu_tanh_slope(const Tensor& x) {
  const auto [t, du] = gelu_tanh_parts(x);
  const Tensor half = constant_like(0.5, x);
  return add(multiply(half, add(constant_like(1.0, x), t)),
             multiply(multiply(half, x), multiply(subtract(constant_like(1.0, x), square(t)), du)));
}

static Grads gelu_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents gelu_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor gelu_grad_fixed_x(const Tensor& x, const Tensor& g);
static Grads gelu_tanh_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents gelu_tanh_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor gelu_tanh_grad_fixed_x(const Tensor& x, const Tensor& g);
// gelu's two ops, each as a one-input function for its batching rule, and each with its
// gradient as one fused op from the kept input (the slopes above and the product with g were
// 11 and 18 ops).
static Tensor gelu_exact(const Tensor& x) { return gelu(x, false); }
static Tensor gelu_approximate(const Tensor& x) { return gelu(x, true); }
TAPEGRAD_BUILTIN_OP(gelu_op) = detail::differentiable_op(
    "Gelu", fused_gradient<&detail::gelu_grad_op, Kept::Input>, KeepSet::all(), KeepSet::none(),
    fused_tangent<&detail::gelu_grad_op, Kept::Input>, detail::batch_unary<&gelu_exact>);
TAPEGRAD_BUILTIN_OP(gelu_tanh_op) = detail::differentiable_op(
    "GeluTanh", fused_gradient<&detail::gelu_tanh_grad_op, Kept::Input>, KeepSet::all(),
    KeepSet::none(), fused_tangent<&detail::gelu_tanh_grad_op, Kept::Input>,
    detail::batch_unary<&gelu_approximate>);
TAPEGRAD_BUILTIN_OP(gelu_grad_definition) = detail::with_structure(
    detail::differentiable_op(
        "GeluGrad", gelu_grad_gradient, KeepSet::all(), KeepSet::none(), gelu_grad_tangent,
        detail::batch_fused_activation<&detail::gelu_grad_op, &gelu_grad_fixed_x>),
    detail::structure_fused_activation<&detail::gelu_grad_op>);
TAPEGRAD_BUILTIN_OP(gelu_tanh_grad_definition) = detail::with_structure(
    detail::differentiable_op(
        "GeluTanhGrad", gelu_tanh_grad_gradient, KeepSet::all(), KeepSet::none(),
        gelu_tanh_grad_tangent,
        detail::batch_fused_activation<&detail::gelu_tanh_grad_op, &gelu_tanh_grad_fixed_x>),
    detail::structure_fused_activation<&detail::gelu_tanh_grad_op>);

Tensor gelu(const Tensor& x, bool approximate) {
  if (approximate) {
    // 0.5 x (1 + tanh u) as x sigmoid(2u), in double (vector_math.hpp's gelu_tanh_in_double).
    return detail::vectorised_floating_unary_op<detail::VectorFunction::GeluTanh>(gelu_tanh_op,
                                                                                  "gelu", x);
  }
  // In double with erfc (vector_math.hpp's gelu_in_double); above kVectorMathAbove elements
  // with kernels/simd/erfc_batch.hpp's SIMD erfc.
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Gelu>(gelu_op, "gelu", x);
}

// The slopes (vector_math's GeluSlope, GeluTanhSlope) in double, rounded to g's type before
// the product, as the unfused rules rounded them.

Tensor detail::gelu_grad_op(const Tensor& x, const Tensor& g) {
  Tensor out = activation_grad_vector_math<VectorFunction::GeluSlope>("GeluGrad", x, g);
  record(gelu_grad_definition, {&x, &g}, out);
  return out;
}

Tensor detail::gelu_tanh_grad_op(const Tensor& x, const Tensor& g) {
  Tensor out = activation_grad_vector_math<VectorFunction::GeluTanhSlope>("GeluTanhGrad", x, g);
  record(gelu_tanh_grad_definition, {&x, &g}, out);
  return out;
}

// GeluGrad's slope in x: d (Phi + x phi) = 2 phi + x phi' = phi(x) (2 - x^2).
static Tensor gelu_g_times_ds(const Tensor& x, const Tensor& g) {
  const Tensor x2 = square(x);
  const Tensor pdf =
      multiply(constant_like(kInvSqrt2Pi, x), exp(multiply(constant_like(-0.5, x), x2)));
  return multiply(g, multiply(pdf, subtract(constant_like(2.0, x), x2)));
}

// GeluTanhGrad's slope in x, with d2u/dx2 = 6 k c x: (1 - t^2) (2 du - k - x t du^2), the
// factor 1 - t^2 as TanhGrad.
static Tensor gelu_tanh_g_times_ds(const Tensor& x, const Tensor& g) {
  const auto [t, du] = gelu_tanh_parts(x);
  const Tensor k = constant_like(kSqrt2OverPi, x);
  const Tensor inner = subtract(subtract(multiply(constant_like(2.0, x), du), k),
                                multiply(multiply(x, t), square(du)));
  return detail::tanh_grad_op(t, multiply(g, inner));
}

static Tangents gelu_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::gelu_grad_op, gelu_g_times_ds);
}

static Grads gelu_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::gelu_grad_op, gelu_g_times_ds);
}

static Tangents gelu_tanh_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::gelu_tanh_grad_op,
                                          gelu_tanh_g_times_ds);
}

static Grads gelu_tanh_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::gelu_tanh_grad_op,
                                           gelu_tanh_g_times_ds);
}

// Batched g, fixed x: the slope once, broadcast.
static Tensor gelu_grad_fixed_x(const Tensor& x, const Tensor& g) {
  return multiply(g, gelu_slope(x));
}
static Tensor gelu_tanh_grad_fixed_x(const Tensor& x, const Tensor& g) {
  return multiply(g, gelu_tanh_slope(x));
}

// ---- Silu: x sigmoid(x); slope s (1 + x (1 - s)) -----------------------------------------

static Tensor silu_slope(const Tensor& x) {
  const Tensor s = sigmoid(x);
  return multiply(s, add(constant_like(1.0, x), multiply(x, subtract(constant_like(1.0, x), s))));
}
TAPEGRAD_BUILTIN_OP(silu_op) = detail::differentiable_op("Silu", detail::slope_gradient<silu_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<silu_slope>,
                                                         detail::batch_unary<&tapegrad::silu>);

Tensor silu(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Silu>(silu_op, "silu", x);
}

// ---- LogSigmoid: -softplus(-x) = min(x, 0) - log1p(e^-|x|); slope sigmoid(-x) -----------

static Tensor log_sigmoid_slope(const Tensor& x) { return sigmoid(negative(x)); }
TAPEGRAD_BUILTIN_OP(log_sigmoid_op) = detail::differentiable_op(
    "LogSigmoid", detail::slope_gradient<log_sigmoid_slope>, KeepSet::all(), KeepSet::none(),
    detail::slope_tangent<log_sigmoid_slope>, detail::batch_unary<&tapegrad::log_sigmoid>);

Tensor log_sigmoid(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::LogSigmoid>(log_sigmoid_op,
                                                                                  "log_sigmoid", x);
}

// ---- Softsign: x / (1 + |x|); slope 1 / (1 + |x|)^2 --------------------------------------

static Tensor softsign_slope(const Tensor& x) {
  return reciprocal(square(add(constant_like(1.0, x), abs(x))));
}
TAPEGRAD_BUILTIN_OP(softsign_op) = detail::differentiable_op(
    "Softsign", detail::slope_gradient<softsign_slope>, KeepSet::all(), KeepSet::none(),
    detail::slope_tangent<softsign_slope>, detail::batch_unary<&tapegrad::softsign>);

Tensor softsign(const Tensor& x) {
  return detail::floating_unary_op(softsign_op, "softsign", x,
                                   [](auto v) { return v / (1 + std::fabs(v)); });
}

// ---- SparseSoftmaxCrossEntropyWithLogits ---------------------------------------------------

static Grads sparse_xent_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents sparse_xent_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(sparse_xent_op) = detail::differentiable_op(
    "SparseSoftmaxCrossEntropyWithLogits", sparse_xent_gradient, KeepSet::all(), KeepSet::none(),
    sparse_xent_tangent, detail::batch_all_batched<&sparse_softmax_cross_entropy_with_logits>);

static constexpr const char* kSparseXent = "sparse_softmax_cross_entropy_with_logits";

static std::string describe_sparse(const Tensor& labels, const Tensor& logits) {
  return detail::describe(kSparseXent, {{"labels", labels}, {"logits", logits}});
}

// TF: labels [d0, ..., dr-1] of int32/int64 class indices, logits [d0, ..., dr-1, classes] of
// a float dtype; every label in [0, classes).
static void require_sparse_operands(const Tensor& labels, const Tensor& logits) {
  detail::require_defined(kSparseXent, labels);
  detail::require_defined(kSparseXent, logits);
  if (labels.dtype() != DType::Int32 && labels.dtype() != DType::Int64) {
    throw InvalidArgument(describe_sparse(labels, logits) + ": labels must be int32 or int64");
  }
  if (!is_floating(logits.dtype())) {
    throw InvalidArgument(describe_sparse(labels, logits) + ": logits must be float32 or float64");
  }
  const Shape& shape = logits.shape();
  if (shape.empty() || labels.shape() != Shape(shape.begin(), shape.end() - 1)) {
    throw InvalidArgument(describe_sparse(labels, logits) +
                          ": logits must have labels' shape plus one axis of classes");
  }
  const detail::IndexValues ids = detail::index_values(labels);
  const auto classes = static_cast<std::int64_t>(shape.back());
  for (std::size_t row = 0; row < ids.size(); ++row) {
    if (ids[row] < 0 || ids[row] >= classes) {
      throw InvalidArgument(describe_sparse(labels, logits) + ": row " + std::to_string(row) +
                            " has label " + std::to_string(ids[row]) +
                            ", outside the valid range of classes [0, " + std::to_string(classes) +
                            ")");
    }
  }
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  require_sparse_operands(labels, logits);
  const detail::IndexValues ids = detail::index_values(labels);
  const std::size_t classes = logits.shape().back();
  Tensor out = detail::dispatch_floating(kSparseXent, logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = detail::kernel_data<T>(logits);
    T* o = nullptr;
    Tensor loss = detail::new_tensor<T>(labels.shape(), o);
    // -log_softmax(x)[label] = logsumexp(x) - x[label].
    std::vector<T> scratch(detail::log_sum_exp_scratch(classes));
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const T* row = x + r * classes;
      o[r] = detail::log_sum_exp_row(row, classes, scratch.data()) - row[ids[r]];
    }
    return loss;
  });
  detail::record(sparse_xent_op, {&labels, &logits}, out);
  return out;
}

// d loss / d logits = softmax(logits) - one_hot(labels), from differentiable ops (softmax),
// so the second derivative is softmax's (TF's op returns a precomputed backprop instead).
// The one-hot rows are an op's output (OneHot, not differentiable: labels get no gradient),
// never read from the labels in C++, so a vectorized_map trace batches them per slice.
static Tensor softmax_minus_labels(const Tensor& labels, const Tensor& logits) {
  const int classes = static_cast<int>(logits.shape().back());
  return subtract(softmax(logits, -1), one_hot(labels, classes, logits.dtype()));
}

static Tangents sparse_xent_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor from_logits = detail::if_defined(tangents[1], [&](const Tensor& dx) {
    return reduce_sum(multiply(softmax_minus_labels(op.inputs[0], op.inputs[1]), dx), {-1});
  });
  return {detail::output_tangent(op, 0, {from_logits})};
}

static Grads sparse_xent_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads r(2);  // labels: none
  if (op.needs_gradient(1)) {
    r[1] = multiply(softmax_minus_labels(op.inputs()[0], op.inputs()[1]), expand_dims(g[0], -1));
  }
  return r;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(nn_activations)
