// slice (with its gradient, padding into zeros) and tile. Each op reads top to bottom: its
// definition, its forward, its gradient. Everything but the public functions has internal
// linkage (static, constexpr).
#include "kernels/box_copy.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/strided_cursor.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

static std::vector<std::size_t> unsigned_ints(const std::vector<std::int64_t>& v) {
  return std::vector<std::size_t>(v.begin(), v.end());
}

// ---- Slice, SliceGrad (its gradient: g padded into zeros) -------------------------------

static Tensor pad_into_zeros(const Tensor& g, const std::vector<std::size_t>& begin,
                             const Shape& shape);

// Batching rules: the whole batch axis taken (slice), padded (SliceGrad) or kept once (tile).
static std::vector<Tensor> slice_batched(const detail::BatchingContext& op,
                                         const std::vector<Tensor>& in) {
  std::vector<std::int64_t> begin{0};
  for (std::int64_t b : op.attrs().get_ints("begin")) begin.push_back(b);
  const Shape size = op.batched_output_shape(0);
  return {slice(in[0], begin, std::vector<std::int64_t>(size.begin(), size.end()))};
}
static std::vector<Tensor> slice_grad_batched(const detail::BatchingContext& op,
                                              const std::vector<Tensor>& in) {
  std::vector<std::size_t> begin{0};
  for (std::int64_t b : op.attrs().get_ints("begin")) begin.push_back(static_cast<std::size_t>(b));
  return {pad_into_zeros(in[0], begin, op.batched_output_shape(0))};
}
static std::vector<Tensor> tile_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& in) {
  std::vector<std::size_t> multiples{1};
  for (std::int64_t m : op.attrs().get_ints("multiples"))
    multiples.push_back(static_cast<std::size_t>(m));
  return {tile(in[0], multiples)};
}

// Replay rules: the recorded begin (or multiples), the box the trace took (or padded into).
static detail::ReplayOutputs slice_replay(const detail::ReplayContext& op,
                                          const std::vector<Tensor>& in) {
  return {slice(in[0], op.attrs().get_ints("begin"), detail::signed_shape(op.output_shapes[0]))};
}
static detail::ReplayOutputs slice_grad_replay(const detail::ReplayContext& op,
                                               const std::vector<Tensor>& in) {
  return {pad_into_zeros(in[0], unsigned_ints(op.attrs().get_ints("begin")), op.output_shapes[0])};
}
static detail::ReplayOutputs tile_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& in) {
  return {tile(in[0], unsigned_ints(op.attrs().get_ints("multiples")))};
}

static Grads slice_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents slice_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads slice_grad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents slice_grad_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(slice_op) =
    detail::with_replay(detail::differentiable_op("Slice", slice_gradient, KeepSet::none(),
                                                  KeepSet::none(), slice_tangent, slice_batched),
                        slice_replay);
TAPEGRAD_BUILTIN_OP(slice_grad_op) = detail::with_replay(
    detail::differentiable_op("SliceGrad", slice_grad_gradient, KeepSet::none(), KeepSet::none(),
                              slice_grad_tangent, slice_grad_batched),
    slice_grad_replay);

Tensor slice(const Tensor& x, std::vector<std::int64_t> begin, std::vector<std::int64_t> size) {
  detail::require_defined("slice", x);
  const Shape& shape = x.shape();
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("slice", x) + ": begin " +
                          detail::ints_to_string(begin) + " and size " +
                          detail::ints_to_string(size) + " " + why);
  };
  if (begin.size() != shape.size() || size.size() != shape.size()) {
    fail("need one entry per dimension");
  }
  Shape box(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto dim = static_cast<std::int64_t>(shape[d]);
    if (begin[d] < 0 || begin[d] > dim) fail("start outside the tensor");
    const std::int64_t extent = size[d] == -1 ? dim - begin[d] : size[d];
    // extent > dim - begin, not begin + extent > dim: the sum can overflow int64.
    if (extent < 0 || extent > dim - begin[d]) fail("do not fit");
    box[d] = static_cast<std::size_t>(extent);
  }
  // A view: the box's first element and lengths, x's strides.
  detail::ViewGeometry view = detail::view_geometry(x);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (box[d] != 0) view.offset += static_cast<std::size_t>(begin[d] * view.strides[d]);
  }
  view.shape = box;
  Tensor out = detail::make_view(std::move(view));
  detail::record(slice_op, {&x}, out, [&] { return Attrs().set("begin", begin); });
  return out;
}

// g placed at `begin` inside zeros of `shape`: the gradient of slice (TF pads instead).
static Tensor pad_into_zeros(const Tensor& g, const std::vector<std::size_t>& begin,
                             const Shape& shape) {
  Tensor out = detail::dispatch_any(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> padded = xt::zeros<T>(shape);
    const std::vector<std::size_t> origin(shape.size(), 0);
    detail::copy_box(detail::kernel_data<T>(g), g.shape(), origin, padded.data(), shape, begin,
                     g.shape());
    return Tensor(std::move(padded));
  });
  detail::record(slice_grad_op, {&g}, out, [&] {
    return Attrs().set("begin", std::vector<std::int64_t>(begin.begin(), begin.end()));
  });
  return out;
}

// Each linear: the op applied to the tangent.
static Tangents slice_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return slice(dx, op.attrs().get_ints("begin"), detail::signed_shape(op.outputs[0].shape()));
  });
}

