// Neural-network activations (with the fused gradients ReluGrad, SigmoidGrad, SoftplusGrad)
// and losses. Each op reads top to bottom: its definition, its forward, its gradient.
// Everything but the public functions has internal linkage.
//
// Every kernel that exponentiates subtracts the maximum first (log-sum-exp), so logits of
// +-1000 give finite values and finite gradients.
#include "tapegrad/ops/nn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/log_sum_exp.hpp"
#include "kernels/pairwise_sum.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/math_kernels.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "ops/structure_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

// ---- Relu -------------------------------------------------------------------------------

static Grads relu_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents relu_tangent(const ForwardContext& op, const Tangents& tangents);
struct ReluElement {
  template <class T>
  static T apply(T v) {
    return v > 0 || v != v ? v : T(0);
  }
};
TAPEGRAD_BUILTIN_OP(relu_op) = detail::with_elementwise(
    detail::differentiable_op("Relu", relu_gradient, KeepSet::none(), KeepSet::all(), relu_tangent,
                              detail::batch_unary<&tapegrad::relu>),
    detail::unary_elementwise<ReluElement>);

Tensor relu(const Tensor& x) {
  // NaN stays NaN (TF, NumPy's maximum(x, 0)); its gradient is 0 like any non-positive input.
  return detail::numeric_unary_op(relu_op, "relu", x, [](auto v) { return ReluElement::apply(v); });
}

static Tangents relu_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return detail::relu_grad_op(op.outputs[0], dx); });
}

// One fused op (TF's ReluGrad) from the kept output instead of a mask and a select.
static Grads relu_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::relu_grad_op(op.outputs()[0], g[0])};
}

// ---- ReluGrad: Relu's fused gradient, g where y > 0, itself differentiable --------------

static Grads relu_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents relu_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor relu_grad_fixed_y(const Tensor& y, const Tensor& g);
struct ReluGradElement {
  template <class T>
  static T apply(T yv, T gv) {
    return yv > 0 ? gv : T(0);
  }
};
TAPEGRAD_BUILTIN_OP(relu_grad_definition) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op(
            "ReluGrad", relu_grad_gradient, KeepSet::only({0}), KeepSet::none(), relu_grad_tangent,
            detail::batch_fused_activation<&detail::relu_grad_op, &relu_grad_fixed_y>),
        detail::binary_elementwise<ReluGradElement>),
    detail::structure_fused_activation<&detail::relu_grad_op>);

// The gradient passes where the output is positive (TF: 0 at 0); a NaN output (relu of NaN)
// passes none, like any output <= 0, and a NaN g where y > 0 passes through.
Tensor detail::relu_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel(
      "ReluGrad", y, g, [](auto yv, auto gv) { return ReluGradElement::apply(yv, gv); });
  record(relu_grad_definition, {&y, &g}, out);
  return out;
}

// Linear in g; in y a mask, piecewise constant: no term from dy.
static Tangents relu_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor from_g = detail::if_defined(
      tangents[1], [&](const Tensor& dg) { return detail::relu_grad_op(op.inputs[0], dg); });
  return {detail::output_tangent(op, 0, {from_g})};
}

// ReluGrad again for g; zeros for y (TF), not none, so that y stays connected.
static Grads relu_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  Grads grads(2);
  if (op.needs_gradient(0)) grads[0] = zeros(op.input_shape(0), op.input_dtype(0));
  if (op.needs_gradient(1)) grads[1] = detail::relu_grad_op(op.inputs()[0], h[0]);
  return grads;
}

// Batched g, fixed y: the mask once, a select on the batch (a product with a 0/1 slope would
// turn a NaN g where y <= 0 into NaN).
static Tensor relu_grad_fixed_y(const Tensor& y, const Tensor& g) {
  return where(greater(y, scalar(0.0, y.dtype())), g, scalar(0.0, g.dtype()));
}

// ---- Sigmoid ----------------------------------------------------------------------------

static Grads sigmoid_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents sigmoid_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(sigmoid_op) = detail::with_elementwise(
    detail::differentiable_op("Sigmoid", sigmoid_gradient, KeepSet::none(), KeepSet::all(),
                              sigmoid_tangent, detail::batch_unary<&tapegrad::sigmoid>),
    detail::vector_math_elementwise<detail::VectorFunction::Sigmoid>);

