// Random ops: the counter-based Generator, random_uniform, random_normal and dropout.
// The uniform and normal tensors are constants (never recorded); dropout is recorded with its
// scaled mask as a second input so that its gradient is one multiply by that same mask.
#include "tapegrad/ops/random.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/philox_fill.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/op_support.hpp"
#include "runtime/op_trace.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

// ---- Generator --------------------------------------------------------------------------

Generator::Generator(std::uint64_t seed) : Generator(seed, 0) {}

Generator::Generator(std::uint64_t seed, std::uint64_t counter) : seed_(seed), counter_(counter) {}

void Generator::reset(std::uint64_t seed, std::uint64_t counter) {
  seed_ = seed;
  counter_.store(counter, std::memory_order_relaxed);
}

// "random_uniform: shape [2, 3], dtype float32": what every rejection of a draw starts with.
static std::string describe_draw(const char* op, const Shape& shape, DType dtype) {
  return std::string(op) + ": shape " + shape_to_string(shape) + ", dtype " + dtype_name(dtype);
}

namespace detail {

struct GeneratorAccess {
  // The counter of the first of `n` values, the counter advanced past them. A compare-exchange
  // rather than fetch_add so that a draw that would wrap the 64-bit counter (and repeat the
  // stream) is refused before anything moves.
  // `shape` and `dtype` are the draw's, for the error (describe_draw).
  static std::uint64_t reserve(const char* op, const Shape& shape, DType dtype,
                               Generator& generator, std::uint64_t n) {
    std::uint64_t start = generator.counter_.load(std::memory_order_relaxed);
    do {
      if (n > std::numeric_limits<std::uint64_t>::max() - start) {
        throw InvalidArgument(describe_draw(op, shape, dtype) + ": the generator (seed " +
                              std::to_string(generator.seed_) + ") has drawn " +
                              std::to_string(start) + " values; " + std::to_string(n) +
                              " more would wrap its 64-bit counter");
      }
    } while (
        !generator.counter_.compare_exchange_weak(start, start + n, std::memory_order_relaxed));
    if (detail::live_trace_count.load(std::memory_order_relaxed) != 0) {
      detail::note_generator_draw(op, generator, start);
    }
    return start;
  }
};

}  // namespace detail

// "1.5", "1e+39", "nan", "-inf": the shortest text that reads back as the value.
static std::string value_text(double value) {
  char text[32];
  const std::to_chars_result end = std::to_chars(text, text + sizeof text, value);
  return std::string(text, end.ptr);
}

[[noreturn]] static void reject_draw(const char* op, const Shape& shape, DType dtype,
                                     const std::string& why) {
  throw InvalidArgument(describe_draw(op, shape, dtype) + ": " + why);
}

static void require_floating_draw(const char* op, const Shape& shape, DType dtype) {
  if (!is_floating(dtype)) {
    reject_draw(op, shape, dtype,
                std::string("dtype ") + dtype_name(dtype) +
                    " is not supported (expected float32 or float64)");
  }
}

// A floating tensor of `shape`, its n elements written by fill(T* data, n, seed, start) from
// n values reserved on the generator.
template <class Fill>
static Tensor draw(const char* op, const Shape& shape, DType dtype, Generator& generator,
                   Fill fill) {
  return detail::dispatch_floating(op, dtype, [&](auto zero) -> Tensor {
    using T = decltype(zero);
    auto values = detail::allocate_array<T>(op, shape);
    const std::uint64_t start =
        detail::GeneratorAccess::reserve(op, shape, dtype, generator, values.size());
    fill(values.data(), values.size(), generator.seed(), start);
    return Tensor(std::move(values));
  });
}

// ---- random_uniform ---------------------------------------------------------------------

// Every bound that would give a value outside [lo, hi) or a non-finite one, refused before
// the generator moves.
static void check_uniform_bounds(const Shape& shape, DType dtype, double lo, double hi) {
  constexpr const char* op = "random_uniform";
  // Built only for a message: a valid draw allocates no text.
  const auto bounds = [&] { return " (lo " + value_text(lo) + ", hi " + value_text(hi) + ")"; };
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    reject_draw(op, shape, dtype, "the bounds must be finite numbers" + bounds());
  }
  if (!(lo < hi)) reject_draw(op, shape, dtype, "hi must be greater than lo" + bounds());
  if (!std::isfinite(hi - lo))
    reject_draw(op, shape, dtype, "hi - lo overflows float64" + bounds());
  if (dtype == DType::Float32) {
    const float low = static_cast<float>(lo);
    const float high = static_cast<float>(hi);
    if (!std::isfinite(low) || !std::isfinite(high)) {
      reject_draw(op, shape, dtype, "a bound is not finite in float32" + bounds());
    }
    if (!(low < high)) {
      reject_draw(op, shape, dtype, "lo and hi are equal in float32" + bounds());
    }
  }
}

Tensor random_uniform(const Shape& shape, Generator& generator, double lo, double hi, DType dtype) {
  constexpr const char* op = "random_uniform";
  require_floating_draw(op, shape, dtype);
  check_uniform_bounds(shape, dtype, lo, hi);
  return draw(op, shape, dtype, generator,
              [&](auto* data, std::size_t n, std::uint64_t seed, std::uint64_t start) {
                using T = std::remove_pointer_t<decltype(data)>;
                detail::fill_uniform<T>(data, n, seed, start, lo, hi);
              });
}

