// Convolutions: conv2d against an explicit reference loop (strides, paddings, dilations, odd
// sizes, float32 and float64), hand-computed values, conv2d_transpose as conv2d's gradient
// with respect to x (and the filter backprop as the one with respect to filters), the adjoint
// identity, conv1d against conv2d, first- and second-order numerical checks of every op, and
// bad input; and DataFormat::NCHW (NCW) against the NHWC op on the transposed image, bit for
// bit, through the tape, forward mode and vectorized_map.
#include "support.hpp"

#include <functional>

#include "identical_support.hpp"
#include "image_layout_support.hpp"
#include "misuse_support.hpp"
#include "ops/nn/conv_ops.hpp"
#include "runtime/tensor_impl.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr DType kAllFloat[] = {DType::Float32, DType::Float64};

struct Case {
  Shape x;  // NHWC
  Shape f;  // HWIO
  std::vector<int> strides;
  Padding padding;
  std::vector<int> dilations;
};

const char* name_of(Padding p) { return p == Padding::Same ? "SAME" : "VALID"; }

// Output size and leading padding of one axis, written out from TF's documented rule.
std::pair<std::size_t, std::size_t> axis_out(std::size_t in, std::size_t k, std::size_t s,
                                             std::size_t d, Padding padding) {
  const std::size_t eff = (k - 1) * d + 1;
  if (padding == Padding::Valid) return {(in - eff) / s + 1, 0};
  const std::size_t out = (in + s - 1) / s;
  const long total = static_cast<long>((out - 1) * s + eff) - static_cast<long>(in);
  return {out, total > 0 ? static_cast<std::size_t>(total / 2) : 0};
}

// The seven-deep loop conv2d must agree with, over doubles.
Tensor reference_conv2d(const Tensor& x, const Tensor& f, const Case& c) {
  const auto xv = values(x), fv = values(f);
  const std::size_t n = c.x[0], h = c.x[1], w = c.x[2], ci = c.x[3];
  const std::size_t kh = c.f[0], kw = c.f[1], co = c.f[3];
  const auto sh = static_cast<std::size_t>(c.strides[0]),
             sw = static_cast<std::size_t>(c.strides[1]);
  const auto dh = static_cast<std::size_t>(c.dilations[0]),
             dw = static_cast<std::size_t>(c.dilations[1]);
  const auto [oh, pt] = axis_out(h, kh, sh, dh, c.padding);
  const auto [ow, pl] = axis_out(w, kw, sw, dw, c.padding);
  std::vector<double> out(n * oh * ow * co, 0.0);
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j)
        for (std::size_t o = 0; o < co; ++o) {
          double sum = 0;
          for (std::size_t p = 0; p < kh; ++p)
            for (std::size_t q = 0; q < kw; ++q)
              for (std::size_t ch = 0; ch < ci; ++ch) {
                const long r = static_cast<long>(i * sh + p * dh) - static_cast<long>(pt);
                const long s = static_cast<long>(j * sw + q * dw) - static_cast<long>(pl);
                if (r < 0 || s < 0 || r >= static_cast<long>(h) || s >= static_cast<long>(w))
                  continue;
                sum +=
                    xv[((b * h + static_cast<std::size_t>(r)) * w + static_cast<std::size_t>(s)) *
                           ci +
                       ch] *
                    fv[((p * kw + q) * ci + ch) * co + o];
              }
          out[((b * oh + i) * ow + j) * co + o] = sum;
        }
  return from_values(out, {n, oh, ow, co});
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {{2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, Padding::Valid, {1, 1}},
      {{2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, Padding::Same, {1, 1}},
      {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 2}, Padding::Valid, {1, 1}},
      {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 2}, Padding::Same, {1, 1}},
      {{3, 6, 7, 1}, {2, 4, 1, 2}, {2, 1}, Padding::Same, {1, 1}},
      {{1, 9, 8, 2}, {3, 3, 2, 2}, {1, 1}, Padding::Valid, {2, 2}},
      {{1, 9, 8, 2}, {3, 2, 2, 2}, {1, 1}, Padding::Same, {2, 1}},
      {{2, 8, 7, 2}, {2, 3, 2, 3}, {2, 3}, Padding::Same, {2, 2}},
      {{2, 4, 3, 5}, {1, 1, 5, 3}, {1, 1}, Padding::Valid, {1, 1}},  // pointwise: no im2col
      {{1, 2, 3, 2}, {4, 5, 2, 1}, {1, 1}, Padding::Same, {1, 1}},   // filter larger than x
  };
  return all;
}

std::string describe_case(const Case& c) {
  return "x " + shape_to_string(c.x) + ", f " + shape_to_string(c.f) + ", strides [" +
         std::to_string(c.strides[0]) + ", " + std::to_string(c.strides[1]) + "], " +
         name_of(c.padding) + ", dilations [" + std::to_string(c.dilations[0]) + ", " +
         std::to_string(c.dilations[1]) + "]";
}

Tensor sum_of_product(const Tensor& a, const Tensor& b) { return reduce_sum(multiply(a, b)); }

}  // namespace

// ---- forward ----------------------------------------------------------------------------

TEST_CASE("conv2d on a 3x3 image with a 2x2 ones filter: VALID, SAME (padding at the end)",
          "[conv]") {
  for (DType dtype : kAllFloat) {
    const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1}, dtype);
    const Tensor f = ones({2, 2, 1, 1}, dtype);
    require_close(conv2d(x, f, {1, 1}, Padding::Valid), {1, 2, 2, 1}, {12, 16, 24, 28});
    // SAME pads one row and column, all of it after the image (TF puts the odd one last).
    require_close(conv2d(x, f, {1, 1}, Padding::Same), {1, 3, 3, 1},
                  {12, 16, 9, 24, 28, 15, 15, 17, 9});
    // Stride 2 with SAME: ceil(3 / 2) = 2 outputs per axis.
    require_close(conv2d(x, f, {2, 2}, Padding::Same), {1, 2, 2, 1}, {12, 9, 15, 9});
    // Dilation 2: the taps of a 2x2 filter are the corners of the 3x3 image.
    require_close(conv2d(x, f, {1, 1}, Padding::Valid, {2, 2}), {1, 1, 1, 1}, {20});
  }
}

