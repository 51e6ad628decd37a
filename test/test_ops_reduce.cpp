// Reductions: forward values, gradients (first and second order), ties, zeros, stability and
// bad input.
#include <cmath>
#include <limits>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

const Shape k23{2, 3};

// [[1, 5, 3], [4, 2, 6]] in the requested dtype.
Tensor sample(DType dtype = DType::Float64) { return from_values({1, 5, 3, 4, 2, 6}, k23, dtype); }

// Random values far from each other, so max/min have no ties and stay put under the
// finite-difference steps.
Tensor distinct_random(const Shape& shape, unsigned seed) {
  Tensor r = random_tensor(shape, seed, 0.0, 0.5);
  std::vector<double> v = values(r);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += static_cast<double>((i * 7) % v.size());
  return from_values(v, shape);
}

Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  Tensor y = f(x);
  return tape.gradient(y, x);
}

}  // namespace

TEST_CASE("reduce_sum and reduce_mean: axes, keepdims, int dtypes, size-0 dims", "[reduce]") {
  require_close(reduce_sum(sample()), {}, {21});
  require_close(reduce_sum(sample(), {0}), {3}, {5, 7, 9});
  require_close(reduce_sum(sample(), {-1}, true), {2, 1}, {9, 12});
  require_close(reduce_sum(sample(DType::Int32), {1}), {2}, {9, 12});
  CHECK(reduce_sum(sample(DType::Int64), {1}).dtype() == DType::Int64);
  require_close(reduce_mean(sample(DType::Float32), {0}), {3}, {2.5, 3.5, 4.5}, 1e-6);
  require_close(reduce_mean(sample(DType::Int32), {1}), {2}, {3, 4});  // 9/3, 12/3
  require_close(reduce_sum(zeros({0, 3}), {0}), {3}, {0, 0, 0});
  require_close(reduce_sum(constant(2.5)), {}, {2.5});
}

TEST_CASE("reduce_sum and reduce_mean gradients, first and second order", "[reduce][gradient]") {
  const Tensor x = random_tensor({3, 4}, 1);
  for (bool keep : {false, true}) {
    require_gradient_matches(
        [keep](const std::vector<Tensor>& a) { return reduce_sum(a[0], {1}, keep); }, {x});
    require_gradient_matches(
        [keep](const std::vector<Tensor>& a) { return reduce_mean(a[0], {-2}, keep); }, {x});
    require_second_order_matches(
        [keep](const std::vector<Tensor>& a) { return reduce_sum(square(a[0]), {0}, keep); }, {x});
  }
  require_second_order_matches(
      [](const std::vector<Tensor>& a) { return reduce_mean(a[0] * a[0] * a[0]); }, {x});
}

TEST_CASE("reduce_max and reduce_min forward", "[reduce]") {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int32, DType::Int64}) {
    INFO(dtype_name(dtype));
    const Tensor x = sample(dtype);
    require_close(reduce_max(x), {}, {6});
    require_close(reduce_min(x), {}, {1});
    require_close(reduce_max(x, {0}), {3}, {4, 5, 6});
    require_close(reduce_min(x, {0}), {3}, {1, 2, 3});
    require_close(reduce_max(x, {-1}), {2}, {5, 6});
    require_close(reduce_min(x, {1}, true), {2, 1}, {1, 2});
    require_close(reduce_max(x, {0, 1}, true), {1, 1}, {6});
    CHECK(reduce_max(x, {1}).dtype() == dtype);
  }
  require_close(reduce_max(constant(-3.0)), {}, {-3});
  require_close(reduce_min(from_values({-7, -2}, {2})), {}, {-7});
  // Reducing a non-empty axis of a tensor with no elements gives no elements.
  require_close(reduce_max(zeros({0, 3}), {1}), {0}, {});
}

