// vectorized_map beyond each op's own batching rule (which test_op_samples checks on every op's
// samples against the loop): per-example gradients through maxima, ties and zeros, the generic
// batching maker, the trace's edge cases (zero-size batches, scalars, constants, nesting,
// outer tapes), the loop fallback for a user primitive without a rule, and per-example
// gradients of the digits MLP and CNN.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "captured_stderr.hpp"
#include "misuse_support.hpp"
#include "ops/batching_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/math/math_special.hpp"
#include "ops/nn/conv_ops.hpp"
#include "ops/reduce/reduce_support.hpp"
#include "runtime/batching_context.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/op_trace.hpp"
#include "samples/batch_checks.hpp"
#include "samples/sample_inputs.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::samples;
using tapegrad::testing::CapturedStderr;
using tapegrad::testing::random_tensor;
using tapegrad::testing::values;

namespace {

using MapFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// One-hot labels [batch, 10], label b % 10 for row b.
Tensor one_hot_rows(std::size_t batch) {
  std::vector<double> v(batch * 10, 0.0);
  for (std::size_t b = 0; b < batch; ++b) v[b * 10 + (b * 7) % 10] = 1.0;
  return from_values(v, {batch, 10});
}

}  // namespace

// case a check of two traced slices cannot see.
TEST_CASE("per-example gradients through maxima, ties and zeros that differ in a middle slice",
          "[vectorized_map][gradient]") {
  const auto gradient_of = [](std::function<Tensor(const Tensor&)> f) -> MapFn {
    return [f](const std::vector<Tensor>& in) {
      GradientTape tape;
      tape.watch(in[0]);
      return std::vector<Tensor>{tape.gradient(reduce_sum(f(in[0])), in[0])};
    };
  };
  const auto check = [&](const std::string& name, std::function<Tensor(const Tensor&)> f,
                         const Tensor& xs, const std::vector<double>& expected) {
    INFO(name);
    const MapFn fn = gradient_of(f);
    const std::vector<Tensor> got = vectorized_map(fn, {xs}, /*fallback_to_loop=*/false);
    tapegrad::testing::require_close(got[0], xs.shape(), expected, 0);
    require_same(got[0], loop_reference(fn, {xs})[0], 0);
  };
  // The argmax of each 2x2 window: position 0, 3, 0.
  check("max_pool2d",
        [](const Tensor& x) {
          return max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
        },
        from_values({9, 1, 2, 3, 1, 2, 3, 9, 9, 1, 2, 3}, {3, 1, 2, 2, 1}),
        {1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0});
  // A tie only in the middle slice: the first maximum in window order takes it (TF).
  check("max_pool2d ties",
        [](const Tensor& x) {
          return max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
        },
        from_values({9, 1, 2, 3, 0, 4, 4, 0, 9, 1, 2, 3}, {3, 1, 2, 2, 1}),
        {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0});
  check("reduce_max", [](const Tensor& x) { return reduce_max(x); },
        from_values({5, 1, 2, 1, 2, 5, 5, 1, 2}, {3, 3}), {1, 0, 0, 0, 0, 1, 1, 0, 0});
  check("reduce_max ties", [](const Tensor& x) { return reduce_max(x); },
        from_values({5, 1, 2, 5, 2, 5, 5, 1, 2}, {3, 3}), {1, 0, 0, 0.5, 0, 0.5, 1, 0, 0});
  check("reduce_min over rows", [](const Tensor& x) { return reduce_min(x, {1}); },
        from_values({1, 5, 1, 3, 3, 3, 1, 2, 1, 5, 1, 3}, {3, 2, 2}),
        {1, 0, 1, 0, 0.5, 0.5, 1, 0, 1, 0, 1, 0});
  check("reduce_prod", [](const Tensor& x) { return reduce_prod(x); },
        from_values({0, 1, 2, 1, 0, 2, 0, 1, 2}, {3, 3}), {2, 0, 0, 0, 2, 0, 2, 0, 0});
  check("reduce_prod without, with one and with two zeros",
        [](const Tensor& x) { return reduce_prod(x); },
        from_values({1, 2, 3, 0, 0, 2, 1, 2, 3}, {3, 3}), {6, 3, 2, 0, 0, 0, 6, 3, 2});
  check("relu", [](const Tensor& x) { return relu(x) * 2.0; },
        from_values({1, -1, -1, 1, 1, -1}, {3, 2}), {2, 0, 0, 2, 2, 0});
  check("abs", [](const Tensor& x) { return abs(x); }, from_values({1, -1, -1, 1, 1, -1}, {3, 2}),
        {1, -1, -1, 1, 1, -1});
  check("maximum", [](const Tensor& x) { return maximum(x, reverse(x, {0})); },
        from_values({1, 2, 4, 3, 1, 2}, {3, 2}), {0, 2, 2, 0, 0, 2});
  check("sort",
        [](const Tensor& x) {
          return sort(x) * from_values({1, 10, 100}, {3});
        },
        from_values({3, 1, 2, 1, 3, 2, 3, 1, 2}, {3, 3}), {100, 1, 10, 1, 100, 10, 100, 1, 10});
  check("top_k", [](const Tensor& x) { return top_k(x, 1).values; },
        from_values({3, 1, 2, 1, 3, 2, 3, 1, 2}, {3, 3}), {1, 0, 0, 0, 1, 0, 1, 0, 0});
}

