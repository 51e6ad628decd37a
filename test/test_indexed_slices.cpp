// gather's row-sparse gradient: IndexedSlices through the runtime (aggregation by
// concatenation, densifying mixed lists, duplicate indices) and to_dense.
#include <algorithm>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor ints(const std::vector<double>& v, DType dtype = DType::Int32) {
  return from_values(v, {v.size()}, dtype);
}

std::vector<double> sorted(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// TF's example: x = [[1,2],[3,4],[5,6],[7,8]].
Tensor tf_x() { return constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}, {7.0, 8.0}}); }

Tensor tf_product(const Tensor& x) {
  return gather(x, ints({0, 1})) * gather(x, ints({2, 3})) * gather(x, ints({1, 3}));
}

}  // namespace

TEST_CASE("TF's gather product: dy/dx = [[15,24],[54,76],[3,8],[42,64]]", "[indexed_slices]") {
  const Tensor x = tf_x();
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(tf_product(x));
  const Tensor g = tape.gradient(y, x);
  require_close(g, {4, 2}, {15, 24, 54, 76, 3, 8, 42, 64});
}

TEST_CASE("several sparse gradients aggregate by concatenation", "[indexed_slices]") {
  const Tensor x = tf_x();
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(tf_product(x));
  const auto grads = tape.gradient_values({y}, {x});
  REQUIRE(grads.size() == 1);
  REQUIRE(grads[0].is_sparse());
  const IndexedSlices& s = grads[0].sparse();
  CHECK(s.dense_shape == Shape{4, 2});
  CHECK(s.indices.shape() == Shape{6});
  CHECK(s.values.shape() == Shape{6, 2});
  // Three gathers of two rows each; the concatenation order follows the backward walk.
  CHECK(sorted(values(s.indices)) == std::vector<double>{0, 1, 1, 2, 3, 3});
  require_close(to_dense(s), {4, 2}, {15, 24, 54, 76, 3, 8, 42, 64});
  require_close(grads[0].to_dense(), {4, 2}, {15, 24, 54, 76, 3, 8, 42, 64});
}

