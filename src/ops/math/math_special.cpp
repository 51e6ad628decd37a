// Special functions and the remaining elementwise math of TF: erf, erfc, lgamma, digamma,
// polygamma (internal), atan2, floormod, clip_by_value, squared_difference. Each op reads top
// to bottom: its definition, its forward, its rules. The one-input ones are defined by a slope
// function in tapegrad ops (math_support.hpp's slope_gradient / slope_tangent), so their
// derivatives nest: lgamma -> digamma -> polygamma(1) -> polygamma(2) -> ...
//
// The special functions are computed in double for float32 too (then rounded): the C
// library's float versions are no faster here and less accurate.
#include "ops/math/math_special.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "kernels/int_arith.hpp"
#include "kernels/special_functions.hpp"
#include "ops/batching_support.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/op_trace.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

using detail::constant_like;
using detail::in_double;
using detail::sum_to_input;

// ---- Erf, Erfc: +-2/sqrt(pi) exp(-x^2) --------------------------------------------------

static Tensor erf_slope(const Tensor& x) {
  return multiply(constant_like(M_2_SQRTPI, x), exp(negative(square(x))));
}
static Tensor erfc_slope(const Tensor& x) { return negative(erf_slope(x)); }
TAPEGRAD_BUILTIN_OP(erf_op) = detail::differentiable_op("Erf", detail::slope_gradient<erf_slope>,
                                                        KeepSet::all(), KeepSet::none(),
                                                        detail::slope_tangent<erf_slope>,
                                                        detail::batch_unary<&tapegrad::erf>);
TAPEGRAD_BUILTIN_OP(erfc_op) = detail::differentiable_op("Erfc", detail::slope_gradient<erfc_slope>,
                                                         KeepSet::all(), KeepSet::none(),
                                                         detail::slope_tangent<erfc_slope>,
                                                         detail::batch_unary<&tapegrad::erfc>);

Tensor erf(const Tensor& x) {
  // In double (SIMD above 32 elements: kernels/simd/erfc_batch.hpp).
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Erf>(erf_op, "erf", x);
}

Tensor erfc(const Tensor& x) {
  return detail::vectorised_floating_unary_op<detail::VectorFunction::Erfc>(erfc_op, "erfc", x);
}

// ---- Lgamma: digamma ---------------------------------------------------------------------

static Tensor lgamma_slope(const Tensor& x) { return digamma(x); }
TAPEGRAD_BUILTIN_OP(lgamma_op) = detail::differentiable_op("Lgamma",
                                                           detail::slope_gradient<lgamma_slope>,
                                                           KeepSet::all(), KeepSet::none(),
                                                           detail::slope_tangent<lgamma_slope>,
                                                           detail::batch_unary<&tapegrad::lgamma>);

// lgamma_r, not std::lgamma: the latter writes the global signgam (a data race between
// threads).
Tensor lgamma(const Tensor& x) {
  return detail::floating_unary_op(lgamma_op, "lgamma", x, in_double([](double v) {
                                     int sign = 0;
                                     return ::lgamma_r(v, &sign);
                                   }));
}

// ---- Digamma: polygamma(1, x) ------------------------------------------------------------

static Tensor digamma_slope(const Tensor& x) { return detail::polygamma(1, x); }
TAPEGRAD_BUILTIN_OP(digamma_op) = detail::differentiable_op(
    "Digamma", detail::slope_gradient<digamma_slope>, KeepSet::all(), KeepSet::none(),
    detail::slope_tangent<digamma_slope>, detail::batch_unary<&tapegrad::digamma>);

Tensor digamma(const Tensor& x) {
  return detail::floating_unary_op(digamma_op, "digamma", x, in_double(detail::digamma_value));
}

// ---- Polygamma (internal, order n an attribute): polygamma(n + 1, x) ---------------------

