// gather and unsorted_segment_sum (IndexedSlices itself lives in src/runtime/indexed_slices.cpp;
// gather's gradient for axis 0 is row-sparse). Each op reads top to bottom: its definition,
// its forward, its gradient. Everything but the public functions has internal linkage.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "kernels/segment_sum.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/indexed_slices.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

static std::size_t product(Shape::const_iterator first, Shape::const_iterator last) {
  std::size_t n = 1;
  for (; first != last; ++first) n *= *first;
  return n;
}

static void require_index_dtype(const char* op, const char* name, const Tensor& t) {
  if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64) {
    throw InvalidArgument(detail::describe(op, {{name, t}}) + ": " + name +
                          " must be int32 or int64");
  }
}

// ---- GatherV2 ---------------------------------------------------------------------------

// [B, 1, ..., 1] (rank `rank`) of b * step for row b, in `dtype` (an index dtype): the offsets
// that make each row's indices point into its own block of a flattened batch.
static Tensor row_offsets(std::size_t batch, std::size_t step, std::size_t rank, DType dtype) {
  std::vector<double> values(batch);
  for (std::size_t b = 0; b < batch; ++b) values[b] = static_cast<double>(b * step);
  Shape shape(rank, 1);
  shape[0] = batch;
  return from_values(values, shape, dtype);
}

// Batching rules. Batched params: the axis shifted. Batched indices: the batch axis comes out
// at the gathered axis and moves to the front. Both: the batch axis merged into the gathered
// one, each row's indices offset into its own block.
static std::vector<Tensor> gather_batched(const detail::BatchingContext& op,
                                          const std::vector<Tensor>& in) {
  const auto axis = static_cast<std::size_t>(op.attrs().get_int("axis"));
  const Tensor& params = in[0];
  const Tensor& indices = in[1];
  if (!op.is_batched(1)) return {gather(params, indices, static_cast<int>(axis) + 1)};
  if (!op.is_batched(0)) {
    return {detail::move_axis_to_front(gather(params, indices, static_cast<int>(axis)), axis)};
  }
  const std::size_t length = params.shape()[axis + 1];
  Shape merged = params.shape();
  merged.erase(merged.begin());
  merged[axis] *= op.batch_size;
  const Tensor flat = reshape(detail::move_front_axis_to(params, axis),
                              std::vector<std::int64_t>(merged.begin(), merged.end()));
  const Tensor offsets = row_offsets(op.batch_size, length, indices.rank(), indices.dtype());
  return {detail::move_axis_to_front(gather(flat, add(indices, offsets), static_cast<int>(axis)),
                                     axis)};
}

// Batched data only: the batch axis moves behind the segmented one. Batched ids: each row's
// segments get their own block of B * num_segments.
static std::vector<Tensor> segment_sum_batched(const detail::BatchingContext& op,
                                               const std::vector<Tensor>& in) {
  const std::size_t segments = op.output_shapes[0][0];
  if (!op.is_batched(1)) {
    const Tensor rows_first = detail::move_axis_to_front(in[0], 1);
    return {detail::move_axis_to_front(unsorted_segment_sum(rows_first, in[1], segments), 1)};
  }
  const Tensor data = detail::with_batch_axis(op, in, 0);
  Shape flat = data.shape();
  flat[1] *= flat[0];
  flat.erase(flat.begin());
  const Tensor ids = add(in[1], row_offsets(op.batch_size, segments, 2, in[1].dtype()));
  const Tensor sums =
      unsorted_segment_sum(reshape(data, std::vector<std::int64_t>(flat.begin(), flat.end())),
                           reshape(ids, {-1}), op.batch_size * segments);
  const Shape out = op.batched_output_shape(0);
  return {reshape(sums, std::vector<std::int64_t>(out.begin(), out.end()))};
}

// Replay rules: the recorded axis; the traced number of segments.
static detail::ReplayOutputs gather_replay(const detail::ReplayContext& op,
                                           const std::vector<Tensor>& in) {
  return {gather(in[0], in[1], detail::recorded_axis(op))};
}
static detail::ReplayOutputs segment_sum_replay(const detail::ReplayContext& op,
                                                const std::vector<Tensor>& in) {
  return {unsorted_segment_sum(in[0], in[1], op.output_shapes[0][0])};
}