TEST_CASE("conv2d equals the explicit reference loop (strides, paddings, dilations, dtypes)",
          "[conv]") {
  unsigned seed = 1;
  for (const Case& c : cases()) {
    for (DType dtype : kAllFloat) {
      INFO(describe_case(c) << ", " << dtype_name(dtype));
      const Tensor x = random_tensor(c.x, seed++);
      const Tensor f = random_tensor(c.f, seed++);
      const Tensor expected = reference_conv2d(x, f, c);
      const Tensor got = conv2d(cast(x, dtype), cast(f, dtype), c.strides, c.padding, c.dilations);
      require_close(got, expected.shape(), values(expected),
                    dtype == DType::Float32 ? 1e-5 : 1e-12);
    }
  }
}

TEST_CASE("conv2d and its transposes on inputs that take several im2col blocks", "[conv]") {
  // The im2col matrix is built in blocks of ~256 KB of rows (kernels/im2col.cpp): these
  // float64 cases take 4 to 9 blocks, starting mid-image, with padding, strides, dilations.
  const std::vector<Case> big = {
      {{2, 40, 40, 8}, {3, 3, 8, 5}, {1, 1}, Padding::Same, {1, 1}},
      {{3, 31, 29, 6}, {3, 2, 6, 4}, {2, 1}, Padding::Same, {2, 3}},
      {{2, 37, 33, 7}, {5, 3, 7, 3}, {1, 2}, Padding::Valid, {1, 2}},
  };
  unsigned seed = 900;
  for (const Case& c : big) {
    INFO(describe_case(c));
    const Tensor x = random_tensor(c.x, seed++);
    const Tensor f = random_tensor(c.f, seed++);
    const Tensor y = conv2d(x, f, c.strides, c.padding, c.dilations);
    const Tensor expected = reference_conv2d(x, f, c);
    require_close(y, expected.shape(), values(expected));
    const Tensor g = random_tensor(y.shape(), seed++);
    const double lhs = sum_of_product(y, g).item<double>();
    const Tensor dx = conv2d_transpose(g, f, c.x, c.strides, c.padding, c.dilations);
    const Tensor dw = detail::conv2d_backprop_filter(x, c.f, g, c.strides, c.padding, c.dilations);
    CHECK(sum_of_product(x, dx).item<double>() == Approx(lhs).epsilon(1e-12));
    CHECK(sum_of_product(f, dw).item<double>() == Approx(lhs).epsilon(1e-12));
    // And element by element: each is linear, so one nonzero of g picks out a column.
    for (std::size_t trial = 0; trial < 3; ++trial) {
      std::vector<double> unit(y.size(), 0.0);
      const std::size_t hot = (trial * 7919 + 13) % unit.size();
      unit[hot] = 1.0;
      const Tensor e = from_values(unit, y.shape());
      const Tensor dx_e = conv2d_transpose(e, f, c.x, c.strides, c.padding, c.dilations);
      // <x, convT(e)> is the output element `hot` of conv2d(x, f).
      CHECK(sum_of_product(x, dx_e).item<double>() == Approx(values(y)[hot]).epsilon(1e-12));
      const Tensor dw_e =
          detail::conv2d_backprop_filter(x, c.f, e, c.strides, c.padding, c.dilations);
      CHECK(sum_of_product(f, dw_e).item<double>() == Approx(values(y)[hot]).epsilon(1e-12));
    }
  }
}

TEST_CASE("conv2d accepts TF's 1- and 4-element strides and dilations", "[conv]") {
  const Tensor x = random_tensor({1, 6, 6, 2}, 3);
  const Tensor f = random_tensor({3, 3, 2, 2}, 4);
  const Tensor two = conv2d(x, f, {2, 2}, Padding::Same, {1, 1});
  require_close(conv2d(x, f, {2}, Padding::Same, {1}), two.shape(), values(two));
  require_close(conv2d(x, f, {1, 2, 2, 1}, Padding::Same, {1, 1, 1, 1}), two.shape(), values(two));
}

TEST_CASE("conv2d with an empty batch or no output channels gives empty results", "[conv]") {
  const Tensor f = random_tensor({3, 3, 2, 4}, 5);
  const Tensor y = conv2d(zeros({0, 5, 5, 2}), f, {1, 1}, Padding::Same);
  CHECK(y.shape() == Shape{0, 5, 5, 4});
  GradientTape tape;
  const Tensor x = random_tensor({1, 4, 4, 2}, 6);
  const Tensor empty_f = zeros({3, 3, 2, 0});
  tape.watch(x);
  const Tensor z = conv2d(x, empty_f, {1, 1}, Padding::Valid);
  CHECK(z.shape() == Shape{1, 2, 2, 0});
  require_close(tape.gradient(reduce_sum(z), x, UnconnectedGradients::Zero), x.shape(),
                std::vector<double>(32, 0.0));
}

// ---- the transposes as gradients --------------------------------------------------------

TEST_CASE(
    "conv2d_transpose is conv2d's gradient wrt x, the filter backprop is the one wrt "
    "filters",
    "[conv][gradient]") {
  unsigned seed = 100;
  for (const Case& c : cases()) {
    INFO(describe_case(c));
    Tensor x = random_tensor(c.x, seed++);
    Tensor f = random_tensor(c.f, seed++);
    const Tensor y = conv2d(x, f, c.strides, c.padding, c.dilations);
    const Tensor g = random_tensor(y.shape(), seed++);
    GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    const Tensor loss = sum_of_product(conv2d(x, f, c.strides, c.padding, c.dilations), g);
    const auto grads = tape.gradient(loss, std::vector<Tensor>{x, f});
    const Tensor by_transpose = conv2d_transpose(g, f, c.x, c.strides, c.padding, c.dilations);
    require_close(grads[0], c.x, values(by_transpose));
    const Tensor by_filter_backprop =
        detail::conv2d_backprop_filter(x, c.f, g, c.strides, c.padding, c.dilations);
    require_close(grads[1], c.f, values(by_filter_backprop));
    // The adjoint identity <conv2d(x, f), g> = <x, conv2d_transpose(g, f)> = <f, dW(x, g)>.
    const double lhs = loss.item<double>();
    CHECK(sum_of_product(x, by_transpose).item<double>() == Approx(lhs).epsilon(1e-12));
    CHECK(sum_of_product(f, by_filter_backprop).item<double>() == Approx(lhs).epsilon(1e-12));
  }
}

