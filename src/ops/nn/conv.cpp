// 2-D convolution and its two transposes, each im2col + one gemm (kernels/im2col.cpp):
// Conv2D (conv2d), Conv2DBackpropInput (conv2d_transpose) and Conv2DBackpropFilter. Each is
// bilinear in its two tensor inputs and its gradients are the other two ops (TF's rules), so
// derivatives of any order stay inside this family. conv1d is conv2d on a unit height. The
// recorded ops are channels last; a channels-first call records Transposes around them
// (ImageLayout, conv_support.hpp).
#include <string>
#include <utility>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/im2col.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/linalg/blas_kernel_advice.hpp"
#include "ops/nn/conv_ops.hpp"
#include "ops/nn/conv_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/nn.hpp"

namespace tapegrad {

namespace {

using detail::ConvGeometry;
using detail::Described;
using detail::ImageLayout;
using detail::WindowAttrs;

std::string dims(std::size_t n) { return std::to_string(n); }

// Defined operands of one floating dtype with the given ranks; `a_layout` ("NHWC", ...) is
// named when a has another rank.
void check_operands(const char* op, const Tensor& a, const char* a_name, std::size_t a_rank,
                    const std::string& a_layout, const Tensor& b, const char* b_name,
                    std::size_t b_rank, const Described& described) {
  detail::require_defined(op, a);
  detail::require_defined(op, b);
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(described() + ": " + why);
  };
  if (a.dtype() != b.dtype()) fail("the dtypes differ");
  if (!is_floating(a.dtype())) fail("only float32 and float64 are supported");
  if (a.rank() != a_rank) {
    fail(std::string(a_name) + " must have rank " + dims(a_rank) + " (" + a_layout + ")");
  }
  if (b.rank() != b_rank) fail(std::string(b_name) + " must have rank " + dims(b_rank));
}

// A filter [k_h, k_w, in_c, out_c] whose window is at least 1 x 1 and whose in_c is `in_c`.
void check_filter(const Shape& f, std::size_t in_c, const char* input_name,
                  const Described& described) {
  if (f[0] == 0 || f[1] == 0) {
    throw InvalidArgument(described() + ": the filter's height and width must be >= 1 (got " +
                          dims(f[0]) + " x " + dims(f[1]) + ")");
  }
  if (f[2] != in_c) {
    throw InvalidArgument(described() + ": " + input_name + " has " + dims(in_c) +
                          " channels but the filter expects " + dims(f[2]) +
                          " (filters are [k_h, k_w, in_c, out_c])");
  }
}

Shape output_shape_of(const ConvGeometry& g) { return {g.batch, g.out_h, g.out_w, g.out_c}; }

// Batching by channels: a convolution treats its channels independently on one side, so a
// batch of filters (or of the other operand) folds into that channel axis and one call
// computes every row. t [B, d0, ..., dk, ...] -> [d0, ..., B dk, ...] (row-major: b dk + c).
Tensor fold_batch_into(const Tensor& t, std::size_t axis) {
  const Tensor moved = detail::move_front_axis_to(t, axis);
  std::vector<std::int64_t> shape = detail::signed_shape(moved.shape());
  shape[axis] *= shape[axis + 1];
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1);
  return reshape(moved, shape);
}

// The inverse: axis k of t [..., B dk, ...] split into [B, dk], the batch moved to the front.
Tensor unfold_batch_from(const Tensor& t, std::size_t axis, std::size_t batch) {
  std::vector<std::int64_t> shape = detail::signed_shape(t.shape());
  const std::int64_t per_row = shape[axis] / static_cast<std::int64_t>(batch);
  shape[axis] = static_cast<std::int64_t>(batch);
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, per_row);
  return detail::move_axis_to_front(reshape(t, shape), axis);
}

// Whether input i alone is batched (and the batch is not empty).
bool only_batched(const detail::BatchingContext& op, std::size_t i) {
  if (op.batch_size == 0) return false;
  for (std::size_t j = 0; j < op.batched.size(); ++j) {
    if (op.is_batched(j) != (j == i)) return false;
  }
  return true;
}

}  // namespace

// ---- Conv2D -----------------------------------------------------------------------------

