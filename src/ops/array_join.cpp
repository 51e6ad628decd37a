// concat (and stack, recorded as Reshape + ConcatV2) and split. Each op reads top to bottom:
// its definition, its forward, its gradient. Everything but the public functions has internal
// linkage (static, constexpr).
#include "kernels/box_copy.hpp"
#include "kernels/dispatch.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "ops/batching_support.hpp"

namespace tapegrad {

// "op: values[0] has shape [2] and dtype float64, values[1] has ..."
static std::string describe_list(const char* op, const std::vector<Tensor>& values) {
  std::vector<detail::Operand> operands;
  operands.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    operands.push_back({"values[" + std::to_string(i) + "]", values[i]});
  }
  return detail::describe(op, operands);
}

static void require_values(const char* op, const std::vector<Tensor>& values) {
  if (values.empty()) {
    throw InvalidArgument(std::string(op) + ": values is empty (need at least one tensor)");
  }
  for (const auto& v : values) detail::require_defined(op, v);
}

// ---- ConcatV2 (and stack) ---------------------------------------------------------------

// Batching rules: the recorded axis shifted past the batch axis; concat's unbatched inputs are
// broadcast along it first.
static std::vector<Tensor> concat_batched(const detail::BatchingContext& op,
                                          const std::vector<Tensor>& in) {
  std::vector<Tensor> values;
  values.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) values.push_back(detail::with_batch_axis(op, in, i));
  return {concat(values, detail::shifted_axis(op))};
}
static std::vector<Tensor> split_batched(const detail::BatchingContext& op,
                                         const std::vector<Tensor>& in) {
  return split(in[0], static_cast<int>(op.output_shapes.size()), detail::shifted_axis(op));
}

static Grads concat_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents concat_tangent(const ForwardContext& op, const Tangents& tangents);
constexpr OpDefinition concat_op =
    detail::differentiable_op("ConcatV2", concat_gradient, KeepSet::none(), KeepSet::none(),
                              concat_tangent, concat_batched);

// The concatenated shape, checked: InvalidArgument naming concat and every value otherwise.
static Shape concat_shape(const std::vector<Tensor>& values, int axis, std::size_t a) {
  const Tensor& first = values.front();
  Shape out_shape = first.shape();
  out_shape[a] = 0;
  for (const auto& v : values) {
    bool compatible = v.dtype() == first.dtype() && v.rank() == first.rank();
    for (std::size_t d = 0; compatible && d < first.rank(); ++d) {
      compatible = d == a || v.shape()[d] == first.shape()[d];
    }
    if (!compatible) {
      throw InvalidArgument(describe_list("concat", values) + ": along axis " +
                            std::to_string(axis) +
                            " every value needs the same dtype, rank and dimensions except that axis");
    }
    out_shape[a] += v.shape()[a];
  }
  try {
    detail::check_new_shape("concat", out_shape, first.dtype());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(describe_list("concat", values) + "; " + e.what());
  }
  return out_shape;
}

// The parts laid side by side along `axis`.
static Tensor concat_kernel(const std::vector<Tensor>& values, std::size_t axis,
                            const Shape& out_shape) {
  std::size_t outer = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= out_shape[d];
  return detail::dispatch_any(values.front().dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = detail::allocate_array<T>("concat", out_shape);
    std::vector<const T*> parts;
    std::vector<std::size_t> widths;
    parts.reserve(values.size());
    widths.reserve(values.size());
    for (const auto& v : values) {
      parts.push_back(v.array<T>().data());
      widths.push_back(outer == 0 ? 0 : v.size() / outer);
    }
    detail::join_rows(parts, widths, outer, out.data());
    return Tensor(std::move(out));
  });
}

Tensor concat(const std::vector<Tensor>& values, int axis) {
  require_values("concat", values);
  if (values.front().rank() == 0) {
    throw InvalidArgument(describe_list("concat", values) + ": cannot concatenate scalars (rank 0)");
  }
  const std::size_t a = detail::normalize_axis("concat", axis, values.front());
  Tensor out = concat_kernel(values, a, concat_shape(values, axis, a));
  detail::record(concat_op, values, out,
                 [&] { return Attrs().set("axis", static_cast<std::int64_t>(a)); });
  return out;
}