TEST_CASE("conv2d_transpose of a single 1 places the filter (upsampling by the stride)", "[conv]") {
  // x is 1 at output position (0, 1) of a stride-2 VALID conv of a 5x5 image with a 3x3
  // filter: the transpose writes the filter at rows 0..2, columns 2..4.
  std::vector<double> xv(4, 0.0);
  xv[1] = 1.0;
  const Tensor x = from_values(xv, {1, 2, 2, 1});
  const Tensor f = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3, 1, 1});
  const Tensor y = conv2d_transpose(x, f, {1, 5, 5, 1}, {2, 2}, Padding::Valid);
  require_close(y, {1, 5, 5, 1},
                {0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
}

// ---- conv1d -----------------------------------------------------------------------------

TEST_CASE("conv1d equals conv2d on a unit height, and its gradients too", "[conv]") {
  for (Padding padding : {Padding::Valid, Padding::Same}) {
    for (int stride : {1, 2}) {
      for (int dilation : {1, 2}) {
        INFO(name_of(padding) << ", stride " << stride << ", dilation " << dilation);
        Tensor x = random_tensor({2, 9, 3}, 7);
        Tensor f = random_tensor({3, 3, 2}, 8);
        GradientTape tape;
        tape.watch(x);
        tape.watch(f);
        const Tensor y = conv1d(x, f, stride, padding, dilation);
        const Tensor y2 = conv2d(reshape(x, {2, 1, 9, 3}), reshape(f, {1, 3, 3, 2}), {1, stride},
                                 padding, {1, dilation});
        const auto& s = y2.shape();
        REQUIRE(y.shape() == Shape{s[0], s[2], s[3]});
        require_close(y, y.shape(), values(y2));
        const Tensor g = random_tensor(y.shape(), 9);
        const auto grads = tape.gradient(sum_of_product(y, g), std::vector<Tensor>{x, f});
        const Tensor gx = conv2d_transpose(
            reshape(g, {static_cast<std::int64_t>(s[0]), 1, static_cast<std::int64_t>(s[2]),
                        static_cast<std::int64_t>(s[3])}),
            reshape(f, {1, 3, 3, 2}), {2, 1, 9, 3}, {1, stride}, padding, {1, dilation});
        require_close(grads[0], x.shape(), values(gx));
        CHECK(grads[1].shape() == f.shape());
      }
    }
  }
}

// ---- numerical gradients, first and second order ----------------------------------------

namespace {

// Small cases (the checks build whole Jacobians): odd sizes, both paddings, a stride and a
// dilation.
const std::vector<Case>& small_cases() {
  static const std::vector<Case> all = {
      {{1, 5, 4, 2}, {2, 3, 2, 2}, {2, 2}, Padding::Same, {1, 1}},
      {{2, 5, 5, 1}, {2, 2, 1, 2}, {1, 1}, Padding::Valid, {2, 2}},
      {{1, 4, 5, 2}, {3, 2, 2, 1}, {1, 2}, Padding::Same, {2, 1}},
  };
  return all;
}

}  // namespace

TEST_CASE("conv2d: first and second derivatives match central differences", "[conv][gradient]") {
  unsigned seed = 200;
  for (const Case& c : small_cases()) {
    INFO(describe_case(c));
    const Fn f = [c](const std::vector<Tensor>& a) {
      return conv2d(a[0], a[1], c.strides, c.padding, c.dilations);
    };
    verify_gradients(f, {random_tensor(c.x, seed), random_tensor(c.f, seed + 1)});
    seed += 2;
  }
}

TEST_CASE("conv2d_transpose: first and second derivatives match central differences",
          "[conv][gradient]") {
  unsigned seed = 300;
  for (const Case& c : small_cases()) {
    INFO(describe_case(c));
    const Shape y_shape = conv2d(zeros(c.x), zeros(c.f), c.strides, c.padding, c.dilations).shape();
    const Fn f = [c](const std::vector<Tensor>& a) {
      return conv2d_transpose(a[0], a[1], c.x, c.strides, c.padding, c.dilations);
    };
    verify_gradients(f, {random_tensor(y_shape, seed), random_tensor(c.f, seed + 1)});
    seed += 2;
  }
}

TEST_CASE("Conv2DBackpropFilter: first and second derivatives match central differences",
          "[conv][gradient]") {
  unsigned seed = 400;
  for (const Case& c : small_cases()) {
    INFO(describe_case(c));
    const Shape y_shape = conv2d(zeros(c.x), zeros(c.f), c.strides, c.padding, c.dilations).shape();
    const Fn f = [c](const std::vector<Tensor>& a) {
      return detail::conv2d_backprop_filter(a[0], c.f, a[1], c.strides, c.padding, c.dilations);
    };
    verify_gradients(f, {random_tensor(c.x, seed), random_tensor(y_shape, seed + 1)});
    seed += 2;
  }
}

TEST_CASE("conv1d: first and second derivatives match central differences", "[conv][gradient]") {
  const Fn f = [](const std::vector<Tensor>& a) { return conv1d(a[0], a[1], 2, Padding::Same, 1); };
  verify_gradients(f, {random_tensor({2, 7, 2}, 500), random_tensor({3, 2, 2}, 501)});
  const Fn g = [](const std::vector<Tensor>& a) {
    return conv1d(a[0], a[1], 1, Padding::Valid, 2);
  };
  verify_gradients(g, {random_tensor({1, 8, 1}, 502), random_tensor({2, 1, 3}, 503)});
}

TEST_CASE(
    "conv2d of a nonlinear function: the Hessian-vector product through conv2d's "
    "gradient matches central differences",
    "[conv][gradient]") {
  // sum(tanh(conv2d(x, f))^2) is not bilinear, so the second order check exercises the
  // gradients of the transposed ops with non-constant incoming gradients.
  const Fn f = [](const std::vector<Tensor>& a) {
    const Tensor y = tapegrad::tanh(conv2d(a[0], a[1], {2, 1}, Padding::Same, {1, 1}));
    return reduce_sum(multiply(y, y));
  };
  verify_gradients(f, {random_tensor({1, 5, 4, 2}, 600), random_tensor({3, 2, 2, 2}, 601)});
}

// ---- bad input --------------------------------------------------------------------------

TEST_CASE("convolution misuse: each case throws InvalidArgument naming the op, shapes and value",
          "[conv][misuse]") {
  const int before = misuse_cases_run();
  const Tensor x = random_tensor({1, 5, 5, 2}, 1);
  const Tensor f = random_tensor({3, 3, 2, 4}, 2);
  const auto conv_case = [](const std::string& name, const std::function<void()>& body,
                            const std::vector<std::string>& mentions) {
    expect_misuse<InvalidArgument>(name, body, mentions);
  };
  conv_case("conv2d: x of rank 3",
            [&] {
              conv2d(random_tensor({5, 5, 2}, 3), f, {1, 1}, Padding::Valid);
            },
            {"conv2d", "x has shape [5, 5, 2]", "[3, 3, 2, 4]", "x must have rank 4"});
  conv_case("conv2d: filters of rank 2",
            [&] {
              conv2d(x, random_tensor({3, 3}, 3), {1, 1}, Padding::Valid);
            },
            {"conv2d", "[1, 5, 5, 2]", "filters has shape [3, 3]", "filters must have rank 4"});
  conv_case("conv2d: channel mismatch",
            [&] {
              conv2d(random_tensor({1, 5, 5, 3}, 3), f, {1, 1}, Padding::Valid);
            },
            {"conv2d", "[1, 5, 5, 3]", "[3, 3, 2, 4]", "x has 3 channels", "expects 2"});
  conv_case("conv2d: dtypes differ",
            [&] {
              conv2d(cast(x, DType::Float32), f, {1, 1}, Padding::Valid);
            },
            {"conv2d", "float32", "float64", "dtypes differ"});
  conv_case("conv2d: integer operands",
            [&] {
              conv2d(cast(x, DType::Int32), cast(f, DType::Int32), {1, 1}, Padding::Valid);
            },
            {"conv2d", "int32", "only float32 and float64"});
  conv_case("conv2d: stride 0",
            [&] {
              conv2d(x, f, {0, 1}, Padding::Same);
            },
            {"conv2d", "[1, 5, 5, 2]", "strides [0, 1]", "must be >= 1 (got 0)"});
  conv_case("conv2d: negative stride",
            [&] {
              conv2d(x, f, {1, -2}, Padding::Same);
            },
            {"conv2d", "strides [1, -2]", "(got -2)"});
  conv_case("conv2d: three strides",
            [&] {
              conv2d(x, f, {1, 1, 1}, Padding::Same);
            },
            {"conv2d", "strides [1, 1, 1]", "1, 2 or 4 values"});
  conv_case("conv2d: a batch stride",
            [&] {
              conv2d(x, f, {2, 1, 1, 1}, Padding::Same);
            },
            {"conv2d", "strides [2, 1, 1, 1]", "batch and channel"});
  conv_case("conv2d: dilation 0",
            [&] {
              conv2d(x, f, {1, 1}, Padding::Same, {1, 0});
            },
            {"conv2d", "dilations [1, 0]", "(got 0)"});
  conv_case("conv2d: VALID window larger than x",
            [&] {
              conv2d(random_tensor({1, 2, 6, 2}, 3), f, {1, 1}, Padding::Valid);
            },
            {"conv2d", "[1, 2, 6, 2]", "[3, 3, 2, 4]", "VALID", "height 2", "window's 3"});
  conv_case("conv2d: VALID dilated window larger than x",
            [&] {
              conv2d(x, f, {1, 1}, Padding::Valid, {1, 3});
            },
            {"conv2d", "VALID", "width 5", "window's 7", "dilation 3"});
  conv_case("conv2d: zero-size filter window",
            [&] {
              conv2d(x, zeros({0, 3, 2, 4}), {1, 1}, Padding::Same);
            },
            {"conv2d", "[0, 3, 2, 4]", "height and width must be >= 1", "0 x 3"});
  conv_case("conv2d: undefined x",
            [&] {
              conv2d(Tensor(), f, {1, 1}, Padding::Same);
            },
            {"conv2d", "undefined"});
  const Tensor y = random_tensor({1, 3, 3, 4}, 4);
  conv_case("conv2d_transpose: output_shape does not give x's shape",
            [&] {
              conv2d_transpose(y, f, {1, 6, 6, 2}, {1, 1}, Padding::Valid);
            },
            {"conv2d_transpose", "x has shape [1, 3, 3, 4]", "output_shape [1, 6, 6, 2]",
             "[1, 4, 4, 4], not x's"});
  conv_case("conv2d_transpose: output_shape of rank 3",
            [&] {
              conv2d_transpose(y, f, {5, 5, 2}, {1, 1}, Padding::Valid);
            },
            {"conv2d_transpose", "output_shape [5, 5, 2]", "4 dimensions"});
  conv_case(
      "conv2d_transpose: x channels differ from the filter's output channels",
      [&] {
        conv2d_transpose(random_tensor({1, 3, 3, 3}, 5), f, {1, 5, 5, 2}, {1, 1}, Padding::Valid);
      },
      {"conv2d_transpose", "[1, 3, 3, 3]", "[3, 3, 2, 4]", "x has 3 channels",
       "4 output channels"});
  conv_case("conv2d_transpose: output_shape channels differ from the filter's input channels",
            [&] {
              conv2d_transpose(y, f, {1, 5, 5, 3}, {1, 1}, Padding::Valid);
            },
            {"conv2d_transpose", "output_shape [1, 5, 5, 3]", "output_shape has 3 channels",
             "expects 2"});
  conv_case("conv2d_transpose: stride 0",
            [&] {
              conv2d_transpose(y, f, {1, 5, 5, 2}, {0, 0}, Padding::Valid);
            },
            {"conv2d_transpose", "strides [0, 0]"});
  conv_case("Conv2DBackpropFilter: g of the wrong shape",
            [&] {
              detail::conv2d_backprop_filter(x, f.shape(), y, {1, 1}, Padding::Same);
            },
            {"conv2d_backprop_filter", "g has shape [1, 3, 3, 4]", "filter_shape [3, 3, 2, 4]",
             "[1, 5, 5, 4]"});
  const Tensor x1 = random_tensor({2, 6, 3}, 6);
  const Tensor f1 = random_tensor({3, 3, 2}, 7);
  conv_case("conv1d: x of rank 4", [&] { conv1d(x, f1, 1, Padding::Valid); },
            {"conv1d", "[1, 5, 5, 2]", "x must have rank 3"});
  conv_case("conv1d: channel mismatch",
            [&] {
              conv1d(random_tensor({2, 6, 2}, 8), f1, 1, Padding::Valid);
            },
            {"conv1d", "[2, 6, 2]", "[3, 3, 2]", "x has 2 channels", "expects 3"});
  conv_case("conv1d: stride 0", [&] { conv1d(x1, f1, 0, Padding::Valid); },
            {"conv1d", "[2, 6, 3]", "stride [1, 0]", "(got 0)"});
  conv_case("conv1d: dilation -1", [&] { conv1d(x1, f1, 1, Padding::Valid, -1); },
            {"conv1d", "dilation [1, -1]", "(got -1)"});
  conv_case("conv1d: VALID window larger than x", [&] { conv1d(x1, f1, 1, Padding::Valid, 3); },
            {"conv1d", "[2, 6, 3]", "VALID", "width 6", "window's 7"});
  expect_defined("conv2d: an empty batch", [&] {
    CHECK(conv2d(zeros({0, 5, 5, 2}), f, {2, 2}, Padding::Same).shape() == Shape{0, 3, 3, 4});
  });
  expect_defined("conv2d: SAME on an empty image", [&] {
    CHECK(conv2d(zeros({1, 0, 5, 2}), f, {1, 1}, Padding::Same).shape() == Shape{1, 0, 5, 4});
  });
  const int run = misuse_cases_run() - before;
  std::cout << "convolution misuse cases: " << run << " run\n";
  REQUIRE(run == 27);
}

// ---- DataFormat::NCHW -------------------------------------------------------------------

namespace {

Shape channels_first_shape(const Shape& s) { return {s[0], s[3], s[1], s[2]}; }

using ImageOp = std::function<Tensor(const Tensor& image, const Tensor& filters)>;

// `first` on a channels-first image against `last` on the same image channels last: the
// result, and the tape's gradients for both operands under a random output gradient, equal
// bit for bit (up to the layout's transposes).
void require_layouts_agree(const ImageOp& first, const ImageOp& last, const Tensor& image_last,
                           const Tensor& filters, unsigned seed) {
  const Tensor image_first = to_channels_first(image_last);
  GradientTape tape_first;
  tape_first.watch(std::vector<Tensor>{image_first, filters});
  const Tensor y_first = first(image_first, filters);
  const Tensor g_first = cast(random_tensor(y_first.shape(), seed), y_first.dtype());
  const auto grads_first =
      tape_first.gradient(std::vector<Tensor>{y_first}, std::vector<Tensor>{image_first, filters},
                          std::vector<Tensor>{g_first});

  GradientTape tape_last;
  tape_last.watch(std::vector<Tensor>{image_last, filters});
  const Tensor y_last = last(image_last, filters);
  const auto grads_last =
      tape_last.gradient(std::vector<Tensor>{y_last}, std::vector<Tensor>{image_last, filters},
                         std::vector<Tensor>{to_channels_last(g_first)});

  require_identical(y_first, to_channels_first(y_last));
  require_identical(grads_first[0], to_channels_first(grads_last[0]));
  require_identical(grads_first[1], grads_last[1]);
}

}  // namespace

TEST_CASE(
    "conv2d NCHW equals the NHWC conv2d on the transposed image, values and gradients "
    "bit for bit",
    "[conv][nchw]") {
  unsigned seed = 700;
  for (const Case& c : cases()) {
    INFO(describe_case(c));
    const ImageOp first = [&](const Tensor& x, const Tensor& f) {
      return conv2d(x, f, c.strides, c.padding, c.dilations, DataFormat::NCHW);
    };
    const ImageOp last = [&](const Tensor& x, const Tensor& f) {
      return conv2d(x, f, c.strides, c.padding, c.dilations);
    };
    require_layouts_agree(first, last, random_tensor(c.x, seed), random_tensor(c.f, seed + 1),
                          seed + 2);
    seed += 3;
  }
}

TEST_CASE(
    "conv2d_transpose NCHW (output_shape in NCHW) equals the NHWC op on the transposed "
    "input, values and gradients bit for bit",
    "[conv][nchw]") {
  unsigned seed = 730;
  for (const Case& c : cases()) {
    INFO(describe_case(c));
    const Shape y_shape = conv2d(zeros(c.x), zeros(c.f), c.strides, c.padding, c.dilations).shape();
    const ImageOp first = [&](const Tensor& y, const Tensor& f) {
      return conv2d_transpose(y, f, channels_first_shape(c.x), c.strides, c.padding, c.dilations,
                              DataFormat::NCHW);
    };
    const ImageOp last = [&](const Tensor& y, const Tensor& f) {
      return conv2d_transpose(y, f, c.x, c.strides, c.padding, c.dilations);
    };
    require_layouts_agree(first, last, random_tensor(y_shape, seed), random_tensor(c.f, seed + 1),
                          seed + 2);
    seed += 3;
  }
}

TEST_CASE(
    "NCHW and NHWC agree bit for bit where the direct kernels run (16 and 24 channels), "
    "float32 and float64, and an NCHW result is stored channels first",
    "[conv][nchw]") {
  unsigned seed = 740;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int stride : {1, 2}) {
      INFO(dtype_name(dtype) << ", stride " << stride);
      const Tensor x = cast(random_tensor({2, 9, 8, 16}, seed), dtype);
      const Tensor f = cast(random_tensor({3, 3, 16, 24}, seed + 1), dtype);
      const ImageOp first = [&](const Tensor& image, const Tensor& filters) {
        return conv2d(image, filters, {stride, stride}, Padding::Same, DataFormat::NCHW);
      };
      const ImageOp last = [&](const Tensor& image, const Tensor& filters) {
        return conv2d(image, filters, {stride, stride}, Padding::Same);
      };
      require_layouts_agree(first, last, x, f, seed + 2);
      const Shape y_shape = conv2d(x, f, {stride, stride}, Padding::Same).shape();
      const ImageOp transposed_first = [&](const Tensor& y, const Tensor& filters) {
        return conv2d_transpose(y, filters, {2, 16, 9, 8}, {stride, stride}, Padding::Same,
                                DataFormat::NCHW);
      };
      const ImageOp transposed_last = [&](const Tensor& y, const Tensor& filters) {
        return conv2d_transpose(y, filters, x.shape(), {stride, stride}, Padding::Same);
      };
      require_layouts_agree(transposed_first, transposed_last,
                            cast(random_tensor(y_shape, seed + 3), dtype), f, seed + 4);
      seed += 5;
    }
  }
  // The NCHW result is the op's own storage, not a view that each later op copies.
  const Tensor y =
      conv2d(random_tensor({2, 16, 9, 8}, 749, -1, 1), random_tensor({3, 3, 16, 24}, 750), {1, 1},
             Padding::Same, DataFormat::NCHW);
  REQUIRE(y.shape() == Shape{2, 24, 9, 8});
  REQUIRE(detail::impl_of(y).contiguous());
}

