// Pooling: max_pool2d and avg_pool2d against explicit reference loops (strides, paddings, odd
// sizes, float32 and float64), hand-computed values, where max pooling's gradient goes (ties
// to the first maximum, overlapping windows summed), avg_pool's gradient as its transpose,
// first- and second-order numerical checks, and bad input; and DataFormat::NCHW against the
// NHWC ops on the transposed image, bit for bit (ties included).
#include "support.hpp"

#include <cmath>
#include <functional>
#include <limits>

#include "identical_support.hpp"
#include "image_layout_support.hpp"
#include "misuse_support.hpp"
#include "ops/nn/conv_ops.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr DType kAllFloat[] = {DType::Float32, DType::Float64};

struct Case {
  Shape x;
  std::vector<int> ksize, strides;
  Padding padding;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {{2, 4, 4, 3}, {2, 2}, {2, 2}, Padding::Valid},
      {{2, 5, 5, 3}, {2, 2}, {2, 2}, Padding::Same},
      {{1, 7, 6, 2}, {3, 3}, {2, 2}, Padding::Valid},
      {{1, 7, 6, 2}, {3, 3}, {2, 2}, Padding::Same},
      {{3, 5, 7, 1}, {3, 2}, {1, 1}, Padding::Same},  // overlapping windows
      {{1, 6, 5, 4}, {2, 3}, {3, 1}, Padding::Same},
      {{1, 3, 3, 2}, {5, 5}, {1, 1}, Padding::Same},  // window larger than x
  };
  return all;
}

std::string describe_case(const Case& c) {
  return "x " + shape_to_string(c.x) + ", ksize [" + std::to_string(c.ksize[0]) + ", " +
         std::to_string(c.ksize[1]) + "], strides [" + std::to_string(c.strides[0]) + ", " +
         std::to_string(c.strides[1]) + "], " + (c.padding == Padding::Same ? "SAME" : "VALID");
}

// Explicit window loops over doubles: max or mean of the in-bounds window elements.
Tensor reference_pool(const Tensor& x, const Case& c, bool max) {
  const auto xv = values(x);
  const std::size_t n = c.x[0], h = c.x[1], w = c.x[2], ch = c.x[3];
  const auto kh = static_cast<std::size_t>(c.ksize[0]), kw = static_cast<std::size_t>(c.ksize[1]);
  const auto sh = static_cast<std::size_t>(c.strides[0]),
             sw = static_cast<std::size_t>(c.strides[1]);
  const auto axis = [&](std::size_t in, std::size_t k,
                        std::size_t s) -> std::pair<std::size_t, long> {
    if (c.padding == Padding::Valid) return {(in - k) / s + 1, 0};
    const std::size_t out = (in + s - 1) / s;
    const long total = static_cast<long>((out - 1) * s + k) - static_cast<long>(in);
    return {out, total > 0 ? total / 2 : 0};
  };
  const auto [oh, pt] = axis(h, kh, sh);
  const auto [ow, pl] = axis(w, kw, sw);
  std::vector<double> out;
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j)
        for (std::size_t k = 0; k < ch; ++k) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (std::size_t p = 0; p < kh; ++p)
            for (std::size_t q = 0; q < kw; ++q) {
              const long r = static_cast<long>(i * sh + p) - pt;
              const long s = static_cast<long>(j * sw + q) - pl;
              if (r < 0 || s < 0 || r >= static_cast<long>(h) || s >= static_cast<long>(w))
                continue;
              const double v =
                  xv[((b * h + static_cast<std::size_t>(r)) * w + static_cast<std::size_t>(s)) *
                         ch +
                     k];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          out.push_back(max ? best : sum / count);
        }
  return from_values(out, {n, oh, ow, ch});
}

Tensor sum_of_product(const Tensor& a, const Tensor& b) { return reduce_sum(multiply(a, b)); }

}  // namespace

