// The scan kernel (cumsum, cumprod) and tile's row copies against plain index loops, on the
// layouts their fast paths split on: the last axis with short lines and with long ones (walked
// in pairs: odd and even counts), inner axes, every exclusive/reverse flag, every numeric
// dtype, zero sizes; tile rows of one element, short rows and long rows. Values are compared
// exactly: the kernels combine each line in its own order (float32 in float64), as the loops
// here do.
#include <cstdint>
#include <functional>
#include <type_traits>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// Integer-valued, nonzero, small enough that no product below overflows an Int32.
Tensor small_values(const Shape& shape, DType dtype, unsigned seed) {
  std::vector<double> v(num_elements(shape));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double magnitude = static_cast<double>((i * 7 + seed) % 3 + 1);
    v[i] = (i + seed) % 4 == 0 ? -magnitude : magnitude;
  }
  if (dtype == DType::Float32 || dtype == DType::Float64) {
    // Non-integer values too, so that the order of the float operations shows.
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] *= 1.0 + 0.1 * static_cast<double>((i + seed) % 5);
  }
  return from_values(v, shape, dtype);
}

// Values whose long running products and sums stay finite and exact in every dtype: ±1 for
// the integers, 1 ± a few thousandths for the floats.
Tensor near_one(const Shape& shape, DType dtype) {
  std::vector<double> v(num_elements(shape));
  const bool floating = dtype == DType::Float32 || dtype == DType::Float64;
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = floating ? 1.0 + 0.001 * static_cast<double>(static_cast<int>(i % 7) - 3)
                    : (i % 3 == 0 ? -1.0 : 1.0);
  }
  return from_values(v, shape, dtype);
}

// The scan along `axis` by the definition: for each position, the combine of identity and
// the covered elements of its line, walked from the line's start (its end when reversed);
// float32 lines in float64, each result rounded once.
template <class T>
std::vector<T> scan_by_loop(const Tensor& x, std::size_t axis, bool exclusive, bool reverse,
                            bool product) {
  const Shape& shape = x.shape();
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::size_t n = shape[axis];
  const T* src = x.array<T>().data();
  std::vector<T> out(x.size());
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t i = 0; i < inner; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        using A = std::conditional_t<std::is_same_v<T, float>, double, T>;
        A acc = product ? A(1) : A(0);
        for (std::size_t step = 0; step < n; ++step) {
          const std::size_t k = reverse ? n - 1 - step : step;
          const bool covered =
              reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
          if (!covered) continue;
          const A v = src[(o * n + k) * inner + i];
          acc = product ? static_cast<A>(acc * v) : static_cast<A>(acc + v);
        }
        out[(o * n + j) * inner + i] = static_cast<T>(acc);
      }
    }
  }
  return out;
}

template <class T>
void require_scan_matches_loop(const Tensor& x, int axis) {
  const std::size_t a =
      static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(x.rank()) : axis);
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      INFO("shape " << shape_to_string(x.shape()) << ", axis " << axis << ", exclusive "
                    << exclusive << ", reverse " << reverse);
      const Tensor sum = cumsum(x, axis, exclusive, reverse);
      const Tensor prod = cumprod(x, axis, exclusive, reverse);
      REQUIRE(sum.shape() == x.shape());
      REQUIRE(prod.shape() == x.shape());
      REQUIRE(sum.dtype() == x.dtype());
      const auto sums = scan_by_loop<T>(x, a, exclusive, reverse, false);
      const auto prods = scan_by_loop<T>(x, a, exclusive, reverse, true);
      const T* got_sum = sum.array<T>().data();
      const T* got_prod = prod.array<T>().data();
      for (std::size_t i = 0; i < x.size(); ++i) {
        INFO("element " << i);
        REQUIRE(got_sum[i] == sums[i]);
        REQUIRE(got_prod[i] == prods[i]);
      }
    }
  }
}

template <class T>
void scan_layouts(DType dtype) {
  // The last axis with 1 ... 17 short lines (walked one by one).
  for (std::size_t lines : {1, 2, 7, 8, 9, 16, 17}) {
    for (std::size_t n : {1, 3, 12}) {
      require_scan_matches_loop<T>(
          small_values({lines, n}, dtype, static_cast<unsigned>(lines + n)), 1);
    }
  }
  require_scan_matches_loop<T>(small_values({2, 3, 9, 5}, dtype, 1), -1);
  // Long lines (1024 and more) are walked in pairs, then an odd one alone.
  require_scan_matches_loop<T>(near_one({3, 1030}, dtype), 1);
  require_scan_matches_loop<T>(near_one({2, 1024}, dtype), -1);
  // Inner axes: the lines after the axis walked side by side.
  const Tensor x = small_values({3, 4, 5}, dtype, 2);
  for (int axis : {0, 1}) require_scan_matches_loop<T>(x, axis);
  require_scan_matches_loop<T>(small_values({11}, dtype, 3), 0);
  // Zero sizes: along, before and after the axis.
  for (const Shape& shape : {Shape{0, 4}, Shape{4, 0}, Shape{2, 0, 3}, Shape{9, 0}}) {
    for (int axis : {0, -1}) {
      const Tensor z = zeros(shape, dtype);
      CHECK(cumsum(z, axis, true).shape() == shape);
      CHECK(cumprod(z, axis, false, true).shape() == shape);
    }
  }
}