TEST_CASE(
    "conv1d NCW equals the NWC conv1d on the transposed signal, values and gradients "
    "bit for bit",
    "[conv][nchw]") {
  unsigned seed = 760;
  for (Padding padding : {Padding::Valid, Padding::Same}) {
    for (int stride : {1, 2}) {
      for (int dilation : {1, 2}) {
        INFO(name_of(padding) << ", stride " << stride << ", dilation " << dilation);
        const ImageOp first = [&](const Tensor& x, const Tensor& f) {
          return conv1d(x, f, stride, padding, dilation, DataFormat::NCHW);
        };
        const ImageOp last = [&](const Tensor& x, const Tensor& f) {
          return conv1d(x, f, stride, padding, dilation);
        };
        require_layouts_agree(first, last, random_tensor({3, 11, 2}, seed),
                              random_tensor({3, 2, 4}, seed + 1), seed + 2);
        seed += 3;
      }
    }
  }
}

TEST_CASE("NCHW reads a 4-value strides or dilations list as TF's [1, 1, h, w]", "[conv][nchw]") {
  const Tensor x = random_tensor({2, 3, 9, 8}, 790);
  const Tensor f = random_tensor({3, 3, 3, 2}, 791);
  const Tensor expected = conv2d(x, f, {2, 1}, Padding::Same, {1, 2}, DataFormat::NCHW);
  require_identical(conv2d(x, f, {1, 1, 2, 1}, Padding::Same, {1, 1, 1, 2}, DataFormat::NCHW),
                    expected);
  const Tensor y = random_tensor(expected.shape(), 792);
  require_identical(
      conv2d_transpose(y, f, x.shape(), {1, 1, 2, 1}, Padding::Same, {1, 1, 1, 2},
                       DataFormat::NCHW),
      conv2d_transpose(y, f, x.shape(), {2, 1}, Padding::Same, {1, 2}, DataFormat::NCHW));
}

