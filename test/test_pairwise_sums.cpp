// Sums of many terms stay accurate: reduce_sum, reduce_mean, moments, reduce_logsumexp and the
// softmax family add pairwise (kernels/pairwise_sum.hpp), over every kind of axes; float32
// scans and segment sums run in float64 (kernels/running_accumulator.hpp). Float32
// inputs of millions of elements whose exact sums are known, checked to a few roundings (a
// running sum was 1 % off); and the order is a function of the group's size only, so batched,
// replayed and strided runs give the bits of the plain call.
#include <cmath>
#include <cstdint>
#include <vector>

#include "identical_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// float32's 0.1, exactly, as a double: n copies of it sum to n * kTenth exactly in double for
// n up to 2^29.
const double kTenth = static_cast<double>(0.1f);

Tensor tenths(const Shape& shape) {
  xt::xarray<float> a = xt::empty<float>(shape);
  a.fill(0.1f);
  return Tensor(a);
}

// Every element of t (float32) within `relative` of `exact`.
void require_all_near(const Tensor& t, double exact, double relative) {
  REQUIRE(t.dtype() == DType::Float32);
  for (float v : t.array<float>()) {
    INFO("value " << v << " against " << exact);
    REQUIRE(std::abs(static_cast<double>(v) - exact) <= relative * std::abs(exact));
  }
}

// A float32 row of n values alternating 0 and -1 (n even): exp gives 1 and e^-1, whose sum
// n/2 * (1 + e^-1) is no multiple of a power of two, so a running sum rounds at every step.
Tensor alternating_row(std::size_t n) {
  xt::xarray<float> a = xt::zeros<float>({std::size_t{1}, n});
  for (std::size_t k = 1; k < n; k += 2) a(0, k) = -1.0f;
  return Tensor(a);
}
double alternating_exp_sum(std::size_t n) {
  return static_cast<double>(n / 2) * (1.0 + std::exp(static_cast<double>(-1.0f)));
}

}  // namespace

// 4e-6 is 67 float32 roundings (pairwise summation of 2^23 terms is bounded by about 23 plus
// what a leaf adds); the running sums of before were off by 1e-2 (whole arrays) and 1.1e-2
// (over axis 0) on these inputs.
constexpr double kFewRoundings = 4e-6;

TEST_CASE("reduce_sum and reduce_mean of 2^23 float32 terms are accurate to a few roundings",
          "[reduce][accuracy]") {
  const std::size_t n = std::size_t{1} << 23;
  const Tensor x = tenths({n});
  require_all_near(reduce_sum(x), static_cast<double>(n) * kTenth, kFewRoundings);
  require_all_near(reduce_mean(x), kTenth, kFewRoundings);
}

TEST_CASE("sums over leading, middle, trailing and mixed float32 axes are accurate",
          "[reduce][accuracy]") {
  const std::size_t rows = std::size_t{1} << 20;
  SECTION("leading: [2^20, 8] over axis 0") {
    const Tensor s = reduce_sum(tenths({rows, 8}), {0});
    CHECK(s.shape() == Shape{8});
    require_all_near(s, static_cast<double>(rows) * kTenth, kFewRoundings);
  }
  SECTION("middle: [4, 2^18, 8] over axis 1") {
    const Tensor s = reduce_sum(tenths({4, rows / 4, 8}), {1});
    CHECK(s.shape() == Shape{4, 8});
    require_all_near(s, static_cast<double>(rows / 4) * kTenth, kFewRoundings);
  }
  SECTION("trailing: [8, 2^20] over axis 1") {
    const Tensor s = reduce_sum(tenths({8, rows}), {1});
    require_all_near(s, static_cast<double>(rows) * kTenth, kFewRoundings);
  }
  SECTION("mixed: [2^9, 4, 2^11] over axes 0 and 2, as an NCHW batch's moments") {
    const Tensor s = reduce_sum(tenths({512, 4, 2048}), {0, 2});
    CHECK(s.shape() == Shape{4});
    require_all_near(s, static_cast<double>(rows) * kTenth, kFewRoundings);
    const Tensor m = reduce_mean(tenths({512, 4, 2048}), {0, 2}, true);
    CHECK(m.shape() == Shape{1, 4, 1});
    require_all_near(m, kTenth, kFewRoundings);
  }
  SECTION("a broadcast operand's gradient sums 2^20 rows") {
    const Tensor bias = Tensor(xt::xarray<float>(xt::zeros<float>({std::size_t{8}})));
    GradientTape tape;
    tape.watch(bias);
    const Tensor y = reduce_sum(multiply(add(tenths({rows, 8}), bias), tenths({rows, 8})));
    require_all_near(tape.gradient(y, bias), static_cast<double>(rows) * kTenth, kFewRoundings);
  }
}

