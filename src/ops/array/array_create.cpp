// Ops whose results carry no gradient: the array builders one_hot, range, eye, linspace (TF
// gives none: their inputs are integers or plain numbers) and the positions of extrema argmax,
// argmin (Int64). The ones that read a tensor (one_hot, argmax, argmin) are recorded as
// not-differentiable ops, so that vectorized_map's trace sees their result depend on their
// input (tapes ignore them); range, eye and linspace read no tensor and are not recorded.
#include <cmath>
#include <string>

#include "kernels/dispatch.hpp"
#include "ops/batching_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/indexing.hpp"

namespace tapegrad {

// Over leading axes: the recorded depth and dtype, on the whole batch.
static std::vector<Tensor> one_hot_batched(const detail::BatchingContext& op,
                                           const std::vector<Tensor>& inputs) {
  return {
      one_hot(inputs[0], static_cast<int>(op.attrs().get_int("depth")), op.output_dtypes.at(0))};
}
static detail::ReplayOutputs one_hot_replay(const detail::ReplayContext& op,
                                            const std::vector<Tensor>& inputs) {
  return {
      one_hot(inputs[0], static_cast<int>(op.attrs().get_int("depth")), op.output_dtypes.at(0))};
}

TAPEGRAD_BUILTIN_OP(one_hot_op) =
    detail::with_replay(detail::not_differentiable_op("OneHot", one_hot_batched), one_hot_replay);
// The recorded axis (shifted past the batch axis when batched): the generic axis maker.
TAPEGRAD_BUILTIN_OP(argmax_op) =
    detail::not_differentiable_op("ArgMax", detail::batch_axis<&tapegrad::argmax>);
TAPEGRAD_BUILTIN_OP(argmin_op) =
    detail::not_differentiable_op("ArgMin", detail::batch_axis<&tapegrad::argmin>);

static void require_index_dtype(const char* op, const Tensor& t) {
  if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64) {
    throw InvalidArgument(detail::describe(op, {{"indices", t}}) +
                          ": indices must be int32 or int64");
  }
}

template <class T>
static T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

// ---- one_hot ----------------------------------------------------------------------------

Tensor one_hot(const Tensor& indices, int depth, DType dtype) {
  detail::require_defined("one_hot", indices);
  require_index_dtype("one_hot", indices);
  if (depth < 0) {
    throw InvalidArgument(detail::describe("one_hot", {{"indices", indices}}) + ": depth " +
                          std::to_string(depth) + " must be >= 0");
  }
  Shape shape = indices.shape();
  shape.push_back(static_cast<std::size_t>(depth));
  const detail::IndexValues index = detail::index_values(indices);
  Tensor result = detail::dispatch_any(dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = detail::allocate_array<T>("one_hot", shape);
    std::fill(out.begin(), out.end(), T(0));
    const auto d = static_cast<std::size_t>(depth);
    for (std::size_t k = 0; k < index.size(); ++k) {
      // Out-of-range indices give an all-off row (TF), not an error.
      if (index[k] >= 0 && index[k] < depth)
        out.data()[k * d + static_cast<std::size_t>(index[k])] = T(1);
    }
    return Tensor(std::move(out));
  });
  detail::record(one_hot_op, {&indices}, result,
                 [&] { return Attrs().set("depth", static_cast<std::int64_t>(depth)); });
  return result;
}

// ---- range, eye, linspace ---------------------------------------------------------------

Tensor range(double start, double limit, double delta, DType dtype) {
  const std::string args = "range: start " + std::to_string(start) + ", limit " +
                           std::to_string(limit) + ", delta " + std::to_string(delta);
  if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
    throw InvalidArgument(args + ": delta must be nonzero and every value finite");
  }
  if (dtype == DType::Bool) throw InvalidArgument(args + ": dtype bool is not supported");
  const double count = std::ceil((limit - start) / delta);
  // Checked as a double first: casting a count beyond size_t would be undefined.
  if (count > static_cast<double>(detail::kMaxElements)) {
    throw InvalidArgument(args + ": " + std::to_string(count) + " values exceed 2^63 - 1 elements");
  }
  const auto n = static_cast<std::size_t>(count > 0 ? count : 0);
  return detail::dispatch_any(dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = detail::allocate_array<T>("range", {n});
    for (std::size_t i = 0; i < n; ++i) {
      out.data()[i] = from_double<T>(start + static_cast<double>(i) * delta);
    }
    return Tensor(std::move(out));
  });
}