TEST_CASE("max_pool2d and avg_pool2d on a 4x4 image: hand-computed values", "[pooling]") {
  for (DType dtype : kAllFloat) {
    const Tensor x =
        from_values({1, 5, 2, 0, 3, 4, 8, 1, 0, 2, 6, 7, 9, 1, 3, 3}, {1, 4, 4, 1}, dtype);
    require_close(max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid), {1, 2, 2, 1}, {5, 8, 9, 7});
    require_close(avg_pool2d(x, {2, 2}, {2, 2}, Padding::Valid), {1, 2, 2, 1},
                  {3.25, 2.75, 3, 4.75});
    // SAME with a 3x3 window and stride 2: one padding row/column, after the image; the
    // average counts only the in-bounds elements (4 of them at the bottom-right corner).
    require_close(max_pool2d(x, {3, 3}, {2, 2}, Padding::Same), {1, 2, 2, 1}, {8, 8, 9, 7});
    require_close(avg_pool2d(x, {3, 3}, {2, 2}, Padding::Same), {1, 2, 2, 1},
                  {31.0 / 9, 24.0 / 6, 21.0 / 6, 19.0 / 4}, 1e-6);
  }
}

TEST_CASE("max_pool2d of all-negative values never returns the padding", "[pooling]") {
  const Tensor x = fill({1, 3, 3, 1}, -5.0);
  require_close(max_pool2d(x, {2, 2}, {2, 2}, Padding::Same), {1, 2, 2, 1}, {-5, -5, -5, -5});
}

TEST_CASE("pooling equals the explicit reference loops (strides, paddings, dtypes)", "[pooling]") {
  unsigned seed = 1;
  for (const Case& c : cases()) {
    for (DType dtype : kAllFloat) {
      INFO(describe_case(c) << ", " << dtype_name(dtype));
      const Tensor x = random_tensor(c.x, seed++);
      const double tol = dtype == DType::Float32 ? 1e-6 : 1e-13;
      const Tensor max_ref = reference_pool(x, c, true);
      require_close(max_pool2d(cast(x, dtype), c.ksize, c.strides, c.padding), max_ref.shape(),
                    values(max_ref), tol);
      const Tensor avg_ref = reference_pool(x, c, false);
      require_close(avg_pool2d(cast(x, dtype), c.ksize, c.strides, c.padding), avg_ref.shape(),
                    values(avg_ref), tol);
    }
  }
}

TEST_CASE("max_pool2d's gradient goes to the first maximum of each window and sums overlaps",
          "[pooling][gradient]") {
  // Ties: the window [[2, 2], [2, 1]] sends its gradient to the first 2 (row-major order).
  Tensor x = from_values({2, 2, 0, 3, 2, 1, 3, 0, 1, 1, 4, 4, 1, 0, 4, 4}, {1, 4, 4, 1});
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
    require_close(y, {1, 2, 2, 1}, {2, 3, 1, 4});
    const Tensor g = from_values({10, 20, 30, 40}, {1, 2, 2, 1});
    require_close(tape.gradient(sum_of_product(y, g), x), {1, 4, 4, 1},
                  {10, 0, 0, 20, 0, 0, 0, 0, 30, 0, 40, 0, 0, 0, 0, 0});
  }
  {
    // Overlapping 2x2 windows with stride 1: the 4 at (2, 2) comes first in the four windows
    // that hold it (tied with the other 4s), so it collects all four gradients.
    GradientTape tape;
    tape.watch(x);
    const Tensor y = max_pool2d(x, {2, 2}, {1, 1}, Padding::Valid);
    require_close(y, {1, 3, 3, 1}, {2, 3, 3, 2, 4, 4, 1, 4, 4});
    require_close(tape.gradient(reduce_sum(y), x), {1, 4, 4, 1},
                  {1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 4, 0, 0, 0, 0, 0});
  }
}