TEST_CASE(
    "the convolutions' overloads: with and without dilations, with and without a data "
    "format, all compile unambiguously and agree",
    "[conv][nchw]") {
  // Each call below must resolve to one overload: a change that makes one ambiguous fails to
  // compile here.
  const Tensor x = random_tensor({1, 6, 7, 2}, 793);
  const Tensor f = random_tensor({3, 3, 2, 3}, 794);
  const Tensor x_first = to_channels_first(x);
  require_identical(conv2d(x, f, {1, 1}, Padding::Same),
                    conv2d(x, f, {1, 1}, Padding::Same, {1, 1}, DataFormat::NHWC));
  require_identical(conv2d(x, f, {1, 1}, Padding::Same, {2, 2}),
                    conv2d(x, f, {1, 1}, Padding::Same, {2, 2}, DataFormat::NHWC));
  require_identical(conv2d(x, f, {1, 1}, Padding::Same, {2}),
                    conv2d(x, f, {1, 1}, Padding::Same, {2, 2}));
  require_identical(conv2d(x, f, {1, 1}, Padding::Same, DataFormat::NHWC),
                    conv2d(x, f, {1, 1}, Padding::Same));
  require_identical(conv2d(x_first, f, {1, 1}, Padding::Same, DataFormat::NCHW),
                    conv2d(x_first, f, {1, 1}, Padding::Same, {1, 1}, DataFormat::NCHW));
  require_identical(conv2d(x_first, f, {2, 2}, Padding::Valid, {2, 1}, DataFormat::NCHW),
                    to_channels_first(conv2d(x, f, {2, 2}, Padding::Valid, {2, 1})));

  const Tensor signal = random_tensor({2, 9, 2}, 795);
  const Tensor f1 = random_tensor({3, 2, 3}, 796);
  const Tensor signal_first = to_channels_first(signal);
  require_identical(conv1d(signal, f1, 1, Padding::Same),
                    conv1d(signal, f1, 1, Padding::Same, 1, DataFormat::NHWC));
  require_identical(conv1d(signal, f1, 1, Padding::Same, 2),
                    conv1d(signal, f1, 1, Padding::Same, 2, DataFormat::NHWC));
  require_identical(conv1d(signal_first, f1, 2, Padding::Valid, DataFormat::NCHW),
                    conv1d(signal_first, f1, 2, Padding::Valid, 1, DataFormat::NCHW));

  const Tensor y = conv2d(x, f, {2, 2}, Padding::Same);
  const Tensor y_first = to_channels_first(y);
  require_identical(
      conv2d_transpose(y, f, x.shape(), {2, 2}, Padding::Same),
      conv2d_transpose(y, f, x.shape(), {2, 2}, Padding::Same, {1, 1}, DataFormat::NHWC));
  require_identical(
      conv2d_transpose(y_first, f, x_first.shape(), {2, 2}, Padding::Same, DataFormat::NCHW),
      conv2d_transpose(y_first, f, x_first.shape(), {2, 2}, Padding::Same, {1, 1},
                       DataFormat::NCHW));
}

