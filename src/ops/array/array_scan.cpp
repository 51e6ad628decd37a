// Scans along one axis (cumsum, cumprod: TF's Cumsum and Cumprod with exclusive and reverse)
// and reverse (TF's ReverseV2). The scan loops are kernels/scan_kernel.hpp.
#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "kernels/scan_kernel.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/indexing.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

namespace {

struct ScanAttrs {
  std::size_t axis;
  bool exclusive;
  bool reverse;
};

ScanAttrs scan_attrs(const Attrs& attrs) {
  return {static_cast<std::size_t>(attrs.get_int("axis")), attrs.get_bool("exclusive"),
          attrs.get_bool("reverse")};
}

}  // namespace

// The scan of x along `axis` with `combine` (+ or *) starting from `identity` (the loops are
// in kernels/scan_kernel.hpp).
template <class Combine>
static Tensor scan(const char* op, const Tensor& x, const ScanAttrs& s, double identity,
                   Combine combine) {
  const Shape& shape = x.shape();
  detail::ScanLayout layout;
  for (std::size_t d = 0; d < s.axis; ++d) layout.outer *= shape[d];
  for (std::size_t d = s.axis + 1; d < shape.size(); ++d) layout.inner *= shape[d];
  layout.n = shape[s.axis];
  return detail::dispatch_numeric(op, x, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = detail::allocate_array<T>(op, shape);
    detail::scan_lines(detail::kernel_data<T>(x), out.data(), layout, s.exclusive, s.reverse,
                       static_cast<T>(identity), combine);
    return Tensor(std::move(out));
  });
}

static ScanAttrs checked_scan(const char* op, const Tensor& x, int axis, bool exclusive,
                              bool reverse) {
  detail::require_defined(op, x);
  if (x.rank() == 0) throw InvalidArgument(detail::describe(op, x) + ": x must have rank >= 1");
  return {detail::normalize_axis(op, axis, x), exclusive, reverse};
}

static Attrs to_attrs(const ScanAttrs& s) {
  return Attrs()
      .set("axis", static_cast<std::int64_t>(s.axis))
      .set("exclusive", s.exclusive)
      .set("reverse", s.reverse);
}

static Tensor cumsum_of(const Tensor& x, const ScanAttrs& s) {
  return cumsum(x, static_cast<int>(s.axis), s.exclusive, s.reverse);
}

// A scan's batching rule: the recorded scan one axis further in (past the batch axis), one
// call on the whole batch.
template <Tensor (*Scan)(const Tensor&, int, bool, bool)>
static std::vector<Tensor> scan_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& inputs) {
  const ScanAttrs s = scan_attrs(op.attrs());
  return {Scan(inputs[0], static_cast<int>(s.axis) + 1, s.exclusive, s.reverse)};
}
// Its replay: the recorded scan.
template <Tensor (*Scan)(const Tensor&, int, bool, bool)>
static detail::ReplayOutputs scan_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& inputs) {
  const ScanAttrs s = scan_attrs(op.attrs());
  return {Scan(inputs[0], static_cast<int>(s.axis), s.exclusive, s.reverse)};
}

// ---- Cumsum -----------------------------------------------------------------------------

static Grads cumsum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents cumsum_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(cumsum_op) = detail::with_replay(
    detail::differentiable_op("Cumsum", cumsum_gradient, KeepSet::none(), KeepSet::none(),
                              cumsum_tangent, scan_batched<&tapegrad::cumsum>),
    scan_replay<&tapegrad::cumsum>);

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  const ScanAttrs s = checked_scan("cumsum", x, axis, exclusive, reverse);
  Tensor out = scan("cumsum", x, s, 0, [](auto a, auto b) { return detail::wrapping_add(a, b); });
  detail::record(cumsum_op, {&x}, out, [&] { return to_attrs(s); });
  return out;
}

static Tangents cumsum_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return cumsum_of(dx, scan_attrs(op.attrs())); });
}

// Each output sums the inputs before (or after) it, so each input collects the gradients of
// the outputs after (or before) it: the same scan run the other way.
static Grads cumsum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  ScanAttrs s = scan_attrs(op.attrs());
  s.reverse = !s.reverse;
  return {cumsum_of(g[0], s)};
}

// ---- Cumprod ----------------------------------------------------------------------------

static Grads cumprod_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents cumprod_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(cumprod_op) = detail::with_replay(
    detail::differentiable_op("Cumprod", cumprod_gradient, KeepSet::all(), KeepSet::all(),
                              cumprod_tangent, scan_batched<&tapegrad::cumprod>),
    scan_replay<&tapegrad::cumprod>);

Tensor cumprod(const Tensor& x, int axis, bool exclusive, bool reverse) {
  const ScanAttrs s = checked_scan("cumprod", x, axis, exclusive, reverse);
  Tensor out = scan("cumprod", x, s, 1, [](auto a, auto b) { return detail::wrapping_mul(a, b); });
  detail::record(cumprod_op, {&x}, out, [&] { return to_attrs(s); });
  return out;
}

