// The random family: Philox known answers, the moments of random_normal and random_uniform,
// determinism (same seed and counter, same numbers on any thread), dropout's mask, scale and
// gradients, and the misuse cases of every random op.
#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Mean and (population) variance of the values of t.
struct Moments {
  double mean = 0, variance = 0;
};
Moments moments_of(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= static_cast<double>(v.size());
  return m;
}

// Random123's own u01fixedpt conversions, written out: what the ops must produce from a word.
float float_from_word(std::uint32_t w) { return static_cast<float>(1U | (w >> 8)) * 0x1p-24f; }
double double_from_words(std::uint32_t low, std::uint32_t high) {
  const std::uint64_t u = (std::uint64_t{high} << 32) | low;
  return static_cast<double>(1U | (u >> 11)) * 0x1p-53;
}

r123::Philox4x32::ctr_type philox(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                  std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
  const r123::Philox4x32 generator;
  return generator({{c0, c1, c2, c3}}, {{k0, k1}});
}

}  // namespace

// Random123 1.14, tests/kat_vectors, the three "philox4x32 10" lines (counter, key, result).
TEST_CASE("Philox4x32-10 as installed gives Random123's known answers") {
  const auto zero = philox(0, 0, 0, 0, 0, 0);
  CHECK(zero[0] == 0x6627e8d5U);
  CHECK(zero[1] == 0xe169c58dU);
  CHECK(zero[2] == 0xbc57ac4cU);
  CHECK(zero[3] == 0x9b00dbd8U);
  const std::uint32_t f = 0xffffffffU;
  const auto ones = philox(f, f, f, f, f, f);
  CHECK(ones[0] == 0x408f276dU);
  CHECK(ones[1] == 0x41c83b0eU);
  CHECK(ones[2] == 0xa20bc7c6U);
  CHECK(ones[3] == 0x6d5451fdU);
  const auto pi =
      philox(0x243f6a88U, 0x85a308d3U, 0x13198a2eU, 0x03707344U, 0xa4093822U, 0x299f31d0U);
  CHECK(pi[0] == 0xd16cfe09U);
  CHECK(pi[1] == 0x94fdccebU);
  CHECK(pi[2] == 0x5001e420U);
  CHECK(pi[3] == 0x24126ea1U);
}

TEST_CASE("random_uniform: the known answer of seed 0, counter 0 through the public op") {
  SECTION("float32: one word per value") {
    Generator g(0);
    const Tensor u = random_uniform({4}, g, 0.0, 1.0, DType::Float32);
    REQUIRE(u.dtype() == DType::Float32);
    const auto& a = u.array<float>();
    CHECK(a(0) == float_from_word(0x6627e8d5U));
    CHECK(a(1) == float_from_word(0xe169c58dU));
    CHECK(a(2) == float_from_word(0xbc57ac4cU));
    CHECK(a(3) == float_from_word(0x9b00dbd8U));
    CHECK(a(0) == Approx(0x6627e9 / 16777216.0).epsilon(0));
  }
  SECTION("float64: two words per value, low word first") {
    Generator g(0);
    const Tensor u = random_uniform({2}, g);
    const auto& a = u.array<double>();
    CHECK(a(0) == double_from_words(0x6627e8d5U, 0xe169c58dU));
    CHECK(a(1) == double_from_words(0xbc57ac4cU, 0x9b00dbd8U));
  }
}

TEST_CASE("random_uniform: key = seed halves, counter words = (block, start) as documented") {
  const std::uint64_t seed = 0x299f31d0a4093822ULL;
  const std::uint64_t start = 0x0370734413198a2eULL;
  Generator g(seed, start);
  const Tensor u = random_uniform({6}, g, 0.0, 1.0, DType::Float32);
  CHECK(g.counter() == start + 6);
  const auto& a = u.array<float>();
  const auto block0 = philox(0, 0, 0x13198a2eU, 0x03707344U, 0xa4093822U, 0x299f31d0U);
  const auto block1 = philox(1, 0, 0x13198a2eU, 0x03707344U, 0xa4093822U, 0x299f31d0U);
  for (std::size_t k = 0; k < 4; ++k) CHECK(a(k) == float_from_word(block0[k]));
  CHECK(a(4) == float_from_word(block1[0]));
  CHECK(a(5) == float_from_word(block1[1]));
}

