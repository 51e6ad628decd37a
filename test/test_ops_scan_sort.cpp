// cumsum, cumprod, reverse, sort, argsort, top_k, argmax, argmin: exact values (TF's
// examples and hand-computed ones), cumsum against sums of slices, first and second
// derivatives, no gradient through positions, and bad input.
#include <cmath>
#include <limits>
#include <numeric>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor ints(const std::vector<double>& v, const Shape& shape, DType dtype = DType::Int32) {
  return from_values(v, shape, dtype);
}

Fn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& a) { return f(a[0]); };
}

}  // namespace

TEST_CASE("cumsum and cumprod: values with exclusive and reverse", "[scan]") {
  const Tensor x = constant({1, 2, 3, 4});
  require_close(cumsum(x, 0), {4}, {1, 3, 6, 10});
  require_close(cumsum(x, 0, true), {4}, {0, 1, 3, 6});
  require_close(cumsum(x, 0, false, true), {4}, {10, 9, 7, 4});
  require_close(cumsum(x, -1, true, true), {4}, {9, 7, 4, 0});
  require_close(cumprod(x, 0), {4}, {1, 2, 6, 24});
  require_close(cumprod(x, 0, true), {4}, {1, 1, 2, 6});
  require_close(cumprod(x, 0, false, true), {4}, {24, 24, 12, 4});
  require_close(cumprod(x, 0, true, true), {4}, {24, 12, 4, 1});
  const Tensor m = constant({{1, 2, 3}, {4, 5, 6}});
  require_close(cumsum(m, 0), {2, 3}, {1, 2, 3, 5, 7, 9});
  require_close(cumsum(m, 1), {2, 3}, {1, 3, 6, 4, 9, 15});
  require_close(cumprod(m, -2, true), {2, 3}, {1, 1, 1, 1, 2, 3});
  const Tensor i = cumsum(ints({1, 2, 3, 4}, {2, 2}, DType::Int64), 1, false, true);
  CHECK(i.dtype() == DType::Int64);
  require_close(i, {2, 2}, {3, 2, 7, 4});
  require_close(cumprod(ints({2, 3, 4}, {3}), 0), {3}, {2, 6, 24});
  CHECK(cumsum(zeros({2, 0, 3}), 1).shape() == Shape{2, 0, 3});
}

TEST_CASE("cumsum equals sums of slices, forward, exclusive and reverse", "[scan][identity]") {
  const Tensor x = random_tensor({3, 5, 2}, 1);
  const std::int64_t n = 5;
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      const Tensor c = cumsum(x, 1, exclusive, reverse);
      for (std::int64_t j = 0; j < n; ++j) {
        // The covered window along axis 1: [0, j] or [j, n) widened or narrowed by one.
        std::int64_t begin = reverse ? j : 0;
        std::int64_t end = reverse ? n : j + 1;
        if (exclusive) (reverse ? begin : end) += reverse ? 1 : -1;
        const Tensor window = slice(x, {0, begin, 0}, {3, end - begin, 2});
        const Tensor expected = reduce_sum(window, {1});
        const Tensor got = reshape(slice(c, {0, j, 0}, {3, 1, 2}), {3, 2});
        require_close(got, {3, 2}, values(expected), 1e-14);
      }
    }
  }
}

TEST_CASE("cumsum, cumprod, reverse: first and second derivatives", "[scan][gradient]") {
  const Tensor x = random_tensor({3, 4}, 2);
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      // Squared, so the second derivative passes through the scan's own gradient.
      verify_gradients(
          unary([=](const Tensor& v) { return square(cumsum(v, 1, exclusive, reverse)); }), {x});
      verify_gradients(unary([=](const Tensor& v) { return cumprod(v, 0, exclusive, reverse); }),
                       {random_tensor({3, 4}, 3, 0.5, 1.5)});
    }
  }
  verify_gradients(unary([](const Tensor& v) { return square(reverse(v, {0, -1})); }), {x});
  verify_gradients(unary([](const Tensor& v) { return multiply(reverse(v, {1}), v); }), {x});
}