static Grads polygamma_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents polygamma_tangent(const ForwardContext& op, const Tangents& tangents);
// Elementwise: the recorded order n, on the whole batch.
static std::vector<Tensor> polygamma_batched(const detail::BatchingContext& op,
                                             const std::vector<Tensor>& inputs) {
  return {detail::polygamma(static_cast<int>(op.attrs().get_int("n")), inputs[0])};
}
static detail::ReplayOutputs polygamma_replay(const detail::ReplayContext& op,
                                              const std::vector<Tensor>& inputs) {
  return {detail::polygamma(static_cast<int>(op.attrs().get_int("n")), inputs[0])};
}
TAPEGRAD_BUILTIN_OP(polygamma_op) = detail::with_replay(
    detail::differentiable_op("Polygamma", polygamma_gradient, KeepSet::all(), KeepSet::none(),
                              polygamma_tangent, polygamma_batched),
    polygamma_replay);

Tensor detail::polygamma(int n, const Tensor& x) {
  const char* function = "polygamma";
  require_defined(function, x);
  if (n < 0) {
    throw InvalidArgument(describe(function, x) + ": the order n = " + std::to_string(n) +
                          " must be >= 0");
  }
  Tensor out = unary_kernel<DTypeSet::Floating>(
      function, x, in_double([n](double v) { return polygamma_value(n, v); }));
  record(polygamma_op, {&x}, out, [&] { return Attrs().set("n", std::int64_t{n}); });
  return out;
}

static int order_of(const Attrs& attrs) { return static_cast<int>(attrs.get_int("n")); }

static Tangents polygamma_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const int n = order_of(op.attrs());
  return detail::unary_tangent(
      op, tangents, [&](const Tensor& dx) { return multiply(dx, detail::polygamma(n + 1, x)); });
}

static Grads polygamma_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], detail::polygamma(order_of(op.attrs()) + 1, op.inputs()[0]))};
}

// ---- The binary ops' shared validation ---------------------------------------------------

static std::string describe_pair(const char* op, const char* a_name, const Tensor& a,
                                 const char* b_name, const Tensor& b) {
  return detail::describe(op, {{a_name, a}, {b_name, b}});
}

// Both defined, one dtype, floating.
static void require_floating_pair(const char* op, const char* a_name, const Tensor& a,
                                  const char* b_name, const Tensor& b) {
  detail::require_defined(op, a);
  detail::require_defined(op, b);
  if (a.dtype() != b.dtype()) {
    throw InvalidArgument(describe_pair(op, a_name, a, b_name, b) +
                          ": the dtypes differ (no implicit promotion; cast one)");
  }
  if (!is_floating(a.dtype())) {
    throw InvalidArgument(describe_pair(op, a_name, a, b_name, b) +
                          ": expected float32 or float64 operands");
  }
}

// ---- Atan2(y, x): dy = x / (x^2 + y^2), dx = -y / (x^2 + y^2) ----------------------------

static Grads atan2_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents atan2_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(atan2_op) =
    detail::differentiable_op("Atan2", atan2_gradient, KeepSet::all(), KeepSet::none(),
                              atan2_tangent, detail::batch_binary_broadcasting<&tapegrad::atan2>);

// std::atan2 gives TF's (the C library's) values on the axes: atan2(0, 0) = 0,
// atan2(0, -0) = pi, atan2(-0, -1) = -pi.
Tensor atan2(const Tensor& y, const Tensor& x) {
  const char* op = "atan2";
  require_floating_pair(op, "y", y, "x", x);
  Tensor out = detail::dispatch_floating(op, y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return detail::broadcast_binary<T, T>(op, y, x, [](T a, T b) { return std::atan2(a, b); });
  });
  detail::record(atan2_op, {&y, &x}, out);
  return out;
}

// 1 / (x^2 + y^2): infinite at the origin, where the gradient is NaN as in TF.
static Tensor inverse_radius_squared(const Tensor& y, const Tensor& x) {
  return reciprocal(add(square(x), square(y)));
}

static Tangents atan2_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& y = op.inputs[0];
  const Tensor& x = op.inputs[1];
  const Tensor scale = inverse_radius_squared(y, x);
  const Tensor from_y = detail::if_defined(
      tangents[0], [&](const Tensor& dy) { return multiply(dy, multiply(x, scale)); });
  const Tensor from_x = detail::if_defined(
      tangents[1], [&](const Tensor& dx) { return negative(multiply(dx, multiply(y, scale))); });
  return {detail::output_tangent(op, 0, {from_y, from_x})};
}

