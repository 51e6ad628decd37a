// 2-D pooling on NHWC inputs (kernels/pooling.cpp): MaxPool, AvgPool and AvgPoolGrad.
//
// MaxPool's gradient is MaxPoolGrad(x, g), g summed into the windows' maxima (found again
// from the kept input inside the kernel); MaxPoolGrad's gradient is MaxPoolGradGrad(x, h), h
// read at the same maxima, and its gradient MaxPoolGrad again, so every order routes through
// the same positions (TF's MaxPoolGrad / MaxPoolGradGrad). AvgPool and AvgPoolGrad are linear
// and each other's gradient. The recorded ops are channels last; a channels-first call records
// Transposes around them (ImageLayout, conv_support.hpp).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/pooling.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
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

// The window geometry of a pooling op on an NHWC input of `input_shape`: checks the ksize and
// strides lists (given in `data_format`'s axis order) and that a Valid window fits.
ConvGeometry pool_geometry(const Shape& input_shape, WindowAttrs& w, const std::vector<int>& ksize,
                           const std::vector<int>& strides, Padding padding,
                           const Described& described, DataFormat data_format = DataFormat::NHWC) {
  w.ksize = detail::spatial_pair(ksize, "ksize", described, data_format);
  w.strides = detail::spatial_pair(strides, "strides", described, data_format);
  w.padding = padding;
  return detail::window_geometry(input_shape, w.ksize[0], w.ksize[1], input_shape[3], w.strides,
                                 {1, 1}, padding, described);
}

// A defined float tensor of rank 4 (`layout` names its axes in the error).
void check_input(const char* op, const Tensor& x, const Described& described,
                 const std::string& layout = "NHWC") {
  detail::require_defined(op, x);
  if (!is_floating(x.dtype())) {
    throw InvalidArgument(described() + ": only float32 and float64 are supported");
  }
  if (x.rank() != 4) {
    throw InvalidArgument(described() + ": x must have rank 4 (" + layout + ")");
  }
}

// The batching and replay rules of max_pool2d and avg_pool2d, `pool` being the op's forward.
// Pooling has one input: the batch is always merged into its examples axis (one call).
using PoolForward = Tensor (*)(const Tensor&, std::vector<int>, std::vector<int>, Padding,
                               DataFormat);
template <PoolForward pool>
std::vector<Tensor> pool_batched(const detail::BatchingContext& op,
                                 const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return detail::batch_into_first_axis(op, inputs, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        pool(in[0], w.ksize_list(), w.strides_list(), w.padding, DataFormat::NHWC)};
  });
}
template <PoolForward pool>
detail::ReplayOutputs pool_replay(const detail::ReplayContext& op,
                                  const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {pool(inputs[0], w.ksize_list(), w.strides_list(), w.padding, DataFormat::NHWC)};
}

Shape pooled_shape(const ConvGeometry& g) { return {g.batch, g.out_h, g.out_w, g.in_c}; }

// What max_pool2d and avg_pool2d share: the checks, the layout, the geometry and the record;
// `pool(g, input, y)` fills y from the NHWC input.
template <class Pool>
Tensor pool2d(const char* op, const detail::OpDefinition& definition, const Tensor& x,
              const std::vector<int>& ksize, const std::vector<int>& strides, Padding padding,
              DataFormat data_format, Pool pool) {
  const Described operands = [&] { return detail::describe(op, x); };
  const ImageLayout layout(data_format, 4, operands);
  const Described described = layout.describing(operands);
  check_input(op, x, described, layout.name());
  WindowAttrs w;
  const ConvGeometry g = pool_geometry(layout.channels_last(x.shape()), w, ksize, strides, padding,
                                       described, data_format);
  const Tensor input = layout.to_channels_last(x);
  Tensor out = detail::compute_floating(op, x.dtype(), pooled_shape(g),
                                        [&](auto* y) { pool(g, detail::data_of(input, y), y); });
  detail::record(definition, {&input}, out, [&] { return w.to_attrs(); });
  return layout.from_channels_last(out);
}

}  // namespace

