// sort, argsort and top_k, and the two linear ops their gradients are made of: TakeAlongAxis
// (values picked along an axis by per-line positions, NumPy's take_along_axis) and its adjoint
// PutAlongAxis (values added back at those positions into zeros). sort and top_k are a
// permutation computed once (never recorded: indices carry no gradient) followed by a
// recorded TakeAlongAxis, so first and second derivatives come from that pair of ops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/dispatch.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/indexing.hpp"

namespace tapegrad {

namespace {

// A shape seen as [outer, n, inner] around one axis.
struct Lines {
  std::size_t outer = 1, n = 1, inner = 1;
  Lines(const Shape& shape, std::size_t axis) : n(shape[axis]) {
    for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
    for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  }
};

}  // namespace

// ---- TakeAlongAxis, PutAlongAxis --------------------------------------------------------

static Grads take_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents take_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads put_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents put_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> take_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& inputs);
static std::vector<Tensor> put_batched(const detail::BatchingContext& op,
                                       const std::vector<Tensor>& inputs);
static detail::ReplayOutputs take_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& inputs);
static detail::ReplayOutputs put_replay(const detail::ReplayContext& op,
                                        const std::vector<Tensor>& inputs);
TAPEGRAD_BUILTIN_OP(take_op) = detail::with_replay(
    detail::differentiable_op("TakeAlongAxis", take_gradient, KeepSet::only({1}), KeepSet::none(),
                              take_tangent, take_batched),
    take_replay);
TAPEGRAD_BUILTIN_OP(put_op) =
    detail::with_replay(detail::differentiable_op("PutAlongAxis", put_gradient, KeepSet::only({1}),
                                                  KeepSet::none(), put_tangent, put_batched),
                        put_replay);

// out[o, j, i] = x[o, positions[o, j, i], i]; positions are valid by construction (internal).
static Tensor take_along_axis(const Tensor& x, const Tensor& positions, std::size_t axis) {
  const Lines in(x.shape(), axis);
  const Lines out_lines(positions.shape(), axis);
  const detail::IndexValues pos = detail::index_values(positions);
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> taken = detail::allocate_array<T>("take_along_axis", positions.shape());
    const T* src = detail::kernel_data<T>(x);
    T* dst = taken.data();
    const std::size_t k = out_lines.n, inner = in.inner;
    for (std::size_t o = 0; o < in.outer; ++o) {
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t at = (o * k + j) * inner;
        for (std::size_t i = 0; i < inner; ++i) {
          dst[at + i] = src[(o * in.n + static_cast<std::size_t>(pos[at + i])) * inner + i];
        }
      }
    }
    return Tensor(std::move(taken));
  });
  detail::record(take_op, {&x, &positions}, out,
                 [&] { return Attrs().set("axis", static_cast<std::int64_t>(axis)); });
  return out;
}

// The adjoint: zeros with `n` along axis, g's values added at their positions.
static Tensor put_along_axis(const Tensor& g, const Tensor& positions, std::size_t axis,
                             std::size_t n) {
  const Lines lines(g.shape(), axis);
  Shape out_shape = g.shape();
  out_shape[axis] = n;
  const detail::IndexValues pos = detail::index_values(positions);
  Tensor out = detail::dispatch_numeric("put_along_axis", g, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> put = detail::allocate_array<T>("put_along_axis", out_shape);
    std::fill(put.begin(), put.end(), T(0));
    const T* src = detail::kernel_data<T>(g);
    T* dst = put.data();
    const std::size_t k = lines.n, inner = lines.inner;
    for (std::size_t o = 0; o < lines.outer; ++o) {
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t at = (o * k + j) * inner;
        for (std::size_t i = 0; i < inner; ++i) {
          dst[(o * n + static_cast<std::size_t>(pos[at + i])) * inner + i] += src[at + i];
        }
      }
    }
    return Tensor(std::move(put));
  });
  detail::record(put_op, {&g, &positions}, out, [&] {
    return Attrs()
        .set("axis", static_cast<std::int64_t>(axis))
        .set("n", static_cast<std::int64_t>(n));
  });
  return out;
}

static std::size_t axis_attr(const Attrs& attrs) {
  return static_cast<std::size_t>(attrs.get_int("axis"));
}

// Both operands given the batch axis (their shapes agree off the axis), the axis shifted past
// it: one call on the whole batch.
static std::vector<Tensor> take_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& inputs) {
  return {take_along_axis(detail::with_batch_axis(op, inputs, 0),
                          detail::with_batch_axis(op, inputs, 1), axis_attr(op.attrs()) + 1)};
}

static std::vector<Tensor> put_batched(const detail::BatchingContext& op,
                                       const std::vector<Tensor>& inputs) {
  return {put_along_axis(detail::with_batch_axis(op, inputs, 0),
                         detail::with_batch_axis(op, inputs, 1), axis_attr(op.attrs()) + 1,
                         static_cast<std::size_t>(op.attrs().get_int("n")))};
}

static detail::ReplayOutputs take_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& inputs) {
  return {take_along_axis(inputs[0], inputs[1], axis_attr(op.attrs()))};
}

static detail::ReplayOutputs put_replay(const detail::ReplayContext& op,
                                        const std::vector<Tensor>& inputs) {
  return {put_along_axis(inputs[0], inputs[1], axis_attr(op.attrs()),
                         static_cast<std::size_t>(op.attrs().get_int("n")))};
}

// Both linear in their first input: the op applied to the tangent.
static Tangents take_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return take_along_axis(dx, op.inputs[1], axis_attr(op.attrs()));
  });
}

