// Reductions over runs long enough for the lane-parallel folds: reduce_sum against plain loops
// (exact for whole numbers, wrapping for integers), reduce_max / reduce_min and their
// gradient where it scatters g into the ties: values against plain loops, NaNs in the lanes
// and in the tail, ties split evenly, the dense fallback, first and second order.
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.gradient(y, x);
}

// n whole numbers in [-500, 500), reproducible from the seed (exact in every dtype).
std::vector<double> whole_numbers(std::size_t n, unsigned seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<double>(static_cast<long>((i * 7919 + seed * 104729) % 1000) - 500);
  }
  return v;
}

// The dense gradient of a whole-array max/min: g / (number of ties) at each tie, else 0.
std::vector<double> split_between_ties(const std::vector<double>& x, double extremum, double g) {
  double ties = 0;
  for (double v : x) ties += v == extremum ? 1 : 0;
  std::vector<double> out(x.size(), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] == extremum ? g / ties : 0.0;
  return out;
}

}  // namespace

TEST_CASE("reduce_sum over long runs equals a plain loop in every dtype", "[reduce]") {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int32, DType::Int64}) {
    // Lengths around the eight lanes, the sixteen-element threshold and a tail.
    for (std::size_t n : {1u, 8u, 15u, 16u, 17u, 23u, 24u, 1001u}) {
      const std::vector<double> v = whole_numbers(n, static_cast<unsigned>(n));
      double sum = 0;
      for (double e : v) sum += e;  // whole numbers: exact in any order
      INFO("dtype " << dtype_name(dtype) << ", n " << n);
      require_close(reduce_sum(from_values(v, {n}, dtype)), {}, {sum}, 0);
    }
    // Row sums over a trailing axis of 37.
    const std::vector<double> v = whole_numbers(4 * 37, 9);
    std::vector<double> rows(4, 0.0);
    for (std::size_t r = 0; r < 4; ++r) {
      for (std::size_t j = 0; j < 37; ++j) rows[r] += v[r * 37 + j];
    }
    require_close(reduce_sum(from_values(v, {4, 37}, dtype), {1}), {4}, rows, 0);
  }
  // int32 wraps around as a loop in unsigned arithmetic does, whatever the order.
  std::vector<double> big(40);
  std::uint32_t wrapped = 0;
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<double>(1 << 30) - static_cast<double>(i);
    wrapped += static_cast<std::uint32_t>(big[i]);
  }
  CHECK(reduce_sum(from_values(big, {40}, DType::Int32)).item<std::int32_t>() ==
        static_cast<std::int32_t>(wrapped));
  // Fractions: within rounding of the exact sum, and the same bits on every call.
  std::vector<double> f(999);
  double exact = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = 1.0 / static_cast<double>(i + 1);
    exact += f[i];
  }
  const Tensor x = from_values(f, {999});
  require_close(reduce_sum(x), {}, {exact}, 1e-13);
  CHECK(reduce_sum(x).item<double>() == reduce_sum(x).item<double>());
  // Its gradient is still ones, and second order zero, over a long run.
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = reduce_sum(x * x);
    g = inner.gradient(y, x);
  }
  require_close(g, {999}, values(2.0 * x));
  require_close(outer.gradient(reduce_sum(g), x), {999}, std::vector<double>(999, 2.0));
}

TEST_CASE("reduce_max and reduce_min over long runs equal a plain loop in every dtype",
          "[reduce]") {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int32, DType::Int64}) {
    // Lengths around the eight lanes and a tail, and the extremum at every lane and in the tail.
    for (std::size_t n : {7u, 8u, 9u, 16u, 17u, 63u, 1001u}) {
      for (std::size_t at : {std::size_t{0}, n / 3, n - 1}) {
        std::vector<double> v = whole_numbers(n, static_cast<unsigned>(at));
        v[at] = 777;
        const Tensor x = from_values(v, {n}, dtype);
        INFO("dtype " << dtype_name(dtype) << ", n " << n << ", extremum at " << at);
        require_close(reduce_max(x), {}, {777});
        v[at] = -777;
        require_close(reduce_min(from_values(v, {n}, dtype)), {}, {-777});
      }
    }
    // A trailing axis of 37 per row: each row's own extremum.
    const std::vector<double> v = whole_numbers(5 * 37, 3);
    std::vector<double> row_max(5, -1e9), row_min(5, 1e9);
    for (std::size_t r = 0; r < 5; ++r) {
      for (std::size_t j = 0; j < 37; ++j) {
        row_max[r] = std::max(row_max[r], v[r * 37 + j]);
        row_min[r] = std::min(row_min[r], v[r * 37 + j]);
      }
    }
    require_close(reduce_max(from_values(v, {5, 37}, dtype), {1}), {5}, row_max);
    require_close(reduce_min(from_values(v, {5, 37}, dtype), {-1}, true), {5, 1}, row_min);
  }
}