static Grads atan2_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& y = op.inputs()[0];
  const Tensor& x = op.inputs()[1];
  const Tensor g_scaled = multiply(g[0], inverse_radius_squared(y, x));
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, multiply(g_scaled, x));
  // Negated after the sum (the same numbers, but for a zero sum's sign): a broadcast y's
  // gradient is small, the product is the output's size.
  if (op.needs_gradient(1)) r[1] = negative(sum_to_input(op, 1, multiply(g_scaled, y)));
  return r;
}

// ---- FloorMod(x, y): x - floor(x / y) y; dx = g, dy = -g floor(x / y) ---------------------

static Grads floormod_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents floormod_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(floormod_op) = detail::differentiable_op(
    "FloorMod", floormod_gradient, KeepSet::all(), KeepSet::none(), floormod_tangent,
    detail::batch_binary_broadcasting<&tapegrad::floormod>);

// The remainder with the divisor's sign (Python's %, TF's floormod). For integers y = -1 is
// answered directly because INT_MIN % -1 is undefined behaviour in C++.
template <class T>
static T floor_mod(T x, T y) {
  T r;
  if constexpr (std::is_integral_v<T>) {
    if (y == -1 || y == 0) return 0;  // y == 0: only on placeholders (floormod rejects it)
    r = x % y;
  } else {
    r = std::fmod(x, y);
  }
  return r != 0 && ((r < 0) != (y < 0)) ? static_cast<T>(r + y) : r;
}

static bool has_integer_zero(const Tensor& y) {
  if (y.dtype() == DType::Int32) {
    for (auto v : detail::kernel_array<std::int32_t>(y))
      if (v == 0) return true;
  }
  if (y.dtype() == DType::Int64) {
    for (auto v : detail::kernel_array<std::int64_t>(y))
      if (v == 0) return true;
  }
  return false;
}

Tensor floormod(const Tensor& x, const Tensor& y) {
  const char* op = "floormod";
  detail::require_numeric_operands(op, x, y);
  if (has_integer_zero(y) && !detail::computing_on_placeholders()) {
    throw InvalidArgument(detail::describe(op, x, y) + ": integer division by zero (y has a 0)");
  }
  return detail::numeric_binary_op(floormod_op, op, x, y,
                                   [](auto a, auto b) { return floor_mod(a, b); });
}

// floor(x / y): the quotient whose multiple floormod subtracts; piecewise constant (its own
// gradient is zero, so the rule's derivatives are right too).
static Tensor floor_quotient(const Tensor& x, const Tensor& y) { return floor(divide(x, y)); }

static Tangents floormod_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const Tensor& y = op.inputs[1];
  const Tensor from_y = detail::if_defined(
      tangents[1], [&](const Tensor& dy) { return negative(multiply(dy, floor_quotient(x, y))); });
  return {detail::output_tangent(op, 0, {tangents[0], from_y})};
}

static Grads floormod_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor& y = op.inputs()[1];
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, g[0]);
  if (op.needs_gradient(1)) {
    r[1] = negative(sum_to_input(op, 1, multiply(g[0], floor_quotient(x, y))));
  }
  return r;
}

// ---- ClipByValue(x, lo, hi) --------------------------------------------------------------

static Grads clip_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents clip_tangent(const ForwardContext& op, const Tangents& tangents);
static std::vector<Tensor> clip_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& inputs);
static detail::ReplayOutputs clip_replay(const detail::ReplayContext& op,
                                         const std::vector<Tensor>& inputs);
TAPEGRAD_BUILTIN_OP(clip_op) =
    detail::with_replay(detail::differentiable_op("ClipByValue", clip_gradient, KeepSet::all(),
                                                  KeepSet::none(), clip_tangent, clip_batched),
                        clip_replay);