TEST_CASE("reduce_max and reduce_min split the gradient between ties", "[reduce][gradient]") {
  require_close(
      gradient_of([](const Tensor& x) { return reduce_max(x); }, constant({1.0, 3.0, 3.0})), {3},
      {0, 0.5, 0.5});
  require_close(
      gradient_of([](const Tensor& x) { return reduce_min(x); }, constant({2.0, 1.0, 1.0, 1.0})),
      {4}, {0, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  // Per row: a tie in row 0, a single maximum in row 1; the upstream gradient scales it.
  require_close(gradient_of(
                    [](const Tensor& x) {
                      return reduce_max(x, {1}) * constant({2.0, 10.0});
                    },
                    constant({{3.0, 3.0}, {1.0, 2.0}})),
                {2, 2}, {1, 1, 0, 10});
  // Ties along axis 0 with keepdims.
  require_close(gradient_of([](const Tensor& x) { return reduce_min(x, {0}, true); },
                            constant({{1.0, 5.0}, {1.0, 2.0}})),
                {2, 2}, {0.5, 0, 0.5, 1});
}

TEST_CASE("reduce_max of -infs is -inf, reduce_min of +infs is +inf, their ties split the gradient",
          "[reduce][gradient]") {
  // Short rows and rows long enough for the lane loop (16 and more), float64 and float32: the
  // value is the infinity itself, not the most negative (positive) finite number, so every
  // element ties with it.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::Float64, DType::Float32}) {
    for (std::size_t n : {2, 5, 16, 37}) {
      INFO(dtype_name(dtype) << ", " << n << " elements");
      std::vector<double> lows(n, -inf), highs(n, inf), mixed(2 * n, -inf);
      mixed[2 * n - 1] = 7.0;  // row 1 of mixed: -infs and one 7
      const Tensor low = cast(from_values(lows, {n}), dtype);
      const Tensor high = cast(from_values(highs, {n}), dtype);
      CHECK(values(reduce_max(low)) == std::vector<double>{-inf});
      CHECK(values(reduce_min(high)) == std::vector<double>{inf});
      CHECK(values(reduce_max(cast(from_values(mixed, {2, n}), dtype), {1})) ==
            std::vector<double>{-inf, 7.0});
      // 1 / n rounded to the dtype, as the rule divides.
      const double share = dtype == DType::Float32
                               ? static_cast<double>(1.0f / static_cast<float>(n))
                               : 1.0 / static_cast<double>(n);
      const std::vector<double> even(n, share);
      require_close(gradient_of([](const Tensor& x) { return reduce_max(x); }, low), {n}, even);
      require_close(gradient_of([](const Tensor& x) { return reduce_min(x); }, high), {n}, even);
    }
  }
}

TEST_CASE("reduce_max and reduce_min gradients away from ties, first and second order",
          "[reduce][gradient]") {
  const Tensor x = distinct_random({3, 4}, 2);
  for (bool keep : {false, true}) {
    for (std::vector<int> axes : {std::vector<int>{}, {0}, {-1}, {0, 1}}) {
      require_gradient_matches(
          [=](const std::vector<Tensor>& a) { return reduce_max(a[0], axes, keep); }, {x});
      require_gradient_matches(
          [=](const std::vector<Tensor>& a) { return reduce_min(a[0], axes, keep); }, {x});
    }
  }
  // The extremum feeds a nonlinear function, so the incoming gradient depends on x.
  require_second_order_matches(
      [](const std::vector<Tensor>& a) {
        const Tensor m = reduce_max(a[0], {1});
        return m * m * m;
      },
      {x});
  require_second_order_matches(
      [](const std::vector<Tensor>& a) {
        const Tensor m = reduce_min(a[0], {-2}, true);
        return exp(m) * a[0];
      },
      {x});
  // float32 works and keeps its dtype.
  const Tensor g = gradient_of([](const Tensor& t) { return reduce_max(t); },
                               from_values({1, 4, 2}, {3}, DType::Float32));
  CHECK(g.dtype() == DType::Float32);
  require_close(g, {3}, {0, 1, 0});
}

TEST_CASE("reduce_prod forward", "[reduce]") {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int32, DType::Int64}) {
    INFO(dtype_name(dtype));
    const Tensor x = from_values({1, 2, 3, 4, 5, 6}, k23, dtype);
    require_close(reduce_prod(x), {}, {720});
    require_close(reduce_prod(x, {0}), {3}, {4, 10, 18});
    require_close(reduce_prod(x, {-1}, true), {2, 1}, {6, 120});
  }
  require_close(reduce_prod(zeros({2, 0}), {1}), {2}, {1, 1});  // the empty product is 1
  require_close(reduce_prod(constant(-2.0)), {}, {-2});
}