TEST_CASE("NCHW convolutions: forward mode equals the NHWC tangent transposed, bit for bit",
          "[conv][nchw][forward]") {
  const Tensor x = random_tensor({2, 7, 6, 3}, 797);
  const Tensor f = random_tensor({3, 2, 3, 4}, 798);
  const Tensor dx = random_tensor(x.shape(), 799);
  const Tensor df = random_tensor(f.shape(), 800);
  const auto [y_first, tangent_first] = jvp(
      [](const std::vector<Tensor>& a) {
        return conv2d(a[0], a[1], {2, 1}, Padding::Same, {1, 2}, DataFormat::NCHW);
      },
      {to_channels_first(x), f}, {to_channels_first(dx), df});
  const auto [y_last, tangent_last] = jvp(
      [](const std::vector<Tensor>& a) {
        return conv2d(a[0], a[1], {2, 1}, Padding::Same, {1, 2});
      },
      {x, f}, {dx, df});
  require_identical(y_first, to_channels_first(y_last));
  require_identical(tangent_first, to_channels_first(tangent_last));
}

TEST_CASE("NCHW convolutions: first and second derivatives match central differences",
          "[conv][nchw][gradient]") {
  const Fn conv = [](const std::vector<Tensor>& a) {
    return conv2d(a[0], a[1], {2, 1}, Padding::Same, {1, 2}, DataFormat::NCHW);
  };
  verify_gradients(conv, {random_tensor({1, 2, 5, 4}, 810), random_tensor({2, 3, 2, 2}, 811)});
  const Shape y_shape = conv2d(zeros({1, 2, 5, 4}), zeros({2, 3, 2, 2}), {2, 1}, Padding::Valid,
                               {1, 1}, DataFormat::NCHW)
                            .shape();
  const Fn transposed = [](const std::vector<Tensor>& a) {
    return conv2d_transpose(a[0], a[1], {1, 2, 5, 4}, {2, 1}, Padding::Valid, DataFormat::NCHW);
  };
  verify_gradients(transposed, {random_tensor(y_shape, 812), random_tensor({2, 3, 2, 2}, 813)});
  const Fn conv_1d = [](const std::vector<Tensor>& a) {
    return conv1d(a[0], a[1], 2, Padding::Same, 1, DataFormat::NCHW);
  };
  verify_gradients(conv_1d, {random_tensor({2, 2, 7}, 814), random_tensor({3, 2, 2}, 815)});
}