Tensor sigmoid(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Sigmoid>(sigmoid_op,
                                                                               "sigmoid", x);
}

static Tangents sigmoid_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return detail::sigmoid_grad_op(op.outputs[0], dx); });
}

// One fused op (TF's SigmoidGrad) from the kept output instead of three.
static Grads sigmoid_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::sigmoid_grad_op(op.outputs()[0], g[0])};
}

// ---- SigmoidGrad: Sigmoid's fused gradient g y (1 - y), itself differentiable ----------

static Grads sigmoid_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents sigmoid_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor sigmoid_grad_fixed_y(const Tensor& y, const Tensor& g);
// The slope y (1 - y) first, then times g: the batching rule's sigmoid_grad_fixed_y (a fixed
// y) computes the same roundings, so a batched replay gives these bits loop or op by op.
struct SigmoidGradElement {
  template <class T>
  static T apply(T yv, T gv) {
    return gv * (yv * (1 - yv));
  }
};
TAPEGRAD_BUILTIN_OP(sigmoid_grad_definition) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op(
            "SigmoidGrad", sigmoid_grad_gradient, KeepSet::all(), KeepSet::none(),
            sigmoid_grad_tangent,
            detail::batch_fused_activation<&detail::sigmoid_grad_op, &sigmoid_grad_fixed_y>),
        detail::binary_elementwise<SigmoidGradElement>),
    detail::structure_fused_activation<&detail::sigmoid_grad_op>);

Tensor detail::sigmoid_grad_op(const Tensor& y, const Tensor& g) {
  Tensor out = activation_grad_kernel(
      "SigmoidGrad", y, g, [](auto yv, auto gv) { return SigmoidGradElement::apply(yv, gv); });
  record(sigmoid_grad_definition, {&y, &g}, out);
  return out;
}

// SigmoidGrad(y, g) = g y (1 - y): its slope in y is 1 - 2y.
static Tensor sigmoid_g_times_slope_derivative(const Tensor& y, const Tensor& g) {
  return multiply(g, subtract(scalar(1.0, y.dtype()), multiply(scalar(2.0, y.dtype()), y)));
}

static Tangents sigmoid_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::sigmoid_grad_op,
                                          sigmoid_g_times_slope_derivative);
}

static Grads sigmoid_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::sigmoid_grad_op,
                                           sigmoid_g_times_slope_derivative);
}

// Batched g, fixed y: the slope y (1 - y) once, broadcast.
static Tensor sigmoid_grad_fixed_y(const Tensor& y, const Tensor& g) {
  return multiply(g, multiply(y, subtract(scalar(1.0, y.dtype()), y)));
}

// ---- Softplus ---------------------------------------------------------------------------

static Grads softplus_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents softplus_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(softplus_op) =
    detail::differentiable_op("Softplus", softplus_gradient, KeepSet::all(), KeepSet::none(),
                              softplus_tangent, detail::batch_unary<&tapegrad::softplus>);

Tensor softplus(const Tensor& x) {
  // kernels/vector_math.hpp's stable_softplus (SIMD above 32 elements).
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Softplus>(softplus_op,
                                                                                "softplus", x);
}

static Tangents softplus_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return detail::softplus_grad_op(op.inputs[0], dx); });
}

// One fused op (TF's SoftplusGrad) from the kept input instead of a sigmoid and a product.
static Grads softplus_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::softplus_grad_op(op.inputs()[0], g[0])};
}

// ---- SoftplusGrad: Softplus's fused gradient g sigmoid(x), itself differentiable --------

static Grads softplus_grad_gradient(const OpContext& op, const std::vector<Tensor>& h);
static Tangents softplus_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Tensor softplus_grad_fixed_x(const Tensor& x, const Tensor& g);
TAPEGRAD_BUILTIN_OP(softplus_grad_definition) = detail::with_structure(
    detail::differentiable_op(
        "SoftplusGrad", softplus_grad_gradient, KeepSet::all(), KeepSet::none(),
        softplus_grad_tangent,
        detail::batch_fused_activation<&detail::softplus_grad_op, &softplus_grad_fixed_x>),
    detail::structure_fused_activation<&detail::softplus_grad_op>);