TEST_CASE("random_normal: moments of 10^6 draws within a few standard errors") {
  const std::size_t n = 1000000;
  const double mean = 2.0, stddev = 3.0;
  Generator g(20261123);
  const Tensor z = random_normal({1000, 1000}, g, mean, stddev);
  REQUIRE(z.shape() == Shape{1000, 1000});
  REQUIRE(z.dtype() == DType::Float64);
  const auto v = values(z);
  const Moments m = moments_of(v);
  const double se_mean = stddev / std::sqrt(static_cast<double>(n));
  const double se_variance = stddev * stddev * std::sqrt(2.0 / static_cast<double>(n));
  CHECK(std::fabs(m.mean - mean) < 4 * se_mean);
  CHECK(std::fabs(m.variance - stddev * stddev) < 4 * se_variance);
  // The shape, not only two moments: P(|z - mean| < stddev) = erf(1/sqrt 2) = 0.682689...
  const double p = std::erf(1.0 / std::sqrt(2.0));
  const double within =
      static_cast<double>(std::count_if(v.begin(), v.end(),
                                        [&](double x) { return std::fabs(x - mean) < stddev; })) /
      static_cast<double>(n);
  CHECK(std::fabs(within - p) < 4 * std::sqrt(p * (1 - p) / static_cast<double>(n)));
  double third = 0;  // skewness 0
  for (double x : v) third += std::pow((x - m.mean) / stddev, 3);
  CHECK(std::fabs(third / static_cast<double>(n)) < 4 * std::sqrt(6.0 / static_cast<double>(n)));
}

TEST_CASE("random_normal: float32 draws, stddev 0") {
  Generator g(7);
  const Tensor z = random_normal({200000}, g, -1.0, 0.5, DType::Float32);
  REQUIRE(z.dtype() == DType::Float32);
  const Moments m = moments_of(values(z));
  CHECK(std::fabs(m.mean + 1.0) < 4 * 0.5 / std::sqrt(200000.0));
  CHECK(std::fabs(m.variance - 0.25) < 4 * 0.25 * std::sqrt(2.0 / 200000.0));
  const Tensor c = random_normal({3}, g, 1.5, 0.0);
  require_close(c, {3}, {1.5, 1.5, 1.5}, 0.0);
  CHECK(g.counter() == 200003);
}

TEST_CASE("random_uniform: range and moments") {
  SECTION("float64 in [-2, 3): every value in range, mean and variance of U(-2, 3)") {
    Generator g(99);
    const Tensor u = random_uniform({1000000}, g, -2.0, 3.0);
    const auto v = values(u);
    CHECK(*std::min_element(v.begin(), v.end()) >= -2.0);
    CHECK(*std::max_element(v.begin(), v.end()) < 3.0);
    const Moments m = moments_of(v);
    const double sd = 5.0 / std::sqrt(12.0);
    CHECK(std::fabs(m.mean - 0.5) < 4 * sd / 1000.0);
    CHECK(std::fabs(m.variance - sd * sd) < 4 * std::sqrt(1.0 / 180.0 * 625.0 / 1e6));
    // Both ends are reached to within a few spacings of 5/10^6.
    CHECK(*std::min_element(v.begin(), v.end()) < -2.0 + 1e-4);
    CHECK(*std::max_element(v.begin(), v.end()) > 3.0 - 1e-4);
  }
  SECTION("float32 in [1, 2): values that round up to hi are moved below it") {
    Generator g(5);
    const Tensor u = random_uniform({100000}, g, 1.0, 2.0, DType::Float32);
    REQUIRE(u.dtype() == DType::Float32);
    const auto& a = u.array<float>();
    CHECK(*std::min_element(a.begin(), a.end()) >= 1.0f);
    CHECK(*std::max_element(a.begin(), a.end()) < 2.0f);
  }
  SECTION("a one-spacing range [1, 1 + 2^-52) gives exactly 1") {
    Generator g(5);
    const Tensor u = random_uniform({1000}, g, 1.0, 1.0 + 0x1p-52);
    for (double x : values(u)) REQUIRE(x == 1.0);
  }
  SECTION("an empty shape draws nothing") {
    Generator g(5);
    CHECK(random_uniform({0, 3}, g).shape() == Shape{0, 3});
    CHECK(g.counter() == 0);
    CHECK(random_normal({}, g).shape() == Shape{});
    CHECK(g.counter() == 1);
  }
}