TEST_CASE("MaxPoolGrad and MaxPoolGradGrad are each other's transpose in their second input",
          "[pooling][gradient]") {
  // <MaxPoolGrad(x, g), h> = <g, MaxPoolGradGrad(x, h)> for any g, h, overlapping windows
  // included; and the second order of max_pool2d is zero in x (piecewise linear).
  const Tensor x = from_values({2, 2, 0, 3, 2, 1, 3, 0, 1, 1, 4, 4, 1, 0, 4, 4}, {1, 4, 4, 1});
  const Tensor g = random_tensor({1, 3, 3, 1}, 30);
  const Tensor h = random_tensor({1, 4, 4, 1}, 31);
  const Tensor dx = detail::max_pool_grad(x, g, {2, 2}, {1, 1}, Padding::Valid);
  const Tensor read = detail::max_pool_grad_grad(x, h, {2, 2}, {1, 1}, Padding::Valid);
  // The maxima of the nine windows, by flat position in x (first maximum on ties).
  const std::vector<std::size_t> argmax{0, 6, 3, 4, 10, 10, 8, 10, 10};
  std::vector<double> expected_dx(16, 0.0), expected_read;
  for (std::size_t k = 0; k < 9; ++k) {
    expected_dx[argmax[k]] += values(g)[k];
    expected_read.push_back(values(h)[argmax[k]]);
  }
  require_close(dx, {1, 4, 4, 1}, expected_dx, 1e-15);
  require_close(read, {1, 3, 3, 1}, expected_read, 0);
  CHECK(reduce_sum(dx * h).item<double>() ==
        Approx(reduce_sum(g * read).item<double>()).epsilon(1e-14));

  GradientTape outer;
  outer.watch(x);
  GradientTape inner;
  inner.watch(x);
  const Tensor first =
      inner.gradient(reduce_sum(max_pool2d(x, {2, 2}, {1, 1}, Padding::Valid) * g), x);
  require_close(first, {1, 4, 4, 1}, expected_dx, 1e-15);
  require_close(outer.gradient(reduce_sum(first * h), x, UnconnectedGradients::Zero), {1, 4, 4, 1},
                std::vector<double>(16, 0.0), 0);
}

TEST_CASE("max_pool2d and avg_pool2d propagate a NaN from any position of the window",
          "[pooling][nan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : kAllFloat) {
    for (std::size_t p = 0; p < 4; ++p) {
      INFO(dtype_name(dtype) << ", NaN at window position " << p);
      // Channel 0 holds the NaN beside a larger value 5 (so neither "first" nor "largest"
      // hides it); channel 1 has no NaN and must be unaffected.
      std::vector<double> v = {1, 2, 5, 3, 1, 9, 1, 4};
      v[2 * p] = nan;
      if (p == 2) v[0] = 5;  // keep a 5 in channel 0 beside the NaN
      Tensor x = from_values(v, {1, 2, 2, 2}, dtype);
      GradientTape tape(/*persistent=*/true);
      tape.watch(x);
      const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
      REQUIRE(y.shape() == Shape{1, 1, 1, 2});
      const auto yv = values(y);
      CHECK(std::isnan(yv[0]));
      CHECK(yv[1] == 9);
      // The first NaN is the window's argmax: g goes there, not to the 5.
      const Tensor g = from_values({7, 11}, {1, 1, 1, 2}, dtype);
      std::vector<double> expected(8, 0.0);
      expected[2 * p] = 7;
      expected[5] = 11;
      require_close(tape.gradient({y}, {x}, {g})[0], {1, 2, 2, 2}, expected);

      const Tensor a = avg_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
      const auto av = values(a);
      CHECK(std::isnan(av[0]));
      CHECK(av[1] == 4.5);  // (2 + 3 + 9 + 4) / 4
      // AvgPool's gradient does not read x: it stays g / 4 everywhere.
      require_close(tape.gradient({a}, {x}, {g})[0], {1, 2, 2, 2},
                    {1.75, 2.75, 1.75, 2.75, 1.75, 2.75, 1.75, 2.75});
    }
    // Two NaNs in one window: the first of them (window order) gets the gradient; a 1x1
    // input with SAME padding has the NaN as its only in-bounds tap.
    Tensor x = from_values({2, nan, 8, nan}, {1, 2, 2, 1}, dtype);
    GradientTape tape;
    tape.watch(x);
    const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
    CHECK(std::isnan(values(y)[0]));
    require_close(tape.gradient(y, x), {1, 2, 2, 1}, {0, 1, 0, 0});
    CHECK(std::isnan(values(
        max_pool2d(from_values({nan}, {1, 1, 1, 1}, dtype), {3, 3}, {1, 1}, Padding::Same))[0]));
  }
}