TEST_CASE("moments of a constant float32 tensor of 2^22 elements: its value and variance 0",
          "[reduce][accuracy]") {
  const auto [mean, variance] = moments(tenths({std::size_t{1} << 22}), {0});
  require_all_near(mean, kTenth, kFewRoundings);
  // A mean off by 1 % (as a running sum gives) would make the variance 1e-6.
  CHECK(variance.item<float>() <= 1e-12f);
}

TEST_CASE("reduce_logsumexp, softmax and the cross entropies over a row of 2^20 float32 logits",
          "[reduce][nn][accuracy]") {
  const std::size_t n = std::size_t{1} << 20;
  const Tensor row = alternating_row(n);
  const double sum = alternating_exp_sum(n);
  CHECK(std::abs(reduce_logsumexp(row).item<float>() - std::log(sum)) <= 2e-6 * std::log(sum));
  CHECK(std::abs(reduce_logsumexp(reshape(row, {-1})).item<float>() - std::log(sum)) <=
        2e-6 * std::log(sum));
  // softmax of the largest logit (0) is 1 / sum.
  const float first = softmax(row).array<float>()(0, 0);
  CHECK(std::abs(first * sum - 1.0) <= 2e-6);
  CHECK(std::abs(log_softmax(row).array<float>()(0, 0) + std::log(sum)) <= 2e-6 * std::log(sum));
  // Label 0: the loss is logsumexp - 0.
  const Tensor label = Tensor(xt::xarray<std::int64_t>{0});
  CHECK(std::abs(sparse_softmax_cross_entropy_with_logits(label, row).item<float>() -
                 std::log(sum)) <= 2e-6 * std::log(sum));
  xt::xarray<float> one_hot_row = xt::zeros<float>({std::size_t{1}, n});
  one_hot_row(0, 0) = 1.0f;
  CHECK(std::abs(softmax_cross_entropy_with_logits(Tensor(one_hot_row), row).item<float>() -
                 std::log(sum)) <= 2e-6 * std::log(sum));
}

