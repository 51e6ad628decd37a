// Shape manipulation and copying ops: identity, reshape (and expand_dims, squeeze), transpose,
// broadcast_to (and unbroadcast, the sum that undoes a broadcast). Each op reads top to bottom:
// its definition, its forward, its gradient. Everything but the public functions has internal
// linkage (static, constexpr).
#include "tapegrad/ops/array.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <string>

#include "kernels/dispatch.hpp"
#include "kernels/strided_cursor.hpp"
#include "ops/batching_support.hpp"
#include "ops/elementwise_tensors.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "ops/structure_support.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

// Strides that read a strided tensor of dimensions `from` (strides `strides`) in the row-major
// order of `to` (the same element count): each run of `from`'s axes that `to` merges or splits
// must step evenly through the buffer (NumPy's reshape without a copy). [n, 3, k] read with
// strides (3, 1, 3n), a transposed [k, n, 3], becomes [3n, k] with strides (1, 3n); [3, 2] read
// with strides (1, 3) has no such [6]. Nothing for an empty tensor.
static std::optional<detail::TensorImpl::Strides> strides_without_copy(
    const Shape& from, const detail::TensorImpl::Strides& strides, const Shape& to) {
  std::vector<std::size_t> dims;
  std::vector<std::ptrdiff_t> steps;
  for (std::size_t d = 0; d < from.size(); ++d) {
    if (from[d] == 0) return std::nullopt;
    if (from[d] != 1) {
      dims.push_back(from[d]);
      steps.push_back(strides[d]);
    }
  }
  detail::TensorImpl::Strides result(to.size(), 0);  // an axis of length 1 takes any stride
  std::size_t old_axis = 0;
  std::size_t new_axis = 0;
  while (new_axis < to.size()) {
    if (to[new_axis] == 1) {
      ++new_axis;
      continue;
    }
    if (old_axis == dims.size()) return std::nullopt;
    // The smallest runs [old_axis, old_end) and [new_axis, new_end) of equal products.
    std::size_t old_end = old_axis + 1, new_end = new_axis + 1;
    std::size_t old_product = dims[old_axis], new_product = to[new_axis];
    while (old_product != new_product) {
      if (new_product < old_product) {
        if (new_end == to.size()) return std::nullopt;
        new_product *= to[new_end++];
      } else {
        if (old_end == dims.size()) return std::nullopt;
        old_product *= dims[old_end++];
      }
    }
    for (std::size_t k = old_axis; k + 1 < old_end; ++k) {
      if (steps[k] != steps[k + 1] * static_cast<std::ptrdiff_t>(dims[k + 1])) return std::nullopt;
    }
    result[new_end - 1] = steps[old_end - 1];
    for (std::size_t k = new_end - 1; k > new_axis; --k) {
      result[k - 1] = result[k] * static_cast<std::ptrdiff_t>(to[k]);
    }
    old_axis = old_end;
    new_axis = new_end;
  }
  if (old_axis != dims.size()) return std::nullopt;
  return result;
}

// x's elements, in order, as a tensor of `shape` (same element count), without copying them:
// a view of x's buffer (identity, stop_gradient, reshape, expand_dims, squeeze). A strided x
// (a transpose, say) is a strided view too where its strides allow (strides_without_copy);
// otherwise the view is of its contiguous copy, built once and kept by x.
static Tensor view_with_shape(const Tensor& x, const Shape& shape) {
  const detail::TensorImpl& impl = detail::impl_of(x);
  if (impl.is_view() && !impl.contiguous()) {
    if (impl.elements() == nullptr) {  // no copy yet: read the base where it lies
      if (auto strides = strides_without_copy(x.shape(), impl.strides(), shape)) {
        return detail::make_view(detail::buffer_owner_of(x), shape, std::move(*strides),
                                 impl.offset());
      }
    }
    return detail::make_view(impl.as_view().materialized(), shape,
                             detail::row_major_strides_signed(shape), 0);
  }
  return detail::make_view(detail::buffer_owner_of(x), shape,
                           detail::row_major_strides_signed(shape), impl.offset());
}

// ---- Identity (and stop_gradient, which records nothing) --------------------------------