TEST_CASE("reduce_prod gradient without zeros, first and second order", "[reduce][gradient]") {
  require_close(gradient_of([](const Tensor& x) { return reduce_prod(x, {1}); },
                            constant({{2.0, 3.0, 4.0}, {1.0, -1.0, 5.0}})),
                {2, 3}, {12, 8, 6, -5, 5, -1});
  const Tensor x = random_tensor({3, 4}, 3, 0.5, 1.5);
  for (bool keep : {false, true}) {
    require_gradient_matches(
        [keep](const std::vector<Tensor>& a) { return reduce_prod(a[0], {1}, keep); }, {x});
    require_gradient_matches(
        [keep](const std::vector<Tensor>& a) { return reduce_prod(a[0], {}, keep); }, {x});
    require_second_order_matches(
        [keep](const std::vector<Tensor>& a) { return reduce_prod(a[0], {0}, keep); }, {x});
  }
}

TEST_CASE("reduce_prod gradient with zeros divides by nothing", "[reduce][gradient]") {
  // One zero per row: only the zero gets a gradient, the product of the others.
  require_close(gradient_of([](const Tensor& x) { return reduce_prod(x, {1}); },
                            constant({{2.0, 0.0, 3.0}, {1.0, 4.0, 5.0}})),
                {2, 3}, {0, 6, 0, 20, 5, 4});
  // Two zeros: every partial derivative is 0.
  require_close(
      gradient_of([](const Tensor& x) { return reduce_prod(x); }, constant({0.0, 2.0, 0.0})), {3},
      {0, 0, 0});
  // Exactness with exactly one zero in a group, first and second order.
  const Tensor x = constant({{0.0, 1.5, -2.0}, {0.7, 0.0, 1.1}});
  require_gradient_matches([](const std::vector<Tensor>& a) { return reduce_prod(a[0], {1}); },
                           {x});
  require_second_order_matches([](const std::vector<Tensor>& a) { return reduce_prod(a[0], {1}); },
                               {x});
  require_second_order_matches(
      [](const std::vector<Tensor>& a) { return reduce_prod(a[0], {-1}, true); }, {x});
}

TEST_CASE("reduce_logsumexp forward is stable", "[reduce]") {
  const double lse123 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  require_close(reduce_logsumexp(constant({1.0, 2.0, 3.0})), {}, {lse123});
  require_close(reduce_logsumexp(from_values({1, 2, 3}, {3}, DType::Float32)), {}, {lse123}, 1e-6);
  require_close(reduce_logsumexp(constant({1000.0, 1000.0})), {}, {1000 + std::log(2.0)});
  require_close(reduce_logsumexp(constant({-1000.0, -1000.0})), {}, {-1000 + std::log(2.0)});
  require_close(reduce_logsumexp(from_values({1000, 1000}, {2}, DType::Float32)), {},
                {1000 + std::log(2.0)}, 1e-6);
  require_close(reduce_logsumexp(constant({{0.0, 0.0}, {1000.0, -1000.0}}), {1}), {2},
                {std::log(2.0), 1000});
  require_close(reduce_logsumexp(constant({{0.0, 0.0}, {1000.0, -1000.0}}), {-1}, true), {2, 1},
                {std::log(2.0), 1000});
  require_close(reduce_logsumexp(constant({{1.0, 2.0}, {3.0, 4.0}}), {0}), {2},
                {std::log(std::exp(1.0) + std::exp(3.0)), std::log(std::exp(2.0) + std::exp(4.0))});
}