TEST_CASE("softmax over a long strided axis and long rows holding a NaN or an infinity",
          "[nn][accuracy]") {
  const std::size_t n = std::size_t{1} << 20;
  SECTION("axis 0 of [2^20, 2]: the one-exponential-at-a-time path") {
    const Tensor columns = transpose(concat({alternating_row(n), alternating_row(n)}, 0));
    const double sum = alternating_exp_sum(n);
    const auto p = softmax(columns * 1.0f, 0).array<float>();
    CHECK(std::abs(p(0, 0) * sum - 1.0) <= 2e-6);
    CHECK(std::abs(p(0, 1) * sum - 1.0) <= 2e-6);
    CHECK(std::abs(reduce_logsumexp(columns, {0}).array<float>()(1) - std::log(sum)) <=
          2e-6 * std::log(sum));
  }
  for (std::size_t length : {std::size_t{10}, std::size_t{1000}}) {
    INFO(length << " logits");
    xt::xarray<double> row = xt::zeros<double>({std::size_t{1}, length});
    row(0, length / 2) = std::nan("");
    const auto with_nan = softmax(Tensor(row)).array<double>();
    CHECK(std::isnan(with_nan(0, 0)));
    CHECK(std::isnan(reduce_logsumexp(Tensor(row)).item<double>()));
    CHECK(std::isnan(log_softmax(Tensor(row)).array<double>()(0, 0)));
    row(0, length / 2) = INFINITY;
    CHECK(reduce_logsumexp(Tensor(row)).item<double>() == INFINITY);
    CHECK(log_softmax(Tensor(row)).array<double>()(0, 0) == -INFINITY);
    row(0, length / 2) = 3.0;
    row(0, 0) = -1e300;
    const auto p = softmax(Tensor(row)).array<double>();
    const double sum = std::exp(3.0) + static_cast<double>(length - 2);
    CHECK(p(0, 0) == 0.0);
    CHECK(std::abs(p(0, length / 2) - std::exp(3.0) / sum) <= 1e-15);
    CHECK(std::abs(p(0, 1) - 1.0 / sum) <= 1e-15);
  }
}

TEST_CASE(
    "reduce_logsumexp over trailing and leading axes: the same values, the same special groups",
    "[reduce][accuracy]") {
  for (std::size_t n : {std::size_t{10}, std::size_t{40}, std::size_t{3000}}) {
    INFO(n << " elements per group");
    // Rows: random, all -inf, a +inf among finite values, a NaN among finite values.
    xt::xarray<double> rows = xt::zeros<double>({std::size_t{4}, n});
    for (std::size_t k = 0; k < n; ++k) {
      rows(0, k) = std::sin(static_cast<double>(k)) * 30.0;
      rows(1, k) = -INFINITY;
      rows(2, k) = static_cast<double>(k);
      rows(3, k) = static_cast<double>(k);
    }
    rows(2, n / 2) = INFINITY;
    rows(3, n / 3) = std::nan("");
    long double max = -INFINITY, sum = 0;
    for (std::size_t k = 0; k < n; ++k) max = std::max<long double>(max, rows(0, k));
    for (std::size_t k = 0; k < n; ++k) sum += std::exp(static_cast<long double>(rows(0, k)) - max);
    const double exact = static_cast<double>(max + std::log(sum));
    const auto trailing = reduce_logsumexp(Tensor(rows), {1}).array<double>();
    const auto leading = reduce_logsumexp(transpose(Tensor(rows)) * 1.0, {0}).array<double>();
    for (const auto* lse : {&trailing, &leading}) {
      CHECK(std::abs((*lse)(0) - exact) <= 4e-16 * std::abs(exact));
      CHECK((*lse)(1) == -INFINITY);
      CHECK((*lse)(2) == INFINITY);
      CHECK(std::isnan((*lse)(3)));
    }
  }
  const auto empty = reduce_logsumexp(zeros({2, 0}), {1}).array<double>();
  CHECK(empty(0) == -INFINITY);
  CHECK(empty(1) == -INFINITY);
}