// Batching rules: the example's target shape (or permutation) with the batch axis in front.
static std::vector<Tensor> reshape_batched(const detail::BatchingContext& op,
                                           const std::vector<Tensor>& in) {
  const Shape shape = op.batched_output_shape(0);
  // A reshape to the same shape (a gradient rule's) is the input itself: no copy.
  if (in[0].shape() == shape) return {in[0]};
  return {reshape(in[0], std::vector<std::int64_t>(shape.begin(), shape.end()))};
}
static std::vector<Tensor> transpose_batched(const detail::BatchingContext& op,
                                             const std::vector<Tensor>& in) {
  std::vector<int> perm{0};
  for (std::int64_t p : op.attrs().get_ints("perm")) perm.push_back(static_cast<int>(p) + 1);
  return {transpose(in[0], perm)};
}
static std::vector<Tensor> broadcast_to_batched(const detail::BatchingContext& op,
                                                const std::vector<Tensor>& in) {
  const Tensor aligned = detail::align_batched(in[0], in[0].rank() - 1, op.output_shapes[0].size());
  return {broadcast_to(aligned, op.batched_output_shape(0))};
}

// Replay rules: the traced output shape (or the recorded permutation) on the new input.
static detail::ReplayOutputs reshape_replay(const detail::ReplayContext& op,
                                            const std::vector<Tensor>& in) {
  return {reshape(in[0], detail::signed_shape(op.output_shapes[0]))};
}
static detail::ReplayOutputs transpose_replay(const detail::ReplayContext& op,
                                              const std::vector<Tensor>& in) {
  const auto& perm = op.attrs().get_ints("perm");
  return {transpose(in[0], std::vector<int>(perm.begin(), perm.end()))};
}
static detail::ReplayOutputs broadcast_to_replay(const detail::ReplayContext& op,
                                                 const std::vector<Tensor>& in) {
  return {broadcast_to(in[0], op.output_shapes[0])};
}

// Structure rules: a diagonal batch stays diagonal, its diagonal in the output's shape.
static detail::StructuredOutputs identity_structured(
    const detail::StructureContext&, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>&) {
  return detail::diagonal_output(values[0].diagonal);
}
static detail::StructuredOutputs reshape_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>&) {
  return detail::diagonal_output(
      reshape(values[0].diagonal, detail::signed_shape(op.output_shapes[0])));
}

TAPEGRAD_BUILTIN_OP(identity_op) = detail::with_structure(
    detail::identity_gradient_op("Identity", detail::batch_unary<&tapegrad::identity>),
    identity_structured);

Tensor identity(const Tensor& x) {
  detail::require_defined("identity", x);
  Tensor out = view_with_shape(x, x.shape());
  detail::record(identity_op, {&x}, out);
  return out;
}

// Recorded as not differentiable (TF's StopGradient): nothing flows back, but a
// vectorized_map trace sees it.
TAPEGRAD_BUILTIN_OP(stop_gradient_op) =
    detail::not_differentiable_op("StopGradient", detail::batch_unary<&tapegrad::stop_gradient>);

Tensor stop_gradient(const Tensor& x) {
  detail::require_defined("stop_gradient", x);
  Tensor out = view_with_shape(x, x.shape());
  detail::record(stop_gradient_op, {&x}, out);
  return out;
}

// ---- Reshape (and expand_dims, squeeze, recorded as Reshape) ----------------------------

static Grads reshape_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents reshape_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(reshape_op) = detail::with_structure(
    detail::with_replay(detail::differentiable_op("Reshape", reshape_gradient, KeepSet::none(),
                                                  KeepSet::none(), reshape_tangent,
                                                  reshape_batched),
                        reshape_replay),
    reshape_structured);

std::vector<std::int64_t> detail::shape_entries(const char* op, const char* what,
                                                const Shape& shape) {
  std::vector<std::int64_t> entries;
  entries.reserve(shape.size());
  for (const std::size_t d : shape) {
    if (d > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())) {
      throw InvalidArgument(std::string(op) + ": " + what + " " + shape_to_string(shape) +
                            " has an entry " + std::to_string(d) + " beyond 2^63 - 1");
    }
    entries.push_back(static_cast<std::int64_t>(d));
  }
  return entries;
}