// tile by its definition: out[i] = x[i mod shape] along every axis.
std::vector<double> tile_by_loop(const Tensor& x, const Shape& out_shape) {
  const auto v = values(x);
  const Shape& shape = x.shape();
  std::vector<double> out(num_elements(out_shape));
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    std::size_t rest = flat, from = 0, stride = 1;
    for (std::size_t d = out_shape.size(); d-- > 0;) {
      const std::size_t index = rest % out_shape[d];
      rest /= out_shape[d];
      from += (index % shape[d]) * stride;
      stride *= shape[d];
    }
    out[flat] = v[from];
  }
  return out;
}

}  // namespace

TEST_CASE("cumsum and cumprod equal a plain loop on every layout, flag and dtype",
          "[scan][kernel]") {
  SECTION("float64") { scan_layouts<double>(DType::Float64); }
  SECTION("float32") { scan_layouts<float>(DType::Float32); }
  SECTION("int32") { scan_layouts<std::int32_t>(DType::Int32); }
  SECTION("int64") { scan_layouts<std::int64_t>(DType::Int64); }
}

TEST_CASE("cumprod of a tiled column is the Vandermonde matrix, row by row", "[scan][kernel]") {
  // llsq's primal: rows t^0 ... t^(m-1) of 19 points.
  const std::size_t n = 19, m = 6;
  std::vector<double> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = -1.0 + 2.0 * static_cast<double>(i) / (n - 1.0);
  const Tensor v = cumprod(tile(from_values(t, {n, 1}), {1, m}), 1, true);
  REQUIRE(v.shape() == Shape{n, m});
  const auto got = values(v);
  for (std::size_t i = 0; i < n; ++i) {
    double power = 1.0;
    for (std::size_t j = 0; j < m; ++j, power *= t[i]) {
      INFO("t " << t[i] << ", power " << j);
      CHECK(got[i * m + j] == power);
    }
  }
  // Reversed: row i is t^(m-1) ... t^0.
  const auto reversed = values(cumprod(tile(from_values(t, {n, 1}), {1, m}), 1, true, true));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < m; ++j) CHECK(reversed[i * m + j] == got[i * m + (m - 1 - j)]);
  }
}

TEST_CASE("cumsum wraps Int32 overflow on the last axis, short and long lines", "[scan][kernel]") {
  // Each line is [INT32_MAX, 1, 0, ...], whose sum wraps at position 1: 9 short lines (one by
  // one) and 3 of length 1024 (a pair and one alone).
  for (const std::size_t length : {2, 1024}) {
    const std::size_t lines = length == 2 ? 9 : 3;
    std::vector<double> v(lines * length, 0.0);
    for (std::size_t line = 0; line < lines; ++line) {
      v[line * length] = 2147483647.0;
      v[line * length + 1] = 1.0;
    }
    const Tensor s = cumsum(from_values(v, {lines, length}, DType::Int32), 1);
    for (std::size_t line = 0; line < lines; ++line) {
      INFO("length " << length << ", line " << line);
      CHECK(s.array<std::int32_t>()(line, 0) == 2147483647);
      CHECK(s.array<std::int32_t>()(line, length - 1) == -2147483647 - 1);
    }
  }
}

TEST_CASE("cumprod on the last axis: first and second derivatives", "[scan][kernel][gradient]") {
  const Tensor x = random_tensor({5, 4}, 5, 0.5, 1.5);
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      const Fn f = [=](const std::vector<Tensor>& a) {
        return square(cumprod(a[0], 1, exclusive, reverse));
      };
      require_gradient_matches(f, {x});
      require_second_order_matches(f, {x});
    }
  }
}

TEST_CASE("tile equals a plain index loop: rows of one element, short rows, long rows",
          "[tile][kernel]") {
  struct Case {
    Shape shape;
    std::vector<std::size_t> multiples;
  };
  const std::vector<Case> cases = {
      {{5, 1}, {1, 7}},       {{5, 1}, {2, 3}},       {{3, 2}, {2, 5}}, {{2, 15}, {3, 2}},
      {{2, 16}, {1, 3}},      {{2, 40}, {2, 2}},      {{1}, {9}},       {{4}, {3}},
      {{2, 3, 1}, {2, 1, 4}}, {{2, 1, 3}, {1, 4, 2}}, {{3, 1}, {1, 1}}, {{2, 1}, {0, 3}},
      {{0, 1}, {2, 3}},       {{3, 1}, {2, 0}}};
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int32, DType::Int64, DType::Bool}) {
    for (const Case& c : cases) {
      INFO("shape " << shape_to_string(c.shape) << ", dtype " << dtype_name(dtype));
      const Tensor x = dtype == DType::Bool ? greater(small_values(c.shape, DType::Float64, 4),
                                                      scalar(0.0, DType::Float64))
                                            : small_values(c.shape, dtype, 4);
      const Tensor t = tile(x, c.multiples);
      Shape out_shape;
      for (std::size_t d = 0; d < c.shape.size(); ++d)
        out_shape.push_back(c.shape[d] * c.multiples[d]);
      REQUIRE(t.shape() == out_shape);
      REQUIRE(t.dtype() == dtype);
      CHECK(values(t) == tile_by_loop(x, out_shape));
    }
  }
}

TEST_CASE("tile of a column: first and second derivatives", "[tile][kernel][gradient]") {
  const Tensor x = random_tensor({4, 1}, 6);
  const Fn f = [](const std::vector<Tensor>& a) { return square(tile(a[0], {2, 5})); };
  require_gradient_matches(f, {x});
  require_second_order_matches(f, {x});
}
