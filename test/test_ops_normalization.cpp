// Normalization (nn_normalization.cpp): moments, batch_normalization, layer_normalization,
// l2_normalize. Closed-form values, normalized outputs with mean 0 / variance 1 / norm 1,
// exact Hessians (the variance's gradient flows through the mean), first and second
// derivatives against central differences, bad input.
#include "support.hpp"

#include <cmath>
#include <iostream>

#include "misuse_support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// Row means and biased variances of a [rows, cols] row-major vector.
std::pair<std::vector<double>, std::vector<double>> row_moments(const std::vector<double>& v,
                                                                std::size_t rows,
                                                                std::size_t cols) {
  std::vector<double> mean(rows, 0.0), var(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) mean[r] += v[r * cols + c] / cols;
    for (std::size_t c = 0; c < cols; ++c) {
      var[r] += (v[r * cols + c] - mean[r]) * (v[r * cols + c] - mean[r]) / cols;
    }
  }
  return {mean, var};
}

}  // namespace

TEST_CASE("moments: mean and biased variance over any axes", "[normalization]") {
  const Tensor x = constant({{1, 2, 3, 6}, {-1, 0, 0, 5}});
  const MeanAndVariance rows = moments(x, {1});
  require_close(rows.mean, {2}, {3, 1});
  require_close(rows.variance, {2}, {3.5, 5.5});  // (4 + 1 + 0 + 9) / 4, (4 + 1 + 1 + 16) / 4
  const MeanAndVariance cols = moments(x, {-2}, /*keepdims=*/true);
  require_close(cols.mean, {1, 4}, {0, 1, 1.5, 5.5});
  require_close(cols.variance, {1, 4}, {1, 1, 2.25, 0.25});
  const MeanAndVariance all = moments(x, {});
  require_close(all.mean, {}, {2});
  require_close(all.variance, {}, {(1 + 0 + 1 + 16 + 9 + 4 + 4 + 9) / 8.0});
  const MeanAndVariance m32 = moments(from_values(values(x), {2, 4}, DType::Float32), {1});
  CHECK(m32.variance.dtype() == DType::Float32);
  require_close(m32.variance, {2}, {3.5, 5.5}, 1e-6);
  const Tensor big = random_tensor({3, 5, 4}, 9, -2, 3);
  const MeanAndVariance m = moments(big, {0, 2}, true);
  CHECK(m.mean.shape() == Shape{1, 5, 1});
  require_close(m.mean, {1, 5, 1}, values(reduce_mean(big, {0, 2}, true)), 1e-15);
  require_close(m.variance, {1, 5, 1},
                values(subtract(reduce_mean(square(big), {0, 2}, true), square(m.mean))), 1e-13);
}

TEST_CASE("moments: the variance's Hessian is exact, 2/n (I - 11^T/n)", "[normalization][grad]") {
  const Tensor v = constant({0.3, -1.1, 2.0, 0.7});
  const Tensor h = hessian([](const Tensor& z) { return moments(z, {0}).variance; }, v);
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) expected.push_back(0.5 * ((i == j ? 1.0 : 0.0) - 0.25));
  }
  require_close(h, {4, 4}, expected, 1e-13);
  verify_gradients([](const std::vector<Tensor>& a) { return moments(a[0], {1}).variance; },
                   {random_tensor({3, 4}, 10)});
  verify_gradients([](const std::vector<Tensor>& a) { return moments(a[0], {0}, true).mean; },
                   {random_tensor({3, 4}, 11)});
}