TEST_CASE("Generator: determinism and independence") {
  const auto draw = [](std::uint64_t seed) {
    Generator g(seed);
    return values(random_normal({64, 3}, g));
  };
  SECTION("the same seed gives the same numbers, twice and on two other threads") {
    const auto first = draw(42);
    CHECK(draw(42) == first);
    std::vector<double> a, b;
    std::thread ta([&] { a = draw(42); });
    std::thread tb([&] { b = draw(42); });
    ta.join();
    tb.join();
    CHECK(a == first);
    CHECK(b == first);
  }
  SECTION("different seeds differ") {
    const auto x = draw(42), y = draw(43);
    std::size_t equal = 0;
    for (std::size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
    CHECK(equal == 0);
  }
  SECTION("successive draws differ; the counter advances by the values drawn") {
    Generator g(42);
    const auto x = values(random_uniform({10}, g));
    CHECK(g.counter() == 10);
    const auto y = values(random_uniform({10}, g));
    CHECK(g.counter() == 20);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] != y[i]);
    // Resuming at counter 10 repeats the second draw.
    Generator resumed(42, 10);
    CHECK(values(random_uniform({10}, resumed)) == y);
  }
  SECTION("a draw's first values do not depend on its size") {
    Generator small(8), large(8);
    const auto x = values(random_normal({3}, small, 0, 1, DType::Float32));
    const auto y = values(random_normal({11}, large, 0, 1, DType::Float32));
    CHECK(std::equal(x.begin(), x.end(), y.begin()));
  }
  SECTION("one generator shared by two threads: disjoint ranges, no repeated value") {
    Generator g(3);
    std::vector<double> a, b;
    const auto work = [&g](std::vector<double>& out) {
      for (int i = 0; i < 500; ++i) {
        const auto v = values(random_uniform({4}, g));
        out.insert(out.end(), v.begin(), v.end());
      }
    };
    std::thread ta([&] { work(a); });
    std::thread tb([&] { work(b); });
    ta.join();
    tb.join();
    CHECK(g.counter() == 4000);
    std::set<double> all(a.begin(), a.end());
    all.insert(b.begin(), b.end());
    CHECK(all.size() == 4000);
  }
}

TEST_CASE("random tensors are constants: a tape may watch one like any tensor") {
  Generator g(11);
  Tensor r = random_normal({5}, g);
  GradientTape tape;
  tape.watch(r);
  const Tensor y = reduce_sum(multiply(r, r));
  require_close(tape.gradient(y, r), {5}, values(add(r, r)), 0.0);
}

TEST_CASE("dropout: kept fraction, scale, exact gradient") {
  const double rate = 0.3;
  const double scale = 1.0 / (1.0 - rate);
  const std::size_t n = 200000;
  Tensor x = random_tensor({n}, 17, 1.0, 2.0);
  Generator g(123);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = dropout(x, rate, g);
  CHECK(g.counter() == n);
  const Tensor dx = tape.gradient(reduce_sum(y), x);
  const auto xv = values(x), yv = values(y), gv = values(dx);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (yv[i] != 0.0) {
      ++kept;
      REQUIRE(yv[i] == xv[i] * scale);
      REQUIRE(gv[i] == scale);
    } else {
      REQUIRE(gv[i] == 0.0);
    }
  }
  const double fraction = static_cast<double>(kept) / static_cast<double>(n);
  CHECK(std::fabs(fraction - (1 - rate)) <
        4 * std::sqrt(rate * (1 - rate) / static_cast<double>(n)));
}

TEST_CASE("dropout: float32, NaN dropped to 0, determinism") {
  Tensor x = from_values({1, kNaN, 3, 4, 5, 6, 7, 8}, {2, 4}, DType::Float32);
  Generator g1(4), g2(4);
  const Tensor a = dropout(x, 0.5, g1);
  const Tensor b = dropout(x, 0.5, g2);
  REQUIRE(a.dtype() == DType::Float32);
  REQUIRE(a.shape() == Shape{2, 4});
  const auto& av = a.array<float>();
  const auto& bv = b.array<float>();
  const auto& xv = x.array<float>();
  for (std::size_t i = 0; i < 8; ++i) {
    const bool kept = !(av.data()[i] == 0.0f);
    if (kept) {
      CHECK((std::isnan(xv.data()[i]) ? std::isnan(av.data()[i])
                                      : av.data()[i] == xv.data()[i] * 2.0f));
    }
    CHECK((std::isnan(av.data()[i]) ? std::isnan(bv.data()[i]) : av.data()[i] == bv.data()[i]));
  }
  // The mask is x's dtype's unit uniforms >= rate (TF): rebuild it from a generator at the
  // same counter.
  Generator g3(4);
  const auto u = values(random_uniform({8}, g3, 0.0, 1.0, DType::Float32));
  for (std::size_t i = 0; i < 8; ++i) {
    INFO("element " << i);
    const bool kept = u[i] >= 0.5;
    if (!kept) CHECK(av.data()[i] == 0.0f);
    if (kept && !std::isnan(xv.data()[i])) CHECK(av.data()[i] == xv.data()[i] * 2.0f);
  }
}