static Tangents slice_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dg) {
    return pad_into_zeros(dg, unsigned_ints(op.attrs().get_ints("begin")), op.outputs[0].shape());
  });
}

static Grads slice_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {pad_into_zeros(g[0], unsigned_ints(op.attrs().get_ints("begin")), op.input_shape(0))};
}

// Padding is linear: its gradient takes the same window back out.
static Grads slice_grad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {slice(g[0], op.attrs().get_ints("begin"), detail::signed_shape(op.input_shape(0)))};
}

// ---- Tile -------------------------------------------------------------------------------

static Grads tile_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents tile_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(tile_op) =
    detail::with_replay(detail::differentiable_op("Tile", tile_gradient, KeepSet::none(),
                                                  KeepSet::none(), tile_tangent, tile_batched),
                        tile_replay);

// The tiled shape, checked: InvalidArgument naming tile, x and the multiples when a dimension
// or the whole would exceed what a tensor can hold.
static Shape tiled_shape(const Tensor& x, const std::vector<std::size_t>& multiples) {
  const Shape& shape = x.shape();
  if (multiples.size() != shape.size()) {
    throw InvalidArgument(detail::describe("tile", x) + ": multiples " +
                          detail::ints_to_string(multiples) + " needs one entry per dimension");
  }
  Shape out_shape(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (multiples[d] > detail::kMaxElements ||
        (shape[d] != 0 && multiples[d] > detail::kMaxElements / shape[d])) {
      throw InvalidArgument(detail::describe("tile", x) + ": multiples " +
                            detail::ints_to_string(multiples) + ": dimension " + std::to_string(d) +
                            " would exceed 2^63 - 1 elements");
    }
    out_shape[d] = shape[d] * multiples[d];
  }
  try {
    detail::check_new_shape("tile", out_shape, x.dtype());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe("tile", x) + ", multiples " +
                          detail::ints_to_string(multiples) + "; " + e.what());
  }
  return out_shape;
}

// Rows shorter than this are repeated by a plain loop: a library copy call per repeat costs
// more than the copy itself.
constexpr std::size_t kShortRun = 16;

// Along each axis, output index k * size + j is copy k of element j: the output's rows (every
// axis but the last) in row-major order are the index space [multiple, size] per axis, where
// the copy index moves nothing in x. Each output row is its source row repeated.
template <class T>
static void tile_rows(const T* src, const Shape& shape, const std::vector<std::size_t>& multiples,
                      T* dst, const Shape& out_shape) {
  const std::size_t rank = shape.size();
  const auto strides = detail::row_major_strides(shape);
  const auto out_strides = detail::row_major_strides(out_shape);
  using Axes = xt::svector<std::size_t, 8>;  // no allocation up to rank 5
  Axes copies_and_elements, from_strides, to_strides;
  for (std::size_t d = 0; d + 1 < rank; ++d) {
    copies_and_elements.insert(copies_and_elements.end(), {multiples[d], shape[d]});
    from_strides.insert(from_strides.end(), {0, strides[d]});
    to_strides.insert(to_strides.end(), {shape[d] * out_strides[d], out_strides[d]});
  }
  const std::size_t run = shape[rank - 1];
  const std::size_t copies = multiples[rank - 1];
  detail::StridedCursor(copies_and_elements, copies_and_elements.size(), from_strides, to_strides)
      .for_each([=](std::size_t from, std::size_t to) {
        T* row = dst + to;
        if (run == 1) {  // a column tiled into rows: a fill, not one library copy per element
          std::fill_n(row, copies, src[from]);
        } else if (run < kShortRun) {
          for (std::size_t m = 0; m < copies; ++m, row += run) {
            for (std::size_t i = 0; i < run; ++i) row[i] = src[from + i];
          }
        } else {
          for (std::size_t m = 0; m < copies; ++m)
            row = std::copy(src + from, src + from + run, row);
        }
      });
}

Tensor tile(const Tensor& x, std::vector<std::size_t> multiples) {
  detail::require_defined("tile", x);
  const Shape out_shape = tiled_shape(x, multiples);
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> tiled = detail::allocate_array<T>("tile", out_shape);
    const T* src = detail::kernel_data<T>(x);
    if (out_shape.empty()) {
      tiled.data()[0] = src[0];
    } else if (tiled.size() != 0) {
      tile_rows(src, x.shape(), multiples, tiled.data(), out_shape);
    }
    return Tensor(std::move(tiled));
  });
  detail::record(tile_op, {&x}, out, [&] {
    return Attrs().set("multiples", std::vector<std::int64_t>(multiples.begin(), multiples.end()));
  });
  return out;
}

static Tangents tile_tangent(const ForwardContext& op, const Tangents& tangents) {
  const auto& multiples = op.attrs().get_ints("multiples");
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return tile(dx, std::vector<std::size_t>(multiples.begin(), multiples.end()));
  });
}

// Split each axis into [multiple, size] and sum over the copies.
static Grads tile_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Shape& shape = op.input_shape(0);
  const auto& multiples = op.attrs().get_ints("multiples");
  if (shape.empty()) return {g[0]};
  std::vector<std::int64_t> interleaved;
  std::vector<int> copy_axes;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    copy_axes.push_back(static_cast<int>(interleaved.size()));
    interleaved.push_back(multiples[d]);
    interleaved.push_back(static_cast<std::int64_t>(shape[d]));
  }
  return {reduce_sum(reshape(g[0], interleaved), copy_axes, /*keepdims=*/false)};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_slice)