TEST_CASE("avg_pool2d's gradient is AvgPoolGrad, the transpose of the averaging",
          "[pooling][gradient]") {
  unsigned seed = 50;
  for (const Case& c : cases()) {
    INFO(describe_case(c));
    Tensor x = random_tensor(c.x, seed++);
    GradientTape tape;
    tape.watch(x);
    const Tensor y = avg_pool2d(x, c.ksize, c.strides, c.padding);
    const Tensor g = random_tensor(y.shape(), seed++);
    const Tensor loss = sum_of_product(y, g);
    const Tensor dx = tape.gradient(loss, x);
    const Tensor by_op = detail::avg_pool_grad(g, c.x, c.ksize, c.strides, c.padding);
    require_close(dx, c.x, values(by_op));
    CHECK(sum_of_product(x, dx).item<double>() == Approx(loss.item<double>()).epsilon(1e-12));
  }
}

TEST_CASE("pooling: first and second derivatives match central differences",
          "[pooling][gradient]") {
  const std::vector<Case> small = {
      {{1, 5, 4, 2}, {2, 2}, {2, 2}, Padding::Same},
      {{2, 4, 5, 1}, {3, 2}, {1, 2}, Padding::Valid},
      {{1, 4, 4, 2}, {3, 3}, {1, 1}, Padding::Same},
  };
  unsigned seed = 70;
  for (const Case& c : small) {
    INFO(describe_case(c));
    // Random values are distinct, so no window's maximum is a tie that a step could flip.
    const Tensor x = random_tensor(c.x, seed++);
    verify_gradients(
        [c](const std::vector<Tensor>& a) {
          return max_pool2d(a[0], c.ksize, c.strides, c.padding);
        },
        {x});
    verify_gradients(
        [c](const std::vector<Tensor>& a) {
          return avg_pool2d(a[0], c.ksize, c.strides, c.padding);
        },
        {x});
    const Shape pooled = avg_pool2d(x, c.ksize, c.strides, c.padding).shape();
    verify_gradients(
        [c](const std::vector<Tensor>& a) {
          return detail::avg_pool_grad(a[0], c.x, c.ksize, c.strides, c.padding);
        },
        {random_tensor(pooled, seed++)});
    // Nonlinear around the pooling, so second derivatives are not all zero: the max pool's
    // Hessian routes through the segment sum's gradient (a gather at the same positions).
    verify_gradients(
        [c](const std::vector<Tensor>& a) {
          const Tensor m = max_pool2d(multiply(a[0], a[0]), c.ksize, c.strides, c.padding);
          const Tensor v = avg_pool2d(tapegrad::sin(a[0]), c.ksize, c.strides, c.padding);
          return reduce_sum(multiply(multiply(m, m), v));
        },
        {x});
  }
}