TEST_CASE("dropout: rate 0 is the identity and draws nothing") {
  Tensor x = random_tensor({3, 2}, 1);
  Generator g(9);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = dropout(x, 0.0, g);
  CHECK(y.id() == x.id());
  CHECK(g.counter() == 0);
  require_close(tape.gradient(reduce_sum(y), x), {3, 2}, std::vector<double>(6, 1.0), 0.0);
}

TEST_CASE("dropout: first and second order numerical checks with a fixed generator") {
  // Each call draws from a fresh generator of one seed: the same mask every time.
  const Fn f = [](const std::vector<Tensor>& a) {
    Generator g(2024);
    return sin(dropout(a[0], 0.4, g));
  };
  const Fn weighted = [](const std::vector<Tensor>& a) {
    Generator g(2024);
    return multiply(dropout(a[0], 0.4, g), a[1]);
  };
  const Tensor x = random_tensor({4, 5}, 3);
  const Tensor w = random_tensor({4, 5}, 4);
  require_gradient_matches(f, {x});
  require_second_order_matches(f, {x});
  require_gradient_matches(weighted, {x, w}, 0);
  require_second_order_matches(weighted, {x, w}, 0);
  // Both a kept and a dropped element are in the check.
  Generator g(2024);
  const auto y = values(dropout(x, 0.4, g));
  CHECK(std::count(y.begin(), y.end(), 0.0) > 0);
  CHECK(std::count(y.begin(), y.end(), 0.0) < 20);
}

TEST_CASE("dropout: the derivative of the gradient is recorded (nested tapes)") {
  // d/dx sum(x * dropout(x)) = dropout(x) + x * mask = 2 * mask * x; its derivative is 2 * mask.
  Tensor x = random_tensor({50}, 8, 1.0, 2.0);
  GradientTape outer;
  outer.watch(x);
  Tensor first;
  {
    GradientTape inner;
    inner.watch(x);
    Generator g(77);
    first = inner.gradient(reduce_sum(multiply(x, dropout(x, 0.5, g))), x);
  }
  const Tensor second = outer.gradient(reduce_sum(first), x);
  const auto fv = values(first), sv = values(second), xv = values(x);
  for (std::size_t i = 0; i < xv.size(); ++i) {
    INFO("element " << i);
    if (fv[i] == 0.0) {
      CHECK(sv[i] == 0.0);
    } else {
      CHECK(fv[i] == Approx(4.0 * xv[i]).epsilon(1e-15));
      CHECK(sv[i] == 4.0);
    }
  }
}

// ---- misuse -------------------------------------------------------------------------------