// ---- random_normal ----------------------------------------------------------------------

Tensor random_normal(const Shape& shape, Generator& generator, double mean, double stddev,
                     DType dtype) {
  constexpr const char* op = "random_normal";
  require_floating_draw(op, shape, dtype);
  const auto moments = [&] {
    return " (mean " + value_text(mean) + ", stddev " + value_text(stddev) + ")";
  };
  if (!std::isfinite(mean) || !std::isfinite(stddev)) {
    reject_draw(op, shape, dtype, "mean and stddev must be finite numbers" + moments());
  }
  if (stddev < 0) reject_draw(op, shape, dtype, "stddev must be >= 0" + moments());
  if (dtype == DType::Float32 &&
      (!std::isfinite(static_cast<float>(mean)) || !std::isfinite(static_cast<float>(stddev)))) {
    reject_draw(op, shape, dtype, "mean or stddev is not finite in float32" + moments());
  }
  return draw(op, shape, dtype, generator,
              [&](auto* data, std::size_t n, std::uint64_t seed, std::uint64_t start) {
                using T = std::remove_pointer_t<decltype(data)>;
                detail::fill_normal<T>(data, n, seed, start, mean, stddev);
              });
}

// ---- Dropout ----------------------------------------------------------------------------

// Batching rule: the recorded mask applied to every row (x's dropped elements are 0 even when
// x is NaN or infinite, as the kernel selects).
static std::vector<Tensor> dropout_batched(const detail::BatchingContext& op,
                                           const std::vector<Tensor>& in) {
  const std::vector<Tensor> aligned = detail::aligned_for_broadcast(op, in);
  const Tensor zero = scalar(0.0, in[0].dtype());
  return {where(not_equal(aligned[1], zero), multiply(aligned[0], aligned[1]), zero)};
}

static Grads dropout_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents dropout_tangent(const ForwardContext& op, const Tangents& tangents);
// No replay rule: each call draws a new mask (a Function that traces dropout runs eagerly).
TAPEGRAD_BUILTIN_OP(dropout_op) = detail::differentiable_op("Dropout", dropout_gradient,
                                                            KeepSet::only({1}), KeepSet::none(),
                                                            dropout_tangent, dropout_batched);

// The scaled keep mask (0 or 1/(1 - rate) in T, kept where a unit uniform is >= rate, as TF)
// and x * mask, where a dropped element is 0 even when x is NaN or infinite (TF selects rather
// than multiplies).
template <class T>
static std::vector<Tensor> dropout_kernel(const Tensor& x, double rate, Generator& generator) {
  constexpr const char* op = "dropout";
  const auto& in = detail::kernel_array<T>(x);
  auto mask = detail::allocate_array<T>(op, x.shape());
  auto out = detail::allocate_array<T>(op, x.shape());
  const std::size_t n = in.size();
  const T scale = static_cast<T>(1.0 / (1.0 - rate));
  const std::uint64_t start =
      detail::GeneratorAccess::reserve(op, x.shape(), x.dtype(), generator, n);
  detail::fill_keep_mask<T>(mask.data(), n, generator.seed(), start, rate, scale);
  const T* src = in.data();
  const T* m = mask.data();
  T* dst = out.data();
  for (std::size_t i = 0; i < n; ++i) dst[i] = detail::keep_or_zero(m[i] != T(0), src[i] * scale);
  return {Tensor(std::move(out)), Tensor(std::move(mask))};
}

Tensor dropout(const Tensor& x, double rate, Generator& generator) {
  constexpr const char* op = "dropout";
  detail::require_defined(op, x);
  if (!(rate >= 0.0 && rate < 1.0)) {
    throw InvalidArgument(detail::describe(op, x) + ": rate must be in [0, 1), got " +
                          value_text(rate));
  }
  if (!is_floating(x.dtype())) {
    detail::throw_unsupported_dtype(op, x, "float32 or float64");
  }
  if (rate == 0.0) return x;  // TF's fast path: nothing dropped, nothing drawn
  const std::vector<Tensor> out_and_mask = detail::dispatch_floating(
      op, x.dtype(), [&](auto zero) { return dropout_kernel<decltype(zero)>(x, rate, generator); });
  const Tensor& out = out_and_mask[0];
  const Tensor& mask = out_and_mask[1];
  detail::record(dropout_op, {&x, &mask}, out);
  return out;
}

// Linear in x: the tangent times the same scaled mask (the mask, data, moves nothing).
static Tangents dropout_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& mask = op.inputs[1];
  const Tensor from_x =
      detail::if_defined(tangents[0], [&](const Tensor& dx) { return multiply(dx, mask); });
  return {detail::output_tangent(op, 0, {from_x})};
}

// d(x * mask)/dx = mask, the same scaled mask the forward used; written as a multiply so that
// an outer tape records it. The mask is data, not a function of x: no gradient.
static Grads dropout_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return {multiply(g[0], op.inputs()[1]), GradientValue()};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(random)