TEST_CASE("pooling misuse: each case throws InvalidArgument naming the op, shape and value",
          "[pooling][misuse]") {
  const int before = misuse_cases_run();
  const Tensor x = random_tensor({1, 5, 5, 2}, 1);
  using PoolFn = Tensor (*)(const Tensor&, std::vector<int>, std::vector<int>, Padding, DataFormat);
  const std::vector<std::pair<std::string, PoolFn>> ops = {{"max_pool2d", max_pool2d},
                                                           {"avg_pool2d", avg_pool2d}};
  for (const auto& [name, pool] : ops) {
    const auto p = [pool = pool](const Tensor& x, std::vector<int> ksize, std::vector<int> strides,
                                 Padding padding) {
      return pool(x, std::move(ksize), std::move(strides), padding, DataFormat::NHWC);
    };
    expect_misuse<InvalidArgument>(name + ": rank 3",
                                   [&] {
                                     p(random_tensor({5, 5, 2}, 2), {2, 2}, {2, 2}, Padding::Valid);
                                   },
                                   {name, "[5, 5, 2]", "rank 4"});
    expect_misuse<InvalidArgument>(name + ": integer x",
                                   [&] {
                                     p(cast(x, DType::Int64), {2, 2}, {2, 2}, Padding::Valid);
                                   },
                                   {name, "int64", "only float32 and float64"});
    expect_misuse<InvalidArgument>(name + ": ksize 0",
                                   [&] {
                                     p(x, {0, 2}, {1, 1}, Padding::Valid);
                                   },
                                   {name, "[1, 5, 5, 2]", "ksize [0, 2]", "(got 0)"});
    expect_misuse<InvalidArgument>(name + ": three ksize values",
                                   [&] {
                                     p(x, {2, 2, 2}, {1, 1}, Padding::Valid);
                                   },
                                   {name, "ksize [2, 2, 2]", "1, 2 or 4 values"});
    expect_misuse<InvalidArgument>(name + ": a channel window",
                                   [&] {
                                     p(x, {1, 2, 2, 2}, {1, 1}, Padding::Valid);
                                   },
                                   {name, "ksize [1, 2, 2, 2]", "batch and channel"});
    expect_misuse<InvalidArgument>(name + ": stride -1",
                                   [&] {
                                     p(x, {2, 2}, {-1, 1}, Padding::Valid);
                                   },
                                   {name, "strides [-1, 1]", "(got -1)"});
    expect_misuse<InvalidArgument>(name + ": VALID window larger than x",
                                   [&] {
                                     p(x, {2, 6}, {1, 1}, Padding::Valid);
                                   },
                                   {name, "[1, 5, 5, 2]", "VALID", "width 5", "window's 6"});
    expect_misuse<InvalidArgument>(name + ": undefined x",
                                   [&] {
                                     p(Tensor(), {2, 2}, {1, 1}, Padding::Valid);
                                   },
                                   {name, "undefined"});
    expect_defined(name + ": an empty batch", [&] {
      CHECK(p(zeros({0, 5, 5, 2}), {2, 2}, {2, 2}, Padding::Same).shape() == Shape{0, 3, 3, 2});
    });
  }
  expect_misuse<InvalidArgument>(
      "AvgPoolGrad: g of the wrong shape",
      [&] {
        detail::avg_pool_grad(random_tensor({1, 2, 2, 2}, 3), {1, 5, 5, 2}, {2, 2}, {1, 1},
                              Padding::Valid);
      },
      {"avg_pool_grad", "g has shape [1, 2, 2, 2]", "input_shape [1, 5, 5, 2]", "[1, 4, 4, 2]"});
  const Tensor pooled_g = random_tensor({1, 3, 3, 2}, 4);
  expect_misuse<InvalidArgument>(
      "MaxPoolGrad: g of the wrong shape",
      [&] {
        detail::max_pool_grad(x, random_tensor({1, 2, 2, 2}, 5), {2, 2}, {2, 2}, Padding::Same);
      },
      {"max_pool_grad", "x has shape [1, 5, 5, 2]", "g has shape [1, 2, 2, 2]", "[1, 3, 3, 2]"});
  expect_misuse<InvalidArgument>(
      "MaxPoolGrad: g of another dtype",
      [&] {
        detail::max_pool_grad(x, cast(pooled_g, DType::Float32), {2, 2}, {2, 2}, Padding::Same);
      },
      {"max_pool_grad", "float32", "x's dtype"});
  expect_misuse<InvalidArgument>(
      "MaxPoolGradGrad: h of the pooled shape instead of x's",
      [&] {
        detail::max_pool_grad_grad(x, pooled_g, {2, 2}, {2, 2}, Padding::Same);
      },
      {"max_pool_grad_grad", "h has shape [1, 3, 3, 2]", "[1, 5, 5, 2]"});
  const int run = misuse_cases_run() - before;
  std::cout << "pooling misuse cases: " << run << " run\n";
  REQUIRE(run == 22);
}