TEST_CASE("a group sums to the same bits alone, batched, replayed and from a strided view",
          "[reduce][accuracy]") {
  // 5,000 terms per group (two leaves and a remainder) and 100 rows (pairwise above 32).
  const Tensor wide = random_tensor({3, 5000}, 7);
  const Tensor tall = random_tensor({3, 100, 7}, 8);
  SECTION("vectorized_map equals the loop over the slices") {
    const Tensor batched_wide = vectorized_map([](const Tensor& x) { return reduce_sum(x); }, wide);
    const Tensor batched_tall =
        vectorized_map([](const Tensor& x) { return reduce_sum(x, {0}); }, tall);
    for (std::int64_t i = 0; i < 3; ++i) {
      require_identical(slice(batched_wide, {i}, {1}),
                        reshape(reduce_sum(slice(wide, {i, 0}, {1, -1})), {1}));
      require_identical(slice(batched_tall, {i, 0}, {1, -1}),
                        reshape(reduce_sum(slice(tall, {i, 0, 0}, {1, -1, -1}), {0, 1}), {1, 7}));
    }
  }
  SECTION("a Function's replay equals the eager call, fold rule or not") {
    for (std::size_t rows : {std::size_t{5}, std::size_t{33}, std::size_t{100}}) {
      INFO(rows << " rows");
      const Tensor x = random_tensor({rows, 7}, 9);
      const Function f = function(
          [](const std::vector<Tensor>& a) { return std::vector<Tensor>{reduce_sum(a[0], {0})}; });
      f({x});
      require_identical(f({x})[0], reduce_sum(x, {0}));
    }
  }
  SECTION("a strided view sums as its contiguous copy") {
    const Tensor big = random_tensor({5000, 6}, 10);
    const Tensor column = slice(big, {0, 2}, {-1, 1});
    require_identical(reduce_sum(column), reduce_sum(identity(column) * 1.0));
    require_identical(reduce_sum(transpose(big), {1}), reduce_sum(transpose(big) * 1.0, {1}));
  }
}

TEST_CASE("float32 cumsum and cumprod run in float64: long lines stay accurate",
          "[scan][accuracy]") {
  const std::size_t n = std::size_t{1} << 23;
  const double total = static_cast<double>(n) * kTenth;
  SECTION("the last axis, forward, reverse and exclusive") {
    const auto forward = cumsum(tenths({n}), 0).array<float>();
    const auto reversed = cumsum(tenths({n}), 0, false, true).array<float>();
    const auto exclusive = cumsum(tenths({n}), 0, true).array<float>();
    // Each result is float64's running sum rounded once: within half a float32 unit.
    CHECK(std::abs(forward(n - 1) - total) <= 1e-7 * total);
    CHECK(std::abs(reversed(0) - total) <= 1e-7 * total);
    CHECK(std::abs(exclusive(n - 1) - (total - kTenth)) <= 1e-7 * total);
    CHECK(std::abs(forward(n / 2 - 1) - total / 2) <= 1e-7 * total);
  }
  SECTION("a leading axis, lines side by side") {
    const auto columns = cumsum(tenths({n / 4, 4}), 0).array<float>();
    for (std::size_t c = 0; c < 4; ++c) {
      CHECK(std::abs(columns(n / 4 - 1, c) - total / 4) <= 1e-7 * total);
    }
  }
  SECTION("a product leaves and re-enters float32's range") {
    const Tensor x = from_values({1e30, 1e30, 1e-30, 1e-30, 2}, {5}, DType::Float32);
    const auto p = cumprod(x, 0).array<float>();
    CHECK(p(1) == INFINITY);  // 1e60 is no float32
    CHECK(std::abs(p(2) - 1e30f) <= 1e-6f * 1e30f);
    CHECK(std::abs(p(4) - 2.0f) <= 1e-6f);
  }
}