// ---- MaxPool ----------------------------------------------------------------------------

static Grads max_pool_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents max_pool_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(max_pool_op) = detail::with_replay(
    detail::differentiable_op("MaxPool", max_pool_gradient, KeepSet::all(), KeepSet::none(),
                              max_pool_tangent, pool_batched<&max_pool2d>),
    pool_replay<&max_pool2d>);

Tensor max_pool2d(const Tensor& x, std::vector<int> ksize, std::vector<int> strides,
                  Padding padding, DataFormat data_format) {
  return pool2d("max_pool2d", max_pool_op, x, ksize, strides, padding, data_format,
                [](const ConvGeometry& g, const auto* input, auto* y) {
                  detail::max_pool_forward(g, input, y, nullptr);
                });
}

// The maxima's positions are found inside the kernels below from x, never handed to a rule
// as a tensor: a position read from x outside an op would be a constant of a vectorized_map
// trace, slice 0's positions reused for every slice.
static Tangents max_pool_tangent(const ForwardContext& op, const Tangents& tangents) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return detail::max_pool_grad_grad(op.inputs[0], dx, w.ksize_list(), w.strides_list(),
                                      w.padding);
  });
}

static Grads max_pool_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {detail::max_pool_grad(op.inputs()[0], g[0], w.ksize_list(), w.strides_list(), w.padding)};
}

// ---- MaxPoolGrad and MaxPoolGradGrad ----------------------------------------------------
// MaxPoolGrad(x, g) sums g into the maxima's positions in x; MaxPoolGradGrad(x, h) reads h at
// them. Both are linear in their second input and each other's transpose there; the positions
// are piecewise constant in x, so x gets no gradient (TF's MaxPoolGrad / MaxPoolGradGrad).

namespace {

// The flat index into x of each pooled element's window maximum (the first in window order
// on a tie; a NaN when the window has one: kernels/pooling.cpp).
template <class T>
xt::xarray<std::int64_t> window_maxima(const char* op, const ConvGeometry& g, const T* x) {
  const std::size_t n = g.rows() * g.in_c;
  xt::xarray<std::int64_t> positions = detail::allocate_array<std::int64_t>(op, {n});
  xt::xarray<T> scratch = detail::allocate_array<T>(op, {n});
  detail::max_pool_forward(g, x, scratch.data(), positions.data());
  return positions;
}

// x [N, H, W, C] and the second input (pooled or x-shaped) checked; the window geometry.
ConvGeometry pair_geometry(const char* op, const Tensor& x, const Tensor& second,
                           const char* second_name, bool second_pooled, WindowAttrs& w,
                           const std::vector<int>& ksize, const std::vector<int>& strides,
                           Padding padding) {
  const Described described = [&] {
    return detail::describe(op, {{"x", x}, {second_name, second}});
  };
  check_input(op, x, described);
  detail::require_defined(op, second);
  const ConvGeometry g = pool_geometry(x.shape(), w, ksize, strides, padding, described);
  const Shape expected = second_pooled ? pooled_shape(g) : x.shape();
  if (second.dtype() != x.dtype() || second.shape() != expected) {
    throw InvalidArgument(described() + ": " + second_name + " must have x's dtype and shape " +
                          shape_to_string(expected));
  }
  return g;
}

}  // namespace

static Grads max_pool_grad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents max_pool_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads max_pool_grad_grad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents max_pool_grad_grad_tangent(const ForwardContext& op, const Tangents& tangents);

// Both inputs have the examples axis: the batch is merged into it in both (an unbatched one
// broadcast first), one call.
template <Tensor (*Kernel)(const Tensor&, const Tensor&, std::vector<int>, std::vector<int>,
                           Padding)>
static std::vector<Tensor> pair_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const Tensor x = detail::merge_first_two_axes(detail::with_batch_axis(op, inputs, 0));
  const Tensor second = detail::merge_first_two_axes(detail::with_batch_axis(op, inputs, 1));
  return {detail::split_first_axis(Kernel(x, second, w.ksize_list(), w.strides_list(), w.padding),
                                   op.batch_size, op.output_shapes.at(0).at(0))};
}