TEST_CASE(
    "per-example gradients of an NCHW conv2d + max_pool2d model through vectorized_map "
    "equal a loop",
    "[conv][nchw][vectorized_map]") {
  const Tensor conv1 = random_tensor({3, 3, 2, 4}, 820, -0.5, 0.5);
  const Tensor bias1 = random_tensor({4, 1, 1}, 821, -0.1, 0.1);  // NCHW: per channel
  const Tensor conv2 = random_tensor({2, 2, 4, 3}, 822, -0.5, 0.5);
  const std::vector<Tensor> parameters{conv1, bias1, conv2};
  const std::size_t batch = 4;
  const Tensor images = random_tensor({batch, 2, 7, 6}, 823);
  using MapFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  const MapFn per_example = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(parameters);
    Tensor h =
        relu(conv2d(reshape(in[0], {1, 2, 7, 6}), conv1, {1, 1}, Padding::Same, DataFormat::NCHW) +
             bias1);
    h = max_pool2d(h, {2, 2}, {2, 2}, Padding::Same, DataFormat::NCHW);  // [1, 4, 4, 3]
    h = conv2d(h, conv2, {1, 1}, Padding::Valid, DataFormat::NCHW);      // [1, 3, 3, 2]
    const Tensor loss = reduce_sum(multiply(tapegrad::tanh(h), h));
    return tape.gradient(loss, parameters);
  };
  const std::vector<Tensor> vectorized = vectorized_map(per_example, {images}, false);
  REQUIRE(vectorized.size() == parameters.size());
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    std::vector<Tensor> rows;
    for (std::size_t b = 0; b < batch; ++b) {
      const auto i = static_cast<std::int64_t>(b);
      rows.push_back(
          per_example({reshape(slice(images, {i, 0, 0, 0}, {1, 2, 7, 6}), {2, 7, 6})})[k]);
    }
    INFO("parameter " << k);
    const Tensor looped = stack(rows, 0);
    require_close(vectorized[k], looped.shape(), values(looped), 1e-12);
  }
}