// A rank-2-only op for the maker below: rows of x times w (matmul of matrices).
Tensor rows_times(const Tensor& x, const Tensor& w) {
  REQUIRE(x.rank() == 2);
  return matmul(x, w);
}

TEST_CASE("batch_into_first_axis merges the batch into the examples axis, or loops",
          "[vectorized_map]") {
  const detail::OpDefinition& op = detail::op_named("MatMul");
  const Tensor x = batch_of({4, 3}, 81);
  const Tensor w = random_tensor({3, 2}, 82);
  const Tensor ws = batch_of({3, 2}, 83);
  const std::vector<Shape> shapes{{4, 2}};
  const std::vector<DType> dtypes{DType::Float64};
  for (const bool weight_batched : {false, true}) {
    INFO("weight batched: " << weight_batched);
    const std::vector<bool> batched{true, weight_batched};
    const detail::BatchingContext context{{op, nullptr}, batched, kBatch, shapes, dtypes};
    const std::vector<Tensor> out =
        detail::batch_into_first_axis<&rows_times>(context, {x, weight_batched ? ws : w});
    REQUIRE(out.size() == 1);
    require_same(out[0], matmul(x, weight_batched ? ws : w), 1e-12);
  }
}

TEST_CASE("ReadVariableOp's batching rule passes the batch on", "[vectorized_map]") {
  const detail::OpDefinition& op = detail::op_named("ReadVariableOp");
  REQUIRE(op.batching_rule != nullptr);
  const Tensor x = batch_of({2}, 80);
  const std::vector<bool> batched{true};
  const std::vector<Shape> shapes{{2}};
  const std::vector<DType> dtypes{DType::Float64};
  const detail::BatchingContext context{{op, nullptr}, batched, kBatch, shapes, dtypes};
  const std::vector<Tensor> out = op.batching_rule(context, {x});
  REQUIRE(out.size() == 1);
  require_same(out[0], x, 0);
}