static Grads conv2d_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents conv2d_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> conv2d_batched(const detail::BatchingContext& op,
                                          const std::vector<Tensor>& inputs);
static detail::ReplayOutputs conv2d_replay(const detail::ReplayContext& op,
                                           const std::vector<Tensor>& inputs);
TAPEGRAD_BUILTIN_OP(conv2d_op) =
    detail::with_replay(detail::differentiable_op("Conv2D", conv2d_gradient, KeepSet::all(),
                                                  KeepSet::none(), conv2d_tangent, conv2d_batched),
                        conv2d_replay);

Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int> strides, Padding padding,
              std::vector<int> dilations, DataFormat data_format) {
  const char* op = "conv2d";
  const Described operands = [&] { return detail::describe(op, {{"x", x}, {"filters", filters}}); };
  const ImageLayout layout(data_format, 4, operands);
  const Described described = layout.describing(operands);
  check_operands(op, x, "x", 4, layout.name(), filters, "filters", 4, described);
  const Shape x_shape = layout.channels_last(x.shape());
  const Shape& f = filters.shape();
  check_filter(f, x_shape[3], "x", described);
  WindowAttrs w;
  w.strides = detail::spatial_pair(strides, "strides", described, data_format);
  w.dilations = detail::spatial_pair(dilations, "dilations", described, data_format);
  w.padding = padding;
  const ConvGeometry g = detail::window_geometry(x_shape, f[0], f[1], f[3], w.strides, w.dilations,
                                                 padding, described);
  const Tensor input = layout.to_channels_last(x);
  detail::check_blas_kernels();
  Tensor out = detail::dispatch_floating(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto images = detail::images_of(input, &zero);
    return detail::compute_images<T>(
        op, output_shape_of(g), detail::stored_channels_first(images, x_shape),
        [&](T* y, bool channels_first) {
          detail::conv2d_forward(g, images, detail::data_of(filters, y), y, channels_first);
        });
  });
  detail::record(conv2d_op, {&input, &filters}, out, [&] { return w.to_attrs(); });
  return layout.from_channels_last(out);
}

Tensor conv2d(const Tensor& x, const Tensor& filters, std::vector<int> strides, Padding padding,
              DataFormat data_format) {
  return conv2d(x, filters, std::move(strides), padding, {1, 1}, data_format);
}

// One call: x batched, the batch merged into its examples axis; filters batched, the batch
// folded into their output channels. Both batched: one call per row (folding both would need
// a grouped convolution).
static std::vector<Tensor> conv2d_batched(const detail::BatchingContext& op,
                                          const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const auto conv = [&](const Tensor& x, const Tensor& filters) {
    return conv2d(x, filters, w.strides_list(), w.padding, w.dilations_list());
  };
  if (only_batched(op, 1)) {
    return {unfold_batch_from(conv(inputs[0], fold_batch_into(inputs[1], 3)), 3, op.batch_size)};
  }
  return detail::batch_into_first_axis(op, inputs, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv(in[0], in[1])};
  });
}

// The recorded op is channels last, conv2d's default layout.
static detail::ReplayOutputs conv2d_replay(const detail::ReplayContext& op,
                                           const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {conv2d(inputs[0], inputs[1], w.strides_list(), w.padding, w.dilations_list())};
}

// Bilinear: d conv(x, w) = conv(dx, w) + conv(x, dw).
static Tangents conv2d_tangent(const ForwardContext& op, const Tangents& tangents) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const Tensor& x = op.inputs[0];
  const Tensor& filters = op.inputs[1];
  const auto conv = [&](const Tensor& a, const Tensor& b) {
    return conv2d(a, b, w.strides_list(), w.padding, w.dilations_list());
  };
  return {detail::output_tangent(
      op, 0,
      {detail::if_defined(tangents[0], [&](const Tensor& dx) { return conv(dx, filters); }),
       detail::if_defined(tangents[1], [&](const Tensor& dw) { return conv(x, dw); })})};
}

