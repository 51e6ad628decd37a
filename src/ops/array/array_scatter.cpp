// N-d gather and scatter (TF GatherNd, ScatterNd, TensorScatterUpdate; tensor_scatter_nd_add
// and boolean_mask are compositions of them). GatherNd and ScatterNd are each other's
// gradient, so derivatives of any order stay within the pair.
#include <algorithm>
#include <string>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/indexing.hpp"

namespace tapegrad {

namespace {

// indices of shape [..., m] read against a shape: one offset per index row, in slices of the
// shape's trailing dimensions [m:].
struct NdIndex {
  Shape batch;                       // indices.shape[:-1]
  std::vector<std::size_t> offsets;  // per row, the slice number in the target
  std::size_t slice = 1;             // elements per slice
  std::size_t depth = 0;             // m
};

}  // namespace

// Checks indices (Int32/Int64, rank >= 1, m <= rank of `shape`, every entry in range) and
// reads them. `described` names the op and its operands for the message.
template <class Describe>
static NdIndex read_nd_indices(const Tensor& indices, const Shape& shape, Describe described) {
  if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64) {
    throw InvalidArgument(described() + ": indices must be int32 or int64");
  }
  if (indices.rank() == 0 || indices.shape().back() > shape.size()) {
    throw InvalidArgument(described() +
                          ": indices must have rank >= 1 and a last dimension of "
                          "at most " +
                          std::to_string(shape.size()) + " (the indexed rank)");
  }
  NdIndex nd;
  nd.depth = indices.shape().back();
  nd.batch.assign(indices.shape().begin(), indices.shape().end() - 1);
  for (std::size_t d = nd.depth; d < shape.size(); ++d) nd.slice *= shape[d];
  const detail::IndexValues values = detail::index_values(indices);
  const std::size_t rows = nd.depth == 0 ? indices.size() : values.size() / nd.depth;
  std::size_t count = 1;
  for (std::size_t b : nd.batch) count *= b;
  nd.offsets.assign(nd.depth == 0 ? count : rows, 0);
  for (std::size_t r = 0; r < nd.offsets.size() && nd.depth > 0; ++r) {
    std::size_t offset = 0;
    for (std::size_t d = 0; d < nd.depth; ++d) {
      const std::int64_t v = values[r * nd.depth + d];
      if (v < 0 || static_cast<std::size_t>(v) >= shape[d]) {
        const auto first = values.begin() + static_cast<std::ptrdiff_t>(r * nd.depth);
        throw InvalidArgument(described() + ": index " +
                              detail::ints_to_string(std::vector<std::int64_t>(
                                  first, first + static_cast<std::ptrdiff_t>(nd.depth))) +
                              " (row " + std::to_string(r) +
                              " of indices) is out of range for shape " +
                              detail::ints_to_string(shape));
      }
      offset = offset * shape[d] + static_cast<std::size_t>(v);
    }
    nd.offsets[r] = offset;
  }
  return nd;
}

// The shape of the gathered slices: indices.shape[:-1] ++ shape[m:].
static Shape gathered_shape(const NdIndex& nd, const Shape& shape) {
  Shape out = nd.batch;
  out.insert(out.end(), shape.begin() + static_cast<std::ptrdiff_t>(nd.depth), shape.end());
  return out;
}

// ---- GatherNd, ScatterNd ----------------------------------------------------------------

static Grads gather_nd_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents gather_nd_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads scatter_nd_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents scatter_nd_tangent(const ForwardContext& op, const Tangents& tangents);

// The batching rules of the N-d ops give every operand the batch axis and prefix each index
// row with its row number b: [B, ..., m] -> [B, ..., 1 + m], so one call on the batched
// operand reaches row b's own slice (no loop, whichever operands are batched).
static Tensor with_batch_coordinate(const detail::BatchingContext& op,
                                    const std::vector<Tensor>& inputs, std::size_t i) {
  const Tensor indices = detail::with_batch_axis(op, inputs, i);
  Shape shape = indices.shape();
  shape.back() = 1;
  std::size_t per_row = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) per_row *= shape[d];
  std::vector<double> rows;
  rows.reserve(per_row * op.batch_size);
  for (std::size_t b = 0; b < op.batch_size; ++b) {
    rows.insert(rows.end(), per_row, static_cast<double>(b));
  }
  return concat({from_values(rows, shape, indices.dtype()), indices}, -1);
}