namespace {

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// A user primitive: x^3 computed outside tapegrad (from array()), recorded with
// record_operation; it has a gradient but no batching rule.
Tensor user_cube(const Tensor& x) {
  std::vector<double> v;
  for (double e : x.array<double>()) v.push_back(e * e * e);
  const Tensor out = from_values(v, x.shape());
  record_operation("TestUserCube", {x}, {out});
  return out;
}

// Its gradient, 3 x^2 g, registered once per process.
void register_user_cube_gradient() {
  static const bool registered = [] {
    register_gradient("TestUserCube", [](const OpContext& op, const std::vector<Tensor>& g) {
      const Tensor& x = op.inputs()[0];
      return std::vector<Tensor>{g[0] * x * x * 3.0};
    });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("vectorized_map of a zero-size batch gives empty results of the example's shapes",
          "[vectorized_map]") {
  const MapFn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{reduce_sum(in[0], {1}), cast(in[0], DType::Float32)};
  };
  const std::vector<Tensor> out = vectorized_map(fn, {zeros({0, 2, 3})}, false);
  REQUIRE(out.size() == 2);
  CHECK(out[0].shape() == Shape{0, 2});
  CHECK(out[0].dtype() == DType::Float64);
  CHECK(out[1].shape() == Shape{0, 2, 3});
  CHECK(out[1].dtype() == DType::Float32);
}

TEST_CASE("an empty batch: fn never sees a value, so what rejects zeros does not run on them",
          "[vectorized_map]") {
  // Zeros are singular, divide by zero, and have an infinite log: no kernel rejects them.
  std::size_t calls = 0;
  const MapFn rejects_zeros = [&calls](const std::vector<Tensor>& in) {
    ++calls;
    return std::vector<Tensor>{
        matrix_inverse(in[0]), cholesky(in[0]),        solve(in[0], reduce_sum(in[0], {1}, true)),
        divide(in[1], in[1]),  floormod(in[1], in[1]), log(in[0])};
  };
  {
    DetectAnomaly anomaly;
    const std::vector<Tensor> out =
        vectorized_map(rejects_zeros, {zeros({0, 3, 3}), zeros({0, 4}, DType::Int32)}, false);
    REQUIRE(out.size() == 6);
    CHECK(out[0].shape() == Shape{0, 3, 3});
    CHECK(out[1].shape() == Shape{0, 3, 3});
    CHECK(out[2].shape() == Shape{0, 3, 1});
    CHECK(out[3].shape() == Shape{0, 4});
    CHECK(out[3].dtype() == DType::Int32);
    CHECK(out[4].shape() == Shape{0, 4});
    CHECK(out[5].shape() == Shape{0, 3, 3});
  }
  CHECK(calls == 1);  // traced once
  // The checks are back once the trace is gone.
  tapegrad::testing::expect_misuse<InvalidArgument>("matrix_inverse of zeros after an empty batch",
                                                    [] {
                                                      matrix_inverse(zeros({2, 2}));
                                                    },
                                                    {"matrix_inverse", "singular"});
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "integer division by zero after an empty batch",
      [] { divide(ones({2}, DType::Int32), zeros({2}, DType::Int32)); },
      {"divide", "division by zero"});

  // What fn reads from C++ has no value on a placeholder: the error says which read.
  const MapFn reads = [](const std::vector<Tensor>& in) {
    const double first = in[0].item<double>();
    return std::vector<Tensor>{multiply(in[0], scalar(first, DType::Float64))};
  };
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map of an empty batch, fn reads its input",
      [&] { vectorized_map(reads, {zeros({0})}); },
      {"vectorized_map", "batch is empty", "placeholder", "Tensor::item()", "float64", "shape []"});
  // An output whose shape depends on values (boolean_mask of a batched mask) cannot be known.
  const MapFn masked = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{boolean_mask(in[0], greater(in[1], scalar(0.0, DType::Float64)))};
  };
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map of an empty batch, boolean_mask of a batched mask",
      [&] {
        vectorized_map(masked, {zeros({0, 4}), zeros({0, 4})});
      },
      {"vectorized_map", "batch is empty", "depend on its inputs' values", "'Where'"});
}

TEST_CASE("vectorized_map of one slice, of scalars, of constants and of fn's own input",
          "[vectorized_map]") {
  const Tensor w = random_tensor({3, 2}, 90);
  const MapFn fn = [w](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], w, tanh(matmul(reshape(in[0], {1, 3}), w)), Tensor()};
  };
  for (const std::size_t batch : {std::size_t{1}, std::size_t{4}}) {
    INFO("batch " << batch);
    const Tensor x = random_tensor({batch, 3}, 91);
    const std::vector<Tensor> out = vectorized_map(fn, {x}, false);
    REQUIRE(out.size() == 4);
    require_same(out[0], x, 0);
    require_same(out[1], broadcast_to(w, {batch, 3, 2}), 0);
    const Tensor expected = tanh(matmul(x, w));
    require_same(out[2], reshape(expected, {static_cast<std::int64_t>(batch), 1, 2}));
    CHECK_FALSE(out[3].defined());
  }
  // Scalars in, scalars out: the batch is a vector.
  const Tensor s = constant({0.5, 1.0, 2.0});
  const std::vector<Tensor> squares = vectorized_map(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[0] + 1.0}; }, {s},
      false);
  tapegrad::testing::require_close(squares[0], {3}, {1.25, 2.0, 5.0});
}