// TF's _Conv2DGrad: x gets the transposed convolution of g, filters the filter backprop.
static Grads conv2d_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  Grads r(2);
  if (op.needs_gradient(0)) {
    r[0] = conv2d_transpose(g[0], op.inputs()[1], op.input_shape(0), w.strides_list(), w.padding,
                            w.dilations_list());
  }
  if (op.needs_gradient(1)) {
    r[1] = detail::conv2d_backprop_filter(op.inputs()[0], op.input_shape(1), g[0], w.strides_list(),
                                          w.padding, w.dilations_list());
  }
  return r;
}

// ---- Conv2DBackpropInput (conv2d_transpose) ---------------------------------------------

static Grads backprop_input_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents backprop_input_tangent(const ForwardContext& op, const Tangents& tangents);
// As Conv2D's: the recorded output shape's examples axis grows by the batch when merged; batched
// filters fold into their input channels (the output's channels here).
static std::vector<Tensor> backprop_input_batched(const detail::BatchingContext& op,
                                                  const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  Shape shape = op.attrs().get_shape("output_shape");
  if (only_batched(op, 1)) {
    shape[3] *= op.batch_size;
    const Tensor out = conv2d_transpose(inputs[0], fold_batch_into(inputs[1], 2), shape,
                                        w.strides_list(), w.padding, w.dilations_list());
    return {unfold_batch_from(out, 3, op.batch_size)};
  }
  const bool merged = detail::only_first_batched(op, inputs);
  if (merged) shape[0] *= op.batch_size;
  const detail::BatchForward forward = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        conv2d_transpose(in[0], in[1], shape, w.strides_list(), w.padding, w.dilations_list())};
  };
  return merged ? detail::merged_into_first_axis(op, inputs, forward)
                : detail::row_by_row(op, inputs, forward);
}
static detail::ReplayOutputs backprop_input_replay(const detail::ReplayContext& op,
                                                   const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {conv2d_transpose(inputs[0], inputs[1], op.attrs().get_shape("output_shape"),
                           w.strides_list(), w.padding, w.dilations_list())};
}
TAPEGRAD_BUILTIN_OP(backprop_input_op) = detail::with_replay(
    detail::differentiable_op("Conv2DBackpropInput", backprop_input_gradient, KeepSet::all(),
                              KeepSet::none(), backprop_input_tangent, backprop_input_batched),
    backprop_input_replay);

Tensor conv2d_transpose(const Tensor& x, const Tensor& filters, const Shape& output_shape,
                        std::vector<int> strides, Padding padding, std::vector<int> dilations,
                        DataFormat data_format) {
  const char* op = "conv2d_transpose";
  const Described operands = [&] {
    return detail::describe(op, {{"x", x}, {"filters", filters}}) + ", output_shape " +
           shape_to_string(output_shape);
  };
  const ImageLayout layout(data_format, 4, operands);
  const Described described = layout.describing(operands);
  check_operands(op, x, "x", 4, layout.name(), filters, "filters", 4, described);
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(described() + ": " + why);
  };
  if (output_shape.size() != 4) {
    fail("output_shape must have 4 dimensions (" + layout.name() + ")");
  }
  const Shape x_shape = layout.channels_last(x.shape());
  const Shape out_shape = layout.channels_last(output_shape);
  const Shape& f = filters.shape();
  check_filter(f, out_shape[3], "output_shape", described);
  if (x_shape[3] != f[3]) {
    fail("x has " + dims(x_shape[3]) + " channels but the filter has " + dims(f[3]) +
         " output channels (filters are [k_h, k_w, in_c, out_c])");
  }
  WindowAttrs w;
  w.strides = detail::spatial_pair(strides, "strides", described, data_format);
  w.dilations = detail::spatial_pair(dilations, "dilations", described, data_format);
  w.padding = padding;
  const ConvGeometry g = detail::window_geometry(out_shape, f[0], f[1], f[3], w.strides,
                                                 w.dilations, padding, described);
  if (output_shape_of(g) != x_shape) {
    fail("a conv2d of output_shape with these strides, padding and dilations has shape " +
         shape_to_string(layout.as_given(output_shape_of(g))) + ", not x's");
  }
  detail::check_new_shape(op, out_shape, x.dtype());
  const Tensor input = layout.to_channels_last(x);
  Tensor out = detail::dispatch_floating(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto images = detail::images_of(input, &zero);
    return detail::compute_images<T>(op, out_shape, detail::stored_channels_first(images, x_shape),
                                     [&](T* dx, bool channels_first) {
                                       detail::conv2d_backprop_input(g, images,
                                                                     detail::data_of(filters, dx),
                                                                     dx, channels_first);
                                     });
  });
  detail::record(backprop_input_op, {&input, &filters}, out,
                 [&] { return w.to_attrs().set("output_shape", out_shape); });
  return layout.from_channels_last(out);
}