// indices[k] (in flat order) lies outside params' axis `a` (`axis` as the caller gave it). The
// kernels check each index as they read it: a separate pass over millions of indices cost as
// much as the copy.
[[noreturn]] static void throw_index_out_of_range(const Tensor& params, const Tensor& indices,
                                                  int axis, std::size_t a, std::size_t k) {
  throw InvalidArgument(detail::describe("gather", {{"params", params}, {"indices", indices}}) +
                        ": index " + std::to_string(detail::index_values(indices)[k]) +
                        " (indices[" + std::to_string(k) + "] in flat order) is out of range [0, " +
                        std::to_string(params.shape()[a]) + ") along axis " + std::to_string(axis));
}

// A Function's fused loop reads the gathered rows itself (runtime/gather_rule.hpp).
static detail::IndexValues fused_rows(const Tensor&, const Tensor& indices, std::size_t) {
  return detail::index_values(indices);
}
static void fused_out_of_range(const Tensor& params, const Tensor& indices, std::size_t axis,
                               std::size_t k) {
  throw_index_out_of_range(params, indices, static_cast<int>(axis), axis, k);
}
static constexpr detail::GatherRule gather_rows_rule{&fused_rows, &fused_out_of_range};

static Grads gather_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents gather_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(gather_op) = detail::with_gather(
    detail::with_replay(detail::differentiable_op("GatherV2", gather_gradient, KeepSet::only({1}),
                                                  KeepSet::none(), gather_tangent, gather_batched),
                        gather_replay),
    gather_rows_rule);

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  detail::require_defined("gather", params);
  detail::require_defined("gather", indices);
  require_index_dtype("gather", "indices", indices);
  auto described = [&] {
    return detail::describe("gather", {{"params", params}, {"indices", indices}});
  };
  if (params.rank() == 0) throw InvalidArgument(described() + ": params must have rank >= 1");
  const Shape& shape = params.shape();
  const std::size_t a = detail::normalize_axis("gather", axis, params);
  const std::size_t limit = shape[a];
  const detail::IndexValues index = detail::index_values(indices);
  const auto axis_position = shape.begin() + static_cast<std::ptrdiff_t>(a);
  Shape out_shape(shape.begin(), axis_position);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), axis_position + 1, shape.end());
  const std::size_t outer = product(shape.begin(), axis_position);
  const std::size_t inner = product(axis_position + 1, shape.end());
  if (outer == 0) {  // no row is copied, so the copy below checks none
    const std::size_t k = detail::first_out_of_range(index, limit);
    if (k < index.size()) throw_index_out_of_range(params, indices, axis, a, k);
  }
  Tensor out = detail::dispatch_any(params.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> gathered = detail::allocate_array<T>("gather", out_shape);
    const T* src = detail::kernel_data<T>(params);
    T* dst = gathered.data();
    // Rows of a few elements (points, vertices: inner 3) are copied by a loop of a
    // compile-time length: a call of std::copy (memmove) per row costs more than the row.
    const auto copy_rows = [&](auto row_length) {
      const std::size_t length = row_length;
      for (std::size_t o = 0; o < outer; ++o) {
        const T* block = src + o * limit * length;
        for (std::size_t k = 0; k < index.size(); ++k) {
          const auto i = static_cast<std::uint64_t>(index[k]);  // a negative index: past limit
          if (i >= limit) throw_index_out_of_range(params, indices, axis, a, k);
          const T* row = block + i * length;
          for (std::size_t j = 0; j < length; ++j) dst[j] = row[j];
          dst += length;
        }
      }
    };
    switch (inner) {
      case 1:
        copy_rows(std::integral_constant<std::size_t, 1>{});
        break;
      case 2:
        copy_rows(std::integral_constant<std::size_t, 2>{});
        break;
      case 3:
        copy_rows(std::integral_constant<std::size_t, 3>{});
        break;
      case 4:
        copy_rows(std::integral_constant<std::size_t, 4>{});
        break;
      default:
        for (std::size_t o = 0; o < outer; ++o) {
          for (std::size_t k = 0; k < index.size(); ++k) {
            const auto i = static_cast<std::uint64_t>(index[k]);
            if (i >= limit) throw_index_out_of_range(params, indices, axis, a, k);
            const T* row = src + (o * limit + i) * inner;
            dst = std::copy(row, row + inner, dst);
          }
        }
    }
    return Tensor(std::move(gathered));
  });
  detail::record(gather_op, {&params, &indices}, out,
                 [&] { return Attrs().set("axis", static_cast<std::int64_t>(a)); });
  return out;
}

// Linear in params: the same gather of its tangent (the indices carry none).
static Tangents gather_tangent(const ForwardContext& op, const Tangents& tangents) {
  const int axis = static_cast<int>(op.attrs().get_int("axis"));
  return {
      detail::output_tangent(op, 0, {detail::if_defined(tangents[0], [&](const Tensor& dparams) {
                               return gather(dparams, op.inputs[1], axis);
                             })})};
}