TEST_CASE("cumprod's gradient is exact where x has zeros (TF's formula gives NaN there)",
          "[scan][gradient]") {
  // d/dx sum(cumprod([2, x1, 3])) = [1 + x1 + 3 x1, 2 + 6, 2 x1]: finite at x1 = 0, where TF's
  // cumsum(y g, reverse) / x is 0 / 0.
  const Tensor x = constant({2, 0, 3});
  GradientTape tape;
  tape.watch(x);
  require_close(tape.gradient(reduce_sum(cumprod(x, 0)), x), {3}, {1, 8, 0});
  // Zeros in several lines (one line with two), every flag combination, first and second order.
  const Tensor z = from_values({0.5, 0, 1.5, -1, 0, 2, 0, 0.7, 1.2, 0.9, -0.4, 1.1}, {3, 4});
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      verify_gradients(unary([=](const Tensor& v) { return cumprod(v, 1, exclusive, reverse); }),
                       {z});
      verify_gradients(unary([=](const Tensor& v) { return cumprod(v, 0, exclusive, reverse); }),
                       {z});
    }
  }
}

TEST_CASE("cumprod of lines longer than 16: derivatives exact with zeros, no branch on values",
          "[scan][gradient]") {
  // Lines of 20 near +-1 (no overflow): row 0 without a zero, row 1 with one, row 2 with two.
  std::vector<double> v(60);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = (i % 3 == 0 ? -1.0 : 1.0) * (0.8 + 0.02 * static_cast<double>(i % 20));
  }
  v[20 + 7] = 0;
  v[40 + 3] = 0;
  v[40 + 15] = 0;
  const Tensor x = from_values(v, {3, 20});
  const Tensor one_zero_at_most = slice(x, {0, 0}, {2, 20});
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      const auto f = unary([=](const Tensor& t) { return cumprod(t, 1, exclusive, reverse); });
      verify_gradients(f, {one_zero_at_most});     // first and second order
      verify_gradients(f, {x}, VerifyOptions{1});  // two zeros in a line: first order
      // The forward rule is the gradient's transpose.
      const Tensor dx = random_tensor({3, 20}, 31);
      ForwardAccumulator acc(x, dx);
      const Tensor by_rule = acc.jvp(cumprod(x, 1, exclusive, reverse));
      GradientTape tape;
      tape.watch(x);
      const Tensor j = tape.jacobian(cumprod(x, 1, exclusive, reverse), x);
      const Tensor expected = reshape(matmul(reshape(j, {60, 60}), reshape(dx, {60, 1})), {3, 20});
      require_close(by_rule, {3, 20}, values(expected), 1e-12);
    }
  }
}