static std::vector<Tensor> gather_nd_batched(const detail::BatchingContext& op,
                                             const std::vector<Tensor>& inputs) {
  return {gather_nd(detail::with_batch_axis(op, inputs, 0), with_batch_coordinate(op, inputs, 1))};
}

static std::vector<Tensor> scatter_nd_batched(const detail::BatchingContext& op,
                                              const std::vector<Tensor>& inputs) {
  return {scatter_nd(with_batch_coordinate(op, inputs, 0), detail::with_batch_axis(op, inputs, 1),
                     op.batched_output_shape(0))};
}

// Replay rules: the same call; ScatterNd into the traced output shape.
static detail::ReplayOutputs gather_nd_replay(const detail::ReplayContext&,
                                              const std::vector<Tensor>& inputs) {
  return {gather_nd(inputs[0], inputs[1])};
}

static detail::ReplayOutputs scatter_nd_replay(const detail::ReplayContext& op,
                                               const std::vector<Tensor>& inputs) {
  return {scatter_nd(inputs[0], inputs[1], op.output_shapes[0])};
}

TAPEGRAD_BUILTIN_OP(gather_nd_op) = detail::with_replay(
    detail::differentiable_op("GatherNd", gather_nd_gradient, KeepSet::only({1}), KeepSet::none(),
                              gather_nd_tangent, gather_nd_batched),
    gather_nd_replay);
TAPEGRAD_BUILTIN_OP(scatter_nd_op) = detail::with_replay(
    detail::differentiable_op("ScatterNd", scatter_nd_gradient, KeepSet::only({0}), KeepSet::none(),
                              scatter_nd_tangent, scatter_nd_batched),
    scatter_nd_replay);

Tensor gather_nd(const Tensor& params, const Tensor& indices) {
  detail::require_defined("gather_nd", params);
  detail::require_defined("gather_nd", indices);
  const NdIndex nd = read_nd_indices(indices, params.shape(), [&] {
    return detail::describe("gather_nd", {{"params", params}, {"indices", indices}});
  });
  Tensor out = detail::dispatch_any(params.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> gathered =
        detail::allocate_array<T>("gather_nd", gathered_shape(nd, params.shape()));
    const T* src = detail::kernel_data<T>(params);
    T* dst = gathered.data();
    for (std::size_t offset : nd.offsets) {
      dst = std::copy(src + offset * nd.slice, src + (offset + 1) * nd.slice, dst);
    }
    return Tensor(std::move(gathered));
  });
  detail::record(gather_nd_op, {&params, &indices}, out);
  return out;
}

// updates added into zeros of `shape`; `op` names the public function for errors.
static Tensor scatter_into(const char* op, const Tensor* base, const Tensor& indices,
                           const Tensor& updates, const Shape& shape, bool replace) {
  auto described = [&] {
    if (base == nullptr) {
      return detail::describe(op, {{"indices", indices}, {"updates", updates}}) + ", shape " +
             detail::ints_to_string(shape);
    }
    return detail::describe(op, {{"tensor", *base}, {"indices", indices}, {"updates", updates}});
  };
  const NdIndex nd = read_nd_indices(indices, shape, described);
  if (updates.shape() != gathered_shape(nd, shape)) {
    throw InvalidArgument(described() + ": updates must have shape " +
                          detail::ints_to_string(gathered_shape(nd, shape)) +
                          " (indices.shape[:-1] ++ shape[m:])");
  }
  if (base != nullptr && base->dtype() != updates.dtype()) {
    throw InvalidArgument(described() + ": tensor and updates must have the same dtype");
  }
  return detail::dispatch_numeric(op, updates, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = detail::allocate_array<T>(op, shape);
    if (base != nullptr) {
      const T* from = detail::kernel_data<T>(*base);
      std::copy(from, from + out.size(), out.data());
    } else {
      std::fill(out.begin(), out.end(), T(0));
    }
    const T* src = detail::kernel_data<T>(updates);
    for (std::size_t r = 0; r < nd.offsets.size(); ++r) {
      T* row = out.data() + nd.offsets[r] * nd.slice;
      const T* from = src + r * nd.slice;
      if (replace) {
        std::copy(from, from + nd.slice, row);  // a later duplicate overwrites: the last wins
      } else {
        for (std::size_t j = 0; j < nd.slice; ++j) row[j] = detail::wrapping_add(row[j], from[j]);
      }
    }
    return Tensor(std::move(out));
  });
}

Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const Shape& shape) {
  detail::require_defined("scatter_nd", indices);
  detail::require_defined("scatter_nd", updates);
  Tensor out = scatter_into("scatter_nd", nullptr, indices, updates, shape, false);
  detail::record(scatter_nd_op, {&indices, &updates}, out);
  return out;
}

