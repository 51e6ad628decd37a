// pad (TF tf.pad: PadV2 for the constant mode, MirrorPad for reflect and symmetric) and
// MirrorPadGrad. Every mode is a separable index map: along each axis, each output coordinate
// reads one input coordinate, or none (the constant). The forward gathers through the maps,
// MirrorPadGrad adds back through them (its adjoint); the constant mode's gradient is a slice.
#include <algorithm>
#include <new>

#include "kernels/dispatch.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/indexing.hpp"

namespace tapegrad {

using Paddings = std::vector<std::pair<std::int64_t, std::int64_t>>;
using AxisMaps = std::vector<std::vector<std::int64_t>>;  // per axis: output -> input or -1

static const char* mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::Constant:
      return "constant";
    case PadMode::Reflect:
      return "reflect";
    case PadMode::Symmetric:
      return "symmetric";
  }
  return "?";
}

static std::vector<std::int64_t> flat_paddings(const Paddings& paddings) {
  std::vector<std::int64_t> flat;
  for (const auto& [before, after] : paddings) flat.insert(flat.end(), {before, after});
  return flat;
}

static std::string paddings_text(const Paddings& paddings) {
  std::string out = "[";
  for (std::size_t d = 0; d < paddings.size(); ++d) {
    out += (d ? ", [" : "[") + std::to_string(paddings[d].first) + ", " +
           std::to_string(paddings[d].second) + "]";
  }
  return out + "]";
}

// Checks paddings against x's `shape` for `mode` (InvalidArgument naming pad, x, the paddings
// and the mode) and builds the maps.
static AxisMaps axis_maps(const Shape& shape, DType dtype, const Paddings& paddings, PadMode mode) {
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(std::string("pad: x has shape ") + detail::ints_to_string(shape) +
                          " and dtype " + dtype_name(dtype) + ": paddings " +
                          paddings_text(paddings) + " (mode " + mode_name(mode) + ") " + why);
  };
  // Mirroring is TF's MirrorPad, which has no bool kernel; a bool is padded only with a
  // constant (docs/ops.md, pad).
  if (mode != PadMode::Constant && dtype == DType::Bool) {
    fail("need a numeric dtype: bool is padded only in constant mode");
  }
  if (paddings.size() != shape.size()) fail("need one (before, after) pair per dimension");
  AxisMaps maps(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto dim = static_cast<std::int64_t>(shape[d]);
    const auto [before, after] = paddings[d];
    if (before < 0 || after < 0) fail("must be >= 0");
    // No padding is always possible, even of an empty dimension (a batch of none).
    const std::int64_t limit = mode == PadMode::Reflect ? std::max<std::int64_t>(dim - 1, 0) : dim;
    if (mode != PadMode::Constant && (before > limit || after > limit)) {
      fail("exceed dimension " + std::to_string(d) + " of size " + std::to_string(dim) +
           (mode == PadMode::Reflect ? " (at most size - 1)" : " (at most size)"));
    }
    if (before > static_cast<std::int64_t>(detail::kMaxElements) - dim - after)
      fail("are too large");
    auto& map = maps[d];
    try {
      map.resize(static_cast<std::size_t>(before + dim + after));
    } catch (const std::bad_alloc&) {
      fail("need more memory than there is");
    }
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(map.size()); ++j) {
      std::int64_t c = j - before;
      if (c < 0 || c >= dim) {
        if (mode == PadMode::Constant) {
          c = -1;
        } else if (c < 0) {
          c = mode == PadMode::Reflect ? -c : -c - 1;
        } else {
          c = mode == PadMode::Reflect ? 2 * (dim - 1) - c : 2 * dim - 1 - c;
        }
      }
      map[static_cast<std::size_t>(j)] = c;
    }
  }
  return maps;
}

// Visits every row of the padded shape (every axis but the last): visit(row start in the
// padded tensor, source row start in x or -1 when the row lies in the constant padding).
template <class Visit>
static void for_each_padded_row(const Shape& shape, const AxisMaps& maps, Visit visit) {
  const std::size_t rank = shape.size();
  const auto strides = detail::row_major_strides(shape);
  std::size_t rows = 1;
  for (std::size_t d = 0; d + 1 < rank; ++d) rows *= maps[d].size();
  const std::size_t run = maps[rank - 1].size();
  std::vector<std::size_t> index(rank - 1, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    std::int64_t from = 0;
    for (std::size_t d = 0; d + 1 < rank && from >= 0; ++d) {
      const std::int64_t c = maps[d][index[d]];
      from = c < 0 ? -1 : from + c * static_cast<std::int64_t>(strides[d]);
    }
    visit(r * run, from);
    for (std::size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < maps[d].size()) break;
      index[d] = 0;
    }
  }
}

static Shape padded_shape(const AxisMaps& maps) {
  Shape out;
  for (const auto& map : maps) out.push_back(map.size());
  return out;
}

// ---- PadV2, MirrorPad, MirrorPadGrad ----------------------------------------------------

static Grads pad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents pad_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads mirror_grad_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents mirror_grad_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> pad_batched(const detail::BatchingContext& op,
                                       const std::vector<Tensor>& inputs);
static std::vector<Tensor> mirror_grad_batched(const detail::BatchingContext& op,
                                               const std::vector<Tensor>& inputs);
static detail::ReplayOutputs pad_replay(const detail::ReplayContext& op,
                                        const std::vector<Tensor>& inputs);
static detail::ReplayOutputs mirror_grad_replay(const detail::ReplayContext& op,
                                                const std::vector<Tensor>& inputs);
TAPEGRAD_BUILTIN_OP(pad_op) =
    detail::with_replay(detail::differentiable_op("PadV2", pad_gradient, KeepSet::none(),
                                                  KeepSet::none(), pad_tangent, pad_batched),
                        pad_replay);