Tensor conv2d_transpose(const Tensor& x, const Tensor& filters, const Shape& output_shape,
                        std::vector<int> strides, Padding padding, DataFormat data_format) {
  return conv2d_transpose(x, filters, output_shape, std::move(strides), padding, {1, 1},
                          data_format);
}

static Tangents backprop_input_tangent(const ForwardContext& op, const Tangents& tangents) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const Shape& shape = op.attrs().get_shape("output_shape");
  const auto transpose = [&](const Tensor& a, const Tensor& b) {
    return conv2d_transpose(a, b, shape, w.strides_list(), w.padding, w.dilations_list());
  };
  return {detail::output_tangent(
      op, 0,
      {detail::if_defined(tangents[0],
                          [&](const Tensor& dx) { return transpose(dx, op.inputs[1]); }),
       detail::if_defined(tangents[1],
                          [&](const Tensor& dw) { return transpose(op.inputs[0], dw); })})};
}

// TF's _Conv2DBackpropInputGrad: x (the transposed op's input, a conv2d output gradient) gets
// conv2d of h; filters get the filter backprop of (h, x).
static Grads backprop_input_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  Grads r(2);
  if (op.needs_gradient(0)) {
    r[0] = conv2d(g[0], op.inputs()[1], w.strides_list(), w.padding, w.dilations_list());
  }
  if (op.needs_gradient(1)) {
    r[1] = detail::conv2d_backprop_filter(g[0], op.input_shape(1), op.inputs()[0], w.strides_list(),
                                          w.padding, w.dilations_list());
  }
  return r;
}

// ---- Conv2DBackpropFilter ---------------------------------------------------------------

static Grads backprop_filter_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents backprop_filter_tangent(const ForwardContext& op, const Tangents& tangents);
// The filter gradient sums over the examples axis, so no batch merges into it. x alone batched:
// the batch folds into its channels (the filter's input channels); g alone batched: into its
// channels (the filter's output channels); one call either way. Both batched: one call per row.
static std::vector<Tensor> backprop_filter_batched(const detail::BatchingContext& op,
                                                   const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const Shape& shape = op.attrs().get_shape("filter_shape");
  const auto backprop = [&](const Tensor& x, const Shape& filter_shape, const Tensor& g) {
    return detail::conv2d_backprop_filter(x, filter_shape, g, w.strides_list(), w.padding,
                                          w.dilations_list());
  };
  for (const std::size_t i : {std::size_t{0}, std::size_t{1}}) {
    if (!only_batched(op, i)) continue;
    const std::size_t channel = i == 0 ? 2 : 3;  // x's channels are cin, g's cout
    Shape folded = shape;
    folded[channel] *= op.batch_size;
    const Tensor out = i == 0 ? backprop(fold_batch_into(inputs[0], 3), folded, inputs[1])
                              : backprop(inputs[0], folded, fold_batch_into(inputs[1], 3));
    return {unfold_batch_from(out, channel, op.batch_size)};
  }
  return detail::row_by_row(op, inputs, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{backprop(in[0], shape, in[1])};
  });
}
static detail::ReplayOutputs backprop_filter_replay(const detail::ReplayContext& op,
                                                    const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {detail::conv2d_backprop_filter(inputs[0], op.attrs().get_shape("filter_shape"), inputs[1],
                                         w.strides_list(), w.padding, w.dilations_list())};
}
TAPEGRAD_BUILTIN_OP(backprop_filter_op) = detail::with_replay(
    detail::differentiable_op("Conv2DBackpropFilter", backprop_filter_gradient, KeepSet::all(),
                              KeepSet::none(), backprop_filter_tangent, backprop_filter_batched),
    backprop_filter_replay);