// Along axis 0 the gradient is row-sparse: the incoming rows, indexed by the flat indices.
// Along another axis, the gathered axis moves to the front, its rows are summed by index and
// moved back.
static Grads gather_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  if (!op.needs_gradient(0)) return result;
  const Shape& params_shape = op.input_shape(0);
  const Tensor& indices = op.inputs()[1];
  const auto axis = static_cast<std::size_t>(op.attrs().get_int("axis"));
  const auto n = static_cast<std::int64_t>(indices.size());
  const Tensor flat_indices = indices.rank() == 1 ? indices : reshape(indices, {n});
  if (axis == 0) {
    std::vector<std::int64_t> values_shape = detail::signed_shape(params_shape);
    values_shape[0] = n;
    // 1-D indices: g already has the values' shape (no copy).
    const bool same =
        g[0].rank() == values_shape.size() &&
        std::equal(values_shape.begin(), values_shape.end(), g[0].shape().begin(),
                   [](std::int64_t a, std::size_t b) { return static_cast<std::size_t>(a) == b; });
    result[0] =
        IndexedSlices{same ? g[0] : reshape(g[0], values_shape), flat_indices, params_shape};
    return result;
  }
  const auto axis_position = params_shape.begin() + static_cast<std::ptrdiff_t>(axis);
  const auto outer = static_cast<std::int64_t>(product(params_shape.begin(), axis_position));
  const auto inner = static_cast<std::int64_t>(product(axis_position + 1, params_shape.end()));
  const Tensor rows = transpose(reshape(g[0], {outer, n, inner}), {1, 0, 2});
  const Tensor summed = unsorted_segment_sum(rows, flat_indices, params_shape[axis]);
  result[0] = reshape(transpose(summed, {1, 0, 2}), detail::signed_shape(params_shape));
  return result;
}

// ---- UnsortedSegmentSum -----------------------------------------------------------------

static Grads segment_sum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents segment_sum_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(segment_sum_op) = detail::with_replay(
    detail::differentiable_op("UnsortedSegmentSum", segment_sum_gradient, KeepSet::only({1}),
                              KeepSet::none(), segment_sum_tangent, segment_sum_batched),
    segment_sum_replay);

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids,
                            std::size_t num_segments) {
  const char* op = "unsorted_segment_sum";
  detail::require_defined(op, data);
  detail::require_defined(op, segment_ids);
  require_index_dtype(op, "segment_ids", segment_ids);
  auto described = [&] {
    return detail::describe(op, {{"data", data}, {"segment_ids", segment_ids}});
  };
  if (data.rank() == 0 || segment_ids.rank() != 1 || segment_ids.shape()[0] != data.shape()[0]) {
    throw InvalidArgument(described() + ": segment_ids must be 1-D with one id per row of data");
  }
  const detail::IndexValues ids = detail::index_values(segment_ids);
  // Checked by the kernel as it adds each row (kernels/segment_sum.hpp): one pass over the ids.
  const auto out_of_range = [&](std::size_t k) {
    return InvalidArgument(described() + ": segment id " + std::to_string(ids[k]) +
                           " (segment_ids[" + std::to_string(k) + "]) is out of range [0, " +
                           std::to_string(num_segments) + ")");
  };
  Shape out_shape = data.shape();
  out_shape[0] = num_segments;
  try {
    detail::check_new_shape(op, out_shape, data.dtype());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe(op, data) + ", num_segments " +
                          std::to_string(num_segments) + "; " + e.what());
  }
  const std::size_t inner = product(data.shape().begin() + 1, data.shape().end());
  Tensor out = detail::dispatch_numeric(op, data, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> sums = detail::allocate_array<T>(op, out_shape);
    detail::segment_sum_rows(detail::kernel_data<T>(data), ids, inner, num_segments, sums.data(),
                             out_of_range);
    return Tensor(std::move(sums));
  });
  detail::record(segment_sum_op, {&data, &segment_ids}, out);
  return out;
}

// Linear in data: the same segment sum of its tangent.
static Tangents segment_sum_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {detail::output_tangent(op, 0, {detail::if_defined(tangents[0], [&](const Tensor& ddata) {
                                   return unsorted_segment_sum(ddata, op.inputs[1],
                                                               op.outputs[0].shape().at(0));
                                 })})};
}

static Grads segment_sum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  if (op.needs_gradient(0)) result[0] = gather(g[0], op.inputs()[1], 0);
  return result;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_gather)