namespace {

// The exact partials of a cumprod of short lines (kExactPartialsUpTo elements): with the
// scanned axis moved last, partials[..., k, j] = d y_j / d x_k = prod of the x_i that y_j
// covers other than x_k, and 0 when y_j does not cover x_k. Built as a cumprod of x repeated n
// times with x_k replaced by 1 in row k, so it is made of tapegrad ops (and differentiable
// again, exact to every order whatever zeros x holds). O(n^2) per line.
struct CumprodPartials {
  Tensor partials;                 // [..., n, n]
  std::vector<int> to_last, back;  // the axis moved last, and back again
};

CumprodPartials cumprod_partials(const Tensor& x, const ScanAttrs& s) {
  const int rank = static_cast<int>(x.rank());
  CumprodPartials out;
  for (int d = 0; d < rank; ++d) {
    if (d != static_cast<int>(s.axis)) out.to_last.push_back(d);
  }
  out.to_last.push_back(static_cast<int>(s.axis));
  out.back.resize(out.to_last.size());
  for (int d = 0; d < rank; ++d)
    out.back[static_cast<std::size_t>(out.to_last[static_cast<std::size_t>(d)])] = d;
  const Tensor moved = transpose(x, out.to_last);
  const std::size_t n = x.shape()[s.axis];
  const Tensor repeated =
      where(eye(n, DType::Bool), scalar(1.0, x.dtype()), expand_dims(moved, -2));
  // covers[k, j]: y_j's product includes x_k.
  std::vector<double> covers(n * n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t j = 0; j < n; ++j) {
      const bool before = s.exclusive ? k < j : k <= j;
      const bool after = s.exclusive ? k > j : k >= j;
      covers[k * n + j] = (s.reverse ? after : before) ? 1.0 : 0.0;
    }
  }
  out.partials = multiply(cumprod(repeated, -1, s.exclusive, s.reverse),
                          from_values(covers, {n, n}, x.dtype()));
  return out;
}

// Lines of at most this many elements use the exact partials (cumprod_partials); longer ones
// the O(n) form below. Chosen by the shape, never by x's values: a rule that branched on them
// would be fixed by a Function's trace or a vectorized_map, and wrong for the next input or
// the other rows (TF's formula, which divides by x, gave NaN there).
constexpr std::size_t kExactPartialsUpTo = 16;

// What the O(n) form needs where x has zeros, along the scan with its direction and
// exclusivity (`s`):
//   covered_zeros  how many zeros each y_j covers (y_j is 0 from the first on);
//   zeros_so_far   the same counted inclusively (x_i itself included);
//   first_zero     x_i is the first zero of its line, and first_zero_x x there (0 elsewhere);
//   safe_x         x with its zeros replaced by 1, and safe_y its scan: y_j without its zero
//                  when it covers exactly one.
// With them (and what each rule adds) the gradient and the tangent are exact to first order
// with any number of zeros, and to second order with at most one zero per line (the terms of
// y_j covering two zeros are dropped, as they are 0: their derivatives are not).
struct CumprodZeros {
  ScanAttrs inclusive;
  Tensor covered_zeros, zeros_so_far, first_zero, first_zero_x, safe_x, safe_y;
};

CumprodZeros cumprod_zeros(const Tensor& x, const ScanAttrs& s) {
  const Tensor is_zero = equal(x, 0.0);
  const Tensor zero_count = cast(is_zero, x.dtype());
  CumprodZeros z;
  z.inclusive = s;
  z.inclusive.exclusive = false;
  z.covered_zeros = cumsum_of(zero_count, s);
  z.zeros_so_far = cumsum_of(zero_count, z.inclusive);
  z.first_zero = where(is_zero, equal(z.zeros_so_far, 1.0), is_zero);
  z.first_zero_x = where(z.first_zero, x, zeros_like(x));
  z.safe_x = where(is_zero, scalar(1.0, x.dtype()), x);
  z.safe_y = cumprod(z.safe_x, static_cast<int>(s.axis), s.exclusive, s.reverse);
  return z;
}

}  // namespace

// y_j is the product of the x_i it covers: dy_j = y_j sum_i dx_i / x_i where it covers no zero;
// where it covers one, x_k, y_j without x_k times (dx_k + x_k sum_{i != k} dx_i / x_i); 0 where
// it covers more. Short lines: sum_k partials[k, j] dx_k.
static Tangents cumprod_tangent(const ForwardContext& op, const Tangents& tangents) {
  const ScanAttrs s = scan_attrs(op.attrs());
  const Tensor& x = op.inputs[0];
  return detail::unary_tangent(op, tangents, [&](const Tensor& dx) {
    if (x.shape()[s.axis] <= kExactPartialsUpTo) {
      const CumprodPartials p = cumprod_partials(x, s);
      const Tensor dx_moved = expand_dims(transpose(dx, p.to_last), -1);  // [..., k, 1]
      return transpose(reduce_sum(multiply(p.partials, dx_moved), {-2}), p.back);
    }
    const CumprodZeros z = cumprod_zeros(x, s);
    // sum dx_i / x_i over the covered i but the first zero; x_k as y_j covers it.
    const Tensor ratio_sums =
        cumsum_of(where(z.first_zero, zeros_like(dx), divide(dx, z.safe_x)), s);
    const Tensor covered_zero_x = cumsum_of(z.first_zero_x, s);
    const Tensor at_zero = cumsum_of(where(z.first_zero, dx, zeros_like(dx)), s);
    const Tensor one_zero = multiply(z.safe_y, add(at_zero, multiply(covered_zero_x, ratio_sums)));
    return where(equal(z.covered_zeros, 0.0), multiply(op.outputs[0], ratio_sums),
                 where(equal(z.covered_zeros, 1.0), one_zero, zeros_like(one_zero)));
  });
}

