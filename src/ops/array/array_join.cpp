// concat (and stack, recorded as Reshape + ConcatV2) and split. Each op reads top to bottom:
// its definition, its forward, its gradient. Everything but the public functions has internal
// linkage (static, constexpr).
#include <algorithm>
#include <iterator>
#include <memory>

#include "kernels/box_copy.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/strided_copy.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/ops/array.hpp"

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

// Split's part rule and concat's join rule: with only 1s before the axis, the parts follow
// one another in the whole's row-major elements (split's input, concat's output).
static bool part_starts_along_axis(const Shape& whole, const Attrs* attrs,
                                   const std::vector<Shape>& parts,
                                   std::vector<std::size_t>& starts) {
  if (attrs == nullptr || !attrs->has("axis")) return false;
  const auto axis = static_cast<std::size_t>(attrs->get_int("axis"));
  for (std::size_t d = 0; d < axis; ++d) {
    if (whole[d] != 1) return false;
  }
  starts.resize(parts.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    starts[i] = offset;
    offset += num_elements(parts[i]);
  }
  return true;
}
static constexpr detail::PartRule parts_along_axis{part_starts_along_axis};

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

// Replay rules: the recorded axis; split into as many parts as it traced.
static detail::ReplayOutputs concat_replay(const detail::ReplayContext& op,
                                           const std::vector<Tensor>& in) {
  return {concat(in, detail::recorded_axis(op))};
}
static detail::ReplayOutputs split_replay(const detail::ReplayContext& op,
                                          const std::vector<Tensor>& in) {
  return split(in[0], static_cast<int>(op.output_shapes.size()), detail::recorded_axis(op));
}

static Grads concat_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents concat_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(concat_op) = detail::with_join(
    detail::with_replay(detail::differentiable_op("ConcatV2", concat_gradient, KeepSet::none(),
                                                  KeepSet::none(), concat_tangent, concat_batched),
                        concat_replay),
    parts_along_axis);

// A row-major tensor seen along one axis: `outer` blocks of `dim * inner` contiguous elements.
// concat and split copy whole `part * inner` runs, so a tiny op costs no index arithmetic.
struct AxisBlocks {
  std::size_t outer = 1;
  std::size_t inner = 1;
};
template <class Dims>
static AxisBlocks axis_blocks(const Dims& dims, std::size_t axis) {
  AxisBlocks b;
  for (std::size_t d = 0; d < axis; ++d) b.outer *= dims[d];
  for (std::size_t d = axis + 1; d < dims.size(); ++d) b.inner *= dims[d];
  return b;
}

using Dims = xt::svector<std::size_t, 4>;

// The concatenated dimensions, checked: InvalidArgument naming concat and every value
// otherwise. Reads the values' dimensions in place (no Shape built per value).
static Dims concat_dims(const std::vector<Tensor>& values, int axis, std::size_t a) {
  const Tensor& first = values.front();
  Dims out = detail::impl_of(first).dims();
  out[a] = 0;
  for (const auto& v : values) {
    const auto d = detail::impl_of(v).dims_ref();
    bool compatible = v.dtype() == first.dtype() && d.size == out.size();
    for (std::size_t k = 0; compatible && k < out.size(); ++k) {
      compatible = k == a || d.data[k] == out[k];
    }
    if (!compatible) {
      throw InvalidArgument(
          describe_list("concat", values) + ": along axis " + std::to_string(axis) +
          " every value needs the same dtype, rank and dimensions except that axis");
    }
    out[a] += d.data[a];
  }
  return out;
}

// A part that is a strided view with no contiguous copy yet (a transpose, the Jacobian
// jacobian_forward returns): concat reads it where it lies instead of building that copy.
static bool read_in_place(const Tensor& v) {
  const detail::TensorImpl& impl = detail::impl_of(v);
  return impl.is_view() && !impl.contiguous() && impl.elements() == nullptr &&
         impl.holds_elements && v.size() > 0;
}