TEST_CASE("batch_normalization: TF's formula, broadcasting, absent offset and scale",
          "[normalization]") {
  const Tensor x = random_tensor({4, 3}, 12, -2, 2);
  const Tensor mean = constant({0.1, -0.2, 0.3});
  const Tensor variance = constant({0.5, 1.5, 2.0});
  const Tensor offset = constant({1, 2, 3});
  const Tensor scale = constant({2, 0.5, -1});
  const double eps = 1e-3;
  std::vector<double> full, bare;
  const auto xs = values(x), ms = values(mean), vs = values(variance), os = values(offset),
             ss = values(scale);
  for (std::size_t i = 0; i < 12; ++i) {
    const std::size_t c = i % 3;
    const double normalized = (xs[i] - ms[c]) / std::sqrt(vs[c] + eps);
    full.push_back(normalized * ss[c] + os[c]);
    bare.push_back(normalized);
  }
  require_close(batch_normalization(x, mean, variance, offset, scale, eps), {4, 3}, full, 1e-14);
  require_close(batch_normalization(x, mean, variance, Tensor(), Tensor(), eps), {4, 3}, bare,
                1e-14);
  // The default epsilon is 1e-3 (Keras).
  require_close(batch_normalization(x, mean, variance, Tensor(), Tensor()), {4, 3}, bare, 1e-14);
  const Tensor y32 = batch_normalization(from_values(xs, {4, 3}, DType::Float32),
                                         from_values(ms, {3}, DType::Float32),
                                         from_values(vs, {3}, DType::Float32), Tensor(), Tensor());
  CHECK(y32.dtype() == DType::Float32);
  require_close(y32, {4, 3}, bare, 1e-5);
  verify_gradients(
      [](const std::vector<Tensor>& a) {
        return batch_normalization(a[0], a[1], a[2], a[3], a[4], 1e-3);
      },
      {x, mean, variance, offset, scale});
}

TEST_CASE("layer_normalization: each row has mean 0 and variance 1, then gamma and beta",
          "[normalization]") {
  const Tensor x = random_tensor({3, 6}, 13, -3, 5);
  const auto [mean, var] = row_moments(values(x), 3, 6);
  const Tensor y = layer_normalization(x, {-1}, Tensor(), Tensor(), 0.0);
  const auto [y_mean, y_var] = row_moments(values(y), 3, 6);
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK(y_mean[r] == Approx(0).margin(1e-15));
    CHECK(y_var[r] == Approx(1).epsilon(1e-14));
  }
  // With the default epsilon 1e-3 the variance is var / (var + eps).
  const auto [d_mean, d_var] = row_moments(values(layer_normalization(x)), 3, 6);
  for (std::size_t r = 0; r < 3; ++r)
    CHECK(d_var[r] == Approx(var[r] / (var[r] + 1e-3)).epsilon(1e-13));
  const Tensor gamma = constant({1, 2, 3, 4, 5, 6});
  const Tensor beta = constant({0.5, 0.5, 0.5, -1, -1, -1});
  const auto plain = values(y);
  const auto g = values(gamma), b = values(beta);
  std::vector<double> expected;
  for (std::size_t i = 0; i < 18; ++i) expected.push_back(plain[i] * g[i % 6] + b[i % 6]);
  require_close(layer_normalization(x, {1}, gamma, beta, 0.0), {3, 6}, expected, 1e-13);
  // Over two axes: each [2, 3] block of a [2, 2, 3] tensor.
  const Tensor blocks = layer_normalization(reshape(x, {3, 2, 3}), {1, 2}, Tensor(), Tensor(), 0.0);
  const auto [b_mean, b_var] = row_moments(values(blocks), 3, 6);
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK(b_mean[r] == Approx(0).margin(1e-15));
    CHECK(b_var[r] == Approx(1).epsilon(1e-14));
  }
  verify_gradients(
      [](const std::vector<Tensor>& a) { return layer_normalization(a[0], {-1}, a[1], a[2]); },
      {random_tensor({2, 4}, 14, -2, 2), random_tensor({4}, 15, 0.5, 1.5), random_tensor({4}, 16)});
}