TEST_CASE("cumprod's rules follow each call's zeros in a Function and each row's in a batch",
          "[scan][gradient][function]") {
  // The gradient and the tangent once read x's values to choose a formula: a trace on x
  // without zeros then replayed TF's formula on x with zeros (NaN), and vectorized_map used one
  // formula for every row.
  for (std::size_t n : {3, 20}) {
    INFO("lines of " << n);
    std::vector<double> base(n), zeroed(n);
    for (std::size_t i = 0; i < n; ++i) base[i] = 1.0 + 0.05 * static_cast<double>(i);
    zeroed = base;
    zeroed[0] = 0;
    const auto gradient_and_tangent = [n](const std::vector<Tensor>& args) {
      GradientTape tape;
      tape.watch(args[0]);
      ForwardAccumulator acc(args[0], ones({n}));
      const Tensor y = cumprod(args[0], 0);
      return std::vector<Tensor>{tape.gradient(reduce_sum(y), args[0]), acc.jvp(y)};
    };
    const Function traced = function(gradient_and_tangent);
    const Tensor plain = from_values(base, {n}), with_zero = from_values(zeroed, {n});
    traced({plain});
    for (const Tensor& input : {with_zero, plain, with_zero}) {
      const std::vector<Tensor> replayed = traced({input});
      const std::vector<Tensor> eager = gradient_and_tangent({input});
      CHECK(values(replayed[0]) == values(eager[0]));
      CHECK(values(replayed[1]) == values(eager[1]));
      for (double d : values(replayed[0])) CHECK(std::isfinite(d));
    }
    CHECK(traced.trace_count() == 1);
    // d/dx0 sum(cumprod(x)) at x0 = 0: 1 + x1 + x1 x2 + ... (every y_j without x0).
    double expected = 0, product = 1;
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0) product *= zeroed[i];
      expected += product;
    }
    CHECK(values(traced({with_zero})[0])[0] == Approx(expected).epsilon(1e-14));
    // Per-example gradients of rows with and without a zero, against a loop.
    const Tensor rows = stack({plain, with_zero, plain});
    const Tensor batched = vectorized_map(
        [](const Tensor& row) {
          GradientTape tape;
          tape.watch(row);
          return tape.gradient(reduce_sum(cumprod(row, 0)), row);
        },
        rows);
    for (std::size_t r = 0; r < 3; ++r) {
      const Tensor row = r == 1 ? with_zero : plain;
      GradientTape tape;
      tape.watch(row);
      const Tensor looped = tape.gradient(reduce_sum(cumprod(row, 0)), row);
      CHECK(values(gather(batched, from_values({static_cast<double>(r)}, {}, DType::Int64))) ==
            values(looped));
    }
  }
}

TEST_CASE("cumprod's forward rule matches the gradient's transpose where x has zeros",
          "[scan][forward]") {
  const Tensor z = from_values({0.5, 0, 1.5, -1, 0, 2}, {2, 3});
  const Tensor dz = random_tensor({2, 3}, 9);
  ForwardAccumulator acc(z, dz);
  const Tensor y = cumprod(z, 1, false, true);
  const Tensor by_rule = acc.jvp(y);
  GradientTape tape;
  tape.watch(z);
  const Tensor j = tape.jacobian(cumprod(z, 1, false, true), z);  // [2, 3, 2, 3]
  const Tensor expected = reshape(matmul(reshape(j, {6, 6}), reshape(dz, {6, 1})), {2, 3});
  require_close(by_rule, {2, 3}, values(expected), 1e-12);
}