TEST_CASE("reduce_logsumexp gradient is a softmax, first and second order", "[reduce][gradient]") {
  require_close(
      gradient_of([](const Tensor& x) { return reduce_logsumexp(x); }, constant({1000.0, 1000.0})),
      {2}, {0.5, 0.5});
  require_close(gradient_of([](const Tensor& x) { return reduce_logsumexp(x); },
                            constant({-1000.0, -1000.0})),
                {2}, {0.5, 0.5});
  const double e = std::exp(1.0);
  require_close(gradient_of([](const Tensor& x) { return reduce_logsumexp(x, {1}); },
                            constant({{0.0, 1.0}, {2.0, 2.0}})),
                {2, 2}, {1 / (1 + e), e / (1 + e), 0.5, 0.5});
  const Tensor x = random_tensor({3, 4}, 4, -2, 2);
  for (bool keep : {false, true}) {
    for (std::vector<int> axes : {std::vector<int>{}, {0}, {-1}}) {
      require_gradient_matches(
          [=](const std::vector<Tensor>& a) { return reduce_logsumexp(a[0], axes, keep); }, {x});
      require_second_order_matches(
          [=](const std::vector<Tensor>& a) { return reduce_logsumexp(a[0], axes, keep); }, {x});
    }
  }
}

TEST_CASE("reductions reject bad axes naming the op, the axis and the shape", "[reduce][errors]") {
  using Reduce = Tensor (*)(const Tensor&, std::vector<int>, bool);
  const std::pair<const char*, Reduce> ops[] = {
      {"reduce_sum", reduce_sum},   {"reduce_mean", reduce_mean},
      {"reduce_max", reduce_max},   {"reduce_min", reduce_min},
      {"reduce_prod", reduce_prod}, {"reduce_logsumexp", reduce_logsumexp}};
  const Tensor x = sample();
  for (const auto& entry : ops) {
    const auto& name = entry.first;
    const auto& op = entry.second;  // a variable, not a binding: the lambdas below capture it
    INFO(name);
    const std::string out_of_range = message_of<InvalidArgument>([&] { op(x, {2}, false); });
    CHECK_THAT(out_of_range,
               Catch::Contains(name) && Catch::Contains("axis 2") && Catch::Contains("[2, 3]"));
    const std::string negative = message_of<InvalidArgument>([&] { op(x, {-3}, false); });
    CHECK_THAT(negative,
               Catch::Contains(name) && Catch::Contains("axis -3") && Catch::Contains("[2, 3]"));
    const std::string repeated = message_of<InvalidArgument>([&] { op(x, {1, -1}, false); });
    CHECK_THAT(repeated,
               Catch::Contains(name) && Catch::Contains("repeated") && Catch::Contains("[2, 3]"));
  }
}

TEST_CASE("reductions reject unsupported dtypes and empty extrema", "[reduce][errors]") {
  const std::string lse =
      message_of<InvalidArgument>([] { reduce_logsumexp(sample(DType::Int32)); });
  CHECK_THAT(lse, Catch::Contains("reduce_logsumexp") && Catch::Contains("int32"));
  const Tensor flags = from_values({1, 0}, {2}, DType::Bool);
  const std::string max_bool = message_of<InvalidArgument>([&] { reduce_max(flags); });
  CHECK_THAT(max_bool, Catch::Contains("reduce_max") && Catch::Contains("bool"));
  const std::string prod_bool = message_of<InvalidArgument>([&] { reduce_prod(flags); });
  CHECK_THAT(prod_bool, Catch::Contains("reduce_prod") && Catch::Contains("bool"));

  const std::string empty_max = message_of<InvalidArgument>([] { reduce_max(zeros({0, 3}), {0}); });
  CHECK_THAT(empty_max, Catch::Contains("reduce_max") && Catch::Contains("[0, 3]") &&
                            Catch::Contains("empty") && Catch::Contains("float64"));
  const std::string empty_min =
      message_of<InvalidArgument>([] { reduce_min(zeros({0}, DType::Int32)); });
  CHECK_THAT(empty_min,
             Catch::Contains("reduce_min") && Catch::Contains("[0]") && Catch::Contains("int32"));
}