template <Tensor (*Kernel)(const Tensor&, const Tensor&, std::vector<int>, std::vector<int>,
                           Padding)>
static detail::ReplayOutputs pair_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {Kernel(inputs[0], inputs[1], w.ksize_list(), w.strides_list(), w.padding)};
}

TAPEGRAD_BUILTIN_OP(max_pool_grad_op) = detail::with_replay(
    detail::differentiable_op("MaxPoolGrad", max_pool_grad_gradient, KeepSet::only({0}),
                              KeepSet::none(), max_pool_grad_tangent,
                              pair_batched<&detail::max_pool_grad>),
    pair_replay<&detail::max_pool_grad>);
TAPEGRAD_BUILTIN_OP(max_pool_grad_grad_op) = detail::with_replay(
    detail::differentiable_op("MaxPoolGradGrad", max_pool_grad_grad_gradient, KeepSet::only({0}),
                              KeepSet::none(), max_pool_grad_grad_tangent,
                              pair_batched<&detail::max_pool_grad_grad>),
    pair_replay<&detail::max_pool_grad_grad>);

Tensor detail::max_pool_grad(const Tensor& x, const Tensor& g, std::vector<int> ksize,
                             std::vector<int> strides, Padding padding) {
  const char* op = "max_pool_grad";
  WindowAttrs w;
  const ConvGeometry geometry = pair_geometry(op, x, g, "g", true, w, ksize, strides, padding);
  Tensor out = compute_floating(op, x.dtype(), x.shape(), [&](auto* dx) {
    using T = std::remove_pointer_t<decltype(dx)>;
    const xt::xarray<std::int64_t> positions = window_maxima(op, geometry, data_of(x, dx));
    const T* grad = data_of(g, dx);
    std::fill_n(dx, x.size(), T(0));
    for (std::size_t k = 0; k < positions.size(); ++k) dx[positions.data()[k]] += grad[k];
  });
  record(max_pool_grad_op, {&x, &g}, out, [&] { return w.to_attrs(); });
  return out;
}

Tensor detail::max_pool_grad_grad(const Tensor& x, const Tensor& h, std::vector<int> ksize,
                                  std::vector<int> strides, Padding padding) {
  const char* op = "max_pool_grad_grad";
  WindowAttrs w;
  const ConvGeometry geometry = pair_geometry(op, x, h, "h", false, w, ksize, strides, padding);
  Tensor out = compute_floating(op, x.dtype(), pooled_shape(geometry), [&](auto* y) {
    const xt::xarray<std::int64_t> positions = window_maxima(op, geometry, data_of(x, y));
    const auto* at = data_of(h, y);
    for (std::size_t k = 0; k < positions.size(); ++k) y[k] = at[positions.data()[k]];
  });
  record(max_pool_grad_grad_op, {&x, &h}, out, [&] { return w.to_attrs(); });
  return out;
}

// The tangent of g passes through; x's does not (the positions are piecewise constant).
static Tangents max_pool_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[1].defined()) return {Tensor()};
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {detail::max_pool_grad(op.inputs[0], tangents[1], w.ksize_list(), w.strides_list(),
                                w.padding)};
}

static Grads max_pool_grad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {GradientValue(), detail::max_pool_grad_grad(op.inputs()[0], g[0], w.ksize_list(),
                                                      w.strides_list(), w.padding)};
}

static Tangents max_pool_grad_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[1].defined()) return {Tensor()};
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {detail::max_pool_grad_grad(op.inputs[0], tangents[1], w.ksize_list(), w.strides_list(),
                                     w.padding)};
}

static Grads max_pool_grad_grad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {GradientValue(),
          detail::max_pool_grad(op.inputs()[0], g[0], w.ksize_list(), w.strides_list(), w.padding)};
}

// ---- AvgPool ----------------------------------------------------------------------------