Tensor detail::conv2d_backprop_filter(const Tensor& x, const Shape& filter_shape, const Tensor& g,
                                      std::vector<int> strides, Padding padding,
                                      std::vector<int> dilations) {
  const char* op = "conv2d_backprop_filter";
  const Described described = [&] {
    return detail::describe(op, {{"x", x}, {"g", g}}) + ", filter_shape " +
           shape_to_string(filter_shape);
  };
  check_operands(op, x, "x", 4, "NHWC", g, "g", 4, described);
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(described() + ": " + why);
  };
  if (filter_shape.size() != 4) fail("filter_shape must have 4 dimensions (HWIO)");
  check_filter(filter_shape, x.shape()[3], "x", described);
  WindowAttrs w;
  w.strides = spatial_pair(strides, "strides", described);
  w.dilations = spatial_pair(dilations, "dilations", described);
  w.padding = padding;
  const ConvGeometry geometry =
      window_geometry(x.shape(), filter_shape[0], filter_shape[1], filter_shape[3], w.strides,
                      w.dilations, padding, described);
  if (output_shape_of(geometry) != g.shape()) {
    fail("g must have the conv2d output's shape " + shape_to_string(output_shape_of(geometry)));
  }
  Tensor out = detail::compute_floating(op, x.dtype(), filter_shape, [&](auto* dw) {
    detail::conv2d_backprop_filter(geometry, detail::images_of(x, dw), detail::images_of(g, dw),
                                   dw);
  });
  detail::record(backprop_filter_op, {&x, &g}, out,
                 [&] { return w.to_attrs().set("filter_shape", filter_shape); });
  return out;
}

static Tangents backprop_filter_tangent(const ForwardContext& op, const Tangents& tangents) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const Shape& shape = op.attrs().get_shape("filter_shape");
  const auto backprop = [&](const Tensor& a, const Tensor& b) {
    return detail::conv2d_backprop_filter(a, shape, b, w.strides_list(), w.padding,
                                          w.dilations_list());
  };
  return {detail::output_tangent(
      op, 0,
      {detail::if_defined(tangents[0],
                          [&](const Tensor& dx) { return backprop(dx, op.inputs[1]); }),
       detail::if_defined(tangents[1],
                          [&](const Tensor& dg) { return backprop(op.inputs[0], dg); })})};
}

// TF's _Conv2DBackpropFilterGrad: x gets the transposed convolution of g with h as the filter,
// the output gradient g gets conv2d(x, h).
static Grads backprop_filter_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  Grads r(2);
  if (op.needs_gradient(0)) {
    r[0] = conv2d_transpose(op.inputs()[1], g[0], op.input_shape(0), w.strides_list(), w.padding,
                            w.dilations_list());
  }
  if (op.needs_gradient(1)) {
    r[1] = conv2d(op.inputs()[0], g[0], w.strides_list(), w.padding, w.dilations_list());
  }
  return r;
}

// ---- conv1d -----------------------------------------------------------------------------

Tensor conv1d(const Tensor& x, const Tensor& filters, int stride, Padding padding, int dilation,
              DataFormat data_format) {
  const char* op = "conv1d";
  const Described operands = [&] { return detail::describe(op, {{"x", x}, {"filters", filters}}); };
  const ImageLayout layout(data_format, 3, operands);
  const Described described = layout.describing(operands);
  check_operands(op, x, "x", 3, layout.name(), filters, "filters", 3, described);
  const Shape xs = layout.channels_last(x.shape());
  const Shape& f = filters.shape();
  check_filter({1, f[0], f[1], f[2]}, xs[2], "x", described);
  const auto strides = detail::spatial_pair({1, stride}, "stride", described);
  const auto dilations = detail::spatial_pair({1, dilation}, "dilation", described);
  detail::window_geometry({xs[0], 1, xs[1], xs[2]}, 1, f[0], f[2], strides, dilations, padding,
                          described);
  const Tensor y = conv2d(expand_dims(layout.to_channels_last(x), 1), expand_dims(filters, 0),
                          {1, stride}, padding, {1, dilation});
  return layout.from_channels_last(squeeze(y, {1}));
}

Tensor conv1d(const Tensor& x, const Tensor& filters, int stride, Padding padding,
              DataFormat data_format) {
  return conv1d(x, filters, stride, padding, 1, data_format);
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(conv)