// The sigmoid as sigmoid() computes it (the scalar function up to 32 elements, vector_math's
// SIMD kernel above), rounded before the product, as the unfused rule's was.
Tensor detail::softplus_grad_op(const Tensor& x, const Tensor& g) {
  Tensor out = activation_grad_vector_math<VectorFunction::Sigmoid>("SoftplusGrad", x, g);
  record(softplus_grad_definition, {&x, &g}, out);
  return out;
}

// SoftplusGrad(x, g) = g sigmoid(x): its slope in x is sigmoid's, so g s'(x) is
// SigmoidGrad(sigmoid(x), g).
static Tensor softplus_g_times_slope_derivative(const Tensor& x, const Tensor& g) {
  return detail::sigmoid_grad_op(sigmoid(x), g);
}

static Tangents softplus_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::fused_activation_tangent(op, tangents, detail::softplus_grad_op,
                                          softplus_g_times_slope_derivative);
}

static Grads softplus_grad_gradient(const OpContext& op, const std::vector<Tensor>& h) {
  return detail::fused_activation_gradient(op, h[0], detail::softplus_grad_op,
                                           softplus_g_times_slope_derivative);
}

// Batched g, fixed x: sigmoid(x) once, broadcast.
static Tensor softplus_grad_fixed_x(const Tensor& x, const Tensor& g) {
  return multiply(g, sigmoid(x));
}

// ---- Softmax, LogSoftmax ----------------------------------------------------------------

static Grads softmax_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents softmax_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads log_softmax_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents log_softmax_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(softmax_op) = detail::differentiable_op("Softmax", softmax_gradient,
                                                            KeepSet::none(), KeepSet::all(),
                                                            softmax_tangent,
                                                            detail::batch_axis<&tapegrad::softmax>);
TAPEGRAD_BUILTIN_OP(log_softmax_op) =
    detail::differentiable_op("LogSoftmax", log_softmax_gradient, KeepSet::none(), KeepSet::all(),
                              log_softmax_tangent, detail::batch_axis<&tapegrad::log_softmax>);

// out = x - logsumexp(x) along `axis` (log_softmax); softmax exponentiates it. The tensor is
// walked as [outer, n, inner] around the axis.
template <class T>
static xt::xarray<T> log_softmax_kernel(const xt::xarray<T>& x, std::size_t axis,
                                        bool exponentiate) {
  const Shape shape(x.shape().begin(), x.shape().end());
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::size_t n = shape[axis];
  xt::xarray<T> out = xt::empty<T>(shape);
  const T* in = x.data();
  T* o = out.data();
  if (inner == 1) {
    // Contiguous rows (the last axis): long rows exponentiate with SIMD (log_sum_exp_row, and
    // the softmax's exp through vector_math), the output row serving as scratch.
    for (std::size_t a = 0; a < outer; ++a) {
      const T* row = in + a * n;
      T* out_row = o + a * n;
      const T lse = detail::log_sum_exp_row(row, n, out_row);
      for (std::size_t k = 0; k < n; ++k) out_row[k] = row[k] - lse;
      if (!exponentiate) continue;
      if (n > detail::kVectorMathAbove) {
        detail::vector_math(detail::VectorFunction::Exp, out_row, out_row, n);
      } else {
        for (std::size_t k = 0; k < n; ++k) out_row[k] = std::exp(out_row[k]);
      }
    }
    return out;
  }
  for (std::size_t a = 0; a < outer; ++a) {
    for (std::size_t c = 0; c < inner; ++c) {
      const std::size_t base = a * n * inner + c;
      const T lse = detail::log_sum_exp(in + base, n, inner);
      for (std::size_t k = 0; k < n; ++k) {
        const T v = in[base + k * inner] - lse;
        o[base + k * inner] = exponentiate ? std::exp(v) : v;
      }
    }
  }
  return out;
}

// The forward of both: `function` is the public name (for errors); the normalised axis is
// recorded as the attribute "axis".
static Tensor softmax_forward(const OpDefinition& op, const char* function, const Tensor& x,
                              int axis, bool exponentiate) {
  detail::require_defined(function, x);
  if (x.rank() == 0) {
    throw InvalidArgument(detail::describe(function, x) + ": expected a tensor of rank 1 or more");
  }
  const std::size_t ax = detail::normalize_axis(function, axis, x);
  Tensor out = detail::dispatch_floating(function, x, [&](auto zero) {
    using T = decltype(zero);
    return Tensor(log_softmax_kernel(detail::kernel_array<T>(x), ax, exponentiate));
  });
  detail::record(op, {&x}, out, [&] { return Attrs().set("axis", static_cast<std::int64_t>(ax)); });
  return out;
}