TEST_CASE("vectorized_map nests, and is differentiable under an outer tape", "[vectorized_map]") {
  const Tensor x = random_tensor({3, 4, 2}, 92);
  const Tensor w = random_tensor({2, 2}, 93);
  const MapFn inner = [w](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sigmoid(matmul(reshape(in[0], {1, 2}), w))};
  };
  const MapFn outer_fn = [&](const std::vector<Tensor>& in) {
    return vectorized_map(inner, {in[0]}, false);
  };
  const std::vector<Tensor> nested = vectorized_map(outer_fn, {x}, false);
  const Tensor expected = sigmoid(matmul(reshape(x, {12, 2}), w));
  require_same(nested[0], reshape(expected, {3, 4, 1, 2}));

  // d/dw and d/dx of sum(vectorized) equal those of the loop.
  auto gradients = [&](bool vectorized) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    const Tensor y = vectorized ? vectorized_map(inner, {reshape(x, {12, 2})}, false)[0]
                                : loop_reference(inner, {reshape(x, {12, 2})})[0];
    return tape.gradient(reduce_sum(y * y), {x, w});
  };
  const std::vector<Tensor> got = gradients(true);
  const std::vector<Tensor> want = gradients(false);
  require_same(got[0], want[0]);
  require_same(got[1], want[1]);
}

TEST_CASE("an op without a batching rule: one warning naming it and the loop's result",
          "[vectorized_map]") {
  register_user_cube_gradient();
  const MapFn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{exp(user_cube(in[0]))};
  };
  const Tensor x = random_tensor({4, 3}, 94);
  CapturedStderr err;
  const std::vector<Tensor> first = vectorized_map(fn, {x});
  const std::vector<Tensor> second = vectorized_map(fn, {x});
  CHECK(occurrences(err.text(), "op 'TestUserCube' has no batching rule") == 1);
  CHECK(occurrences(err.text(), "a loop") == 1);
  require_same(first[0], exp(x * x * x), 1e-12);
  require_same(second[0], first[0], 0);
}

TEST_CASE("random draws in fn: the loop draws what a loop alone draws, no numbers more",
          "[vectorized_map]") {
  // The traces of slices 0 and B - 1 drew first, then the loop drew again for every slice: row
  // 0 got the numbers a loop gives row 2 (B = 3), and the counter moved by (B + 2) draws.
  for (const std::size_t batch : {2, 3, 5}) {
    CAPTURE(batch);
    Generator generator(3, 10), reference(3, 10);
    Generator other(8), other_reference(8);  // drawn from only by slices after the first
    const MapFn fn = [&](const std::vector<Tensor>& in) {
      Tensor y = in[0] * random_uniform({4}, generator);
      if (in[1].item<double>() > 0) y = y + random_normal({4}, other);  // a value read too
      return std::vector<Tensor>{y};
    };
    const Tensor x = random_tensor({batch, 4}, 95);
    std::vector<double> flags(batch, 1.0);
    flags[0] = 0.0;
    CapturedStderr err;
    const Tensor got = vectorized_map(fn, {x, from_values(flags, {batch})})[0];
    const auto row_of = [](const Tensor& t, std::size_t b) {
      return reshape(slice(t, {static_cast<std::int64_t>(b), 0}, {1, 4}), {4});
    };
    for (std::size_t b = 0; b < batch; ++b) {
      CAPTURE(b);
      Tensor row = row_of(x, b) * random_uniform({4}, reference);
      if (b > 0) row = row + random_normal({4}, other_reference);
      require_same(row_of(got, b), row, 0);
    }
    CHECK(generator.counter() == reference.counter());
    CHECK(generator.counter() == 10 + 4 * batch);
    CHECK(other.counter() == other_reference.counter());
  }
}