TEST_CASE("reduce_max and reduce_min over long runs: a NaN anywhere wins", "[reduce]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::Float64, DType::Float32}) {
    // A short run (scalar loop); lanes of the first and a later block, and the tail.
    for (auto [n, at] : std::vector<std::pair<std::size_t, std::size_t>>{
             {10, 0}, {10, 9}, {43, 0}, {43, 5}, {43, 12}, {43, 40}}) {
      std::vector<double> v = whole_numbers(n, 1);
      v[at] = nan;
      const Tensor x = from_values(v, {n}, dtype);
      INFO("dtype " << dtype_name(dtype) << ", n " << n << ", NaN at " << at);
      CHECK(std::isnan(values(reduce_max(x))[0]));
      CHECK(std::isnan(values(reduce_min(x))[0]));
    }
    // Infinities are values, not NaNs.
    std::vector<double> v = whole_numbers(20, 2);
    v[3] = std::numeric_limits<double>::infinity();
    v[11] = -std::numeric_limits<double>::infinity();
    require_close(reduce_max(from_values(v, {20}, dtype)), {}, {v[3]});
    require_close(reduce_min(from_values(v, {20}, dtype)), {}, {v[11]});
  }
}

TEST_CASE("reduce_max and reduce_min gradients scatter g into the ties, split evenly",
          "[reduce][gradient]") {
  // One maximum, then three tied maxima and two tied minima, among 1000 elements.
  std::vector<double> v = whole_numbers(1000, 4);
  v[123] = 900;
  const Tensor g_one =
      gradient_of([](const Tensor& t) { return 5.0 * reduce_max(t); }, from_values(v, {1000}));
  require_close(g_one, {1000}, split_between_ties(v, 900, 5));
  v[7] = v[500] = v[999] = 901;
  v[10] = v[997] = -901;
  const Tensor x = from_values(v, {1000});
  const Tensor g_max = gradient_of([](const Tensor& t) { return 3.0 * reduce_max(t); }, x);
  require_close(g_max, {1000}, split_between_ties(v, 901, 3));
  CHECK(values(g_max)[500] == 1.0);
  const Tensor g_min = gradient_of([](const Tensor& t) { return reduce_min(t); }, x);
  require_close(g_min, {1000}, split_between_ties(v, -901, 1));
  CHECK(values(g_min)[10] == 0.5);

  // Per row of [4, 50] (keepdims or not), each row's g split between its own ties.
  std::vector<double> m = whole_numbers(200, 5);
  m[0 * 50 + 3] = m[0 * 50 + 40] = 600;  // row 0: two ties
  m[2 * 50 + 9] = 600;                   // row 2: one maximum
  for (bool keep : {false, true}) {
    const Tensor weights =
        keep ? from_values({1, 2, 3, 4}, {4, 1}) : constant({1.0, 2.0, 3.0, 4.0});
    const Tensor g =
        gradient_of([&](const Tensor& t) { return reduce_sum(reduce_max(t, {1}, keep) * weights); },
                    from_values(m, {4, 50}));
    std::vector<double> expected;
    for (std::size_t r = 0; r < 4; ++r) {
      const std::vector<double> row(m.begin() + static_cast<std::ptrdiff_t>(r * 50),
                                    m.begin() + static_cast<std::ptrdiff_t>(r * 50 + 50));
      const double row_max = *std::max_element(row.begin(), row.end());
      const auto split = split_between_ties(row, row_max, static_cast<double>(r + 1));
      expected.insert(expected.end(), split.begin(), split.end());
    }
    INFO("keepdims " << keep);
    require_close(g, {4, 50}, expected);
  }
  // Over the leading axis of [50, 3]: columns are the groups.
  const Tensor columns = from_values(whole_numbers(150, 6), {50, 3});
  const Tensor g_col =
      gradient_of([](const Tensor& t) { return reduce_sum(reduce_min(t, {0})); }, columns);
  const std::vector<double> cv = values(columns);
  std::vector<double> expected_col(150, 0.0);
  for (std::size_t c = 0; c < 3; ++c) {
    double low = 1e9, ties = 0;
    for (std::size_t r = 0; r < 50; ++r) low = std::min(low, cv[r * 3 + c]);
    for (std::size_t r = 0; r < 50; ++r) ties += cv[r * 3 + c] == low ? 1 : 0;
    for (std::size_t r = 0; r < 50; ++r)
      expected_col[r * 3 + c] = cv[r * 3 + c] == low ? 1 / ties : 0;
  }
  require_close(g_col, {50, 3}, expected_col);
}