// The parts laid side by side along `axis`. A strided part is copied a chunk of leading rows at
// a time into a block that stays in cache, and joined from there: one pass over the output
// instead of a copy of the part and then the join.
template <class T>
static void join_parts(const std::vector<Tensor>& values, std::size_t axis, const Dims& out_dims,
                       T* out) {
  const AxisBlocks b = axis_blocks(out_dims, axis);
  std::vector<const T*> parts;
  std::vector<std::size_t> widths;  // each part's contiguous run per outer block
  std::vector<std::size_t> strided;
  parts.reserve(values.size());
  widths.reserve(values.size());
  for (std::size_t k = 0; k < values.size(); ++k) {
    const Tensor& v = values[k];
    widths.push_back(detail::impl_of(v).dims_ref().data[axis] * b.inner);
    if (read_in_place(v)) {
      strided.push_back(k);
      parts.push_back(nullptr);
    } else {
      parts.push_back(detail::kernel_data<T>(v));
    }
  }
  if (strided.empty()) {
    detail::join_rows(parts, widths, b.outer, out);
    return;
  }
  const auto copy_rows = [&](std::size_t k, std::size_t first_row, std::size_t rows, T* to) {
    const detail::ElementLayout layout =
        detail::element_layout(*detail::TensorAccess::pointer(values[k]));
    xt::svector<std::size_t, 4> shape = layout.shape;
    shape[0] = rows;
    const std::ptrdiff_t offset = static_cast<std::ptrdiff_t>(layout.offset) +
                                  static_cast<std::ptrdiff_t>(first_row) * layout.strides[0];
    detail::copy_strided(static_cast<const T*>(layout.data), static_cast<std::size_t>(offset),
                         shape.data(), layout.strides.data(), shape.size(), to);
  };
  if (axis == 0) {  // each part is one block of the output
    T* to = out;
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (parts[k] == nullptr) {
        copy_rows(k, 0, detail::impl_of(values[k]).dims_ref().data[0], to);
      } else {
        std::copy(parts[k], parts[k] + widths[k], to);
      }
      to += widths[k];
    }
    return;
  }
  // Chunks of the leading axis whose strided parts fill about 256 KiB.
  const std::size_t rows = out_dims[0];
  const std::size_t outer_per_row = b.outer / rows;
  std::size_t strided_width = 0;
  for (std::size_t k : strided) strided_width += widths[k];
  const std::size_t row_bytes = outer_per_row * strided_width * sizeof(T);
  const std::size_t chunk_rows = std::clamp<std::size_t>(
      std::size_t{256} * 1024 / std::max<std::size_t>(row_bytes, 1), 1, rows);
  // Not a std::vector: T may be bool.
  const auto scratch = std::make_unique<T[]>(chunk_rows * outer_per_row * strided_width);
  std::size_t total_width = 0;
  for (std::size_t w : widths) total_width += w;
  std::vector<const T*> chunk_parts(parts.size());
  for (std::size_t first = 0; first < rows; first += chunk_rows) {
    const std::size_t count = std::min(chunk_rows, rows - first);
    T* next = scratch.get();
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (parts[k] == nullptr) {
        copy_rows(k, first, count, next);
        chunk_parts[k] = next;
        next += count * outer_per_row * widths[k];
      } else {
        chunk_parts[k] = parts[k] + first * outer_per_row * widths[k];
      }
    }
    detail::join_rows(chunk_parts, widths, count * outer_per_row,
                      out + first * outer_per_row * total_width);
  }
}

static Tensor concat_kernel(const std::vector<Tensor>& values, std::size_t axis,
                            const Dims& out_dims) {
  const Shape out_shape(out_dims.begin(), out_dims.end());
  return detail::with_allocation_check("concat", out_shape, values.front().dtype(), [&] {
    return detail::dispatch_any(values.front().dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* out = nullptr;
      Tensor result = detail::new_tensor<T>(out_dims, out);
      join_parts<T>(values, axis, out_dims, out);
      return result;
    });
  });
}