// With W_i = sum of g_j (y_j without the zero) over the y_j that cover x_i and exactly one
// zero: TF's cumsum(y g, !reverse) / x where no zero comes at or before x_i; W_k at a line's
// first zero x_k; x_k W_i / x_i after it (0, with x_k's derivative). Short lines: the exact
// partials.
static Grads cumprod_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const ScanAttrs s = scan_attrs(op.attrs());
  if (x.shape()[s.axis] <= kExactPartialsUpTo) {
    const CumprodPartials p = cumprod_partials(x, s);
    const Tensor g_moved = expand_dims(transpose(g[0], p.to_last), -2);  // [..., 1, j]
    return {transpose(reduce_sum(multiply(p.partials, g_moved), {-1}), p.back)};
  }
  ScanAttrs flipped = s;
  flipped.reverse = !flipped.reverse;
  const CumprodZeros z = cumprod_zeros(x, s);
  const Tensor before_zero = divide(cumsum_of(multiply(op.outputs()[0], g[0]), flipped), z.safe_x);
  const Tensor w = cumsum_of(
      where(equal(z.covered_zeros, 1.0), multiply(z.safe_y, g[0]), zeros_like(g[0])), flipped);
  // After the first zero: x_k W_i / x_i, x_k carried along from the zero on.
  const Tensor zero_x = cumsum_of(z.first_zero_x, z.inclusive);
  const Tensor after_zero = divide(multiply(zero_x, w), z.safe_x);
  return {where(equal(z.zeros_so_far, 0.0), before_zero, where(z.first_zero, w, after_zero))};
}

// ---- ReverseV2 --------------------------------------------------------------------------

static Grads reverse_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents reverse_tangent(const ForwardContext& op, const Tangents& tangents);
// The recorded axes shifted past the batch axis: one call on the whole batch.
static std::vector<Tensor> reverse_batched(const detail::BatchingContext& op,
                                           const std::vector<Tensor>& inputs) {
  std::vector<int> axes;
  for (std::int64_t a : op.attrs().get_ints("axes")) axes.push_back(static_cast<int>(a) + 1);
  return {reverse(inputs[0], axes)};
}
static Tensor reverse_like(const Tensor& t, const Attrs& attrs);
static detail::ReplayOutputs reverse_replay(const detail::ReplayContext& op,
                                            const std::vector<Tensor>& inputs) {
  return {reverse_like(inputs[0], op.attrs())};
}
TAPEGRAD_BUILTIN_OP(reverse_op) = detail::with_replay(
    detail::differentiable_op("ReverseV2", reverse_gradient, KeepSet::none(), KeepSet::none(),
                              reverse_tangent, reverse_batched),
    reverse_replay);

Tensor reverse(const Tensor& x, std::vector<int> axes) {
  detail::require_defined("reverse", x);
  std::vector<bool> flip(x.rank(), false);
  for (int axis : axes) {
    const std::size_t a = detail::normalize_axis("reverse", axis, x);
    if (flip[a]) {
      throw InvalidArgument(detail::describe("reverse", x) + ": axes " +
                            detail::ints_to_string(axes) + " name dimension " + std::to_string(a) +
                            " twice");
    }
    flip[a] = true;
  }
  // A view: each flipped axis starts at its last element and steps backwards.
  detail::ViewGeometry view = detail::view_geometry(x);
  for (std::size_t d = 0; d < flip.size(); ++d) {
    if (!flip[d] || view.shape[d] == 0) continue;
    view.offset =
        static_cast<std::size_t>(static_cast<std::ptrdiff_t>(view.offset) +
                                 static_cast<std::ptrdiff_t>(view.shape[d] - 1) * view.strides[d]);
    view.strides[d] = -view.strides[d];
  }
  Tensor out = detail::make_view(std::move(view));
  detail::record(reverse_op, {&x}, out, [&] {
    std::vector<std::int64_t> dims;
    for (std::size_t d = 0; d < flip.size(); ++d) {
      if (flip[d]) dims.push_back(static_cast<std::int64_t>(d));
    }
    return Attrs().set("axes", dims);
  });
  return out;
}

static Tensor reverse_like(const Tensor& t, const Attrs& attrs) {
  const auto& dims = attrs.get_ints("axes");
  return reverse(t, std::vector<int>(dims.begin(), dims.end()));
}

static Tangents reverse_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& dx) { return reverse_like(dx, op.attrs()); });
}

static Grads reverse_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {reverse_like(g[0], op.attrs())};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_scan)