TEST_CASE("random ops misuse: each case throws its documented error, the generator unmoved") {
  const int before = misuse_cases_run();
  Generator g(1);
  const auto unmoved = [&g] { REQUIRE(g.counter() == 0); };
  const auto uniform_case = [&](const std::string& name, double lo, double hi, DType dtype,
                                const std::vector<std::string>& mentions) {
    expect_misuse<InvalidArgument>(
        name,
        [&] {
          random_uniform({2, 3}, g, lo, hi, dtype);
        },
        mentions);
    unmoved();
  };
  uniform_case("random_uniform: hi < lo", 2, 1, DType::Float64,
               {"random_uniform", "[2, 3]", "float64", "lo 2", "hi 1"});
  uniform_case("random_uniform: hi == lo", 1, 1, DType::Float64,
               {"random_uniform", "lo 1", "hi 1"});
  uniform_case("random_uniform: NaN lo", kNaN, 1, DType::Float64,
               {"random_uniform", "[2, 3]", "nan"});
  uniform_case("random_uniform: infinite hi", 0, kInf, DType::Float32,
               {"random_uniform", "float32", "inf"});
  uniform_case("random_uniform: hi - lo overflows", -1e308, 1e308, DType::Float64,
               {"random_uniform", "overflows", "-1e+308"});
  uniform_case("random_uniform: hi beyond float32", 0, 1e39, DType::Float32,
               {"random_uniform", "float32", "1e+39"});
  uniform_case("random_uniform: bounds equal in float32", 1, 1 + 1e-10, DType::Float32,
               {"random_uniform", "float32", "equal", "1.0000000001"});
  uniform_case("random_uniform: int32", 0, 1, DType::Int32, {"random_uniform", "[2, 3]", "int32"});
  uniform_case("random_uniform: bool", 0, 1, DType::Bool, {"random_uniform", "bool"});

  const auto normal_case = [&](const std::string& name, double mean, double stddev, DType dtype,
                               const std::vector<std::string>& mentions) {
    expect_misuse<InvalidArgument>(
        name, [&] { random_normal({4}, g, mean, stddev, dtype); }, mentions);
    unmoved();
  };
  normal_case("random_normal: stddev < 0", 0, -1, DType::Float64,
              {"random_normal", "[4]", "float64", "stddev -1"});
  normal_case("random_normal: NaN mean", kNaN, 1, DType::Float32,
              {"random_normal", "float32", "mean nan"});
  normal_case("random_normal: infinite stddev", 0, kInf, DType::Float64, {"random_normal", "inf"});
  normal_case("random_normal: mean beyond float32", 1e39, 1, DType::Float32,
              {"random_normal", "float32", "mean 1e+39"});
  normal_case("random_normal: int64", 0, 1, DType::Int64, {"random_normal", "[4]", "int64"});

  expect_misuse<ResourceExhausted>(
      "random_normal: 2^60 bytes cannot be allocated",
      [&] {
        random_normal({std::size_t{1} << 30, std::size_t{1} << 27}, g);
      },
      {"random_normal", "[1073741824, 134217728]", "float64", "out of memory"});
  unmoved();
  expect_misuse<InvalidArgument>("random_uniform: [2^40, 2^40] overflows the element count",
                                 [&] {
                                   random_uniform({std::size_t{1} << 40, std::size_t{1} << 40}, g);
                                 },
                                 {"random_uniform", "[1099511627776, 1099511627776]"});
  unmoved();

  Generator nearly_spent(5, std::numeric_limits<std::uint64_t>::max() - 2);
  expect_misuse<InvalidArgument>(
      "random_uniform: a draw past the end of the counter",
      [&] { random_uniform({4}, nearly_spent); },
      {"random_uniform", "shape [4]", "dtype float64", "seed 5", "18446744073709551613", "wrap"});
  expect_misuse<InvalidArgument>(
      "dropout: a draw past the end of the counter",
      [&] {
        dropout(from_values({1, 2, 3}, {3}, DType::Float32), 0.5, nearly_spent);
      },
      {"dropout", "shape [3]", "dtype float32", "seed 5", "wrap"});
  CHECK(nearly_spent.counter() == std::numeric_limits<std::uint64_t>::max() - 2);
  expect_defined("random_uniform: a draw up to the last counter value", [&] {
    REQUIRE(random_uniform({2}, nearly_spent).size() == 2);
    REQUIRE(nearly_spent.counter() == std::numeric_limits<std::uint64_t>::max());
  });

  const Tensor x = from_values({1, 2, 3}, {3});
  const auto dropout_case = [&](const std::string& name, const Tensor& input, double rate,
                                const std::vector<std::string>& mentions) {
    expect_misuse<InvalidArgument>(
        name, [&] { dropout(input, rate, g); }, mentions);
    unmoved();
  };
  dropout_case("dropout: rate 1", x, 1.0, {"dropout", "[3]", "float64", "[0, 1)", "got 1"});
  dropout_case("dropout: rate 1.5", x, 1.5, {"dropout", "got 1.5"});
  dropout_case("dropout: negative rate", x, -0.25, {"dropout", "got -0.25"});
  dropout_case("dropout: NaN rate", x, kNaN, {"dropout", "got nan"});
  dropout_case("dropout: int32 x", from_values({1, 2}, {1, 2}, DType::Int32), 0.5,
               {"dropout", "[1, 2]", "int32"});
  dropout_case("dropout: bool x, rate 0", from_values({1, 0}, {2}, DType::Bool), 0.0,
               {"dropout", "[2]", "bool"});
  dropout_case("dropout: undefined x", Tensor(), 0.5, {"dropout", "undefined"});
  static const Variable v(from_values({1, 2, 3}, {3}), true, "w");
  dropout_case("dropout: a variable handle", v.handle(), 0.5,
               {"dropout", "variable handle", "[3]"});
  expect_defined("dropout: an empty tensor", [&] {
    const Tensor empty = dropout(zeros({0, 4}), 0.5, g);
    REQUIRE(empty.shape() == Shape{0, 4});
    unmoved();
  });

  const int run = misuse_cases_run() - before;
  std::cout << "random misuse cases: " << run << " run\n";
  REQUIRE(run == 28);
}
