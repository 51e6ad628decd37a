// JacobianPack and JacobianUnpack: rows of one shape stacked (end to end, or interleaved block
// by block), and split back. GradientTape::jacobian and batch_jacobian stack their gradient
// rows with them, so that a Jacobian computed under an outer tape is itself differentiable.
// Internal op names: TF's Pack/Unpack belong to the array family.
#include "kernels/box_copy.hpp"
#include "kernels/dispatch.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"

namespace tapegrad {

// ---- JacobianPack, JacobianUnpack (each the other's gradient) --------------------------

static std::vector<Tensor> unpack_rows(const Tensor& packed, const Shape& row_shape,
                                       std::size_t count, std::size_t outer);

static std::size_t outer_of(const Attrs& attrs) {
  return static_cast<std::size_t>(attrs.get_int("outer"));
}

// Batching rules: a batch of B is B times as many outer blocks ([B, outer, inner] rows, the
// output [B, outer, R, inner]), so each rule is its own op again.
static std::vector<Tensor> pack_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& in) {
  std::vector<Tensor> rows;
  rows.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) rows.push_back(detail::with_batch_axis(op, in, i));
  return {
      detail::pack_rows(rows, op.batched_output_shape(0), op.batch_size * outer_of(op.attrs()))};
}
static std::vector<Tensor> unpack_batched(const detail::BatchingContext& op,
                                          const std::vector<Tensor>& in) {
  return unpack_rows(detail::with_batch_axis(op, in, 0), op.batched_output_shape(0),
                     op.output_shapes.size(), op.batch_size * outer_of(op.attrs()));
}

// Replays: the row and packed shapes are not recorded, but are the traced outputs'.
static detail::ReplayOutputs pack_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& in) {
  return {detail::pack_rows(in, op.output_shapes.at(0), outer_of(op.attrs()))};
}
static detail::ReplayOutputs unpack_replay(const detail::ReplayContext& op,
                                           const std::vector<Tensor>& in) {
  return unpack_rows(in[0], op.output_shapes.at(0), op.output_shapes.size(), outer_of(op.attrs()));
}

static Grads pack_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents pack_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads unpack_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents unpack_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(pack_op) =
    detail::with_replay(detail::differentiable_op("JacobianPack", pack_gradient, KeepSet::none(),
                                                  KeepSet::none(), pack_tangent, pack_batched),
                        pack_replay);
TAPEGRAD_BUILTIN_OP(unpack_op) = detail::with_replay(
    detail::differentiable_op("JacobianUnpack", unpack_gradient, KeepSet::none(), KeepSet::none(),
                              unpack_tangent, unpack_batched),
    unpack_replay);

// The width of each row's [outer, inner] blocks; InvalidArgument when outer does not divide it.
static std::size_t inner_width(const char* op, std::size_t row_size, std::size_t outer) {
  if (row_size == 0) return 0;  // nothing to split (a batch of none has no blocks)
  if (outer == 0 || row_size % outer != 0) {
    throw InvalidArgument(std::string(op) + ": rows of " + std::to_string(row_size) +
                          " elements do not split into " + std::to_string(outer) + " blocks");
  }
  return row_size / outer;
}

Tensor detail::pack_rows(const std::vector<Tensor>& rows, const Shape& shape, std::size_t outer) {
  const DType dtype = rows.front().dtype();
  const std::size_t width = inner_width("JacobianPack", rows.front().size(), outer);
  Tensor out = dispatch_floating("jacobian", dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = xt::empty<T>(shape);
    std::vector<const T*> parts;
    parts.reserve(rows.size());
    for (const Tensor& row : rows) parts.push_back(detail::kernel_data<T>(row));
    if (a.size() != 0)
      join_rows(parts, std::vector<std::size_t>(rows.size(), width), outer, a.data());
    return Tensor(std::move(a));
  });
  record(pack_op, rows, out,
         [&] { return Attrs().set("outer", static_cast<std::int64_t>(outer)); });
  return out;
}

// The inverse of pack_rows: `count` rows of `row_shape`.
static std::vector<Tensor> unpack_rows(const Tensor& packed, const Shape& row_shape,
                                       std::size_t count, std::size_t outer) {
  const std::size_t width = inner_width("JacobianUnpack", num_elements(row_shape), outer);
  std::vector<Tensor> rows = detail::dispatch_floating("jacobian", packed.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<xt::xarray<T>> arrays;
    std::vector<T*> parts;
    arrays.reserve(count);
    for (std::size_t r = 0; r < count; ++r) {
      arrays.push_back(xt::empty<T>(row_shape));
      parts.push_back(arrays.back().data());
    }
    if (width != 0) {
      detail::split_rows(detail::kernel_data<T>(packed), outer, parts,
                         std::vector<std::size_t>(count, width));
    }
    std::vector<Tensor> pieces;
    pieces.reserve(count);
    for (xt::xarray<T>& a : arrays) pieces.emplace_back(std::move(a));
    return pieces;
  });
  detail::record(unpack_op, {&packed}, rows,
                 [&] { return Attrs().set("outer", static_cast<std::int64_t>(outer)); });
  return rows;
}

// Each linear: the op applied to the tangents (zeros for a row without one).
static Tangents pack_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {detail::pack_rows(detail::tangents_or_zeros(op, tangents), op.outputs[0].shape(),
                            outer_of(op.attrs()))};
}

static Tangents unpack_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[0].defined()) return Tangents(op.outputs.size());
  return unpack_rows(tangents[0], op.outputs[0].shape(), op.outputs.size(), outer_of(op.attrs()));
}