TEST_CASE("reverse: values on any dtype and axis set", "[reverse]") {
  const Tensor m = constant({{1, 2, 3}, {4, 5, 6}});
  require_close(reverse(m, {1}), {2, 3}, {3, 2, 1, 6, 5, 4});
  require_close(reverse(m, {0}), {2, 3}, {4, 5, 6, 1, 2, 3});
  require_close(reverse(m, {-1, 0}), {2, 3}, {6, 5, 4, 3, 2, 1});
  require_close(reverse(m, {}), {2, 3}, {1, 2, 3, 4, 5, 6});
  require_close(reverse(ints({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), {1}), {2, 2, 2},
                {3, 4, 1, 2, 7, 8, 5, 6});
  const Tensor b = reverse(from_values({1, 0, 0}, {3}, DType::Bool), {0});
  require_close(b, {3}, {0, 0, 1});
}

TEST_CASE("sort and argsort: ascending, descending, stable, NaN last", "[sort]") {
  const Tensor x = constant({3, 1, 2, 1, 3});
  require_close(sort(x), {5}, {1, 1, 2, 3, 3});
  require_close(sort(x, 0, true), {5}, {3, 3, 2, 1, 1});
  const Tensor asc = argsort(x);
  CHECK(asc.dtype() == DType::Int32);
  require_close(asc, {5}, {1, 3, 2, 0, 4});  // equal values keep their order
  require_close(argsort(x, -1, true), {5}, {0, 4, 2, 1, 3});
  const Tensor m = constant({{4, 1}, {2, 3}, {0, 5}});
  require_close(sort(m, 0), {3, 2}, {0, 1, 2, 3, 4, 5});
  require_close(argsort(m, 0, true), {3, 2}, {0, 2, 1, 1, 2, 0});
  require_close(sort(ints({5, -2, 7}, {3}, DType::Int64)), {3}, {-2, 5, 7});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto with_nan = values(sort(constant({2, nan, 1})));
  CHECK(with_nan[0] == 1.0);
  CHECK(with_nan[1] == 2.0);
  CHECK(std::isnan(with_nan[2]));
  require_close(argsort(constant({2, nan, 1}), 0, true), {3}, {1, 0, 2});
}

TEST_CASE("argsort and top_k equal a stable sort on long lines full of ties", "[sort]") {
  std::vector<double> v(300);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 5);
  const Tensor x = from_values(v, {3, 100});
  for (bool descending : {false, true}) {
    const auto got = values(argsort(x, 1, descending));
    const auto top = values(top_k(x, 17).indices);  // a stable sort of the whole line
    const auto few = values(top_k(x, 5).indices);   // a heap selection of the first 5
    for (std::size_t row = 0; row < 3; ++row) {
      std::vector<int> order(100);
      std::iota(order.begin(), order.end(), 0);
      auto at = [&](int p) { return v[row * 100 + static_cast<std::size_t>(p)]; };
      std::stable_sort(order.begin(), order.end(),
                       [&](int p, int q) { return descending ? at(p) > at(q) : at(p) < at(q); });
      for (std::size_t j = 0; j < 100; ++j) {
        INFO("descending " << descending << ", row " << row << ", position " << j);
        REQUIRE(got[row * 100 + j] == order[j]);
      }
      if (!descending) continue;
      for (std::size_t j = 0; j < 17; ++j) REQUIRE(top[row * 17 + j] == order[j]);
      for (std::size_t j = 0; j < 5; ++j) REQUIRE(few[row * 5 + j] == order[j]);
    }
  }
}

TEST_CASE("top_k: the k largest in order, first occurrence first among equals", "[sort][top_k]") {
  const Tensor x = constant({{1, 5, 3, 5}, {7, 2, 2, 0}});
  const TopK top = top_k(x, 2);
  require_close(top.values, {2, 2}, {5, 5, 7, 2});
  CHECK(top.indices.dtype() == DType::Int32);
  require_close(top.indices, {2, 2}, {1, 3, 0, 1});
  require_close(top_k(constant({4, 9, 1}), 1).values, {1}, {9});
  CHECK(top_k(x, 0).values.shape() == Shape{2, 0});
  require_close(top_k(ints({3, 8, 5}, {3}), 3).values, {3}, {8, 5, 3});
}

TEST_CASE("sort and top_k gradients scatter back through the permutation", "[sort][gradient]") {
  const Tensor x = constant({3, 1, 2});
  const Tensor w = constant({10, 20, 30});
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(multiply(sort(x), w)), x);
    require_close(g, {3}, {30, 10, 20});  // sorted [1, 2, 3] came from positions [1, 2, 0]
  }
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(multiply(top_k(x, 2).values, constant({5, 7}))), x);
    require_close(g, {3}, {5, 0, 7});
  }
  const Tensor r = random_tensor({3, 4}, 4);
  verify_gradients(unary([](const Tensor& v) { return square(sort(v, 0)); }), {r});
  verify_gradients(unary([](const Tensor& v) { return multiply(sort(v, 1, true), v); }), {r});
  verify_gradients(unary([](const Tensor& v) { return square(top_k(v, 3).values); }), {r});
}