Tensor reshape(const Tensor& x, std::vector<std::int64_t> shape) {
  detail::require_defined("reshape", x);
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("reshape", x) + ": cannot reshape its " +
                          std::to_string(x.size()) + " elements into shape " +
                          detail::ints_to_string(shape) + why);
  };
  // The product of the known entries, checked: a wrapped product could match x's size.
  std::size_t known = 1;
  std::size_t nonzero_product = 1;
  bool known_overflows = false;
  int inferred = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw InvalidArgument(detail::describe("reshape", x) + ": target shape " +
                            detail::ints_to_string(shape) + " has an invalid entry " +
                            std::to_string(shape[i]) + " (only one -1 is allowed)");
    } else {
      // Zero entries are skipped in the overflow check but make the count 0 (as in
      // checked_num_elements: the non-zero dimensions' product must fit too).
      const auto d = static_cast<std::size_t>(shape[i]);
      if (d != 0 && nonzero_product > detail::kMaxElements / d) known_overflows = true;
      if (d != 0) nonzero_product *= d;
      known *= d;
    }
  }
  if (known_overflows) fail(": its element count exceeds 2^63 - 1");
  if (inferred >= 0) {
    if (known == 0 || x.size() % known != 0) fail("");
    shape[static_cast<std::size_t>(inferred)] = static_cast<std::int64_t>(x.size() / known);
  } else if (known != x.size()) {
    fail("");
  }
  const Shape target(shape.begin(), shape.end());
  Tensor out = view_with_shape(x, target);
  detail::record(reshape_op, {&x}, out);
  return out;
}

Tensor reshape(const Tensor& x, std::initializer_list<std::int64_t> shape) {
  return reshape(x, std::vector<std::int64_t>(shape));
}

Tensor expand_dims(const Tensor& x, int axis) {
  detail::require_defined("expand_dims", x);
  const int rank = static_cast<int>(x.rank());
  if (axis < -rank - 1 || axis > rank) {
    throw InvalidArgument(detail::describe("expand_dims", x) + ": axis " + std::to_string(axis) +
                          " is out of range [" + std::to_string(-rank - 1) + ", " +
                          std::to_string(rank) + "]");
  }
  const auto position = static_cast<std::size_t>(axis < 0 ? axis + rank + 1 : axis);
  auto target = detail::signed_shape(x.shape());
  target.insert(target.begin() + static_cast<std::ptrdiff_t>(position), 1);
  return reshape(x, target);
}

Tensor squeeze(const Tensor& x, std::vector<int> axes) {
  detail::require_defined("squeeze", x);
  const Shape& shape = x.shape();
  std::vector<bool> drop(shape.size(), false);
  if (axes.empty()) {
    for (std::size_t d = 0; d < shape.size(); ++d) drop[d] = shape[d] == 1;
  }
  for (int axis : axes) {
    const std::size_t d = detail::normalize_axis("squeeze", axis, x);
    if (shape[d] != 1) {
      throw InvalidArgument(detail::describe("squeeze", x) + ": cannot squeeze axis " +
                            std::to_string(axis) + ": its size is " + std::to_string(shape[d]) +
                            ", not 1");
    }
    drop[d] = true;
  }
  std::vector<std::int64_t> target;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!drop[d]) target.push_back(static_cast<std::int64_t>(shape[d]));
  }
  return reshape(x, target);
}

// Linear, as transpose and broadcast_to below: the op applied to the tangent.
static Tangents reshape_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return dx.shape() == op.outputs[0].shape()
               ? dx
               : reshape(dx, detail::signed_shape(op.outputs[0].shape()));
  });
}

// A reshape that kept the shape passes its gradient on as it is (no copy, nothing recorded).
static Grads reshape_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  if (g[0].shape() == op.input_shape(0)) return {g[0]};
  return {reshape(g[0], detail::signed_shape(op.input_shape(0)))};
}

// ---- Transpose --------------------------------------------------------------------------

static Grads transpose_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents transpose_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(transpose_op) = detail::with_replay(
    detail::differentiable_op("Transpose", transpose_gradient, KeepSet::none(), KeepSet::none(),
                              transpose_tangent, transpose_batched),
    transpose_replay);