static std::string describe_clip(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  return detail::describe("clip_by_value", {{"x", x}, {"lo", lo}, {"hi", hi}});
}

// Calls f(i, lo offset, hi offset) for every element i of x (row-major), lo and hi
// broadcast to x's shape.
template <class F>
static void for_each_clip_element(const Shape& shape, const Shape& lo_shape, const Shape& hi_shape,
                                  F f) {
  const std::size_t n = num_elements(shape);
  if (num_elements(lo_shape) == 1 && num_elements(hi_shape) == 1) {
    for (std::size_t i = 0; i < n; ++i) f(i, 0, 0);
    return;
  }
  const auto lo_strides = detail::broadcast_strides(lo_shape, shape);
  const auto hi_strides = detail::broadcast_strides(hi_shape, shape);
  std::vector<std::size_t> index(shape.size(), 0);
  std::size_t lo_at = 0, hi_at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    f(i, lo_at, hi_at);
    for (std::size_t d = shape.size(); d-- > 0;) {  // the next index, last axis fastest
      lo_at += lo_strides[d];
      hi_at += hi_strides[d];
      if (++index[d] < shape[d]) break;
      lo_at -= lo_strides[d] * shape[d];
      hi_at -= hi_strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

template <class T>
static std::string number(T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    std::ostringstream s;
    s << v;
    return s.str();
  }
}

// TF's tf.clip_by_value: the result has x's shape, so lo and hi must broadcast to it.
static void require_clip_operands(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  for (const Tensor* t : {&x, &lo, &hi}) detail::require_defined("clip_by_value", *t);
  if (lo.dtype() != x.dtype() || hi.dtype() != x.dtype()) {
    throw InvalidArgument(describe_clip(x, lo, hi) +
                          ": the dtypes differ (no implicit promotion; cast lo and hi)");
  }
  if (x.dtype() == DType::Bool) {
    throw InvalidArgument(
        describe_clip(x, lo, hi) +
        ": dtype bool is not supported (expected float32, float64, int32 or int64)");
  }
  for (const Tensor* bound : {&lo, &hi}) {
    const Shape shape = detail::broadcast_shapes("clip_by_value", x, *bound);
    if (shape != x.shape()) {
      throw InvalidArgument(describe_clip(x, lo, hi) +
                            ": lo and hi must broadcast to x's shape (the result has x's shape)");
    }
  }
}

Tensor clip_by_value(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  require_clip_operands(x, lo, hi);
  Tensor out = detail::dispatch_numeric("clip_by_value", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xs = detail::kernel_data<T>(x);
    const T* los = detail::kernel_data<T>(lo);
    const T* his = detail::kernel_data<T>(hi);
    T* o = nullptr;
    Tensor result = detail::new_tensor<T>(x.shape(), o);
    for_each_clip_element(
        x.shape(), lo.shape(), hi.shape(), [&](std::size_t i, std::size_t l, std::size_t h) {
          if (!(los[l] <= his[h])) {
            throw InvalidArgument(describe_clip(x, lo, hi) + ": lo must be <= hi, but at element " +
                                  std::to_string(i) + " of x lo = " + number(los[l]) +
                                  " and hi = " + number(his[h]));
          }
          // NaN in x stays NaN (TF's minimum/maximum).
          const T v = xs[i];
          o[i] = v < los[l] ? los[l] : (v > his[h] ? his[h] : v);
        });
    return result;
  });
  detail::record(clip_op, {&x, &lo, &hi}, out);
  return out;
}

Tensor clip_by_value(const Tensor& x, double lo, double hi) {
  detail::require_defined("clip_by_value", x);
  if (!(lo <= hi)) {
    throw InvalidArgument(detail::describe("clip_by_value", x) +
                          ": lo must be <= hi, but lo = " + number(lo) + " and hi = " + number(hi));
  }
  return clip_by_value(x, detail::scalar_of("clip_by_value", lo, x.dtype()),
                       detail::scalar_of("clip_by_value", hi, x.dtype()));
}

