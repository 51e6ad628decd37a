// Row-sparse (IndexedSlices) updates, with the slices built by hand.
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

IndexedSlices slices(const std::vector<double>& values, const std::vector<std::int64_t>& indices,
                     const Shape& dense_shape) {
  Shape values_shape = dense_shape;
  values_shape[0] = indices.size();
  const std::vector<double> idx(indices.begin(), indices.end());
  return IndexedSlices{from_values(values, values_shape),
                       from_values(idx, {indices.size()}, DType::Int64), dense_shape};
}

}  // namespace

TEST_CASE("TF's embedding case by hand: eight slices of -1 on row 1, SGD lr 0.1",
          "[optim][sparse]") {
  // The gradient of loss = 1 - gather(E, ids) with ids = eight 1s (target not reduced, so
  // gradient() sums it) is eight rows of -1 at index 1: summed, -8; lr 0.1 -> row 1 += 0.8.
  Tensor initial = random_tensor({1000, 512}, 41);
  Variable embedding(initial, true, "embedding");
  SGD sgd(0.1);
  IndexedSlices grad =
      slices(std::vector<double>(8 * 512, -1.0), std::vector<std::int64_t>(8, 1), {1000, 512});
  sgd.apply_gradients(std::vector<std::pair<GradientValue, Variable>>{{grad, embedding}});
  const auto before = values(initial);
  const auto after = values(embedding.peek());
  std::size_t changed_elsewhere = 0;
  for (std::size_t r = 0; r < 1000; ++r) {
    for (std::size_t j = 0; j < 512; ++j) {
      const std::size_t k = r * 512 + j;
      if (r == 1) {
        REQUIRE(after[k] == Approx(before[k] + 0.8).margin(1e-12));
      } else if (after[k] != before[k]) {
        ++changed_elsewhere;
      }
    }
  }
  CHECK(changed_elsewhere == 0);
}

TEST_CASE("SGD sparse: duplicates summed, only the named rows touched", "[optim][sparse]") {
  Variable w(from_values({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}), true, "w");
  SGD sgd(0.5);
  // rows 2, 0, 2: row 2 gets (1,2)+(3,4) = (4,6); row 0 gets (10, 20).
  sgd.apply_gradients(std::vector<std::pair<GradientValue, Variable>>{
      {slices({1, 2, 10, 20, 3, 4}, {2, 0, 2}, {4, 2}), w}});
  require_close(w.peek(), {4, 2}, {1 - 5.0, 1 - 10.0, 2, 2, 3 - 2.0, 3 - 3.0, 4, 4});
}

TEST_CASE("SGD sparse float32: a row repeated 2^20 times sums in float64 after its 32nd",
          "[optim][sparse]") {
  // 2^20 slices of 0.1 on row 0: their sum 104857.6 (float32's 0.1 times 2^20, exactly in
  // float64); a float32 running sum was 1 % off.
  const std::size_t n = std::size_t{1} << 20;
  Variable w(zeros({2, 1}, DType::Float32), true, "w");
  SGD sgd(1.0);
  const IndexedSlices grad{fill({n, 1}, 0.1, DType::Float32), zeros({n}, DType::Int64), {2, 1}};
  sgd.apply_gradients(std::vector<std::pair<GradientValue, Variable>>{{grad, w}});
  float first_32 = 0.0f;
  for (int k = 0; k < 32; ++k) first_32 += 0.1f;
  const double rest = static_cast<double>(n - 32) * static_cast<double>(0.1f);
  CHECK(w.peek().array<float>()(0, 0) == -static_cast<float>(first_32 + rest));
  CHECK(w.peek().array<float>()(1, 0) == 0.0f);
}

TEST_CASE("SGD momentum sparse: only the named rows' velocity moves", "[optim][sparse]") {
  Variable w(zeros({3, 1}), true, "w");
  SGD sgd(1.0, 0.5);
  using Pairs = std::vector<std::pair<GradientValue, Variable>>;
  sgd.apply_gradients(Pairs{{slices({1.0}, {0}, {3, 1}), w}});
  sgd.apply_gradients(Pairs{{slices({2.0}, {2}, {3, 1}), w}});
  // Row 0's velocity (-1) is not decayed by the step that names only row 2 (lazy rows).
  require_close(sgd.slot(w, "momentum"), {3, 1}, {-1.0, 0.0, -2.0});
  require_close(w.peek(), {3, 1}, {-1.0, 0.0, -2.0});
  sgd.apply_gradients(Pairs{{slices({0.0}, {0}, {3, 1}), w}});
  require_close(w.peek(), {3, 1}, {-1.5, 0.0, -2.0});
}