TEST_CASE("reduce_max gradient: many ties and NaN groups keep the dense rule's values",
          "[reduce][gradient]") {
  // Every element tied: all get g / n (more ties than the scatter takes).
  const Tensor flat = fill({40}, 2.0);
  require_close(gradient_of([](const Tensor& t) { return reduce_max(t); }, flat), {40},
                std::vector<double>(40, 1.0 / 40));
  // A NaN maximum has no tie: as TF (0 / 0), its group's gradient is NaN; other groups are
  // unaffected.
  std::vector<double> v = whole_numbers(2 * 30, 7);
  v[4] = std::numeric_limits<double>::quiet_NaN();
  v[30 + 8] = 800;
  const std::vector<double> g = values(gradient_of(
      [](const Tensor& t) { return reduce_sum(reduce_max(t, {1})); }, from_values(v, {2, 30})));
  for (std::size_t i = 0; i < 30; ++i) CHECK(std::isnan(g[i]));
  for (std::size_t i = 30; i < 60; ++i) CHECK(g[i] == (i == 38 ? 1.0 : 0.0));
}

TEST_CASE("reduce_max and reduce_min scattered gradients, first and second order (nested tapes)",
          "[reduce][gradient]") {
  // Distinct values: the extremum stays put under the finite-difference steps.
  std::vector<double> v(3 * 40);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01 * static_cast<double>((i * 37) % v.size());
  const Tensor x = from_values(v, {3, 40});
  for (std::vector<int> axes : {std::vector<int>{}, {1}}) {
    require_gradient_matches([=](const std::vector<Tensor>& a) { return reduce_max(a[0], axes); },
                             {x});
    require_gradient_matches([=](const std::vector<Tensor>& a) { return reduce_min(a[0], axes); },
                             {x});
    // The incoming gradient depends on x: the scatter's rule is differentiated again.
    require_second_order_matches(
        [=](const std::vector<Tensor>& a) {
          const Tensor m = reduce_max(a[0] * a[0], axes);
          return m * m * m;
        },
        {x});
    require_second_order_matches(
        [=](const std::vector<Tensor>& a) { return exp(reduce_min(a[0], axes, true)) * a[0]; },
        {x});
  }
}

TEST_CASE("log-sum-exp built from reduce_max and reduce_sum has the softmax gradient, ties too",
          "[reduce][gradient]") {
  // GradBench's lse: a = max(x); log(sum(exp(x - a))) + a. Its gradient is softmax(x), with
  // or without tied maxima (the max's share cancels).
  auto lse = [](const Tensor& t) {
    const Tensor a = reduce_max(t);
    return log(reduce_sum(exp(t - a))) + a;
  };
  for (bool tied : {false, true}) {
    std::vector<double> v(300);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i));
    v[17] = 1.5;
    if (tied) v[201] = v[250] = 1.5;
    double sum = 0;
    for (double e : v) sum += std::exp(e);
    std::vector<double> softmax(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) softmax[i] = std::exp(v[i]) / sum;
    INFO("tied maxima " << tied);
    require_close(gradient_of(lse, from_values(v, {300})), {300}, softmax, 1e-13);
  }
}

TEST_CASE("reduce_mean over long runs is reduce_sum divided by the count, bit for bit",
          "[reduce]") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    std::vector<double> v(1003);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.1 * static_cast<double>(i)) / 3;
    const Tensor x = from_values(v, {1003}, dtype);
    const Tensor rows =
        from_values(std::vector<double>(v.begin(), v.begin() + 1000), {10, 100}, dtype);
    INFO("dtype " << dtype_name(dtype));
    CHECK(values(reduce_mean(x)) == values(reduce_sum(x) / scalar(1003.0, dtype)));
    CHECK(values(reduce_mean(rows, {1})) == values(reduce_sum(rows, {1}) / scalar(100.0, dtype)));
    double sum = 0;
    for (double e : v) sum += e;
    require_close(reduce_mean(x), {}, {sum / 1003}, dtype == DType::Float32 ? 1e-5 : 1e-13);
  }
  // Integer means: the wrapped sum divided by the count, truncated.
  std::vector<double> w(50);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<double>(i) - 20;  // sum 225, mean 4.5
  CHECK(reduce_mean(from_values(w, {50}, DType::Int64)).item<std::int64_t>() == 4);
}