Tensor softmax(const Tensor& x, int axis) {
  return softmax_forward(softmax_op, "softmax", x, axis, /*exponentiate=*/true);
}

Tensor log_softmax(const Tensor& x, int axis) {
  return softmax_forward(log_softmax_op, "log_softmax", x, axis, /*exponentiate=*/false);
}

static int axis_attr(const OpContext& op) { return static_cast<int>(op.attrs().get_int("axis")); }

// dy = y * (dx - sum(dx * y)) along the axis.
static Tangents softmax_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& y = op.outputs[0];
  const int axis = static_cast<int>(op.attrs().get_int("axis"));
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return multiply(y, subtract(dx, reduce_sum(multiply(dx, y), {axis}, /*keepdims=*/true)));
  });
}

// dy = dx - sum(softmax * dx) along the axis; softmax = exp(log_softmax).
static Tangents log_softmax_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& y = op.outputs[0];
  const int axis = static_cast<int>(op.attrs().get_int("axis"));
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return subtract(dx, reduce_sum(multiply(exp(y), dx), {axis}, /*keepdims=*/true));
  });
}

// dx = y * (g - sum(g * y)) along the axis.
static Grads softmax_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& y = op.outputs()[0];
  const Tensor dot = reduce_sum(multiply(g[0], y), {axis_attr(op)}, /*keepdims=*/true);
  return {multiply(y, subtract(g[0], dot))};
}

// dx = g - softmax * sum(g) along the axis; softmax = exp(log_softmax).
static Grads log_softmax_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& y = op.outputs()[0];
  const Tensor total = reduce_sum(g[0], {axis_attr(op)}, /*keepdims=*/true);
  return {subtract(g[0], multiply(exp(y), total))};
}

// ---- The losses' shared validation ------------------------------------------------------

static std::string describe_loss(const char* op, const Tensor& labels, const Tensor& logits) {
  return detail::describe(op, {{"labels", labels}, {"logits", logits}});
}

static void require_loss_operands(const char* op, const Tensor& labels, const Tensor& logits) {
  detail::require_defined(op, labels);
  detail::require_defined(op, logits);
  if (labels.dtype() != logits.dtype()) {
    throw InvalidArgument(describe_loss(op, labels, logits) +
                          ": the dtypes differ (no implicit promotion; cast one)");
  }
  if (!is_floating(logits.dtype())) {
    throw InvalidArgument(describe_loss(op, labels, logits) +
                          ": expected float32 or float64 operands");
  }
  if (labels.shape() != logits.shape()) {
    throw InvalidArgument(describe_loss(op, labels, logits) +
                          ": labels and logits must have the same shape");
  }
}

// ---- SoftmaxCrossEntropyWithLogits ------------------------------------------------------

static Grads softmax_cross_entropy_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents softmax_cross_entropy_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(softmax_cross_entropy_op) = detail::differentiable_op(
    "SoftmaxCrossEntropyWithLogits", softmax_cross_entropy_gradient, KeepSet::all(),
    KeepSet::none(), softmax_cross_entropy_tangent,
    detail::batch_all_batched<&tapegrad::softmax_cross_entropy_with_logits>);

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "softmax_cross_entropy_with_logits";
  require_loss_operands(op, labels, logits);
  if (logits.rank() == 0) {
    throw InvalidArgument(describe_loss(op, labels, logits) +
                          ": expected tensors of rank 1 or more (classes on the last axis)");
  }
  const Shape& shape = logits.shape();
  const Shape row_shape(shape.begin(), shape.end() - 1);
  Tensor out = detail::dispatch_floating(op, logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::size_t classes = shape.back();
    const std::size_t rows = num_elements(row_shape);
    const T* z = detail::kernel_data<T>(labels);
    const T* x = detail::kernel_data<T>(logits);
    xt::xarray<T> loss = xt::empty<T>(row_shape);
    T* o = loss.data();
    // -sum(z * log_softmax(x)) = sum(z * (lse - x)); lse - x >= 0 is finite for finite x.
    std::vector<T> scratch(detail::log_sum_exp_scratch(classes));
    for (std::size_t r = 0; r < rows; ++r) {
      const T* xr = x + r * classes;
      const T* zr = z + r * classes;
      const T lse = detail::log_sum_exp_row(xr, classes, scratch.data());
      o[r] =
          detail::pairwise_sum_of<T>(classes, [&](std::size_t k) { return zr[k] * (lse - xr[k]); });
    }
    return Tensor(std::move(loss));
  });
  detail::record(softmax_cross_entropy_op, {&labels, &logits}, out);
  return out;
}