// Both linear in their float operand: the op applied to the tangent.
static Tangents gather_nd_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {detail::output_tangent(op, 0, {detail::if_defined(tangents[0], [&](const Tensor& dp) {
                                   return gather_nd(dp, op.inputs[1]);
                                 })})};
}

static Tangents scatter_nd_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {detail::output_tangent(op, 0, {detail::if_defined(tangents[1], [&](const Tensor& du) {
                                   return scatter_nd(op.inputs[0], du, op.outputs[0].shape());
                                 })})};
}

static Grads gather_nd_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  result[0] = scatter_nd(op.inputs()[1], g[0], op.input_shape(0));
  return result;
}

static Grads scatter_nd_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  result[1] = gather_nd(g[0], op.inputs()[0]);
  return result;
}

// ---- tensor_scatter_nd_add (Add of a ScatterNd), TensorScatterUpdate --------------------

Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  const char* op = "tensor_scatter_nd_add";
  detail::require_defined(op, tensor);
  detail::require_defined(op, indices);
  detail::require_defined(op, updates);
  // Checked here so that errors name this function, then built from two recorded ops.
  scatter_into(op, &tensor, indices, updates, tensor.shape(), false);
  return add(tensor, scatter_nd(indices, updates, tensor.shape()));
}

static Grads scatter_update_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents scatter_update_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> scatter_update_batched(const detail::BatchingContext& op,
                                                  const std::vector<Tensor>& inputs) {
  return {tensor_scatter_nd_update(detail::with_batch_axis(op, inputs, 0),
                                   with_batch_coordinate(op, inputs, 1),
                                   detail::with_batch_axis(op, inputs, 2))};
}
static detail::ReplayOutputs scatter_update_replay(const detail::ReplayContext&,
                                                   const std::vector<Tensor>& inputs) {
  return {tensor_scatter_nd_update(inputs[0], inputs[1], inputs[2])};
}
TAPEGRAD_BUILTIN_OP(scatter_update_op) = detail::with_replay(
    detail::differentiable_op("TensorScatterUpdate", scatter_update_gradient, KeepSet::only({1}),
                              KeepSet::none(), scatter_update_tangent, scatter_update_batched),
    scatter_update_replay);

Tensor tensor_scatter_nd_update(const Tensor& tensor, const Tensor& indices,
                                const Tensor& updates) {
  const char* op = "tensor_scatter_nd_update";
  detail::require_defined(op, tensor);
  detail::require_defined(op, indices);
  detail::require_defined(op, updates);
  Tensor out = scatter_into(op, &tensor, indices, updates, tensor.shape(), true);
  detail::record(scatter_update_op, {&tensor, &indices, &updates}, out);
  return out;
}

// Linear in (tensor, updates) together.
static Tangents scatter_update_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& tensor = op.inputs[0];
  const Tensor& updates = op.inputs[2];
  if (!tangents[0].defined() && !tangents[2].defined()) return {Tensor()};
  const Tensor dt = tangents[0].defined() ? tangents[0] : zeros(tensor.shape(), tensor.dtype());
  const Tensor du = tangents[2].defined() ? tangents[2] : zeros(updates.shape(), updates.dtype());
  return {tensor_scatter_nd_update(dt, op.inputs[1], du)};
}