// The result has x's shape, so x carries the batch axis even when only a bound does; the
// bounds are aligned to broadcast against it.
static std::vector<Tensor> clip_batched(const detail::BatchingContext& op,
                                        const std::vector<Tensor>& inputs) {
  std::vector<Tensor> aligned = detail::aligned_for_broadcast(op, inputs);
  if (!op.is_batched(0)) aligned[0] = broadcast_to(inputs[0], op.batched_output_shape(0));
  return {clip_by_value(aligned[0], aligned[1], aligned[2])};
}

static detail::ReplayOutputs clip_replay(const detail::ReplayContext&,
                                         const std::vector<Tensor>& inputs) {
  return {clip_by_value(inputs[0], inputs[1], inputs[2])};
}

// TF: x gets g where lo <= x <= hi (the bounds included), lo gets g where x < lo, hi where
// x > hi; the masks are constants, so the rule is linear in g and nests.
static Grads clip_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor& lo = op.inputs()[1];
  const Tensor& hi = op.inputs()[2];
  const Tensor zero = scalar(0.0, g[0].dtype());
  const Tensor below = less(x, lo);
  const Tensor above = greater(x, hi);
  Grads r(3);
  if (op.needs_gradient(0)) r[0] = where(below, zero, where(above, zero, g[0]));
  if (op.needs_gradient(1)) r[1] = sum_to_input(op, 1, where(below, g[0], zero));
  if (op.needs_gradient(2)) r[2] = sum_to_input(op, 2, where(above, g[0], zero));
  return r;
}

static Tangents clip_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const Tensor& lo = op.inputs[1];
  const Tensor& hi = op.inputs[2];
  const Tensor zero = scalar(0.0, op.outputs[0].dtype());
  const Tensor below = less(x, lo);
  const Tensor above = greater(x, hi);
  const Tensor from_x = detail::if_defined(
      tangents[0], [&](const Tensor& dx) { return where(below, zero, where(above, zero, dx)); });
  const Tensor from_lo =
      detail::if_defined(tangents[1], [&](const Tensor& dlo) { return where(below, dlo, zero); });
  const Tensor from_hi =
      detail::if_defined(tangents[2], [&](const Tensor& dhi) { return where(above, dhi, zero); });
  return {detail::output_tangent(op, 0, {from_x, from_lo, from_hi})};
}

// ---- SquaredDifference(a, b): (a - b)^2; da = 2 (a - b) g, db = -da ----------------------

static Grads squared_difference_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents squared_difference_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(squared_difference_op) = detail::differentiable_op(
    "SquaredDifference", squared_difference_gradient, KeepSet::all(), KeepSet::none(),
    squared_difference_tangent, detail::batch_binary_broadcasting<&tapegrad::squared_difference>);

Tensor squared_difference(const Tensor& a, const Tensor& b) {
  return detail::numeric_binary_op(squared_difference_op, "squared_difference", a, b,
                                   [](auto u, auto v) {
                                     const auto d = detail::wrapping_sub(u, v);
                                     return detail::wrapping_mul(d, d);
                                   });
}

static Tensor twice_difference(const Tensor& a, const Tensor& b) {
  return multiply(constant_like(2.0, a), subtract(a, b));
}

static Tangents squared_difference_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& a = op.inputs[0];
  const Tensor& b = op.inputs[1];
  const Tensor from_a = detail::if_defined(
      tangents[0], [&](const Tensor& da) { return multiply(da, twice_difference(a, b)); });
  const Tensor from_b = detail::if_defined(tangents[1], [&](const Tensor& db) {
    return negative(multiply(db, twice_difference(a, b)));
  });
  return {detail::output_tangent(op, 0, {from_a, from_b})};
}

static Grads squared_difference_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor scaled = multiply(g[0], twice_difference(op.inputs()[0], op.inputs()[1]));
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, scaled);
  // Negated after the sum, as subtract's (the same numbers, but for a zero sum's sign): a
  // broadcast b (moments' mean) gets its gradient without another pass over the output's size.
  if (op.needs_gradient(1)) r[1] = negative(sum_to_input(op, 1, scaled));
  return r;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(math_special)
