// Neural-network activations and losses.
#pragma once

#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// TF: tf.nn.relu (gradient 0 at 0), tf.sigmoid, tf.nn.softplus.
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softplus(const Tensor& x);
/// TF: tf.nn.softmax / tf.nn.log_softmax along `axis`; stable for large logits.
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
/// Per-row loss -sum(labels * log_softmax(logits)) over the last axis; gradients flow to
/// both labels and logits (TF2 tf.nn.softmax_cross_entropy_with_logits).
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
/// Elementwise max(x,0) - x*z + log(1+exp(-|x|)) (TF: tf.nn.sigmoid_cross_entropy_with_logits).
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

/// More activations, elementwise on float32/float64 (InvalidArgument naming the op and the
/// dtype for integers). TF: tf.nn.leaky_relu (x > 0 ? x : alpha x for any finite alpha, as
/// TF's kernel; gradient at 0 is alpha, as TF), tf.nn.elu (x < 0 ? e^x - 1 : x),
/// tf.nn.selu (scale 1.0507009873554805, alpha 1.6732632423543772), tf.nn.gelu (exact
/// x Phi(x) with erf; approximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))),
/// tf.nn.silu (x sigmoid(x)), tf.math.log_sigmoid (-softplus(-x), stable for large |x|),
/// tf.nn.softsign (x / (1 + |x|)). Every gradient is differentiable again.
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);
Tensor elu(const Tensor& x);
Tensor selu(const Tensor& x);
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor silu(const Tensor& x);
Tensor log_sigmoid(const Tensor& x);
Tensor softsign(const Tensor& x);
/// Per-row loss -log_softmax(logits)[label] (TF: tf.nn.sparse_softmax_cross_entropy_with_logits).
/// labels: int32 or int64 class indices of shape [d0, ..., dn]; logits: float of shape
/// [d0, ..., dn, classes]; result: labels' shape, logits' dtype. Gradient: logits get
/// (softmax(logits) - one_hot(labels)) g, labels none. InvalidArgument naming the op, the
/// shapes and dtypes for other dtypes or shapes, and naming the row and the value for a
/// label outside [0, classes) (TF raises too).
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

/// The mean and the (biased) variance of x over `axes` ({} = every axis; negative axes count
/// from the end), reduced axes kept as 1 when `keepdims` (TF: tf.nn.moments). Floating x.
/// The variance's gradient also flows through the mean (exact second derivatives; TF stops
/// it there, which changes only the second derivative). `auto [mean, variance] = moments(...)`.
struct MeanAndVariance {
  Tensor mean;
  Tensor variance;
};
MeanAndVariance moments(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);
/// (x - mean) scale / sqrt(variance + eps) + offset, every operand broadcasting with x
/// (TF: tf.nn.batch_normalization). offset and scale may be undefined Tensors (absent).
/// InvalidArgument naming the op and the operand for a dtype other than x's, a shape that does
/// not broadcast with x, or an epsilon that is negative or not finite.
Tensor batch_normalization(const Tensor& x, const Tensor& mean, const Tensor& variance,
                           const Tensor& offset, const Tensor& scale,
                           double variance_epsilon = 1e-3);
/// x normalized by its moments over `axes` (default: the last), then gamma * . + beta
/// (each optional, broadcasting with x): Keras's LayerNormalization, epsilon 1e-3 as Keras.
Tensor layer_normalization(const Tensor& x, const std::vector<int>& axes = {-1},
                           const Tensor& gamma = Tensor(), const Tensor& beta = Tensor(),
                           double epsilon = 1e-3);
/// x / sqrt(max(sum(x^2 over axes), epsilon)) ({} = every axis) (TF: tf.math.l2_normalize).
Tensor l2_normalize(const Tensor& x, const std::vector<int>& axes = {}, double epsilon = 1e-12);

// ---- Convolution and pooling (NHWC or NCHW images; src/ops/conv.cpp, src/ops/pooling.cpp) -
//
// Common rules: float32 or float64, x and filters of one dtype. `strides`, `dilations` and
// `ksize` take 1 value (both spatial axes), 2 ({h, w}) or 4 (TF's {1, h, w, 1}; with
// DataFormat::NCHW, TF's {1, 1, h, w}); each must be >= 1. Padding follows TF: Valid uses
// only windows inside x (output (in - k_eff) / s + 1, an error when in < k_eff,
// k_eff = (k - 1) * dilation + 1); Same gives ceil(in / s) outputs, padding
// max((out - 1) * s + k_eff - in, 0) split with the odd element at the end. Bad input throws
// InvalidArgument naming the op, the operands' shapes (as passed) and dtypes and the bad
// value; so does a DataFormat that is neither enumerator (e.g. cast from an int).
//
// Layouts: the kernels work on channels-last images. A channels-first x is transposed to
// channels last, the channels-last op runs, and its result is transposed back, all three
// recorded; so gradients, forward mode, vectorized_map and higher orders are those of these
// ops, and the numbers are bit-equal to the NHWC op on the transposed input. Filters are HWIO
// (WIO for conv1d) in both layouts, as TF.