Tensor stack(const std::vector<Tensor>& values, int axis) {
  require_values("stack", values);
  const Tensor& first = values.front();
  for (const auto& v : values) {
    if (v.shape() != first.shape() || v.dtype() != first.dtype()) {
      throw InvalidArgument(describe_list("stack", values) +
                            ": every value needs the same shape and dtype");
    }
  }
  const int rank = static_cast<int>(first.rank());
  if (axis < -rank - 1 || axis > rank) {
    throw InvalidArgument(describe_list("stack", values) + ": axis " + std::to_string(axis) +
                          " is out of range [" + std::to_string(-rank - 1) + ", " +
                          std::to_string(rank) + "]");
  }
  // Recorded as expand_dims (Reshape) + ConcatV2, whose gradients are exactly the unstack.
  std::vector<Tensor> expanded;
  expanded.reserve(values.size());
  for (const auto& v : values) expanded.push_back(expand_dims(v, axis));
  return concat(expanded, axis);
}

// Linear: the tangents concatenated (zeros for an input without one).
static Tangents concat_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {concat(detail::tangents_or_zeros(op, tangents),
                 static_cast<int>(op.attrs->get_int("axis")))};
}

// The gradient of each concatenated input is its slice of g along the axis.
static Grads concat_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const auto axis = static_cast<std::size_t>(op.attrs().get_int("axis"));
  Grads result(op.num_inputs());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < op.num_inputs(); ++i) {
    const Shape& shape = op.input_shape(i);
    if (op.needs_gradient(i)) {
      std::vector<std::int64_t> begin(shape.size(), 0);
      begin[axis] = offset;
      result[i] = slice(g[0], begin, detail::signed_shape(shape));
    }
    offset += static_cast<std::int64_t>(shape[axis]);
  }
  return result;
}

// ---- Split ------------------------------------------------------------------------------

static Grads split_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents split_tangent(const ForwardContext& op, const Tangents& tangents);
constexpr OpDefinition split_op =
    detail::differentiable_op("Split", split_gradient, KeepSet::none(), KeepSet::none(),
                              split_tangent, split_batched);

std::vector<Tensor> split(const Tensor& x, int num, int axis) {
  detail::require_defined("split", x);
  if (x.rank() == 0) {
    throw InvalidArgument("split: cannot split a scalar: " + detail::describe("split", x));
  }
  const std::size_t a = detail::normalize_axis("split", axis, x);
  const std::size_t dim = x.shape()[a];
  if (num <= 0 || dim % static_cast<std::size_t>(num) != 0) {
    throw InvalidArgument(detail::describe("split", x) + ": cannot split axis " +
                          std::to_string(axis) + " of size " + std::to_string(dim) + " into " +
                          std::to_string(num) + " equal parts");
  }
  const auto parts = static_cast<std::size_t>(num);
  Shape part_shape = x.shape();
  part_shape[a] = dim / parts;
  std::vector<Tensor> outputs;
  outputs.reserve(parts);
  std::size_t outer = 1;
  for (std::size_t d = 0; d < a; ++d) outer *= x.shape()[d];
  const std::size_t width = outer == 0 ? 0 : x.size() / outer / parts;
  detail::dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<xt::xarray<T>> arrays;
    std::vector<T*> destinations;
    arrays.reserve(parts);
    destinations.reserve(parts);
    for (std::size_t p = 0; p < parts; ++p) {
      arrays.push_back(xt::empty<T>(part_shape));
      destinations.push_back(arrays.back().data());
    }
    detail::split_rows(x.array<T>().data(), outer, destinations,
                       std::vector<std::size_t>(parts, width));
    for (auto& part : arrays) outputs.emplace_back(std::move(part));
    return 0;
  });
  detail::record(split_op, {&x}, outputs,
                 [&] { return Attrs().set("axis", static_cast<std::int64_t>(a)); });
  return outputs;
}

static Tangents split_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[0].defined()) return Tangents(op.outputs.size());
  return split(tangents[0], static_cast<int>(op.outputs.size()),
               static_cast<int>(op.attrs->get_int("axis")));
}

// The runtime passes zeros for outputs nobody used, so every part is defined here.
static Grads split_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {concat(g, static_cast<int>(op.attrs().get_int("axis")))};
}

namespace detail {

void register_array_join_ops(OpRegistrar& registry) { registry.add({&concat_op, &split_op}); }

}  // namespace detail

}  // namespace tapegrad