Tensor transpose(const Tensor& x, std::vector<int> perm) {
  detail::require_defined("transpose", x);
  const std::size_t rank = x.rank();
  if (perm.empty()) {
    perm.resize(rank);
    for (std::size_t i = 0; i < rank; ++i) perm[i] = static_cast<int>(rank - 1 - i);
  }
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = perm.size() == rank;
  for (std::size_t i = 0; valid && i < rank; ++i) valid = sorted[i] == static_cast<int>(i);
  if (!valid) {
    throw InvalidArgument(detail::describe("transpose", x) + ": perm " +
                          detail::ints_to_string(perm) + " is not a permutation of x's axes");
  }
  const Shape& in_shape = x.shape();
  Shape out_shape(rank);
  for (std::size_t i = 0; i < rank; ++i) out_shape[i] = in_shape[static_cast<std::size_t>(perm[i])];
  // A view: the axes' lengths and strides permuted, no element moved.
  detail::ViewGeometry view = detail::view_geometry(x);
  const detail::TensorImpl::Strides in_strides = view.strides;
  for (std::size_t i = 0; i < rank; ++i) {
    view.strides[i] = in_strides[static_cast<std::size_t>(perm[i])];
  }
  view.shape = out_shape;
  Tensor out = detail::make_view(std::move(view));
  detail::record(transpose_op, {&x}, out, [&] {
    return Attrs().set("perm", std::vector<std::int64_t>(perm.begin(), perm.end()));
  });
  return out;
}

static Tangents transpose_tangent(const ForwardContext& op, const Tangents& tangents) {
  const auto& perm = op.attrs().get_ints("perm");
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return transpose(dx, std::vector<int>(perm.begin(), perm.end()));
  });
}

static Grads transpose_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const auto& perm = op.attrs().get_ints("perm");
  std::vector<int> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  }
  return {transpose(g[0], inverse)};
}

// ---- BroadcastTo (and unbroadcast, its gradient) ----------------------------------------

static Grads broadcast_to_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents broadcast_to_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(broadcast_to_op) = detail::with_replay(
    detail::differentiable_op("BroadcastTo", broadcast_to_gradient, KeepSet::none(),
                              KeepSet::none(), broadcast_to_tangent, broadcast_to_batched),
    broadcast_to_replay);

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  detail::require_defined("broadcast_to", x);
  try {
    detail::check_new_shape("broadcast_to", shape, x.dtype());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::describe("broadcast_to", x) + "; " + e.what());
  }
  bool fits = false;
  try {
    fits = detail::broadcast_shapes("broadcast_to", x.shape(), shape) == shape;
  } catch (const InvalidArgument&) {
    // the shapes do not broadcast at all: reported below with x's own description
  }
  if (!fits) {
    throw InvalidArgument(detail::describe("broadcast_to", x) +
                          ": x cannot be broadcast to shape " + shape_to_string(shape));
  }
  Tensor out = detail::with_allocation_check("broadcast_to", shape, x.dtype(), [&] {
    return detail::dispatch_any(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      // A rank-0 second operand broadcasts everywhere, so this is a strided copy of x.
      const xt::xarray<T> unit = xt::empty<T>(Shape{});
      return detail::binary_tensor<T>(detail::KernelInput<T>(x), unit, shape,
                                      [](T a, T) { return a; });
    });
  });
  detail::record(broadcast_to_op, {&x}, out);
  return out;
}

Tensor unbroadcast(const Tensor& grad, const Shape& shape) {
  detail::require_defined("unbroadcast", grad);
  // Compared and walked without building grad's Shape (a tiny op's gradient calls this).
  const auto g = detail::impl_of(grad).dims();
  if (g.size() == shape.size() && std::equal(g.begin(), g.end(), shape.begin())) {
    return grad;
  }
  auto fail = [&] {
    throw InvalidArgument(detail::describe("unbroadcast", {{"grad", grad}}) +
                          ": it cannot be summed to shape " + shape_to_string(shape));
  };
  if (shape.size() > g.size()) fail();
  const std::size_t lead = g.size() - shape.size();
  std::vector<int> axes;
  for (std::size_t d = 0; d < g.size(); ++d) {
    if (d < lead) {
      axes.push_back(static_cast<int>(d));
    } else if (shape[d - lead] != g[d]) {
      if (shape[d - lead] != 1) fail();
      axes.push_back(static_cast<int>(d));
    }
  }
  // Without leading axes, keeping the summed axes gives `shape` already: no reshape op.
  if (lead == 0) return reduce_sum(grad, axes, /*keepdims=*/true);
  Tensor summed = axes.empty() ? grad : reduce_sum(grad, axes, /*keepdims=*/false);
  return reshape(summed, detail::signed_shape(shape));
}

static Tangents broadcast_to_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return broadcast_to(dx, op.outputs[0].shape()); });
}

static Grads broadcast_to_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {detail::sum_to_input(op, 0, g[0])};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array)