TEST_CASE("a single gather gives an IndexedSlices of the flattened indices", "[indexed_slices]") {
  const Tensor x = tf_x();
  GradientTape tape;
  tape.watch(x);
  const Tensor picked = gather(x, from_values({3, 1, 1, 0}, {2, 2}, DType::Int64));  // [2, 2, 2]
  const Tensor w = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  const auto grads = tape.gradient_values({reduce_sum(picked * w)}, {x});
  REQUIRE(grads[0].is_sparse());
  const IndexedSlices& s = grads[0].sparse();
  CHECK(s.indices.dtype() == DType::Int64);
  require_close(s.indices, {4}, {3, 1, 1, 0});
  require_close(s.values, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(s.dense_shape == Shape{4, 2});
  // Duplicate index 1 sums when densified.
  require_close(grads[0].to_dense(), {4, 2}, {7, 8, 8, 10, 0, 0, 1, 2});
}

TEST_CASE("duplicate indices sum when densified", "[indexed_slices]") {
  const Tensor x = constant({1.0, 2.0, 3.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(gather(x, ints({1, 1, 1, 2})));
  require_close(tape.gradient(y, x), {3}, {0, 3, 1});
}

TEST_CASE("a sparse plus a dense gradient densifies", "[indexed_slices]") {
  const Tensor x = tf_x();
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(gather(x, ints({0, 2, 0}))) + reduce_sum(x * x);
  const auto grads = tape.gradient_values({y}, {x});
  CHECK_FALSE(grads[0].is_sparse());
  // 2x plus one per gathered copy of a row.
  require_close(grads[0].dense(), {4, 2}, {4, 6, 6, 8, 11, 13, 14, 16});
}

TEST_CASE("int32 and int64 index gradients concatenate as int64", "[indexed_slices]") {
  const Tensor x = constant({1.0, 2.0, 3.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(gather(x, ints({0})) * gather(x, ints({2}, DType::Int64)));
  const auto grads = tape.gradient_values({y}, {x});
  REQUIRE(grads[0].is_sparse());
  CHECK(grads[0].sparse().indices.dtype() == DType::Int64);
  CHECK(sorted(values(grads[0].sparse().indices)) == std::vector<double>{0, 2});
  require_close(grads[0].to_dense(), {3}, {3, 0, 1});
}

TEST_CASE("gathering from a Variable: gradient() is dense", "[indexed_slices]") {
  Variable table(constant({{1.0, 1.0}, {2.0, 2.0}, {3.0, 3.0}}));
  GradientTape tape;
  const Tensor y = reduce_sum(gather(table, ints({2, 0, 2})));
  const Tensor g = tape.gradient(y, table);
  require_close(g, {3, 2}, {1, 1, 0, 0, 2, 2});
}

TEST_CASE("gather's sparse gradient is differentiable to second order",
          "[indexed_slices][gradient]") {
  const Tensor x = random_tensor({4, 2}, 60);
  Fn f = [](const std::vector<Tensor>& a) { return reduce_sum(tf_product(a[0])); };
  require_gradient_matches(f, {x});
  require_second_order_matches(f, {x});
  // Hand-checked Hessian row: d/dx (dy/dx[0]) = d/dx (x2 * x1) for column 0.
  const Tensor t = tf_x();
  GradientTape outer;
  outer.watch(t);
  Tensor first;
  {
    GradientTape inner;
    inner.watch(t);
    first = inner.gradient(reduce_sum(tf_product(t)), t);
  }
  const Tensor row0_col0 = reduce_sum(slice(first, {0, 0}, {1, 1}));
  // d(x1[0] * x2[0]) = x2[0] at x1[0] and x1[0] at x2[0].
  require_close(outer.gradient(row0_col0, t), {4, 2}, {0, 0, 5, 0, 3, 0, 0, 0});
}

TEST_CASE("to_dense sums rows and is differentiable", "[indexed_slices]") {
  const IndexedSlices s{constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}), ints({2, 0, 2}),
                        Shape{3, 2}};
  require_close(to_dense(s), {3, 2}, {3, 4, 0, 0, 6, 8});
  require_close(to_dense(IndexedSlices{constant({1.0}), ints({1}, DType::Int64), Shape{2}}), {2},
                {0, 1});
  const Tensor ids = ints({1, 1, 0});
  Fn f = [ids](const std::vector<Tensor>& a) {
    return to_dense(IndexedSlices{a[0], ids, Shape{2, 3}});
  };
  require_gradient_matches(f, {random_tensor({3, 3}, 61)});
  require_second_order_matches(
      [f](const std::vector<Tensor>& a) {
        const Tensor d = f(a);
        return d * d;
      },
      {random_tensor({3, 3}, 62)});

  const std::string mismatch = message_of<InvalidArgument>([] {
    to_dense(IndexedSlices{zeros({2, 3}), ints({0, 1}), Shape{4, 2}});
  });
  CHECK_THAT(mismatch,
             Catch::Contains("to_dense") && Catch::Contains("[2, 3]") && Catch::Contains("[4, 2]"));
  const std::string range = message_of<InvalidArgument>([] {
    to_dense(IndexedSlices{zeros({1, 2}), ints({5}), Shape{4, 2}});
  });
  CHECK_THAT(range, Catch::Contains("5") && Catch::Contains("[0, 4)"));
}

TEST_CASE(
    "many sparse gradients reaching an op's rule are summed dense, part by part, to the same "
    "values and second derivatives",
    "[indexed_slices]") {
  // y = x * x is gathered five times, four rows each: 20 rows of slices for a 4-row tensor, so
  // the walk densifies each slice and adds them (no concatenation) before multiply's rule.
  // loss = sum_p c_p sum_{i in I_p} y_i = sum_i w_i x_i^2, w_i = sum_p c_p (count of i in I_p):
  // w = [22, 14, 9, 15], dloss/dx = 2 w x, and d/dx of sum(dloss/dx) = 2 w.
  const Tensor x = constant({1.0, 2.0, 3.0, 4.0});
  GradientTape outer;
  outer.watch(x);
  Tensor gradient;
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = x * x;
    const std::vector<std::pair<std::vector<double>, DType>> parts = {{{0, 1, 2, 3}, DType::Int32},
                                                                      {{1, 1, 1, 1}, DType::Int32},
                                                                      {{3, 0, 3, 0}, DType::Int64},
                                                                      {{2, 2, 3, 3}, DType::Int64},
                                                                      {{0, 0, 0, 1}, DType::Int32}};
    Tensor loss = constant(0.0);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const Tensor picked = gather(y, ints(parts[p].first, parts[p].second));
      loss = loss + reduce_sum(picked) * static_cast<double>(p + 1);
    }
    gradient = tape.gradient(loss, x);
  }
  require_close(gradient, {4}, {44, 56, 54, 120});
  require_close(outer.gradient(reduce_sum(gradient), x), {4}, {44, 28, 18, 30});
}
