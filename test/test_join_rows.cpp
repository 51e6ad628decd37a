// concat and split as rows of blocks (kernels/box_copy.hpp join_rows / split_rows): exact
// values for narrow parts (a column each, element by element) and wide ones (a library copy),
// on the first, a middle and the last axis, every dtype, empty parts; and the batch of two
// that vectorize answers from its two traces (a batch_jacobian with two values per example).
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// [d0, d1, d2] with element (i, j, k) = start + 10000 i + 100 j + k.
Tensor numbered(std::size_t d0, std::size_t d1, std::size_t d2, double start,
                DType dtype = DType::Float64) {
  std::vector<double> v;
  for (std::size_t i = 0; i < d0; ++i) {
    for (std::size_t j = 0; j < d1; ++j) {
      for (std::size_t k = 0; k < d2; ++k) v.push_back(start + 10000.0 * i + 100.0 * j + k);
    }
  }
  return from_values(v, {d0, d1, d2}, dtype);
}

// The element (i, j, k) of `parts` joined along axis 1, read from the parts one by one.
double joined_along_1(const std::vector<Tensor>& parts, std::size_t i, std::size_t j,
                      std::size_t k) {
  for (const Tensor& p : parts) {
    if (j < p.shape()[1]) return values(p)[(i * p.shape()[1] + j) * p.shape()[2] + k];
    j -= p.shape()[1];
  }
  throw std::logic_error("index past the parts");
}

}  // namespace

TEST_CASE("concat along a middle axis of narrow and wide parts, then split back", "[array][join]") {
  // Widths 1 * 2, 3 * 2 and 20 * 2 elements per row: element loops and a library copy.
  const std::vector<Tensor> parts{numbered(3, 1, 2, 0.5), numbered(3, 3, 2, 0.25),
                                  numbered(3, 20, 2, 0.125)};
  const Tensor joined = concat(parts, 1);
  REQUIRE(joined.shape() == Shape{3, 24, 2});
  const std::vector<double> got = values(joined);
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 24; ++j) {
      for (std::size_t k = 0; k < 2; ++k) {
        INFO(i << ", " << j << ", " << k);
        CHECK(got[(i * 24 + j) * 2 + k] == joined_along_1(parts, i, j, k));
      }
    }
  }
  const std::vector<Tensor> halves = split(numbered(3, 24, 2, 0.5), 2, 1);
  REQUIRE(halves.size() == 2);
  require_close(halves[0], {3, 12, 2},
                values(slice(numbered(3, 24, 2, 0.5), {0, 0, 0}, {3, 12, 2})), 0.0);
  require_close(halves[1], {3, 12, 2},
                values(slice(numbered(3, 24, 2, 0.5), {0, 12, 0}, {3, 12, 2})), 0.0);
}

TEST_CASE("split of 15 columns and its gradient, the concat of 15 columns", "[array][join]") {
  // 7 rows, and 150: two whole blocks of 64 rows and a partial one in split's column loop.
  for (const std::size_t rows : {std::size_t{7}, std::size_t{150}}) {
    INFO(rows << " rows");
    const Tensor x = numbered(1, rows, 15, 0.5);
    const Tensor m = reshape(x, {static_cast<std::int64_t>(rows), 15});
    GradientTape tape;
    tape.watch(m);
    const std::vector<Tensor> columns = split(m, 15, 1);
    REQUIRE(columns.size() == 15);
    Tensor loss = scalar(0.0, DType::Float64);
    for (std::size_t c = 0; c < 15; ++c) {
      std::vector<double> expected;
      for (std::size_t r = 0; r < rows; ++r) expected.push_back(0.5 + 100.0 * r + c);
      require_close(columns[c], {rows, 1}, expected, 0.0);
      // Column c weighted by c + 1: the gradient's column c is c + 1 everywhere.
      loss = loss + reduce_sum(columns[c] * scalar(static_cast<double>(c + 1), DType::Float64));
    }
    std::vector<double> expected_gradient;
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < 15; ++c) expected_gradient.push_back(static_cast<double>(c + 1));
    }
    require_close(tape.gradient(loss, m), {rows, 15}, expected_gradient, 0.0);
  }
}

