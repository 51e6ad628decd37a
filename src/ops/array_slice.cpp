// slice (with its gradient, padding into zeros) and tile: forward kernels and gradients side
// by side.
#include "kernels/box_copy.hpp"
#include "kernels/dispatch.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

using detail::KeepSet;
using detail::OpDefinition;
using Grads = std::vector<GradientValue>;

namespace {

std::vector<std::size_t> unsigned_ints(const std::vector<std::int64_t>& v) {
  return std::vector<std::size_t>(v.begin(), v.end());
}

Tensor pad_into_zeros(const Tensor& g, const std::vector<std::size_t>& begin, const Shape& shape);

Grads slice_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {pad_into_zeros(g[0], unsigned_ints(ctx.attrs().get_ints("begin")), ctx.input_shape(0))};
}

// Padding is linear: its gradient takes the same window back out.
Grads slice_grad_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  return {slice(g[0], ctx.attrs().get_ints("begin"), detail::signed_shape(ctx.input_shape(0)))};
}

Grads tile_grad(const OpContext& ctx, const std::vector<Tensor>& g) {
  const Shape& shape = ctx.input_shape(0);
  const auto& multiples = ctx.attrs().get_ints("multiples");
  if (shape.empty()) return {g[0]};
  // Output index k*d + j along a dimension is copy k of element j: split each dimension in
  // [multiple, size] and sum over the copies.
  std::vector<std::int64_t> interleaved;
  std::vector<int> copy_axes;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    copy_axes.push_back(static_cast<int>(interleaved.size()));
    interleaved.push_back(multiples[d]);
    interleaved.push_back(static_cast<std::int64_t>(shape[d]));
  }
  return {reduce_sum(reshape(g[0], interleaved), copy_axes, /*keepdims=*/false)};
}

constexpr OpDefinition slice_op =
    detail::differentiable_op("Slice", slice_grad, KeepSet::none(), KeepSet::none());
constexpr OpDefinition slice_grad_op =
    detail::differentiable_op("SliceGrad", slice_grad_grad, KeepSet::none(), KeepSet::none());
constexpr OpDefinition tile_op =
    detail::differentiable_op("Tile", tile_grad, KeepSet::none(), KeepSet::none());

// g placed at `begin` inside zeros of `shape`: the gradient of slice (TF pads instead).
Tensor pad_into_zeros(const Tensor& g, const std::vector<std::size_t>& begin, const Shape& shape) {
  Tensor out = detail::dispatch_any(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> padded = xt::zeros<T>(shape);
    const std::vector<std::size_t> origin(shape.size(), 0);
    detail::copy_box(g.array<T>().data(), g.shape(), origin, padded.data(), shape, begin, g.shape());
    return Tensor(std::move(padded));
  });
  detail::record(slice_grad_op, {&g}, out, [&] {
    return Attrs().set("begin", std::vector<std::int64_t>(begin.begin(), begin.end()));
  });
  return out;
}

}  // namespace

Tensor slice(const Tensor& x, std::vector<std::int64_t> begin, std::vector<std::int64_t> size) {
  detail::require_defined("slice", x);
  const Shape& shape = x.shape();
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("slice", x) + ": begin " + detail::ints_to_string(begin) +
                          " and size " + detail::ints_to_string(size) + " " + why);
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
  const auto start = unsigned_ints(begin);
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> part = xt::empty<T>(box);
    const std::vector<std::size_t> origin(shape.size(), 0);
    if (part.size() != 0) {
      detail::copy_box(x.array<T>().data(), shape, start, part.data(), box, origin, box);
    }
    return Tensor(std::move(part));
  });
  detail::record(slice_op, {&x}, out, [&] { return Attrs().set("begin", begin); });
  return out;
}

Tensor tile(const Tensor& x, std::vector<std::size_t> multiples) {
  detail::require_defined("tile", x);
  const Shape& shape = x.shape();
  const std::size_t rank = shape.size();
  if (multiples.size() != rank) {
    throw InvalidArgument(detail::describe("tile", x) + ": multiples " +
                          detail::ints_to_string(multiples) + " needs one entry per dimension");
  }
  Shape out_shape(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    if (multiples[d] > detail::kMaxElements ||
        (shape[d] != 0 && multiples[d] > detail::kMaxElements / shape[d])) {
      throw InvalidArgument(detail::describe("tile", x) + ": multiples " +
                            detail::ints_to_string(multiples) + ": dimension " +
                            std::to_string(d) + " would exceed 2^63 - 1 elements");
    }
    out_shape[d] = shape[d] * multiples[d];
  }
  try {
    detail::check_new_shape("tile", out_shape, x.dtype());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe("tile", x) + ", multiples " +
                          detail::ints_to_string(multiples) + "; " + e.what());
  }
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> tiled = detail::allocate_array<T>("tile", out_shape);
    const T* src = x.array<T>().data();
    T* dst = tiled.data();
    if (rank == 0) {
      dst[0] = src[0];
      return Tensor(std::move(tiled));
    }
    if (tiled.size() == 0) return Tensor(std::move(tiled));
    // Each output row (all dimensions but the last) is its source row repeated.
    const auto src_strides = detail::row_major_strides(shape);
    const std::size_t run = shape[rank - 1];
    const std::size_t rows = tiled.size() / out_shape[rank - 1];
    std::vector<std::size_t> index(rank, 0);
    for (std::size_t row = 0; row < rows; ++row) {
      std::size_t src_offset = 0;
      for (std::size_t d = 0; d + 1 < rank; ++d) src_offset += (index[d] % shape[d]) * src_strides[d];
      for (std::size_t m = 0; m < multiples[rank - 1]; ++m) {
        dst = std::copy(src + src_offset, src + src_offset + run, dst);
      }
      for (std::size_t d = rank - 1; d-- > 0;) {
        if (++index[d] < out_shape[d]) break;
        index[d] = 0;
      }
    }
    return Tensor(std::move(tiled));
  });
  detail::record(tile_op, {&x}, out, [&] {
    return Attrs().set("multiples", std::vector<std::int64_t>(multiples.begin(), multiples.end()));
  });
  return out;
}

namespace detail {

void register_array_slice_ops(OpRegistrar& registry) { registry.add({&slice_op, &slice_grad_op, &tile_op}); }

}  // namespace detail

}  // namespace tapegrad