// ---- DataFormat::NCHW -------------------------------------------------------------------

namespace {

using Pool = std::function<Tensor(const Tensor&, DataFormat)>;

// pool(x, NCHW) on the channels-first image against pool(x, NHWC) on the channels-last one:
// the value and the tape's gradient under a random output gradient, bit for bit.
void require_layouts_agree(const Pool& pool, const Tensor& image_last, unsigned seed) {
  const Tensor image_first = to_channels_first(image_last);
  GradientTape tape_first;
  tape_first.watch(image_first);
  const Tensor y_first = pool(image_first, DataFormat::NCHW);
  const Tensor g_first = random_tensor(y_first.shape(), seed);
  const Tensor dx_first = tape_first.gradient(sum_of_product(y_first, g_first), image_first);

  GradientTape tape_last;
  tape_last.watch(image_last);
  const Tensor y_last = pool(image_last, DataFormat::NHWC);
  const Tensor dx_last =
      tape_last.gradient(sum_of_product(y_last, to_channels_last(g_first)), image_last);

  require_identical(y_first, to_channels_first(y_last));
  require_identical(dx_first, to_channels_first(dx_last));
}

}  // namespace

TEST_CASE(
    "max_pool2d and avg_pool2d NCHW equal the NHWC ops on the transposed image, values "
    "and gradients bit for bit",
    "[pooling][nchw]") {
  unsigned seed = 500;
  for (const Case& c : cases()) {
    INFO(describe_case(c));
    const Tensor x = random_tensor(c.x, seed++);
    require_layouts_agree(
        [&](const Tensor& image, DataFormat format) {
          return max_pool2d(image, c.ksize, c.strides, c.padding, format);
        },
        x, seed++);
    require_layouts_agree(
        [&](const Tensor& image, DataFormat format) {
          return avg_pool2d(image, c.ksize, c.strides, c.padding, format);
        },
        x, seed++);
  }
}

TEST_CASE(
    "max_pool2d NCHW breaks ties as NHWC does: the first maximum in row-major window "
    "order",
    "[pooling][nchw]") {
  // Values drawn from {0, 1, 2}: most windows hold a tie for their maximum.
  const Tensor x = tapegrad::floor(random_tensor({2, 6, 7, 3}, 530, 0.0, 3.0));
  for (Padding padding : {Padding::Valid, Padding::Same}) {
    require_layouts_agree(
        [&](const Tensor& image, DataFormat format) {
          return max_pool2d(image, {3, 2}, {1, 2}, padding, format);
        },
        x, 531);
  }
  // The hand-checked window [[2, 2], [2, 1]] of one channel: its gradient goes to the first 2.
  const Tensor single = from_values({2, 2, 2, 1}, {1, 1, 2, 2});
  GradientTape tape;
  tape.watch(single);
  const Tensor y = max_pool2d(single, {2, 2}, {2, 2}, Padding::Valid, DataFormat::NCHW);
  require_close(tape.gradient(y, single), {1, 1, 2, 2}, {1, 0, 0, 0});
}