TEST_CASE("l2_normalize: unit norm along the axes, TF's epsilon floor", "[normalization]") {
  const Tensor x = constant({{3, 4}, {0, -2}});
  require_close(l2_normalize(x, {1}), {2, 2}, {0.6, 0.8, 0, -1});
  require_close(l2_normalize(x, {0}), {2, 2}, {1, 4 / std::sqrt(20.0), 0, -2 / std::sqrt(20.0)});
  require_close(l2_normalize(x), {2, 2},
                {3 / std::sqrt(29.0), 4 / std::sqrt(29.0), 0, -2 / std::sqrt(29.0)});
  const Tensor r = random_tensor({4, 5}, 17, -3, 3);
  const auto n = values(l2_normalize(r, {-1}));
  for (std::size_t row = 0; row < 4; ++row) {
    double s = 0;
    for (std::size_t c = 0; c < 5; ++c) s += n[row * 5 + c] * n[row * 5 + c];
    CHECK(s == Approx(1).epsilon(1e-15));
  }
  // Below epsilon: x / sqrt(eps); the zero vector stays 0 with gradient 1 / sqrt(eps).
  require_close(l2_normalize(constant({1e-8, 0}), {}, 1e-12), {2}, {1e-2, 0}, 1e-15);
  const Tensor zero = constant({0.0, 0.0});
  GradientTape tape;
  tape.watch(zero);
  require_close(tape.gradient(l2_normalize(zero, {0}, 1e-4), zero), {2}, {100, 100}, 1e-12);
  const Tensor y32 = l2_normalize(from_values({3, 4}, {2}, DType::Float32));
  CHECK(y32.dtype() == DType::Float32);
  require_close(y32, {2}, {0.6, 0.8}, 1e-7);
  verify_gradients([](const std::vector<Tensor>& a) { return l2_normalize(a[0], {1}); },
                   {random_tensor({2, 3}, 18, -2, 2)});
}

TEST_CASE("nn_normalization misuse cases", "[normalization][errors]") {
  const int before = misuse_cases_run();
  const Tensor x = zeros({2, 3});
  const Tensor ints = from_values({1, 2}, {2}, DType::Int32);
  expect_misuse<InvalidArgument>("moments of int32", [&] { moments(ints, {0}); },
                                 {"moments", "int32", "[2]"});
  expect_misuse<InvalidArgument>("moments: axis out of range", [&] { moments(x, {2}); },
                                 {"moments", "[2, 3]", "2"});
  expect_misuse<InvalidArgument>("moments: a repeated axis",
                                 [&] {
                                   moments(x, {1, -1});
                                 },
                                 {"moments", "[2, 3]"});
  expect_misuse<InvalidArgument>(
      "batch_normalization: variance of another dtype",
      [&] { batch_normalization(x, zeros({3}), zeros({3}, DType::Float32), Tensor(), Tensor()); },
      {"batch_normalization", "variance has shape [3] and dtype float32", "x's dtype"});
  expect_misuse<InvalidArgument>(
      "batch_normalization: a scale that does not broadcast",
      [&] { batch_normalization(x, zeros({3}), ones({3}), Tensor(), ones({2})); },
      {"batch_normalization", "x has shape [2, 3]", "scale has shape [2]", "does not broadcast"});
  expect_misuse<InvalidArgument>(
      "batch_normalization: a negative epsilon",
      [&] { batch_normalization(x, zeros({3}), ones({3}), Tensor(), Tensor(), -1e-3); },
      {"batch_normalization", "epsilon = -0.001", "[2, 3]"});
  expect_misuse<InvalidArgument>(
      "batch_normalization: undefined mean",
      [&] { batch_normalization(x, Tensor(), ones({3}), Tensor(), Tensor()); },
      {"batch_normalization", "undefined"});
  expect_misuse<InvalidArgument>("layer_normalization: axis out of range",
                                 [&] { layer_normalization(x, {-3}); },
                                 {"layer_normalization", "[2, 3]", "-3"});
  expect_misuse<InvalidArgument>(
      "layer_normalization: gamma that does not broadcast",
      [&] { layer_normalization(x, {-1}, ones({4})); },
      {"layer_normalization", "scale has shape [4]", "does not broadcast"});
  expect_misuse<InvalidArgument>("l2_normalize of int32", [&] { l2_normalize(ints); },
                                 {"l2_normalize", "int32"});
  expect_misuse<InvalidArgument>("l2_normalize: NaN epsilon",
                                 [&] { l2_normalize(x, {}, std::nan("")); },
                                 {"l2_normalize", "epsilon = nan"});
  const int run = misuse_cases_run() - before;
  std::cout << "nn_normalization misuse cases: " << run << " run\n";
  REQUIRE(run == 11);
}