static Grads pack_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  std::vector<Tensor> rows =
      unpack_rows(g[0], op.input_shape(0), op.num_inputs(), outer_of(op.attrs()));
  return Grads(rows.begin(), rows.end());
}

static Grads unpack_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::pack_rows(g, op.input_shape(0), outer_of(op.attrs()))};
}

// ---- JacobianDiagonal, JacobianDiagonalPart (each the other's gradient) ---------------

// Batching rules: a batch of B inputs is B times as many blocks, the block size unchanged.
static std::vector<Tensor> diagonal_blocks_batched(const detail::BatchingContext& op,
                                                   const std::vector<Tensor>& in) {
  const auto n = static_cast<std::size_t>(op.attrs().get_int("n"));
  return {
      detail::diagonal_blocks(detail::with_batch_axis(op, in, 0), n, op.batched_output_shape(0))};
}
static std::vector<Tensor> diagonal_part_batched(const detail::BatchingContext& op,
                                                 const std::vector<Tensor>& in) {
  const auto n = static_cast<std::size_t>(op.attrs().get_int("n"));
  return {detail::diagonal_blocks_part(detail::with_batch_axis(op, in, 0), n,
                                       op.batched_output_shape(0))};
}

static Grads diagonal_blocks_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents diagonal_blocks_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads diagonal_part_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents diagonal_part_tangent(const ForwardContext& op, const Tangents& tangents);
// Replays: the output shape is not recorded, but is the traced output's.
static detail::ReplayOutputs diagonal_blocks_replay(const detail::ReplayContext& op,
                                                    const std::vector<Tensor>& in) {
  const auto n = static_cast<std::size_t>(op.attrs().get_int("n"));
  return {detail::diagonal_blocks(in[0], n, op.output_shapes.at(0))};
}
static detail::ReplayOutputs diagonal_part_replay(const detail::ReplayContext& op,
                                                  const std::vector<Tensor>& in) {
  const auto n = static_cast<std::size_t>(op.attrs().get_int("n"));
  return {detail::diagonal_blocks_part(in[0], n, op.output_shapes.at(0))};
}
TAPEGRAD_BUILTIN_OP(diagonal_blocks_op) = detail::with_replay(
    detail::differentiable_op("JacobianDiagonal", diagonal_blocks_gradient, KeepSet::none(),
                              KeepSet::none(), diagonal_blocks_tangent, diagonal_blocks_batched),
    diagonal_blocks_replay);
TAPEGRAD_BUILTIN_OP(diagonal_part_op) = detail::with_replay(
    detail::differentiable_op("JacobianDiagonalPart", diagonal_part_gradient, KeepSet::none(),
                              KeepSet::none(), diagonal_part_tangent, diagonal_part_batched),
    diagonal_part_replay);

// The block count k, checking that `small` holds k * n elements and `large` k * n * n.
static std::size_t block_count(const char* op, std::size_t n, const Shape& small,
                               const Shape& large) {
  const std::size_t m = num_elements(small);
  const std::size_t k = n == 0 ? 0 : m / n;
  if (n == 0 || m != k * n || num_elements(large) != m * n) {
    throw InvalidArgument(std::string(op) + ": blocks of size " + std::to_string(n) +
                          " do not fit a diagonal of shape " + shape_to_string(small) +
                          " into shape " + shape_to_string(large));
  }
  return k;
}

Tensor detail::diagonal_blocks(const Tensor& d, std::size_t n, const Shape& shape) {
  const std::size_t k = block_count("JacobianDiagonal", n, d.shape(), shape);
  Tensor out = dispatch_floating("jacobian", d.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = xt::empty<T>(shape);
    T* dst = a.data();
    if (a.size() != 0) std::memset(dst, 0, a.size() * sizeof(T));
    const T* src = detail::kernel_data<T>(d);
    for (std::size_t r = 0; r < k; ++r, dst += n * n, src += n) {
      for (std::size_t b = 0; b < n; ++b) dst[b * n + b] = src[b];
    }
    return Tensor(std::move(a));
  });
  record(diagonal_blocks_op, {&d}, out,
         [&] { return Attrs().set("n", static_cast<std::int64_t>(n)); });
  return out;
}

Tensor detail::diagonal_blocks_part(const Tensor& dense, std::size_t n, const Shape& shape) {
  const std::size_t k = block_count("JacobianDiagonalPart", n, shape, dense.shape());
  Tensor out = dispatch_floating("jacobian", dense.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = xt::empty<T>(shape);
    T* dst = a.data();
    const T* src = detail::kernel_data<T>(dense);
    for (std::size_t r = 0; r < k; ++r, dst += n, src += n * n) {
      for (std::size_t b = 0; b < n; ++b) dst[b] = src[b * n + b];
    }
    return Tensor(std::move(a));
  });
  record(diagonal_part_op, {&dense}, out,
         [&] { return Attrs().set("n", static_cast<std::int64_t>(n)); });
  return out;
}

static std::size_t block_size(const Attrs& attrs) {
  return static_cast<std::size_t>(attrs.get_int("n"));
}

// Both linear: the op applied to the tangent.
static Tangents diagonal_blocks_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[0].defined()) return Tangents(1);
  return {detail::diagonal_blocks(tangents[0], block_size(op.attrs()), op.outputs[0].shape())};
}

static Tangents diagonal_part_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[0].defined()) return Tangents(1);
  return {detail::diagonal_blocks_part(tangents[0], block_size(op.attrs()), op.outputs[0].shape())};
}

static Grads diagonal_blocks_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::diagonal_blocks_part(g[0], block_size(op.attrs()), op.input_shape(0))};
}

static Grads diagonal_part_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::diagonal_blocks(g[0], block_size(op.attrs()), op.input_shape(0))};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_rows)