TEST_CASE("boolean_mask: a fixed mask vectorizes, a batched one's positions refuse, the loop runs",
          "[vectorized_map]") {
  // The mask fixed: its positions are a trace constant, GatherNd batches over x.
  const Tensor fixed_mask = from_values({1, 0, 1, 1}, {4}, DType::Bool);
  require_vectorizes(
      [fixed_mask](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{boolean_mask(in[0], fixed_mask)};
      },
      {batch_of({4, 2}, 155)});

  // The mask from the batched input: two true per row, at different positions in each row, so
  // both traced slices have the same shapes and only the Where rule can tell.
  const MapFn masked = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{boolean_mask(multiply(in[0], scalar(10.0, DType::Float64)),
                                            greater(in[1], scalar(0.0, DType::Float64)))};
  };
  const Tensor x = batch_of({4}, 156);
  const Tensor m = from_values({1, -1, 1, -1, -1, 1, -1, 1, 1, 1, -1, -1}, {kBatch, 4});
  CHECK(traced_ops(masked, {x, m}).count("Where") == 1);
  CapturedStderr err;
  const std::vector<Tensor> out = vectorized_map(masked, {x, m});
  CHECK(occurrences(err.text(), "op 'Where'") == 1);
  CHECK(occurrences(err.text(), "a loop") == 1);
  require_same(out[0], loop_reference(masked, {x, m})[0], 0);
  // Row 1 keeps elements 1 and 3 (not row 0's 0 and 2).
  CHECK(values(out[0])[2] == values(x)[5] * 10.0);
  CHECK(values(out[0])[3] == values(x)[7] * 10.0);

  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map: boolean_mask of a batched mask, no fallback",
      [&] {
        vectorized_map(masked, {x, m}, false);
      },
      {"vectorized_map", "'Where'", "boolean_mask", "cannot be stacked"});
}

TEST_CASE("a value read from C++ inside fn: the trace is not replayed, the loop runs",
          "[vectorized_map]") {
  // fn rebuilds its input from its values: tracing cannot see the dependence, so the read is
  // what tells (even when, as here, it changes nothing in the traces' structure).
  const MapFn fn = [](const std::vector<Tensor>& in) {
    const Tensor copy = from_values(values(in[0]), in[0].shape());
    return std::vector<Tensor>{sin(copy)};
  };
  const Tensor x = random_tensor({5, 2}, 95);
  CapturedStderr err;
  const std::vector<Tensor> out = vectorized_map(fn, {x});
  CHECK(occurrences(err.text(),
                    "reads Tensor::array() of a float64 value of shape [2] that "
                    "depends on the slice, in fn") == 1);
  CHECK(occurrences(err.text(), "a loop") == 1);
  require_same(out[0], sin(x), 0);

  // A read that steers fn: slice 1 alone takes the other branch. The end slices agree, so
  // comparing traces could never tell; the read does.
  const MapFn branchy = [](const std::vector<Tensor>& in) {
    const bool positive = in[0].item<double>() > 0;
    return std::vector<Tensor>{positive ? in[0] * 2.0 : in[0] * 3.0};
  };
  const Tensor s = constant({1.0, -1.0, 1.0});
  const std::vector<Tensor> steered = vectorized_map(branchy, {s});
  tapegrad::testing::require_close(steered[0], {3}, {2.0, -3.0, 2.0}, 0);
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map: fn reads item() of its slice, no fallback",
      [&] { vectorized_map(branchy, {s}, false); },
      {"vectorized_map", "Tensor::item()", "float64", "shape []", "in fn",
       "fallback_to_loop is false"});
}