TEST_CASE("NCHW convolution misuse: errors name the op, the shapes as passed and the layout",
          "[conv][nchw][misuse]") {
  const int before = misuse_cases_run();
  const Tensor f = random_tensor({3, 3, 2, 4}, 830);
  const DataFormat bad = static_cast<DataFormat>(7);
  const auto conv_case = [](const std::string& name, const std::function<void()>& body,
                            const std::vector<std::string>& mentions) {
    expect_misuse<InvalidArgument>(name, body, mentions);
  };
  conv_case("conv2d NCHW: x of rank 3",
            [&] {
              conv2d(random_tensor({2, 5, 5}, 831), f, {1, 1}, Padding::Valid, DataFormat::NCHW);
            },
            {"conv2d", "x has shape [2, 5, 5]", "data_format NCHW", "x must have rank 4 (NCHW)"});
  conv_case(
      "conv2d NCHW: channel mismatch",
      [&] {
        conv2d(random_tensor({1, 3, 5, 6}, 832), f, {1, 1}, Padding::Valid, DataFormat::NCHW);
      },
      {"conv2d", "x has shape [1, 3, 5, 6]", "data_format NCHW", "x has 3 channels", "expects 2"});
  conv_case("conv2d NCHW: VALID window taller than x",
            [&] {
              conv2d(random_tensor({1, 2, 2, 6}, 833), f, {1, 1}, Padding::Valid, DataFormat::NCHW);
            },
            {"conv2d", "x has shape [1, 2, 2, 6]", "VALID", "height 2", "window's 3"});
  conv_case(
      "conv2d NCHW: strides in NHWC's 4-value order",
      [&] {
        conv2d(random_tensor({1, 2, 5, 5}, 834), f, {1, 2, 2, 1}, Padding::Same, DataFormat::NCHW);
      },
      {"conv2d", "strides [1, 2, 2, 1]", "[1, 1, h, w] for NCHW"});
  conv_case("conv2d NCHW: integer x",
            [&] {
              conv2d(cast(random_tensor({1, 2, 5, 5}, 835), DType::Int32), cast(f, DType::Int32),
                     {1, 1}, Padding::Same, DataFormat::NCHW);
            },
            {"conv2d", "x has shape [1, 2, 5, 5] and dtype int32", "only float32 and float64"});
  conv_case("conv2d: a DataFormat that is neither enumerator",
            [&] {
              conv2d(random_tensor({1, 5, 5, 2}, 836), f, {1, 1}, Padding::Same, bad);
            },
            {"conv2d", "x has shape [1, 5, 5, 2]", "data_format", "NHWC or DataFormat::NCHW",
             "got the value 7"});
  const Tensor y = random_tensor({1, 4, 3, 3}, 837);
  conv_case("conv2d_transpose NCHW: output_shape does not give x's shape",
            [&] {
              conv2d_transpose(y, f, {1, 2, 6, 7}, {1, 1}, Padding::Valid, DataFormat::NCHW);
            },
            {"conv2d_transpose", "x has shape [1, 4, 3, 3]", "output_shape [1, 2, 6, 7]",
             "data_format NCHW", "has shape [1, 4, 4, 5], not x's"});
  conv_case("conv2d_transpose NCHW: output_shape of rank 3",
            [&] {
              conv2d_transpose(y, f, {2, 5, 5}, {1, 1}, Padding::Valid, DataFormat::NCHW);
            },
            {"conv2d_transpose", "output_shape [2, 5, 5]", "4 dimensions (NCHW)"});
  conv_case("conv2d_transpose NCHW: x of rank 5",
            [&] {
              conv2d_transpose(random_tensor({1, 4, 3, 3, 1}, 838), f, {1, 2, 5, 5}, {1, 1},
                               Padding::Valid, DataFormat::NCHW);
            },
            {"conv2d_transpose", "x has shape [1, 4, 3, 3, 1]", "x must have rank 4 (NCHW)"});
  conv_case("conv2d_transpose: a DataFormat that is neither enumerator",
            [&] {
              conv2d_transpose(y, f, {1, 2, 5, 5}, {1, 1}, Padding::Valid, {1, 1}, bad);
            },
            {"conv2d_transpose", "data_format", "got the value 7"});
  const Tensor f1 = random_tensor({3, 3, 2}, 839);
  conv_case("conv1d NCW: x of rank 4",
            [&] {
              conv1d(random_tensor({1, 3, 5, 5}, 840), f1, 1, Padding::Valid, DataFormat::NCHW);
            },
            {"conv1d", "x has shape [1, 3, 5, 5]", "data_format NCW", "x must have rank 3 (NCW)"});
  conv_case("conv1d NCW: channel mismatch",
            [&] {
              conv1d(random_tensor({2, 2, 6}, 841), f1, 1, Padding::Valid, DataFormat::NCHW);
            },
            {"conv1d", "x has shape [2, 2, 6]", "x has 2 channels", "expects 3"});
  conv_case("conv1d: a DataFormat that is neither enumerator",
            [&] {
              conv1d(random_tensor({2, 6, 3}, 842), f1, 1, Padding::Valid, 1, bad);
            },
            {"conv1d", "data_format", "got the value 7"});
  expect_defined("conv2d NCHW: an empty batch", [&] {
    CHECK(conv2d(zeros({0, 2, 5, 5}), f, {2, 2}, Padding::Same, DataFormat::NCHW).shape() ==
          Shape{0, 4, 3, 3});
  });
  // A Padding cast from another integer would otherwise act as Valid.
  const Padding bad_padding = static_cast<Padding>(5);
  conv_case("conv2d: a Padding that is neither enumerator",
            [&] {
              conv2d(random_tensor({1, 5, 5, 2}, 837), f, {1, 1}, bad_padding);
            },
            {"conv2d", "padding must be Padding::Valid or Padding::Same", "got the value 5"});
  conv_case("conv1d: a Padding that is neither enumerator",
            [&] {
              conv1d(random_tensor({1, 5, 2}, 838), random_tensor({3, 2, 4}, 839), 1, bad_padding);
            },
            {"conv1d", "padding must be Padding::Valid or Padding::Same", "got the value 5"});
  conv_case(
      "conv2d_transpose: a Padding that is neither enumerator",
      [&] {
        conv2d_transpose(random_tensor({1, 3, 3, 4}, 840), f, Shape{1, 5, 5, 2}, {1, 1},
                         bad_padding);
      },
      {"conv2d_transpose", "padding must be Padding::Valid or Padding::Same", "got the value 5"});
  const int run = misuse_cases_run() - before;
  std::cout << "NCHW convolution misuse cases: " << run << " run\n";
  REQUIRE(run == 17);
}

TEST_CASE(
    "NCHW convolutions stored channels first: a Function (optimized or not) and "
    "vectorized_map give the eager results bit for bit",
    "[conv][nchw][function]") {
  const auto f32 = [](const Tensor& t) { return cast(t, DType::Float32); };
  const Tensor x = f32(random_tensor({2, 16, 7, 6}, 900));
  const Tensor f1 = f32(random_tensor({3, 3, 16, 16}, 901, -0.2, 0.2));
  const Tensor f2 = f32(random_tensor({3, 3, 16, 24}, 902, -0.2, 0.2));
  const auto body = [](const std::vector<Tensor>& a) {
    GradientTape tape;
    tape.watch(std::vector<Tensor>{a[1], a[2]});
    Tensor h = relu(conv2d(a[0], a[1], {1, 1}, Padding::Same, DataFormat::NCHW));
    h = max_pool2d(h, {2, 2}, {2, 2}, Padding::Same, DataFormat::NCHW);
    const Tensor y = conv2d(h, a[2], {1, 1}, Padding::Same, DataFormat::NCHW);
    const std::vector<Tensor> g = tape.gradient(reduce_sum(multiply(y, y)), {a[1], a[2]});
    return std::vector<Tensor>{y, g[0], g[1]};
  };
  const std::vector<Tensor> eager = body({x, f1, f2});
  for (bool optimize : {true, false}) {
    INFO("optimize " << optimize);
    FunctionOptions options;
    options.optimize = optimize;
    Function traced = function(body, options);
    for (int call = 0; call < 2; ++call) {
      const std::vector<Tensor> out = traced({x, f1, f2});
      REQUIRE(out.size() == eager.size());
      for (std::size_t i = 0; i < out.size(); ++i) require_identical(out[i], eager[i]);
    }
  }
  // Per-example filter gradients: the batch of images merged into the convolution's batch.
  const auto per_example = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(f1);
    const Tensor y =
        conv2d(reshape(in[0], {1, 16, 7, 6}), f1, {1, 1}, Padding::Same, DataFormat::NCHW);
    return std::vector<Tensor>{tape.gradient(reduce_sum(multiply(y, y)), f1)};
  };
  const std::vector<Tensor> vectorized = vectorized_map(per_example, {x}, false);
  for (std::int64_t b = 0; b < 2; ++b) {
    const Tensor image = reshape(slice(x, {b, 0, 0, 0}, {1, 16, 7, 6}), {16, 7, 6});
    require_identical(
        reshape(slice(vectorized[0], {b, 0, 0, 0, 0}, {1, 3, 3, 16, 16}), {3, 3, 16, 16}),
        per_example({image})[0]);
  }
}
