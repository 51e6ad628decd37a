// gather and unsorted_segment_sum (IndexedSlices itself lives in src/runtime/indexed_slices.cpp;
// gather's gradient for axis 0 is row-sparse). Each op reads top to bottom: its definition,
// its forward, its gradient. Everything but the public functions has internal linkage.
#include <algorithm>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
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

static Grads gather_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents gather_tangent(const ForwardContext& op, const Tangents& tangents);
constexpr OpDefinition gather_op =
    detail::differentiable_op("GatherV2", gather_gradient, KeepSet::only({1}), KeepSet::none(),
                              gather_tangent);

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
  const std::vector<std::int64_t> index = detail::index_values(indices);
  for (std::size_t k = 0; k < index.size(); ++k) {
    if (index[k] < 0 || static_cast<std::size_t>(index[k]) >= limit) {
      throw InvalidArgument(described() + ": index " + std::to_string(index[k]) + " (indices[" +
                            std::to_string(k) + "] in flat order) is out of range [0, " +
                            std::to_string(limit) + ") along axis " + std::to_string(axis));
    }
  }
  const auto axis_position = shape.begin() + static_cast<std::ptrdiff_t>(a);
  Shape out_shape(shape.begin(), axis_position);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), axis_position + 1, shape.end());
  const std::size_t outer = product(shape.begin(), axis_position);
  const std::size_t inner = product(axis_position + 1, shape.end());
  Tensor out = detail::dispatch_any(params.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> gathered = detail::allocate_array<T>("gather", out_shape);
    const T* src = params.array<T>().data();
    T* dst = gathered.data();
    for (std::size_t o = 0; o < outer; ++o) {
      for (std::int64_t i : index) {
        const T* row = src + (o * limit + static_cast<std::size_t>(i)) * inner;
        dst = std::copy(row, row + inner, dst);
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
  const int axis = static_cast<int>(op.attrs->get_int("axis"));
  return {detail::output_tangent(
      op, 0, {detail::if_defined(tangents[0], [&](const Tensor& dparams) {
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
  const Tensor flat_indices = reshape(indices, {n});
  if (axis == 0) {
    std::vector<std::int64_t> values_shape = detail::signed_shape(params_shape);
    values_shape[0] = n;
    result[0] = IndexedSlices{reshape(g[0], values_shape), flat_indices, params_shape};
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
constexpr OpDefinition segment_sum_op = detail::differentiable_op(
    "UnsortedSegmentSum", segment_sum_gradient, KeepSet::only({1}), KeepSet::none(),
                              segment_sum_tangent);

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
  const std::vector<std::int64_t> ids = detail::index_values(segment_ids);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || static_cast<std::size_t>(ids[k]) >= num_segments) {
      throw InvalidArgument(described() + ": segment id " + std::to_string(ids[k]) +
                            " (segment_ids[" + std::to_string(k) + "]) is out of range [0, " +
                            std::to_string(num_segments) + ")");
    }
  }
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
    std::fill(sums.begin(), sums.end(), T(0));
    const T* src = data.array<T>().data();
    T* dst = sums.data();
    for (std::size_t k = 0; k < ids.size(); ++k) {
      T* row = dst + static_cast<std::size_t>(ids[k]) * inner;
      const T* from = src + k * inner;
      for (std::size_t j = 0; j < inner; ++j) row[j] = detail::wrapping_add(row[j], from[j]);
    }
    return Tensor(std::move(sums));
  });
  detail::record(segment_sum_op, {&data, &segment_ids}, out);
  return out;
}

// Linear in data: the same segment sum of its tangent.
static Tangents segment_sum_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {detail::output_tangent(
      op, 0, {detail::if_defined(tangents[0], [&](const Tensor& ddata) {
        return unsorted_segment_sum(ddata, op.inputs[1], op.outputs[0].shape().at(0));
      })})};
}

static Grads segment_sum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  if (op.needs_gradient(0)) result[0] = gather(g[0], op.inputs()[1], 0);
  return result;
}

namespace detail {

void register_array_gather_ops(OpRegistrar& registry) {
  registry.add({&gather_op, &segment_sum_op});
}

}  // namespace detail

}  // namespace tapegrad