Tensor concat(const std::vector<Tensor>& values, int axis) {
  require_values("concat", values);
  if (values.front().rank() == 0) {
    throw InvalidArgument(describe_list("concat", values) +
                          ": cannot concatenate scalars (rank 0)");
  }
  const std::size_t a = detail::normalize_axis("concat", axis, values.front());
  const Dims out_dims = concat_dims(values, axis, a);
  try {
    detail::check_new_shape("concat", Shape(out_dims.begin(), out_dims.end()),
                            values.front().dtype());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(describe_list("concat", values) + "; " + e.what());
  }
  Tensor out = concat_kernel(values, a, out_dims);
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
                 static_cast<int>(op.attrs().get_int("axis")))};
}

// The gradient of each concatenated input is its slice of g along the axis: one split when
// the inputs are equal parts that all need a gradient (stacked steps of a recurrence), so a
// concat of n inputs costs one op in the backward walk instead of n slices.
static Grads concat_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const auto axis = static_cast<std::size_t>(op.attrs().get_int("axis"));
  const std::size_t n = op.num_inputs();
  std::vector<Shape> shapes;
  shapes.reserve(n);
  bool equal_parts = true;
  for (std::size_t i = 0; i < n; ++i) {
    shapes.push_back(op.input_shape(i));
    equal_parts = equal_parts && op.needs_gradient(i) && shapes[i][axis] == shapes[0][axis];
  }
  if (equal_parts && n > 1) {
    std::vector<Tensor> parts = split(g[0], static_cast<int>(n), static_cast<int>(axis));
    return Grads(std::make_move_iterator(parts.begin()), std::make_move_iterator(parts.end()));
  }
  Grads result(n);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Shape& shape = shapes[i];
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
TAPEGRAD_BUILTIN_OP(split_op) = detail::with_part(
    detail::with_replay(detail::differentiable_op("Split", split_gradient, KeepSet::none(),
                                                  KeepSet::none(), split_tangent, split_batched),
                        split_replay),
    parts_along_axis);

std::vector<Tensor> split(const Tensor& x, int num, int axis) {
  detail::require_defined("split", x);
  if (x.rank() == 0) {
    throw InvalidArgument("split: cannot split a scalar: " + detail::describe("split", x));
  }
  const std::size_t a = detail::normalize_axis("split", axis, x);
  const Dims dims = detail::impl_of(x).dims();
  const std::size_t dim = dims[a];
  if (num <= 0 || dim % static_cast<std::size_t>(num) != 0) {
    throw InvalidArgument(detail::describe("split", x) + ": cannot split axis " +
                          std::to_string(axis) + " of size " + std::to_string(dim) + " into " +
                          std::to_string(num) + " equal parts");
  }
  const auto parts = static_cast<std::size_t>(num);
  Dims part_dims = dims;
  part_dims[a] = dim / parts;
  // Views: part p starts p * part_dims[a] rows along axis a into x.
  const detail::ViewGeometry whole = detail::view_geometry(x);
  std::vector<Tensor> outputs;
  outputs.reserve(parts);
  for (std::size_t p = 0; p < parts; ++p) {
    detail::ViewGeometry part = whole;
    part.shape = Shape(part_dims.begin(), part_dims.end());
    if (part_dims[a] != 0) {
      part.offset += p * part_dims[a] * static_cast<std::size_t>(whole.strides[a]);
    }
    outputs.push_back(detail::make_view(std::move(part)));
  }
  detail::record(split_op, {&x}, outputs,
                 [&] { return Attrs().set("axis", static_cast<std::int64_t>(a)); });
  return outputs;
}

static Tangents split_tangent(const ForwardContext& op, const Tangents& tangents) {
  if (!tangents[0].defined()) return Tangents(op.outputs.size());
  return split(tangents[0], static_cast<int>(op.outputs.size()),
               static_cast<int>(op.attrs().get_int("axis")));
}

// The runtime passes zeros for outputs nobody used, so every part is defined here.
static Grads split_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {concat(g, static_cast<int>(op.attrs().get_int("axis")))};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_join)