TEST_CASE("float32 unsorted_segment_sum adds in float64: many rows into few segments",
          "[gather][accuracy]") {
  const std::size_t n = std::size_t{1} << 22;
  const double total = static_cast<double>(n) * kTenth;
  SECTION("one element per row, all into segment 0 of 2") {
    const Tensor ids = Tensor(xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({n})));
    const auto sums = unsorted_segment_sum(tenths({n}), ids, 2).array<float>();
    CHECK(std::abs(sums(0) - total) <= 1e-7 * total);
    CHECK(sums(1) == 0.0f);
  }
  SECTION("rows of 4 into 2 segments, alternating") {
    xt::xarray<std::int64_t> alternating = xt::zeros<std::int64_t>({n / 4});
    for (std::size_t k = 1; k < n / 4; k += 2) alternating(k) = 1;
    const auto sums = unsorted_segment_sum(tenths({n / 4, 4}), Tensor(alternating), 2);
    require_all_near(sums, total / 8, 1e-7);
  }
  SECTION("segments with many rows and with few, and a bad id") {
    // Segment 0: 1,000 rows of 0.1 (float64, rounded once); segment 2: 3 rows (float32, in
    // order); segment 1: none.
    std::vector<double> values(1003, 0.1);
    values[1000] = 1.5;
    values[1001] = 1e-8;
    values[1002] = -2.25;
    std::vector<double> id_values(1003, 0.0);
    for (std::size_t k = 1000; k < 1003; ++k) id_values[k] = 2.0;
    const Tensor data = from_values(values, {1003}, DType::Float32);
    const Tensor ids = from_values(id_values, {1003}, DType::Int64);
    const auto sums = unsorted_segment_sum(data, ids, 3).array<float>();
    CHECK(sums(0) == static_cast<float>(1000 * kTenth));
    CHECK(sums(1) == 0.0f);
    CHECK(sums(2) == (0.0f + 1.5f) + 1e-8f + -2.25f);
    id_values[500] = 3.0;
    const std::string bad = message_of<InvalidArgument>(
        [&] { unsorted_segment_sum(data, from_values(id_values, {1003}, DType::Int64), 3); });
    CHECK_THAT(bad, Catch::Contains("unsorted_segment_sum") && Catch::Contains("segment id 3") &&
                        Catch::Contains("segment_ids[500]") && Catch::Contains("float32"));
  }
  SECTION("a busy segment among far more segments than rows (its slot in a hash map)") {
    // 100 rows into segment 7 of 1,000 (more than 4 segments per row): the first 32 in
    // float32, then the sum in float64, rounded once.
    const Tensor ids = from_values(std::vector<double>(100, 7.0), {100}, DType::Int64);
    const auto sums = unsorted_segment_sum(tenths({100, 2}), ids, 1000).array<float>();
    float first_32 = 0.0f;
    for (int k = 0; k < 32; ++k) first_32 += 0.1f;
    const float expected = static_cast<float>(static_cast<double>(first_32) + 68 * kTenth);
    CHECK(sums(7, 0) == expected);
    CHECK(sums(7, 1) == expected);
    CHECK(sums(6, 0) == 0.0f);
    CHECK(sums(999, 1) == 0.0f);
  }
  SECTION("gather's gradient into a row read 2^22 times") {
    const Tensor params =
        Tensor(xt::xarray<float>(xt::zeros<float>({std::size_t{3}, std::size_t{2}})));
    const Tensor ids = Tensor(xt::xarray<std::int64_t>(xt::ones<std::int64_t>({n})));
    GradientTape tape;
    tape.watch(params);
    const Tensor y = reduce_sum(multiply(gather(params, ids, 0), tenths({n, 2})));
    const auto g = tape.gradient(y, params).array<float>();
    CHECK(std::abs(g(1, 0) - total) <= 1e-7 * total);
    CHECK(std::abs(g(1, 1) - total) <= 1e-7 * total);
    CHECK(g(0, 0) == 0.0f);
  }
}

TEST_CASE("integer sums of many terms are exact and wrap as before", "[reduce]") {
  const std::size_t n = 100000;
  xt::xarray<std::int64_t> a = xt::arange<std::int64_t>(0, static_cast<std::int64_t>(n));
  CHECK(reduce_sum(Tensor(a)).item<std::int64_t>() == static_cast<std::int64_t>(n * (n - 1) / 2));
  xt::xarray<std::int32_t> big = xt::empty<std::int32_t>({std::size_t{3}, n});
  big.fill(30000);
  // 3 * 30000 * 100000 = 9e9 wraps in int32 to 9e9 - 2^33.
  const std::int64_t wrapped = 9000000000LL - (std::int64_t{1} << 33);
  CHECK(reduce_sum(Tensor(big)).item<std::int32_t>() == wrapped);
  CHECK(reduce_sum(Tensor(big), {0}).array<std::int32_t>()(0) == 90000);
}