TEST_CASE("concat and split on the first and last axes, integer and bool dtypes, empty parts",
          "[array][join]") {
  const Tensor a = numbered(2, 2, 3, 1.0, DType::Int64);
  const Tensor b = numbered(1, 2, 3, 50000.0, DType::Int64);
  require_close(
      cast(concat({a, b}, 0), DType::Float64), {3, 2, 3},
      [&] {
        std::vector<double> v = values(a);
        const std::vector<double> w = values(b);
        v.insert(v.end(), w.begin(), w.end());
        return v;
      }(),
      0.0);
  const Tensor flags = from_values({1, 0, 0, 1, 1, 0}, {2, 3}, DType::Bool);
  const std::vector<Tensor> parts = split(flags, 3, 1);
  REQUIRE(parts.size() == 3);
  require_close(cast(parts[0], DType::Float64), {2, 1}, {1, 1}, 0.0);
  require_close(cast(parts[1], DType::Float64), {2, 1}, {0, 1}, 0.0);
  require_close(cast(parts[2], DType::Float64), {2, 1}, {0, 0}, 0.0);
  require_close(cast(concat({parts[2], parts[0], parts[1]}, 1), DType::Float64), {2, 3},
                {0, 1, 0, 0, 1, 1}, 0.0);
  // An empty part, and an empty outer dimension.
  const Tensor empty_columns = zeros({2, 0}, DType::Float64);
  require_close(concat({empty_columns, from_values({1, 2}, {2, 1}, DType::Float64)}, 1), {2, 1},
                {1, 2}, 0.0);
  CHECK(concat({zeros({0, 2}, DType::Float64), zeros({0, 3}, DType::Float64)}, 1).shape() ==
        Shape{0, 5});
  const std::vector<Tensor> none = split(zeros({0, 4}, DType::Float64), 2, 1);
  REQUIRE(none.size() == 2);
  CHECK(none[1].shape() == Shape{0, 2});
}

TEST_CASE("batch_jacobian with two values per example: analytic blocks, differentiable",
          "[jacobian][vectorize]") {
  // y[b] = (x0 x1, sin(x2) x0): J[b] = [[x1, x0, 0], [sin x2, 0, x0 cos x2]]; its sum
  // x0 + x1 + sin x2 + x0 cos x2 has the gradient (1 + cos x2, 1, cos x2 - x0 sin x2).
  const Tensor x = random_tensor({4, 3}, 21);
  GradientTape outer;
  outer.watch(x);
  Tensor blocks;
  {
    GradientTape tape;
    tape.watch(x);
    const std::vector<Tensor> c = split(x, 3, 1);
    const Tensor y = concat({c[0] * c[1], sin(c[2]) * c[0]}, 1);
    blocks = tape.batch_jacobian(y, x);
  }
  const std::vector<double> v = values(x);
  std::vector<double> expected, expected_gradient;
  for (std::size_t b = 0; b < 4; ++b) {
    const double x0 = v[3 * b], x1 = v[3 * b + 1], x2 = v[3 * b + 2];
    const std::vector<double> block{x1, x0, 0.0, std::sin(x2), 0.0, x0 * std::cos(x2)};
    expected.insert(expected.end(), block.begin(), block.end());
    const std::vector<double> g{1.0 + std::cos(x2), 1.0, std::cos(x2) - x0 * std::sin(x2)};
    expected_gradient.insert(expected_gradient.end(), g.begin(), g.end());
  }
  require_close(blocks, {4, 2, 3}, expected, 1e-12);
  require_close(outer.gradient(reduce_sum(blocks), x), {4, 3}, expected_gradient, 1e-12);
}

TEST_CASE("vectorized_map over a batch of two equals the loop and is differentiable",
          "[vectorize]") {
  const Tensor x = from_values({0.5, -1.5, 2.0, 0.25}, {2, 2}, DType::Float64);
  GradientTape tape;
  tape.watch(x);
  const auto fn = [](const std::vector<Tensor>& s) {
    return std::vector<Tensor>{reduce_sum(exp(s[0]) * s[0]), Tensor()};
  };
  const std::vector<Tensor> out = vectorized_map(fn, {x}, /*fallback_to_loop=*/false);
  REQUIRE(out.size() == 2);
  CHECK_FALSE(out[1].defined());
  const auto f = [](double t) { return std::exp(t) * t; };
  const auto df = [](double t) { return std::exp(t) * (t + 1.0); };
  require_close(out[0], {2}, {f(0.5) + f(-1.5), f(2.0) + f(0.25)}, 1e-12);
  require_close(tape.gradient(reduce_sum(out[0] * from_values({1.0, 3.0}, {2}, DType::Float64)), x),
                {2, 2}, {df(0.5), df(-1.5), 3.0 * df(2.0), 3.0 * df(0.25)}, 1e-12);
}