static Grads avg_pool_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents avg_pool_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(avg_pool_op) = detail::with_replay(
    detail::differentiable_op("AvgPool", avg_pool_gradient, KeepSet::none(), KeepSet::none(),
                              avg_pool_tangent, pool_batched<&avg_pool2d>),
    pool_replay<&avg_pool2d>);

Tensor avg_pool2d(const Tensor& x, std::vector<int> ksize, std::vector<int> strides,
                  Padding padding, DataFormat data_format) {
  return pool2d("avg_pool2d", avg_pool_op, x, ksize, strides, padding, data_format,
                [](const ConvGeometry& g, const auto* input, auto* y) {
                  detail::avg_pool_forward(g, input, y);
                });
}

static Tangents avg_pool_tangent(const ForwardContext& op, const Tangents& tangents) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return avg_pool2d(dx, w.ksize_list(), w.strides_list(), w.padding);
  });
}

static Grads avg_pool_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {
      detail::avg_pool_grad(g[0], op.input_shape(0), w.ksize_list(), w.strides_list(), w.padding)};
}

// ---- AvgPoolGrad ------------------------------------------------------------------------

static Grads avg_pool_grad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents avg_pool_grad_tangent(const ForwardContext& op, const Tangents& tangents);
// g's batch merged into its examples axis, and into the recorded input shape's.
static std::vector<Tensor> avg_pool_grad_batched(const detail::BatchingContext& op,
                                                 const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  Shape shape = op.attrs().get_shape("input_shape");
  shape[0] *= op.batch_size;
  return detail::merged_into_first_axis(op, inputs, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        detail::avg_pool_grad(in[0], shape, w.ksize_list(), w.strides_list(), w.padding)};
  });
}
static detail::ReplayOutputs avg_pool_grad_replay(const detail::ReplayContext& op,
                                                  const std::vector<Tensor>& inputs) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {detail::avg_pool_grad(inputs[0], op.attrs().get_shape("input_shape"), w.ksize_list(),
                                w.strides_list(), w.padding)};
}
TAPEGRAD_BUILTIN_OP(avg_pool_grad_op) = detail::with_replay(
    detail::differentiable_op("AvgPoolGrad", avg_pool_grad_gradient, KeepSet::none(),
                              KeepSet::none(), avg_pool_grad_tangent, avg_pool_grad_batched),
    avg_pool_grad_replay);

Tensor detail::avg_pool_grad(const Tensor& g, const Shape& input_shape, std::vector<int> ksize,
                             std::vector<int> strides, Padding padding) {
  const char* op = "avg_pool_grad";
  const Described described = [&] {
    return describe(op, {{"g", g}}) + ", input_shape " + shape_to_string(input_shape);
  };
  check_input(op, g, described);
  if (input_shape.size() != 4) {
    throw InvalidArgument(described() + ": input_shape must have 4 dimensions (NHWC)");
  }
  WindowAttrs w;
  const ConvGeometry geometry = pool_geometry(input_shape, w, ksize, strides, padding, described);
  if (pooled_shape(geometry) != g.shape()) {
    throw InvalidArgument(described() + ": g must have the pooled shape " +
                          shape_to_string(pooled_shape(geometry)));
  }
  Tensor out = detail::compute_floating(op, g.dtype(), input_shape, [&](auto* dx) {
    avg_pool_backward(geometry, detail::data_of(g, dx), dx);
  });
  record(avg_pool_grad_op, {&g}, out, [&] { return w.to_attrs().set("input_shape", input_shape); });
  return out;
}

static Tangents avg_pool_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  const Shape& shape = op.attrs().get_shape("input_shape");
  return detail::unary_tangent(op, tangents, [&](const Tensor& dg) {
    return detail::avg_pool_grad(dg, shape, w.ksize_list(), w.strides_list(), w.padding);
  });
}

static Grads avg_pool_grad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const WindowAttrs w = WindowAttrs::from(op.attrs());
  return {avg_pool2d(g[0], w.ksize_list(), w.strides_list(), w.padding)};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(pooling)