TAPEGRAD_BUILTIN_OP(mirror_pad_op) =
    detail::with_replay(detail::differentiable_op("MirrorPad", pad_gradient, KeepSet::none(),
                                                  KeepSet::none(), pad_tangent, pad_batched),
                        pad_replay);
TAPEGRAD_BUILTIN_OP(mirror_pad_grad_op) = detail::with_replay(
    detail::differentiable_op("MirrorPadGrad", mirror_grad_gradient, KeepSet::none(),
                              KeepSet::none(), mirror_grad_tangent, mirror_grad_batched),
    mirror_grad_replay);

template <class T>
static T value_as(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

Tensor pad(const Tensor& x, Paddings paddings, PadMode mode, double value) {
  detail::require_defined("pad", x);
  const AxisMaps maps = axis_maps(x.shape(), x.dtype(), paddings, mode);
  if (mode == PadMode::Constant) detail::scalar_of("pad", value, x.dtype());  // representable
  const Shape out_shape = padded_shape(maps);
  Tensor out = detail::dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> padded = detail::allocate_array<T>("pad", out_shape);
    const T* src = detail::kernel_data<T>(x);
    T* dst = padded.data();
    const T fill = value_as<T>(value);
    if (x.rank() == 0) {
      dst[0] = src[0];
    } else if (padded.size() != 0) {
      const auto& last = maps.back();
      for_each_padded_row(x.shape(), maps, [&](std::size_t to, std::int64_t from) {
        for (std::size_t j = 0; j < last.size(); ++j) {
          dst[to + j] = from < 0 || last[j] < 0 ? fill : src[from + last[j]];
        }
      });
    }
    return Tensor(std::move(padded));
  });
  detail::record(mode == PadMode::Constant ? pad_op : mirror_pad_op, {&x}, out, [&] {
    return Attrs()
        .set("paddings", flat_paddings(paddings))
        .set("mode", static_cast<std::int64_t>(mode))
        .set("value", value);
  });
  return out;
}

// g of the padded shape added back through the maps into zeros of x's shape.
static Tensor mirror_pad_grad(const Tensor& g, const Shape& shape, const Paddings& paddings,
                              PadMode mode) {
  const AxisMaps maps = axis_maps(shape, g.dtype(), paddings, mode);
  Tensor out = detail::dispatch_numeric("pad", g, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> summed = xt::zeros<T>(shape);
    const T* src = detail::kernel_data<T>(g);
    T* dst = summed.data();
    if (shape.empty()) {
      dst[0] = src[0];
    } else if (g.size() != 0) {
      const auto& last = maps.back();
      for_each_padded_row(shape, maps, [&](std::size_t from, std::int64_t to) {
        for (std::size_t j = 0; j < last.size(); ++j) dst[to + last[j]] += src[from + j];
      });
    }
    return Tensor(std::move(summed));
  });
  detail::record(mirror_pad_grad_op, {&g}, out, [&] {
    return Attrs()
        .set("paddings", flat_paddings(paddings))
        .set("mode", static_cast<std::int64_t>(mode));
  });
  return out;
}

static Paddings paddings_of(const Attrs& attrs) {
  const auto& flat = attrs.get_ints("paddings");
  Paddings out;
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) out.emplace_back(flat[i], flat[i + 1]);
  return out;
}

static PadMode mode_of(const Attrs& attrs) { return static_cast<PadMode>(attrs.get_int("mode")); }

// The recorded paddings with (0, 0) for the batch axis in front: one call on the whole batch.
static Paddings batch_paddings(const Attrs& attrs) {
  Paddings paddings = paddings_of(attrs);
  paddings.insert(paddings.begin(), {0, 0});
  return paddings;
}

static std::vector<Tensor> pad_batched(const detail::BatchingContext& op,
                                       const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {pad(inputs[0], batch_paddings(attrs), mode_of(attrs), attrs.get_double("value"))};
}

static std::vector<Tensor> mirror_grad_batched(const detail::BatchingContext& op,
                                               const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {mirror_pad_grad(inputs[0], op.batched_output_shape(0), batch_paddings(attrs),
                          mode_of(attrs))};
}

// Replay rules: the recorded paddings, mode and value; MirrorPadGrad's traced output shape.
static detail::ReplayOutputs pad_replay(const detail::ReplayContext& op,
                                        const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {pad(inputs[0], paddings_of(attrs), mode_of(attrs), attrs.get_double("value"))};
}

static detail::ReplayOutputs mirror_grad_replay(const detail::ReplayContext& op,
                                                const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {mirror_pad_grad(inputs[0], op.output_shapes[0], paddings_of(attrs), mode_of(attrs))};
}

// Linear in x (the constant does not move with it): the same padding of the tangent, with 0.
static Tangents pad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    return pad(dx, paddings_of(op.attrs()), mode_of(op.attrs()), 0);
  });
}

static Tangents mirror_grad_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [&](const Tensor& dg) {
    return mirror_pad_grad(dg, op.outputs[0].shape(), paddings_of(op.attrs()), mode_of(op.attrs()));
  });
}

static Grads pad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Paddings paddings = paddings_of(op.attrs());
  const PadMode mode = mode_of(op.attrs());
  if (mode == PadMode::Constant) {
    std::vector<std::int64_t> begin;
    for (const auto& p : paddings) begin.push_back(p.first);
    return {slice(g[0], begin, detail::signed_shape(op.input_shape(0)))};
  }
  return {mirror_pad_grad(g[0], op.input_shape(0), paddings, mode)};
}

static Grads mirror_grad_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {pad(g[0], paddings_of(op.attrs()), mode_of(op.attrs()), 0)};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_pad)
