// The structure of matrices: diag, diag_part, band_part and cross (trace is reduce_sum of
// diag_part, as in TF). Each is linear (cross bilinear), so its gradient and its forward rule
// are the op itself or its partner. Contiguous loops over the batch; everything but the public
// functions has internal linkage.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/shape_util.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/linalg/linalg_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

// A defined tensor of a numeric dtype and rank >= `rank`; `expected` describes the shape.
static void require_numeric_rank(const char* op, const char* name, const Tensor& t,
                                 std::size_t rank, const char* expected) {
  detail::require_defined(op, t);
  if (t.dtype() == DType::Bool) {
    throw InvalidArgument(detail::describe(op, {{name, t}}) +
                          ": expected float32, float64, int32 or int64");
  }
  if (t.rank() < rank) {
    throw InvalidArgument(detail::describe(op, {{name, t}}) + ": expected " + expected);
  }
}

// ---- MatrixDiag ---------------------------------------------------------------------------

static Grads diag_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents diag_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(diag_op) = detail::differentiable_op("MatrixDiag", diag_gradient,
                                                         KeepSet::none(), KeepSet::none(),
                                                         diag_tangent,
                                                         detail::batch_unary<&tapegrad::diag>);

Tensor diag(const Tensor& v) {
  require_numeric_rank("diag", "v", v, 1, "a vector or a batch of vectors [..., n] (rank >= 1)");
  const std::size_t n = v.shape().back();
  Shape out_shape = v.shape();
  out_shape.push_back(n);
  Tensor out = detail::dispatch_numeric("diag", v, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = detail::allocate_array<T>("diag", out_shape);
    std::fill(result.begin(), result.end(), T(0));
    const T* src = detail::kernel_data<T>(v);
    T* dst = result.data();
    const std::size_t count = n == 0 ? 0 : v.size() / n;
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t d = 0; d < n; ++d) dst[(i * n + d) * n + d] = src[i * n + d];
    }
    return Tensor(std::move(result));
  });
  detail::record(diag_op, {&v}, out);
  return out;
}

static Tangents diag_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [](const Tensor& dv) { return diag(dv); });
}

static Grads diag_gradient(const OpContext&, const std::vector<Tensor>& g) {
  return {diag_part(g[0])};
}

// ---- MatrixDiagPart -----------------------------------------------------------------------

static Grads diag_part_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents diag_part_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(diag_part_op) = detail::differentiable_op(
    "MatrixDiagPart", diag_part_gradient, KeepSet::none(), KeepSet::none(), diag_part_tangent,
    detail::batch_unary<&tapegrad::diag_part>);

Tensor diag_part(const Tensor& a) {
  require_numeric_rank("diag_part", "a", a, 2,
                       "a matrix or a batch of matrices [..., m, n] (rank >= 2)");
  const Shape& shape = a.shape();
  const std::size_t m = shape[shape.size() - 2], n = shape.back();
  const std::size_t k = std::min(m, n);
  Shape out_shape = detail::matrix_batch_shape(shape);
  out_shape.push_back(k);
  Tensor out = detail::dispatch_numeric("diag_part", a, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = detail::allocate_array<T>("diag_part", out_shape);
    const T* src = detail::kernel_data<T>(a);
    T* dst = result.data();
    const std::size_t count = k == 0 ? 0 : detail::matrix_count(shape);
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t d = 0; d < k; ++d) dst[i * k + d] = src[(i * m + d) * n + d];
    }
    return Tensor(std::move(result));
  });
  detail::record(diag_part_op, {&a}, out);
  return out;
}

static Tangents diag_part_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [](const Tensor& da) { return diag_part(da); });
}

// The gradient on the k x k diagonal, padded with zero rows or columns to m x n.
static Grads diag_part_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Shape& shape = op.input_shape(0);
  const std::size_t m = shape[shape.size() - 2], n = shape.back();
  Tensor grad = diag(g[0]);
  if (m == n) return {grad};
  Shape pad_shape = grad.shape();
  const int axis = m > n ? -2 : -1;
  pad_shape[pad_shape.size() - (m > n ? 2 : 1)] = m > n ? m - n : n - m;
  return {concat({grad, zeros(pad_shape, grad.dtype())}, axis)};
}

// ---- Trace (a composition, as TF's) --------------------------------------------------------

Tensor trace(const Tensor& a) {
  require_numeric_rank("trace", "a", a, 2,
                       "a matrix or a batch of matrices [..., m, n] (rank >= 2)");
  return reduce_sum(diag_part(a), {-1});
}

// ---- MatrixBandPart -----------------------------------------------------------------------

static Grads band_part_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents band_part_tangent(const ForwardContext& op, const Tangents& tangents);
// Over leading axes: the recorded band, on the whole batch.
static std::vector<Tensor> band_part_batched(const detail::BatchingContext& op,
                                             const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {band_part(inputs[0], attrs.get_int("lower"), attrs.get_int("upper"))};
}
static detail::ReplayOutputs band_part_replay(const detail::ReplayContext& op,
                                              const std::vector<Tensor>& inputs) {
  const Attrs& attrs = op.attrs();
  return {band_part(inputs[0], attrs.get_int("lower"), attrs.get_int("upper"))};
}
TAPEGRAD_BUILTIN_OP(band_part_op) = detail::with_replay(
    detail::differentiable_op("MatrixBandPart", band_part_gradient, KeepSet::none(),
                              KeepSet::none(), band_part_tangent, band_part_batched),
    band_part_replay);

