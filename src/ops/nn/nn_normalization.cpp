// Normalization: moments, batch_normalization, layer_normalization, l2_normalize. Each is a
// composition of differentiable ops (TF writes them the same way), so they define no op of
// their own: their gradients, second derivatives and forward rules are those of the parts.
// What they add is validation that names them, not the op inside that would fail.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/shape_util.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/nn.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

static void require_floating(const char* op, const Tensor& x) {
  detail::require_defined(op, x);
  if (!is_floating(x.dtype())) detail::throw_unsupported_dtype(op, x, "float32 or float64");
}

// The reduction axes, checked and normalised with errors naming `op`; {} = every axis.
static std::vector<int> checked_axes(const char* op, const std::vector<int>& axes,
                                     const Tensor& x) {
  const std::vector<std::size_t> normalized = detail::normalize_axes(op, axes, x);
  return std::vector<int>(normalized.begin(), normalized.end());
}

static void require_epsilon(const char* op, const Tensor& x, double epsilon) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    throw InvalidArgument(detail::describe(op, x) + ": epsilon = " + std::to_string(epsilon) +
                          " must be finite and >= 0");
  }
}

// mean over `axes` (kept), and the biased variance mean((x - mean)^2). The variance's
// gradient flows through the mean too (TF stops it there; the first derivative is the same,
// since sum(x - mean) = 0, but the second is not: stopping it drops the -1/n coupling term).
static MeanAndVariance moments_of(const char* op, const Tensor& x, const std::vector<int>& axes,
                                  bool keepdims) {
  require_floating(op, x);
  const std::vector<int> reduced = checked_axes(op, axes, x);
  const Tensor mean = reduce_mean(x, reduced, /*keepdims=*/true);
  const Tensor variance = reduce_mean(squared_difference(x, mean), reduced, keepdims);
  if (keepdims) return {mean, variance};
  return {reshape(mean, detail::signed_shape(variance.shape())), variance};
}

MeanAndVariance moments(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return moments_of("moments", x, axes, keepdims);
}

// `t` (named `name`) has x's dtype and broadcasts with x.
static void require_companion(const char* op, const Tensor& x, const char* name, const Tensor& t) {
  detail::require_defined(op, t);
  if (t.dtype() != x.dtype()) {
    throw InvalidArgument(detail::describe(op, {{"x", x}, {name, t}}) + ": " + name +
                          " must have x's dtype (no implicit promotion)");
  }
  try {
    detail::broadcast_shapes(op, x.shape(), t.shape());
  } catch (const InvalidArgument&) {
    throw InvalidArgument(detail::describe(op, {{"x", x}, {name, t}}) + ": " + name +
                          " does not broadcast with x");
  }
}

// TF's tf.nn.batch_normalization: inv = rsqrt(variance + eps) (times scale), then
// x inv + (offset - mean inv).
static Tensor normalize(const char* op, const Tensor& x, const Tensor& mean, const Tensor& variance,
                        const Tensor& offset, const Tensor& scale, double epsilon) {
  require_floating(op, x);
  require_companion(op, x, "mean", mean);
  require_companion(op, x, "variance", variance);
  if (offset.defined()) require_companion(op, x, "offset", offset);
  if (scale.defined()) require_companion(op, x, "scale", scale);
  require_epsilon(op, x, epsilon);
  Tensor inv = rsqrt(add(variance, scalar(epsilon, x.dtype())));
  if (scale.defined()) inv = multiply(inv, scale);
  const Tensor shift =
      offset.defined() ? subtract(offset, multiply(mean, inv)) : negative(multiply(mean, inv));
  return add(multiply(x, inv), shift);
}

Tensor batch_normalization(const Tensor& x, const Tensor& mean, const Tensor& variance,
                           const Tensor& offset, const Tensor& scale, double variance_epsilon) {
  return normalize("batch_normalization", x, mean, variance, offset, scale, variance_epsilon);
}

Tensor layer_normalization(const Tensor& x, const std::vector<int>& axes, const Tensor& gamma,
                           const Tensor& beta, double epsilon) {
  const char* op = "layer_normalization";
  const MeanAndVariance m = moments_of(op, x, axes, /*keepdims=*/true);
  return normalize(op, x, m.mean, m.variance, beta, gamma, epsilon);
}

// TF's tf.math.l2_normalize: x / sqrt(max(sum(x^2), eps)).
Tensor l2_normalize(const Tensor& x, const std::vector<int>& axes, double epsilon) {
  const char* op = "l2_normalize";
  require_floating(op, x);
  const std::vector<int> reduced = checked_axes(op, axes, x);
  require_epsilon(op, x, epsilon);
  const Tensor sum_of_squares = reduce_sum(square(x), reduced, /*keepdims=*/true);
  return multiply(x, rsqrt(maximum(sum_of_squares, scalar(epsilon, x.dtype()))));
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(nn_normalization)