/// TF's padding="VALID" / "SAME". A value cast from another integer is an InvalidArgument
/// naming the op (never silently one of the two).
enum class Padding { Valid, Same };

/// Where an image's channels are (TF's data_format). NHWC: channels last, [batch, height,
/// width, channels], TF's default. NCHW: channels first, [batch, channels, height, width],
/// PyTorch's layout. For conv1d NHWC means NWC ([batch, width, channels]) and NCHW means NCW
/// ([batch, channels, width]). A value cast from another integer is an InvalidArgument naming
/// the op.
enum class DataFormat { NHWC, NCHW };

/// 2-D convolution (TF: tf.nn.conv2d): filters [k_h, k_w, in_c, out_c] in both layouts;
/// NHWC: x [batch, h, w, in_c] -> [batch, out_h, out_w, out_c];
/// NCHW: x [batch, in_c, h, w] -> [batch, out_c, out_h, out_w].
/// Direct SIMD kernels (im2col + one BLAS gemm for 1x1 filters and few output channels); an
/// NCHW result is stored channels first. Gradients: x gets conv2d_transpose(g, filters, ...),
/// filters a Conv2DBackpropFilter of x and g; both are differentiable again (TF's formulas), so
/// every higher derivative exists. The overload without dilations takes dilation 1, so that
/// conv2d(x, filters, {1, 1}, Padding::Same, DataFormat::NCHW) needs no {1, 1} for them.
Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int> strides, Padding padding,
              std::vector<int> dilations = {1, 1}, DataFormat data_format = DataFormat::NHWC);
Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int> strides, Padding padding,
              DataFormat data_format);

/// 1-D convolution (TF: tf.nn.conv1d): filters [k, in_c, out_c] in both layouts;
/// NHWC (NWC): x [batch, w, in_c] -> [batch, out_w, out_c];
/// NCHW (NCW): x [batch, in_c, w] -> [batch, out_c, out_w].
/// conv2d on a unit height (recorded as reshapes around a Conv2D). The overload without a
/// dilation takes dilation 1.
Tensor conv1d(const Tensor& x, const Tensor& filters, int stride, Padding padding, int dilation = 1,
              DataFormat data_format = DataFormat::NHWC);
Tensor conv1d(const Tensor& x, const Tensor& filters, int stride, Padding padding,
              DataFormat data_format);

/// The transpose of conv2d with respect to its input (TF: tf.nn.conv2d_transpose, op
/// Conv2DBackpropInput): x shaped like conv2d's output (NHWC [batch, out_h, out_w, out_c],
/// NCHW [batch, out_c, out_h, out_w]), filters [k_h, k_w, in_c, out_c] (the same HWIO filters
/// as conv2d's, in both layouts), output_shape the input shape of the conv2d it transposes, in
/// x's data format (NHWC {batch, h, w, in_c}, NCHW {batch, in_c, h, w}); that conv2d's output
/// shape with these strides, padding and dilations must be x's. The result has output_shape.
/// conv2d_transpose(g, w, shape(x), ...) is d<conv2d(x, w), g>/dx. Gradients: x gets
/// conv2d(h, filters), filters a Conv2DBackpropFilter of h and x. The overload without
/// dilations takes dilation 1.
Tensor conv2d_transpose(const Tensor& x, const Tensor& filters, const Shape& output_shape,
                        std::vector<int> strides, Padding padding,
                        std::vector<int> dilations = {1, 1},
                        DataFormat data_format = DataFormat::NHWC);
Tensor conv2d_transpose(const Tensor& x, const Tensor& filters, const Shape& output_shape,
                        std::vector<int> strides, Padding padding, DataFormat data_format);

/// Max pooling (TF: tf.nn.max_pool2d): NHWC x [batch, h, w, c] -> [batch, out_h, out_w, c];
/// NCHW x [batch, c, h, w] -> [batch, c, out_h, out_w]. The largest value of each ksize
/// window (padding never wins). The gradient goes to the window's maximum, the first one in
/// row-major window order on ties (TF's CPU kernel); it is a segment sum at those positions,
/// whose own gradient is a gather at them (second order).
Tensor max_pool2d(const Tensor& x, std::vector<int> ksize, std::vector<int> strides,
                  Padding padding, DataFormat data_format = DataFormat::NHWC);

/// Average pooling (TF: tf.nn.avg_pool2d), shapes as max_pool2d's: the mean of each window
/// over its positions inside x (Same padding is not counted). Linear; the gradient spreads g
/// evenly over each window (AvgPoolGrad, whose gradient is avg_pool2d again).
Tensor avg_pool2d(const Tensor& x, std::vector<int> ksize, std::vector<int> strides,
                  Padding padding, DataFormat data_format = DataFormat::NHWC);

}  // namespace tapegrad