namespace {

// A user primitive whose gradient function reads x's values from C++ (3 x^2 g, x^2 from
// array()): its reads are blamed on it, not on fn.
Tensor user_square_reading(const Tensor& x) {
  const Tensor out = multiply(x, x);
  record_operation("TestUserSquareReadsValues", {x}, {out});
  return out;
}

void register_user_square_reading_gradient() {
  static const bool registered = [] {
    register_gradient("TestUserSquareReadsValues",
                      [](const OpContext& op, const std::vector<Tensor>& g) {
                        const Tensor& x = op.inputs()[0];
                        std::vector<double> twice;
                        for (double v : x.array<double>()) twice.push_back(2.0 * v);
                        return std::vector<Tensor>{g[0] * from_values(twice, x.shape())};
                      });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("a value read by a user's gradient function is blamed on it", "[vectorized_map]") {
  register_user_square_reading_gradient();
  const MapFn fn = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[0]);
    return std::vector<Tensor>{tape.gradient(reduce_sum(user_square_reading(in[0])), in[0])};
  };
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {3, 2});
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map: a user gradient function reads values, no fallback",
      [&] { vectorized_map(fn, {x}, false); },
      {"vectorized_map", "Tensor::array()", "shape [2]",
       "in the gradient function of 'TestUserSquareReadsValues'"});
  CapturedStderr err;
  const std::vector<Tensor> out = vectorized_map(fn, {x});
  CHECK(occurrences(err.text(), "the gradient function of 'TestUserSquareReadsValues'") == 1);
  tapegrad::testing::require_close(out[0], {3, 2}, {2, 4, 6, 8, 10, 12}, 0);
}

TEST_CASE("vectorized_map misuse: the error names the op, the shapes or the reason",
          "[vectorized_map][misuse]") {
  using tapegrad::testing::expect_misuse;
  register_user_cube_gradient();
  const MapFn identity_fn = [](const std::vector<Tensor>& in) { return in; };
  expect_misuse<InvalidArgument>(
      "vectorized_map: no rule and no fallback",
      [] {
        vectorized_map(
            [](const std::vector<Tensor>& in) { return std::vector<Tensor>{user_cube(in[0])}; },
            {random_tensor({3, 2}, 96)}, false);
      },
      {"vectorized_map", "'TestUserCube'", "no batching rule", "fallback_to_loop is false"});
  expect_misuse<InvalidArgument>(
      "vectorized_map: untraceable dependence and no fallback",
      [] {
        vectorized_map(
            [](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{from_values(values(in[0]), in[0].shape())};
            },
            {random_tensor({3, 2}, 97)}, false);
      },
      {"vectorized_map", "reads Tensor::array()", "in fn", "fallback_to_loop is false"});
  expect_misuse<InvalidArgument>("vectorized_map: no elems",
                                 [&] { vectorized_map(identity_fn, {}); },
                                 {"vectorized_map", "no elems"});
  expect_misuse<InvalidArgument>("vectorized_map: a scalar elem",
                                 [&] { vectorized_map(identity_fn, {constant(1.0)}); },
                                 {"vectorized_map", "elem 0", "scalar"});
  expect_misuse<InvalidArgument>("vectorized_map: leading sizes differ",
                                 [&] {
                                   vectorized_map(identity_fn, {zeros({3, 2}), zeros({4})});
                                 },
                                 {"vectorized_map", "leading sizes differ", "[3, 2]", "[4]"});
  expect_misuse<InvalidArgument>("vectorized_map: an undefined elem",
                                 [&] {
                                   vectorized_map(identity_fn, {zeros({3}), Tensor()});
                                 },
                                 {"vectorized_map", "elem 1", "undefined"});
}