TEST_CASE("NCHW pooling: first and second derivatives match central differences",
          "[pooling][nchw][gradient]") {
  // Random values are distinct, so no window's maximum is a tie that a step could flip.
  const Tensor x = random_tensor({2, 3, 5, 4}, 540);
  verify_gradients(
      [](const std::vector<Tensor>& a) {
        return max_pool2d(a[0], {2, 2}, {2, 1}, Padding::Same, DataFormat::NCHW);
      },
      {x});
  verify_gradients(
      [](const std::vector<Tensor>& a) {
        return avg_pool2d(a[0], {3, 2}, {1, 2}, Padding::Valid, DataFormat::NCHW);
      },
      {x});
  verify_gradients(
      [](const std::vector<Tensor>& a) {
        const Tensor m =
            max_pool2d(multiply(a[0], a[0]), {2, 2}, {2, 2}, Padding::Same, DataFormat::NCHW);
        const Tensor v =
            avg_pool2d(tapegrad::sin(a[0]), {2, 2}, {2, 2}, Padding::Same, DataFormat::NCHW);
        return reduce_sum(multiply(multiply(m, m), v));
      },
      {x});
}

TEST_CASE("NCHW pooling misuse: errors name the op, the shape as passed and the layout",
          "[pooling][nchw][misuse]") {
  const int before = misuse_cases_run();
  const Tensor x = random_tensor({1, 2, 5, 6}, 550);  // NCHW: 2 channels, 5 x 6
  using PoolFn = Tensor (*)(const Tensor&, std::vector<int>, std::vector<int>, Padding, DataFormat);
  const std::vector<std::pair<std::string, PoolFn>> ops = {{"max_pool2d", max_pool2d},
                                                           {"avg_pool2d", avg_pool2d}};
  for (const auto& [name, pool] : ops) {
    const PoolFn p = pool;
    expect_misuse<InvalidArgument>(
        name + " NCHW: rank 3",
        [&] {
          p(random_tensor({2, 5, 6}, 551), {2, 2}, {2, 2}, Padding::Valid, DataFormat::NCHW);
        },
        {name, "x has shape [2, 5, 6]", "data_format NCHW", "x must have rank 4 (NCHW)"});
    expect_misuse<InvalidArgument>(
        name + " NCHW: VALID window wider than x",
        [&] {
          p(x, {2, 7}, {1, 1}, Padding::Valid, DataFormat::NCHW);
        },
        {name, "x has shape [1, 2, 5, 6]", "VALID", "width 6", "window's 7"});
    expect_misuse<InvalidArgument>(name + " NCHW: ksize in NHWC's 4-value order",
                                   [&] {
                                     p(x, {1, 2, 2, 1}, {1, 1}, Padding::Valid, DataFormat::NCHW);
                                   },
                                   {name, "ksize [1, 2, 2, 1]", "[1, 1, h, w] for NCHW"});
    expect_misuse<InvalidArgument>(
        name + " NCHW: integer x",
        [&] {
          p(cast(x, DType::Int64), {2, 2}, {2, 2}, Padding::Valid, DataFormat::NCHW);
        },
        {name, "x has shape [1, 2, 5, 6] and dtype int64", "only float32 and float64"});
    expect_misuse<InvalidArgument>(
        name + ": a DataFormat that is neither enumerator",
        [&] {
          p(x, {2, 2}, {2, 2}, Padding::Valid, static_cast<DataFormat>(-1));
        },
        {name, "x has shape [1, 2, 5, 6]", "data_format", "NHWC or DataFormat::NCHW",
         "got the value -1"});
    expect_misuse<InvalidArgument>(
        name + ": a Padding that is neither enumerator",
        [&] {
          p(x, {2, 2}, {2, 2}, static_cast<Padding>(2), DataFormat::NCHW);
        },
        {name, "padding must be Padding::Valid or Padding::Same", "got the value 2"});
    expect_defined(name + " NCHW: TF's 4-value ksize and strides", [&] {
      require_identical(p(x, {1, 1, 2, 3}, {1, 1, 2, 2}, Padding::Same, DataFormat::NCHW),
                        p(x, {2, 3}, {2, 2}, Padding::Same, DataFormat::NCHW));
    });
  }
  const int run = misuse_cases_run() - before;
  std::cout << "NCHW pooling misuse cases: " << run << " run\n";
  REQUIRE(run == 14);
}