// The rows of the loss move by sum(-log_softmax(x) dz + (softmax(x) sum(z) - z) dx) over the
// classes: the gradient's two factors, contracted with the tangents.
static Tangents softmax_cross_entropy_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& labels = op.inputs[0];
  const Tensor& logits = op.inputs[1];
  const Tensor from_labels = detail::if_defined(tangents[0], [&](const Tensor& dz) {
    return reduce_sum(multiply(negative(log_softmax(logits, -1)), dz), {-1});
  });
  const Tensor from_logits = detail::if_defined(tangents[1], [&](const Tensor& dx) {
    const Tensor label_mass = reduce_sum(labels, {-1}, /*keepdims=*/true);
    return reduce_sum(multiply(subtract(multiply(softmax(logits, -1), label_mass), labels), dx),
                      {-1});
  });
  return {detail::output_tangent(op, 0, {from_labels, from_logits})};
}

// TF2: logits get (softmax - labels) * g, labels get -log_softmax * g. Written with
// differentiable ops (not the forward's saved backprop) so second derivatives work.
static Grads softmax_cross_entropy_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& labels = op.inputs()[0];
  const Tensor& logits = op.inputs()[1];
  // The per-row gradient as a column that broadcasts over the classes.
  std::vector<std::int64_t> column_shape = detail::signed_shape(g[0].shape());
  column_shape.push_back(1);
  const Tensor column = reshape(g[0], column_shape);
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = multiply(negative(log_softmax(logits, -1)), column);
  // d/dlogits sum(z * (lse - x)) = softmax * sum(z) - z: exact also for label rows that do
  // not sum to 1 (TF's kernel assumes they do).
  if (op.needs_gradient(1)) {
    const Tensor label_mass = reduce_sum(labels, {-1}, /*keepdims=*/true);
    r[1] = multiply(subtract(multiply(softmax(logits, -1), label_mass), labels), column);
  }
  return r;
}

// ---- SigmoidCrossEntropyWithLogits ------------------------------------------------------

static Grads sigmoid_cross_entropy_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents sigmoid_cross_entropy_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(sigmoid_cross_entropy_op) = detail::differentiable_op(
    "SigmoidCrossEntropyWithLogits", sigmoid_cross_entropy_gradient, KeepSet::all(),
    KeepSet::none(), sigmoid_cross_entropy_tangent,
    detail::batch_all_batched<&tapegrad::sigmoid_cross_entropy_with_logits>);

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "sigmoid_cross_entropy_with_logits";
  require_loss_operands(op, labels, logits);
  Tensor out = detail::dispatch_floating(op, logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Tensor(detail::map_binary<T>(
        detail::kernel_array<T>(labels), detail::kernel_array<T>(logits), logits.shape(),
        [](T z, T x) { return std::max(x, T(0)) - x * z + std::log1p(std::exp(-std::fabs(x))); }));
  });
  detail::record(sigmoid_cross_entropy_op, {&labels, &logits}, out);
  return out;
}

static Tangents sigmoid_cross_entropy_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& labels = op.inputs[0];
  const Tensor& logits = op.inputs[1];
  const Tensor from_labels = detail::if_defined(
      tangents[0], [&](const Tensor& dz) { return negative(multiply(dz, logits)); });
  const Tensor from_logits = detail::if_defined(tangents[1], [&](const Tensor& dx) {
    return multiply(dx, subtract(sigmoid(logits), labels));
  });
  return {detail::output_tangent(op, 0, {from_labels, from_logits})};
}

// loss = max(x, 0) - x z + log1p(exp(-|x|)): dx = sigmoid(x) - z, dz = -x.
static Grads sigmoid_cross_entropy_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& labels = op.inputs()[0];
  const Tensor& logits = op.inputs()[1];
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = negative(multiply(g[0], logits));
  if (op.needs_gradient(1)) r[1] = multiply(g[0], subtract(sigmoid(logits), labels));
  return r;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(nn)