static Tangents put_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dg) {
    return put_along_axis(dg, op.inputs[1], axis_attr(op.attrs()),
                          static_cast<std::size_t>(op.attrs().get_int("n")));
  });
}

static Grads take_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  const std::size_t axis = axis_attr(op.attrs());
  result[0] = put_along_axis(g[0], op.inputs()[1], axis, op.input_shape(0)[axis]);
  return result;
}

static Grads put_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads result(2);
  result[0] = take_along_axis(g[0], op.inputs()[1], axis_attr(op.attrs()));
  return result;
}

// ---- argsort, sort, top_k ---------------------------------------------------------------

static Tensor sorted_positions(const char* op, const Tensor& x, std::size_t axis, bool descending,
                               std::size_t k);

// The positions are recorded as a not-differentiable op (argsort, sort's permutation, top_k's
// indices), so that vectorized_map's trace sees them depend on x; its rule is the same sort one
// axis further in, on the whole batch.
static std::vector<Tensor> sorted_positions_batched(const detail::BatchingContext& op,
                                                    const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {sorted_positions("argsort", inputs[0], axis_attr(attrs) + 1, attrs.get_bool("descending"),
                           static_cast<std::size_t>(attrs.get_int("k")))};
}
static detail::ReplayOutputs sorted_positions_replay(const detail::ReplayContext& op,
                                                     const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {sorted_positions("argsort", inputs[0], axis_attr(attrs), attrs.get_bool("descending"),
                           static_cast<std::size_t>(attrs.get_int("k")))};
}
TAPEGRAD_BUILTIN_OP(sorted_positions_op) = detail::with_replay(
    detail::not_differentiable_op("ArgSort", sorted_positions_batched), sorted_positions_replay);

// Per line along `axis`, the first `k` positions (all when k == n) of the stable order as
// Int32, ascending or descending; a NaN sorts above every number (last ascending, first
// descending), so the comparison is a strict weak order. Recorded.
static Tensor sorted_positions(const char* op, const Tensor& x, std::size_t axis, bool descending,
                               std::size_t k) {
  const Lines lines(x.shape(), axis);
  Shape out_shape = x.shape();
  out_shape[axis] = k;
  xt::xarray<std::int32_t> out = detail::allocate_array<std::int32_t>(op, out_shape);
  if (lines.n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidArgument(detail::describe(op, x) +
                          ": the sorted axis is too long for int32 indices");
  }
  detail::dispatch_numeric(op, x, [&](auto zero) {
    using T = decltype(zero);
    const T* src = detail::kernel_data<T>(x);
    std::vector<std::int32_t> order(lines.n);
    auto is_nan = [](T v) { return v != v; };
    auto below = [&](T a, T b) { return !is_nan(a) && (is_nan(b) || a < b); };
    // A few of many (top_k): a heap selection of the k first, ties broken by position (the
    // stable order). Everything else: a stable merge sort. Not std::sort: on periodic data
    // with many ties it measured 4x slower than both here (introsort falling back to heapsort).
    const bool select = k * 8 < lines.n;
    for (std::size_t o = 0; o < lines.outer; ++o) {
      for (std::size_t i = 0; i < lines.inner; ++i) {
        const T* line = src + o * lines.n * lines.inner + i;
        auto at = [&](std::int32_t p) { return line[static_cast<std::size_t>(p) * lines.inner]; };
        auto first = [&](std::int32_t p, std::int32_t q) {
          return descending ? below(at(q), at(p)) : below(at(p), at(q));
        };
        std::iota(order.begin(), order.end(), 0);
        if (select) {
          std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k),
                            order.end(), [&](std::int32_t p, std::int32_t q) {
                              return first(p, q) || (!first(q, p) && p < q);
                            });
        } else {
          std::stable_sort(order.begin(), order.end(), first);
        }
        for (std::size_t j = 0; j < k; ++j) {
          out.data()[(o * k + j) * lines.inner + i] = order[j];
        }
      }
    }
    return 0;
  });
  Tensor positions(std::move(out));
  detail::record(sorted_positions_op, {&x}, positions, [&] {
    return Attrs()
        .set("axis", static_cast<std::int64_t>(axis))
        .set("descending", descending)
        .set("k", static_cast<std::int64_t>(k));
  });
  return positions;
}

static std::size_t sort_axis(const char* op, const Tensor& x, int axis) {
  detail::require_defined(op, x);
  if (x.rank() == 0) throw InvalidArgument(detail::describe(op, x) + ": x must have rank >= 1");
  if (x.dtype() == DType::Bool)
    detail::throw_unsupported_dtype(op, x, "float32, float64, int32 or int64");
  return detail::normalize_axis(op, axis, x);
}

Tensor argsort(const Tensor& x, int axis, bool descending) {
  const std::size_t a = sort_axis("argsort", x, axis);
  return sorted_positions("argsort", x, a, descending, x.shape()[a]);
}

Tensor sort(const Tensor& x, int axis, bool descending) {
  const std::size_t a = sort_axis("sort", x, axis);
  return take_along_axis(x, sorted_positions("sort", x, a, descending, x.shape()[a]), a);
}

TopK top_k(const Tensor& x, int k) {
  const std::size_t a = sort_axis("top_k", x, -1);
  const std::size_t n = x.shape()[a];
  if (k < 0 || static_cast<std::size_t>(k) > n) {
    throw InvalidArgument(detail::describe("top_k", x) + ": k " + std::to_string(k) +
                          " must be in [0, " + std::to_string(n) + "] (the last dimension)");
  }
  Tensor indices =
      sorted_positions("top_k", x, a, /*descending=*/true, static_cast<std::size_t>(k));
  Tensor values = take_along_axis(x, indices, a);
  return {std::move(values), std::move(indices)};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_sort)