Tensor band_part(const Tensor& a, std::int64_t lower, std::int64_t upper) {
  require_numeric_rank("band_part", "a", a, 2,
                       "a matrix or a batch of matrices [..., m, n] (rank >= 2)");
  const Shape& shape = a.shape();
  const std::size_t m = shape[shape.size() - 2], n = shape.back();
  const auto too_wide = [&](const char* name, std::int64_t value, std::size_t limit,
                            const char* what) {
    if (value > static_cast<std::int64_t>(limit)) {
      throw InvalidArgument(detail::describe("band_part", {{"a", a}}) + ": " + name + " = " +
                            std::to_string(value) + " exceeds the number of " + what + " (" +
                            std::to_string(limit) + "); use a negative value to keep all");
    }
  };
  too_wide("lower", lower, m, "rows");
  too_wide("upper", upper, n, "columns");
  Tensor out = detail::dispatch_numeric("band_part", a, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = detail::allocate_array<T>("band_part", shape);
    const T* src = detail::kernel_data<T>(a);
    T* dst = result.data();
    const std::size_t count = m * n == 0 ? 0 : detail::matrix_count(shape);
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t r = 0; r < m; ++r) {
        for (std::size_t c = 0; c < n; ++c) {
          const auto below = static_cast<std::int64_t>(r) - static_cast<std::int64_t>(c);
          const bool keep = (lower < 0 || below <= lower) && (upper < 0 || -below <= upper);
          const std::size_t at = (i * m + r) * n + c;
          dst[at] = keep ? src[at] : T(0);
        }
      }
    }
    return Tensor(std::move(result));
  });
  detail::record(band_part_op, {&a}, out,
                 [&] { return Attrs().set("lower", lower).set("upper", upper); });
  return out;
}

static Tangents band_part_tangent(const ForwardContext& op, const Tangents& tangents) {
  const std::int64_t lower = op.attrs().get_int("lower");
  const std::int64_t upper = op.attrs().get_int("upper");
  return detail::unary_tangent(op, tangents,
                               [&](const Tensor& da) { return band_part(da, lower, upper); });
}

static Grads band_part_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {band_part(g[0], op.attrs().get_int("lower"), op.attrs().get_int("upper"))};
}

// ---- Cross --------------------------------------------------------------------------------

static Grads cross_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents cross_tangent(const ForwardContext& op, const Tangents& tangents);
// cross does not broadcast: an unbatched operand is broadcast to the batch first.
TAPEGRAD_BUILTIN_OP(cross_op) =
    detail::differentiable_op("Cross", cross_gradient, KeepSet::all(), KeepSet::none(),
                              cross_tangent, detail::batch_all_batched<&tapegrad::cross>);

Tensor cross(const Tensor& a, const Tensor& b) {
  require_numeric_rank("cross", "a", a, 1, "vectors of 3 along the last axis [..., 3]");
  require_numeric_rank("cross", "b", b, 1, "vectors of 3 along the last axis [..., 3]");
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("cross", {{"a", a}, {"b", b}}) + ": " + why);
  };
  if (a.dtype() != b.dtype()) fail("the dtypes differ");
  if (a.shape() != b.shape()) fail("the shapes differ (cross does not broadcast)");
  if (a.shape().back() != 3) fail("the last axis must have size 3");
  Tensor out = detail::dispatch_numeric("cross", a, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> result = detail::allocate_array<T>("cross", a.shape());
    const T* u = detail::kernel_data<T>(a);
    const T* v = detail::kernel_data<T>(b);
    T* w = result.data();
    for (std::size_t at = 0; at < a.size(); at += 3) {
      w[at] = u[at + 1] * v[at + 2] - u[at + 2] * v[at + 1];
      w[at + 1] = u[at + 2] * v[at] - u[at] * v[at + 2];
      w[at + 2] = u[at] * v[at + 1] - u[at + 1] * v[at];
    }
    return Tensor(std::move(result));
  });
  detail::record(cross_op, {&a, &b}, out);
  return out;
}

// Bilinear: d(a x b) = da x b + a x db.
static Tangents cross_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& a = op.inputs[0];
  const Tensor& b = op.inputs[1];
  const Tensor from_a =
      detail::if_defined(tangents[0], [&](const Tensor& da) { return cross(da, b); });
  const Tensor from_b =
      detail::if_defined(tangents[1], [&](const Tensor& db) { return cross(a, db); });
  return {detail::output_tangent(op, 0, {from_a, from_b})};
}

// TF _CrossGrad: <g, a x b> = <b x g, a> = <g x a, b>.
static Grads cross_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& a = op.inputs()[0];
  const Tensor& b = op.inputs()[1];
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = cross(b, g[0]);
  if (op.needs_gradient(1)) r[1] = cross(g[0], a);
  return r;
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(linalg_structure)