// Per index row (shape indices.shape[:-1]), whether its update is the one the output keeps:
// the last row of a duplicated index, as the forward pass writes them. The row numbers go
// through the same op (integers, not recorded: nothing here is differentiable), so the two
// agree on which write stays. No branch on the indices' values: a Function replaying this
// rule with other indices recomputes it.
static Tensor updates_kept(const Tensor& indices, const Shape& tensor_shape) {
  const std::size_t depth = indices.shape().back();
  const Shape slots(tensor_shape.begin(),
                    tensor_shape.begin() + static_cast<std::ptrdiff_t>(depth));
  const Shape rows_shape(indices.shape().begin(), indices.shape().end() - 1);
  const Tensor row_numbers =
      reshape(range(0, static_cast<double>(num_elements(rows_shape)), 1, DType::Int64), rows_shape);
  const Tensor last_writer =
      tensor_scatter_nd_update(fill(slots, -1, DType::Int64), indices, row_numbers);
  return equal(gather_nd(last_writer, indices), row_numbers);
}

// The replaced slots do not depend on tensor: g with them zeroed. An update gets the gradient
// at its slot when the output kept it; an update a later duplicate overwrote gets zeros (it
// does not reach the output; TF gives it the slot's gradient too, which is not the
// derivative of this op's forward pass, where the last duplicate stays).
static Grads scatter_update_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(3);
  const Tensor& indices = op.inputs()[1];
  if (op.needs_gradient(0)) {
    result[0] = tensor_scatter_nd_update(g[0], indices, zeros(op.input_shape(2), g[0].dtype()));
  }
  if (op.needs_gradient(2)) {
    const Tensor gathered = gather_nd(g[0], indices);
    // The kept flags [rows...] against the updates [rows..., slice...].
    Shape flags_shape(indices.shape().begin(), indices.shape().end() - 1);
    if (num_elements(flags_shape) <= 1) {
      result[2] = gathered;  // one update or none: no duplicate
    } else {
      flags_shape.resize(gathered.rank(), 1);
      result[2] = where(reshape(updates_kept(indices, op.input_shape(0)), flags_shape), gathered,
                        zeros(gathered.shape(), gathered.dtype()));
    }
  }
  return result;
}

// ---- boolean_mask (a GatherNd at the true positions) ------------------------------------

// The true positions' count depends on the mask's values, so per-row results of a batched mask
// cannot be stacked in general: the rule refuses, and vectorized_map loops instead.
static std::vector<Tensor> mask_positions_batched(const detail::BatchingContext& op,
                                                  const std::vector<Tensor>&) {
  throw detail::NotBatchable(
      std::string("vectorized_map: op '") + op.op.name +
      "' (boolean_mask's true positions) has no batched form: its output size "
      "depends on the mask's values, so per-row results cannot be stacked");
}
// Recorded (not differentiable) so that vectorized_map's trace sees the positions depend on
// the mask. No replay rule: the positions' count depends on the mask's values, so a Function
// that traces it runs eagerly.
TAPEGRAD_BUILTIN_OP(mask_positions_op) = detail::not_differentiable_op("Where",
                                                                       mask_positions_batched);

Tensor boolean_mask(const Tensor& x, const Tensor& mask) {
  const char* op = "boolean_mask";
  detail::require_defined(op, x);
  detail::require_defined(op, mask);
  const std::size_t k = mask.rank();
  if (mask.dtype() != DType::Bool || k == 0 || k > x.rank() ||
      !std::equal(mask.shape().begin(), mask.shape().end(), x.shape().begin())) {
    throw InvalidArgument(detail::describe(op, {{"x", x}, {"mask", mask}}) +
                          ": mask must be bool, of rank >= 1, with shape x.shape[:mask.rank]");
  }
  const auto strides = detail::row_major_strides(mask.shape());
  const bool* m = detail::kernel_data<bool>(mask);
  std::vector<std::int64_t> positions;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!m[i]) continue;
    for (std::size_t d = 0; d < k; ++d) {
      positions.push_back(static_cast<std::int64_t>((i / strides[d]) % mask.shape()[d]));
    }
  }
  xt::xarray<std::int64_t> indices =
      xt::xarray<std::int64_t>::from_shape({positions.size() / k, k});
  std::copy(positions.begin(), positions.end(), indices.data());
  const Tensor where = Tensor(std::move(indices));
  detail::record(mask_positions_op, {&mask}, where);
  return gather_nd(x, where);
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_scatter)