TEST_CASE("argmax and argmin: Int64 positions, first among ties, NaN wins", "[argmax]") {
  const Tensor m = constant({{1, 9, 9}, {4, 0, 4}});
  const Tensor a = argmax(m, 1);
  CHECK(a.dtype() == DType::Int64);
  require_close(a, {2}, {1, 0});
  require_close(argmax(m, 0), {3}, {1, 0, 0});
  require_close(argmin(m, -1), {2}, {0, 1});
  require_close(argmin(m, 0), {3}, {0, 1, 1});
  require_close(argmax(ints({3, 7, 7}, {3}), 0), {}, {1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  require_close(argmax(constant({1, nan, 5, nan}), 0), {}, {1});
  require_close(argmin(constant({1, 0, nan}), 0), {}, {2});
}

TEST_CASE("positions carry no gradient: argmax, argsort, top_k indices", "[argmax][gradient]") {
  const Tensor x = constant({{1, 9, 3}, {4, 0, 5}});
  auto gradient_through = [&](const std::function<Tensor(const Tensor&)>& positions,
                              UnconnectedGradients unconnected = UnconnectedGradients::None) {
    GradientTape tape;
    tape.watch(x);
    return tape.gradient(cast(positions(x), DType::Float64), x, unconnected);
  };
  CHECK_FALSE(gradient_through([](const Tensor& v) { return argmax(v, 1); }).defined());
  CHECK_FALSE(gradient_through([](const Tensor& v) { return argmin(v, 0); }).defined());
  CHECK_FALSE(gradient_through([](const Tensor& v) { return argsort(v); }).defined());
  CHECK_FALSE(gradient_through([](const Tensor& v) { return top_k(v, 2).indices; }).defined());
  const Tensor zero =
      gradient_through([](const Tensor& v) { return argmax(v, 1); }, UnconnectedGradients::Zero);
  require_close(zero, {2, 3}, {0, 0, 0, 0, 0, 0});
}

TEST_CASE("scan and sort misuse", "[scan][sort][misuse]") {
  const Tensor m = constant({{1, 2}, {3, 4}});
  expect_misuse<InvalidArgument>("cumsum axis out of range", [&] { cumsum(m, 2); },
                                 {"cumsum", "[2, 2]", "axis", "2"});
  expect_misuse<InvalidArgument>("cumsum of a scalar", [&] { cumsum(constant(1.0), 0); },
                                 {"cumsum", "rank"});
  expect_misuse<InvalidArgument>("cumprod of bool",
                                 [&] {
                                   cumprod(from_values({1, 0}, {2}, DType::Bool), 0);
                                 },
                                 {"cumprod", "bool"});
  expect_misuse<InvalidArgument>("reverse names an axis twice",
                                 [&] {
                                   reverse(m, {1, -1});
                                 },
                                 {"reverse", "[2, 2]", "[1, -1]", "twice"});
  expect_misuse<InvalidArgument>("reverse axis out of range", [&] { reverse(m, {-3}); },
                                 {"reverse", "[2, 2]", "-3"});
  expect_misuse<InvalidArgument>("sort of a scalar", [&] { sort(constant(1.0)); },
                                 {"sort", "rank"});
  expect_misuse<InvalidArgument>("argsort of bool",
                                 [&] {
                                   argsort(from_values({1, 0}, {2}, DType::Bool));
                                 },
                                 {"argsort", "bool"});
  expect_misuse<InvalidArgument>("top_k with k above the last dimension", [&] { top_k(m, 3); },
                                 {"top_k", "[2, 2]", "k 3", "[0, 2]"});
  expect_misuse<InvalidArgument>("top_k with negative k", [&] { top_k(m, -1); }, {"top_k", "k -1"});
  expect_misuse<InvalidArgument>("argmax over an empty axis",
                                 [&] {
                                   argmax(zeros({2, 0}), 1);
                                 },
                                 {"argmax", "[2, 0]", "empty"});
  expect_misuse<InvalidArgument>("argmin of bool",
                                 [&] {
                                   argmin(from_values({1, 0}, {2}, DType::Bool), 0);
                                 },
                                 {"argmin", "bool"});
  expect_misuse<InvalidArgument>("argmax axis out of range", [&] { argmax(m, 5); },
                                 {"argmax", "[2, 2]", "5"});
}