Tensor eye(std::size_t n, DType dtype) {
  return detail::dispatch_any(dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = detail::allocate_array<T>("eye", {n, n});
    std::fill(out.begin(), out.end(), T(0));
    for (std::size_t i = 0; i < n; ++i) out.data()[i * n + i] = T(1);
    return Tensor(std::move(out));
  });
}

Tensor linspace(double start, double stop, std::int64_t num, DType dtype) {
  if (num < 1) {
    throw InvalidArgument("linspace: num " + std::to_string(num) + " must be >= 1");
  }
  return detail::dispatch_floating("linspace", dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto n = static_cast<std::size_t>(num);
    xt::xarray<T> out = detail::allocate_array<T>("linspace", {n});
    const double step = n > 1 ? (stop - start) / static_cast<double>(n - 1) : 0;
    for (std::size_t i = 0; i < n; ++i)
      out.data()[i] = static_cast<T>(start + static_cast<double>(i) * step);
    if (n > 1) out.data()[n - 1] = static_cast<T>(stop);  // the end exactly, not start + (n-1) step
    return Tensor(std::move(out));
  });
}

// ---- argmax, argmin ---------------------------------------------------------------------

// The position along `axis` of the element `better` prefers, first one among equals; a NaN
// wins over everything (NumPy), the first NaN among several.
template <class Better>
static Tensor arg_extremum(const OpDefinition& definition, const char* op, const Tensor& x,
                           int axis, Better better) {
  detail::require_defined(op, x);
  if (x.rank() == 0) throw InvalidArgument(detail::describe(op, x) + ": x must have rank >= 1");
  const std::size_t a = detail::normalize_axis(op, axis, x);
  const Shape& shape = x.shape();
  const std::size_t n = shape[a];
  if (n == 0) {
    throw InvalidArgument(detail::describe(op, x) + ": axis " + std::to_string(axis) + " is empty");
  }
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < a; ++d) outer *= shape[d];
  for (std::size_t d = a + 1; d < shape.size(); ++d) inner *= shape[d];
  Shape out_shape = shape;
  out_shape.erase(out_shape.begin() + static_cast<std::ptrdiff_t>(a));
  xt::xarray<std::int64_t> out = detail::allocate_array<std::int64_t>(op, out_shape);
  detail::dispatch_numeric(op, x, [&](auto zero) {
    using T = decltype(zero);
    const T* src = detail::kernel_data<T>(x);
    for (std::size_t o = 0; o < outer; ++o) {
      for (std::size_t i = 0; i < inner; ++i) {
        const T* line = src + o * n * inner + i;
        std::size_t best = 0;
        for (std::size_t k = 1; k < n; ++k) {
          const T v = line[k * inner];
          const T b = line[best * inner];
          if (b != b) break;  // NaN (only floating values differ from themselves)
          if (v != v || better(v, b)) best = k;
        }
        out.data()[o * inner + i] = static_cast<std::int64_t>(best);
      }
    }
    return 0;
  });
  Tensor result(std::move(out));
  detail::record(definition, {&x}, result,
                 [&] { return Attrs().set("axis", static_cast<std::int64_t>(a)); });
  return result;
}

Tensor argmax(const Tensor& x, int axis) {
  return arg_extremum(argmax_op, "argmax", x, axis, [](auto v, auto b) { return v > b; });
}

Tensor argmin(const Tensor& x, int axis) {
  return arg_extremum(argmin_op, "argmin", x, axis, [](auto v, auto b) { return v < b; });
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(array_create)