// Per-example gradients of the digits MLP (examples/train_digits: 64-128-10, ReLU, softmax
// cross-entropy): vectorized_map of the gradient equals a loop of gradient calls.
TEST_CASE("per-example gradients of the digits MLP through vectorized_map equal a loop",
          "[vectorized_map][mlp]") {
  const Tensor w1 = random_tensor({64, 128}, 100, -0.2, 0.2);
  const Tensor b1 = random_tensor({128}, 101, -0.1, 0.1);
  const Tensor w2 = random_tensor({128, 10}, 102, -0.2, 0.2);
  const Tensor b2 = random_tensor({10}, 103, -0.1, 0.1);
  const std::size_t batch = 6;
  const Tensor images = random_tensor({batch, 64}, 104, 0, 1);
  const Tensor labels = one_hot_rows(batch);
  const MapFn per_example = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    for (const Tensor* p : {&w1, &b1, &w2, &b2}) tape.watch(*p);
    const Tensor x = reshape(in[0], {1, 64});
    const Tensor logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
    const Tensor loss =
        reduce_mean(softmax_cross_entropy_with_logits(reshape(in[1], {1, 10}), logits));
    return tape.gradient(loss, {w1, b1, w2, b2});
  };
  const std::vector<Tensor> vectorized = vectorized_map(per_example, {images, labels}, false);
  REQUIRE(vectorized.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    std::vector<Tensor> rows;
    for (std::size_t b = 0; b < batch; ++b) {
      const Tensor index = ints({static_cast<double>(b)}, Shape{});
      rows.push_back(per_example({gather(images, index, 0), gather(labels, index, 0)})[k]);
    }
    INFO("parameter " << k);
    require_same(vectorized[k], stack(rows, 0), 1e-12);
  }
}

// Per-example gradients of the digits CNN (examples/train_digits_cnn: conv 3x3x16 SAME, relu,
// max_pool 2x2, conv 3x3x32 SAME, relu, dense 512-128 relu, dense 128-10, softmax
// cross-entropy) with no loop fallback. Half the pixels are 0 (no ink) and relu zeroes more,
// so the pooled windows' maxima, ties among zeros and the zero patterns differ in every slice.
TEST_CASE("per-example gradients of the digits CNN through vectorized_map equal a loop",
          "[vectorized_map][cnn]") {
  const Tensor conv1 = reshape(random_tensor({9, 16}, 170, -0.4, 0.4), {3, 3, 1, 16});
  const Tensor conv1_bias = random_tensor({16}, 171, -0.1, 0.1);
  const Tensor conv2 = reshape(random_tensor({144, 32}, 172, -0.1, 0.1), {3, 3, 16, 32});
  const Tensor conv2_bias = random_tensor({32}, 173, -0.1, 0.1);
  const Tensor hidden = random_tensor({512, 128}, 174, -0.05, 0.05);
  const Tensor hidden_bias = random_tensor({128}, 175, -0.1, 0.1);
  const Tensor out = random_tensor({128, 10}, 176, -0.1, 0.1);
  const Tensor out_bias = random_tensor({10}, 177, -0.1, 0.1);
  const std::vector<Tensor> parameters{conv1,  conv1_bias,  conv2, conv2_bias,
                                       hidden, hidden_bias, out,   out_bias};
  const std::size_t batch = 5;
  const Tensor images = reshape(relu(random_tensor({batch, 64}, 178, -1, 1)), {5, 8, 8, 1});
  const Tensor labels = one_hot_rows(batch);
  const MapFn per_example = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(parameters);
    Tensor h =
        relu(conv2d(reshape(in[0], {1, 8, 8, 1}), conv1, {1, 1}, Padding::Same) + conv1_bias);
    h = max_pool2d(h, {2, 2}, {2, 2}, Padding::Valid);
    h = relu(conv2d(h, conv2, {1, 1}, Padding::Same) + conv2_bias);
    h = relu(matmul(reshape(h, {1, 512}), hidden) + hidden_bias);
    const Tensor logits = matmul(h, out) + out_bias;
    const Tensor loss =
        reduce_mean(softmax_cross_entropy_with_logits(reshape(in[1], {1, 10}), logits));
    return tape.gradient(loss, parameters);
  };
  const std::vector<Tensor> vectorized = vectorized_map(per_example, {images, labels}, false);
  const std::vector<Tensor> looped = loop_reference(per_example, {images, labels});
  REQUIRE(vectorized.size() == 8);
  for (std::size_t k = 0; k < 8; ++k) {
    INFO("parameter " << k);
    require_same(vectorized[k], looped[k], 1e-12);
  }
  // The pooled windows did differ: some example's conv1 filter gradient is not another's.
  CHECK(values(gather(vectorized[0], ints({0}, Shape{}), 0)) !=
        values(gather(vectorized[0], ints({2}, Shape{}), 0)));
}