TEST_CASE("Adam sparse follows TF's dense Adam: same as the densified gradient",
          "[optim][sparse][adam]") {
  Tensor initial = random_tensor({5, 3}, 51);
  Variable sparse_w(initial, true, "sparse_w");
  Variable dense_w(initial, true, "dense_w");
  Adam sparse_adam(0.1), dense_adam(0.1);
  using Pairs = std::vector<std::pair<GradientValue, Variable>>;
  const std::vector<IndexedSlices> steps{slices({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 1}, {5, 3}),
                                         slices({-1, 0.5, 2}, {4}, {5, 3})};
  const std::vector<std::vector<double>> densified{
      {0, 0, 0, 8, 10, 12, 0, 0, 0, 4, 5, 6, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0.5, 2}};
  for (std::size_t s = 0; s < steps.size(); ++s) {
    sparse_adam.apply_gradients(Pairs{{steps[s], sparse_w}});
    dense_adam.apply_gradients({{from_values(densified[s], {5, 3}), dense_w}});
    INFO("step " << s);
    require_close(sparse_w.peek(), {5, 3}, values(dense_w.peek()), 1e-15);
  }
  // Rows never named stay put; row 1, named only in step 0, kept moving in step 1.
  const auto init = values(initial), now = values(sparse_w.peek());
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(now[j] == init[j]);
    CHECK(now[6 + j] == init[6 + j]);
  }
  CHECK(now[3] != init[3]);
}

TEST_CASE("mixing dense and sparse pairs in one call", "[optim][sparse]") {
  Variable table(zeros({3, 2}), true, "table");
  Variable bias(constant(1.0), true, "bias");
  SGD sgd(1.0);
  sgd.apply_gradients(std::vector<std::pair<GradientValue, Variable>>{
      {slices({1, 2}, {1}, {3, 2}), table}, {GradientValue(constant(0.5)), bias}});
  require_close(table.peek(), {3, 2}, {0, 0, -1, -2, 0, 0});
  require_close(bias.peek(), {}, {0.5});
  CHECK(sgd.iterations() == 1);
}

TEST_CASE("sparse gradient errors name the optimizer and the variable", "[optim][sparse]") {
  Variable w(zeros({4, 2}), true, "table");
  SGD sgd;
  using Pairs = std::vector<std::pair<GradientValue, Variable>>;
  auto msg = message_of<InvalidArgument>([&] {
    sgd.apply_gradients(Pairs{{slices({1, 2}, {4}, {4, 2}), w}});
  });
  CHECK_THAT(msg, Catch::Contains("SGD") && Catch::Contains("'table'") &&
                      Catch::Contains("index 4") && Catch::Contains("[0, 4)"));
  msg = message_of<InvalidArgument>([&] {
    sgd.apply_gradients(Pairs{{slices({1, 2}, {0}, {5, 2}), w}});
  });
  CHECK_THAT(msg, Catch::Contains("dense_shape") && Catch::Contains("[5, 2]"));
  IndexedSlices bad_values{zeros({2, 3}), Tensor(xt::xarray<std::int64_t>{0, 1}), {4, 2}};
  msg = message_of<InvalidArgument>([&] { sgd.apply_gradients(Pairs{{bad_values, w}}); });
  CHECK_THAT(msg, Catch::Contains("[2, 3]") && Catch::Contains("[2, 2]"));
  IndexedSlices float_indices{zeros({1, 2}), constant({0.0}), {4, 2}};
  msg = message_of<InvalidArgument>([&] { sgd.apply_gradients(Pairs{{float_indices, w}}); });
  CHECK_THAT(msg, Catch::Contains("indices") && Catch::Contains("float64"));
}
