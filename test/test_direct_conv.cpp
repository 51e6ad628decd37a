// The direct convolution kernels (src/kernels/direct_conv.hpp) for every instruction set this
// CPU runs, float32 and float64: the forward product, the input gradient and the filter
// gradient against sums in long double, within the rounding bound of their number of terms
// (n u times the sum of the terms' magnitudes), over strides, dilations, both paddings, odd
// image sizes and channel counts on both sides of the SIMD width; each result independent of
// where it sits (an image repeated in the batch, the same output channels among more of
// them, bit for bit); and where the kernels do not apply they say so and write nothing.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/direct_conv.hpp"
#include "support.hpp"

using namespace tapegrad;
using detail::ConvGeometry;
using detail::InstructionSet;

namespace {

constexpr InstructionSet kSets[] = {InstructionSet::Baseline, InstructionSet::Avx2,
                                    InstructionSet::Avx512};

// Lanes of one SIMD batch of T on `set` (xsimd's default architecture is SSE2 on x86-64).
template <class T>
std::size_t width_of(InstructionSet set) {
  const std::size_t bytes = set == InstructionSet::Avx512 ? 64
                            : set == InstructionSet::Avx2 ? 32
                                                          : 16;
  return bytes / sizeof(T);
}

struct Case {
  std::size_t batch, in_h, in_w, in_c, k_h, k_w, out_c, stride_h, stride_w, dilation_h, dilation_w;
  bool same;
};

std::string describe(const Case& c) {
  return "x " + std::to_string(c.batch) + "x" + std::to_string(c.in_h) + "x" +
         std::to_string(c.in_w) + "x" + std::to_string(c.in_c) + ", filter " +
         std::to_string(c.k_h) + "x" + std::to_string(c.k_w) + " -> " + std::to_string(c.out_c) +
         ", strides " + std::to_string(c.stride_h) + "," + std::to_string(c.stride_w) +
         ", dilations " + std::to_string(c.dilation_h) + "," + std::to_string(c.dilation_w) +
         (c.same ? ", SAME" : ", VALID");
}

// TF's output size and leading padding along one axis.
void axis(std::size_t in, std::size_t k, std::size_t stride, std::size_t dilation, bool same,
          std::size_t& out, std::size_t& pad) {
  const std::size_t effective = (k - 1) * dilation + 1;
  if (same) {
    out = (in + stride - 1) / stride;
    const std::size_t needed = (out - 1) * stride + effective;
    pad = needed > in ? (needed - in) / 2 : 0;
  } else {
    out = (in - effective) / stride + 1;
    pad = 0;
  }
}

ConvGeometry geometry_of(const Case& c) {
  ConvGeometry g;
  g.batch = c.batch;
  g.in_h = c.in_h;
  g.in_w = c.in_w;
  g.in_c = c.in_c;
  g.k_h = c.k_h;
  g.k_w = c.k_w;
  g.out_c = c.out_c;
  g.stride_h = c.stride_h;
  g.stride_w = c.stride_w;
  g.dilation_h = c.dilation_h;
  g.dilation_w = c.dilation_w;
  axis(c.in_h, c.k_h, c.stride_h, c.dilation_h, c.same, g.out_h, g.pad_top);
  axis(c.in_w, c.k_w, c.stride_w, c.dilation_w, c.same, g.out_w, g.pad_left);
  return g;
}

// x [batch, in_h, in_w, in_c] and an output [batch, out_h, out_w, out_c], row-major.
template <class T>
detail::StridedImages<T> images(const std::vector<T>& x, const ConvGeometry& g) {
  return detail::StridedImages<T>::row_major(x.data(), g.in_h, g.in_w, g.in_c);
}
template <class T>
detail::StridedImages<T> output_images(const std::vector<T>& y, const ConvGeometry& g) {
  return detail::StridedImages<T>::row_major(y.data(), g.out_h, g.out_w, g.out_c);
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& e : v) e = static_cast<T>(uniform(engine));
  return v;
}

// Visits every term of the convolution: (x index, filter index, output index).
template <class Visit>
void for_each_term(const ConvGeometry& g, Visit visit) {
  for (std::size_t n = 0; n < g.batch; ++n) {
    for (std::size_t oh = 0; oh < g.out_h; ++oh) {
      for (std::size_t ow = 0; ow < g.out_w; ++ow) {
        for (std::size_t kh = 0; kh < g.k_h; ++kh) {
          const auto ih = static_cast<std::ptrdiff_t>(oh * g.stride_h + kh * g.dilation_h) -
                          static_cast<std::ptrdiff_t>(g.pad_top);
          if (ih < 0 || ih >= static_cast<std::ptrdiff_t>(g.in_h)) continue;
          for (std::size_t kw = 0; kw < g.k_w; ++kw) {
            const auto iw = static_cast<std::ptrdiff_t>(ow * g.stride_w + kw * g.dilation_w) -
                            static_cast<std::ptrdiff_t>(g.pad_left);
            if (iw < 0 || iw >= static_cast<std::ptrdiff_t>(g.in_w)) continue;
            for (std::size_t ci = 0; ci < g.in_c; ++ci) {
              for (std::size_t co = 0; co < g.out_c; ++co) {
                const std::size_t xi = ((n * g.in_h + static_cast<std::size_t>(ih)) * g.in_w +
                                        static_cast<std::size_t>(iw)) *
                                           g.in_c +
                                       ci;
                const std::size_t fi = ((kh * g.k_w + kw) * g.in_c + ci) * g.out_c + co;
                const std::size_t oi = ((n * g.out_h + oh) * g.out_w + ow) * g.out_c + co;
                visit(xi, fi, oi);
              }
            }
          }
        }
      }
    }
  }
}

// A sum in long double, the magnitude of its terms, their number.
struct Exact {
  std::vector<long double> sum, magnitude;
  std::vector<std::size_t> terms;
  explicit Exact(std::size_t n) : sum(n, 0), magnitude(n, 0), terms(n, 0) {}
  void add(std::size_t i, long double term) {
    sum[i] += term;
    magnitude[i] += std::fabs(term);
    ++terms[i];
  }
};

// Every value within terms * u * magnitude of the exact sum (plus the one rounding of the
// result); names the first one that is not.
template <class T>
void check_against(const std::vector<T>& got, const Exact& exact, const std::string& what) {
  const long double u = std::numeric_limits<T>::epsilon() / 2;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const long double bound =
        static_cast<long double>(exact.terms[i] + 1) * u * exact.magnitude[i] +
        u * std::fabs(exact.sum[i]);
    const long double error = std::fabs(static_cast<long double>(got[i]) - exact.sum[i]);
    if (!(error <= bound)) {
      FAIL(what << ": element " << i << " is " << got[i] << ", exactly "
                << static_cast<double>(exact.sum[i]) << " (error " << static_cast<double>(error)
                << " > bound " << static_cast<double>(bound) << ")");
    }
  }
}

template <class T>
void check_case(const Case& c, InstructionSet set, unsigned seed) {
  const ConvGeometry g = geometry_of(c);
  const std::string what = describe(c) + ", " + detail::instruction_set_name(set) + ", " +
                           (sizeof(T) == 4 ? "float32" : "float64");
  INFO(what);
  const std::vector<T> x = random_values<T>(g.input_size(), seed);
  const std::vector<T> f = random_values<T>(g.filter_size(), seed + 1);
  const std::vector<T> grad = random_values<T>(g.output_size(), seed + 2);

  Exact out(g.output_size()), dx(g.input_size()), df(g.filter_size());
  for_each_term(g, [&](std::size_t xi, std::size_t fi, std::size_t oi) {
    out.add(oi, static_cast<long double>(x[xi]) * f[fi]);
    dx.add(xi, static_cast<long double>(grad[oi]) * f[fi]);
    df.add(fi, static_cast<long double>(x[xi]) * grad[oi]);
  });

  std::vector<T> got(g.output_size(), T(7));
  REQUIRE(detail::direct_conv2d_forward(g, images(x, g), f.data(), got.data(), false, set));
  check_against(got, out, what + ": forward");

  std::vector<T> got_dx(g.input_size(), T(7));
  // Its output channels are x's: declined for fewer than half a batch, and for strides.
  const bool applies = c.stride_h == 1 && c.stride_w == 1 && 2 * c.in_c >= width_of<T>(set);
  REQUIRE(detail::direct_conv2d_backprop_input(g, output_images(grad, g), f.data(), got_dx.data(),
                                               false, set) == applies);
  if (applies) {
    check_against(got_dx, dx, what + ": input gradient");
  } else {
    for (T v : got_dx) REQUIRE(v == T(7));  // nothing written
  }

  std::vector<T> got_df(g.filter_size(), T(7));
  REQUIRE(detail::direct_conv2d_backprop_filter(g, images(x, g), output_images(grad, g),
                                                got_df.data(), set));
  check_against(got_df, df, what + ": filter gradient");
}

template <class T>
std::vector<Case> cases_for(InstructionSet set) {
  const std::size_t w = width_of<T>(set);
  return {
      // batch, h, w, in_c, k_h, k_w, out_c, strides, dilations, SAME
      {2, 7, 9, 3, 3, 3, w, 1, 1, 1, 1, true},
      {1, 8, 8, 1, 3, 3, w + 3, 1, 1, 1, 1, true},  // the digits' first layer and a tail
      {2, 6, 5, 9, 3, 3, 2 * w, 1, 1, 1, 1, false},
      {1, 9, 7, 17, 3, 2, 2 * w + 5, 1, 1, 1, 1, true},
      {3, 5, 6, 8, 2, 2, (w + 1) / 2, 1, 1, 1, 1, true},  // half a batch, and an even filter
      {2, 11, 10, 4, 3, 3, w + 1, 2, 2, 1, 1, true},      // strided: no direct input gradient
      {1, 12, 9, 5, 3, 2, 3 * w + 1, 2, 1, 1, 1, false},
      {2, 9, 10, 6, 3, 3, w, 1, 1, 2, 2, true},  // dilated
      {1, 9, 8, w + 1, 3, 2, w / 2 + 1, 1, 1, 2, 1, true},
      {1, 7, 7, 2 * w + 3, 5, 5, w, 1, 1, 1, 1, true},
      {1, 10, 11, 3, 2, 3, 2 * w - 1, 1, 1, 3, 2, false},
      {2, 4, 4, 16, 1, 1, w, 1, 1, 1, 1, true},      // 1x1
      {1, 3, 3, 2, 5, 5, w, 1, 1, 1, 1, true},       // the window wider than the image
      {1, 1, 37, 7, 1, 5, w + 2, 1, 3, 1, 1, true},  // conv1d's unit height
  };
}

template <class T>
void check_every_case(unsigned seed) {
  for (InstructionSet set : kSets) {
    if (!detail::instruction_set_available(set)) continue;
    for (const Case& c : cases_for<T>(set)) check_case<T>(c, set, seed++);
  }
}

}  // namespace

TEST_CASE(
    "direct convolutions equal the exact sums within rounding: every instruction set, "
    "float32",
    "[conv][direct]") {
  check_every_case<float>(11);
}

TEST_CASE(
    "direct convolutions equal the exact sums within rounding: every instruction set, "
    "float64",
    "[conv][direct]") {
  check_every_case<double>(101);
}

TEST_CASE("direct convolutions: a result does not depend on its image or its channel's place",
          "[conv][direct]") {
  for (InstructionSet set : kSets) {
    if (!detail::instruction_set_available(set)) continue;
    INFO(detail::instruction_set_name(set));
    const std::size_t w = width_of<float>(set);
    // Two copies of one image, 2w + 3 output channels; then the image alone with the first w.
    Case c{2, 6, 7, 5, 3, 3, 2 * w + 3, 1, 1, 1, 1, true};
    const ConvGeometry g = geometry_of(c);
    std::vector<float> x = random_values<float>(g.input_size(), 5);
    const std::size_t image = g.input_size() / 2;
    std::copy_n(x.begin(), image, x.begin() + static_cast<std::ptrdiff_t>(image));
    const std::vector<float> f = random_values<float>(g.filter_size(), 6);
    std::vector<float> out(g.output_size());
    REQUIRE(detail::direct_conv2d_forward(g, images(x, g), f.data(), out.data(), false, set));
    const std::size_t half = out.size() / 2;
    for (std::size_t i = 0; i < half; ++i) REQUIRE(out[i] == out[half + i]);

    Case narrow = c;
    narrow.batch = 1;
    narrow.out_c = w;
    const ConvGeometry h = geometry_of(narrow);
    std::vector<float> f_narrow(h.filter_size());
    for (std::size_t r = 0; r < g.patch(); ++r) {
      std::copy_n(f.begin() + static_cast<std::ptrdiff_t>(r * g.out_c), w,
                  f_narrow.begin() + static_cast<std::ptrdiff_t>(r * w));
    }
    std::vector<float> out_narrow(h.output_size());
    REQUIRE(detail::direct_conv2d_forward(h, images(x, h), f_narrow.data(), out_narrow.data(),
                                          false, set));
    for (std::size_t p = 0; p < h.rows(); ++p) {
      for (std::size_t co = 0; co < w; ++co) {
        REQUIRE(out_narrow[p * w + co] == out[p * g.out_c + co]);
      }
    }
  }
}

TEST_CASE("direct convolutions decline fewer output channels than half a SIMD batch",
          "[conv][direct]") {
  for (InstructionSet set : kSets) {
    if (!detail::instruction_set_available(set)) continue;
    INFO(detail::instruction_set_name(set));
    const std::size_t w = width_of<float>(set);
    // Few output channels: the forward and the filter gradient decline; few input channels:
    // the input gradient (whose output channels they are) declines.
    Case c{1, 5, 5, 2 * w, 3, 3, w / 2 - 1, 1, 1, 1, 1, true};
    const ConvGeometry g = geometry_of(c);
    const std::vector<float> x = random_values<float>(g.input_size(), 1);
    const std::vector<float> f = random_values<float>(g.filter_size(), 2);
    std::vector<float> out(g.output_size(), 7.0F), df(g.filter_size(), 7.0F);
    CHECK_FALSE(detail::direct_conv2d_forward(g, images(x, g), f.data(), out.data(), false, set));
    CHECK_FALSE(detail::direct_conv2d_backprop_filter(g, images(x, g), output_images(out, g),
                                                      df.data(), set));
    for (float v : out) REQUIRE(v == 7.0F);
    for (float v : df) REQUIRE(v == 7.0F);
    Case narrow_input{1, 5, 5, w / 2 - 1, 3, 3, 2 * w, 1, 1, 1, 1, true};
    const ConvGeometry h = geometry_of(narrow_input);
    const std::vector<float> grad = random_values<float>(h.output_size(), 3);
    const std::vector<float> fh = random_values<float>(h.filter_size(), 4);
    std::vector<float> dx(h.input_size(), 7.0F);
    CHECK_FALSE(detail::direct_conv2d_backprop_input(h, output_images(grad, h), fh.data(),
                                                     dx.data(), false, set));
    for (float v : dx) REQUIRE(v == 7.0F);
  }
}

namespace {

// y [batch, h, w, c] row-major stored channels first, [batch, c, h, w].
template <class T>
std::vector<T> channels_first(const std::vector<T>& y, std::size_t batch, std::size_t h,
                              std::size_t w, std::size_t c) {
  std::vector<T> r(y.size());
  for (std::size_t n = 0; n < batch; ++n) {
    for (std::size_t p = 0; p < h * w; ++p) {
      for (std::size_t k = 0; k < c; ++k) r[(n * c + k) * h * w + p] = y[(n * h * w + p) * c + k];
    }
  }
  return r;
}

template <class T>
detail::StridedImages<T> channels_first_images(const std::vector<T>& stored, std::size_t h,
                                               std::size_t w, std::size_t c) {
  detail::StridedImages<T> images;
  images.data = stored.data();
  images.strides[0] = static_cast<std::ptrdiff_t>(c * h * w);
  images.strides[1] = static_cast<std::ptrdiff_t>(w);
  images.strides[2] = 1;
  images.strides[3] = static_cast<std::ptrdiff_t>(h * w);
  return images;
}

// The row-major results against channels-first inputs and outputs, and against images read
// with a reversed width (a general strided view), bit for bit.
template <class T>
void check_layouts(const Case& c, InstructionSet set, unsigned seed) {
  const ConvGeometry g = geometry_of(c);
  INFO(describe(c) << ", " << detail::instruction_set_name(set));
  const std::vector<T> x = random_values<T>(g.input_size(), seed);
  const std::vector<T> f = random_values<T>(g.filter_size(), seed + 1);
  const std::vector<T> grad = random_values<T>(g.output_size(), seed + 2);
  const std::vector<T> x_first = channels_first(x, g.batch, g.in_h, g.in_w, g.in_c);
  const std::vector<T> grad_first = channels_first(grad, g.batch, g.out_h, g.out_w, g.out_c);
  const auto x_images = channels_first_images(x_first, g.in_h, g.in_w, g.in_c);
  const auto grad_images = channels_first_images(grad_first, g.out_h, g.out_w, g.out_c);

  std::vector<T> out(g.output_size()), out_first(g.output_size());
  REQUIRE(detail::direct_conv2d_forward(g, images(x, g), f.data(), out.data(), false, set));
  REQUIRE(detail::direct_conv2d_forward(g, x_images, f.data(), out_first.data(), true, set));
  REQUIRE(out_first == channels_first(out, g.batch, g.out_h, g.out_w, g.out_c));
  std::vector<T> out_last(g.output_size());
  REQUIRE(detail::direct_conv2d_forward(g, x_images, f.data(), out_last.data(), false, set));
  REQUIRE(out_last == out);

  std::vector<T> dx(g.input_size()), dx_first(g.input_size());
  if (detail::direct_conv2d_backprop_input(g, output_images(grad, g), f.data(), dx.data(), false,
                                           set)) {
    REQUIRE(
        detail::direct_conv2d_backprop_input(g, grad_images, f.data(), dx_first.data(), true, set));
    REQUIRE(dx_first == channels_first(dx, g.batch, g.in_h, g.in_w, g.in_c));
  }

  std::vector<T> df(g.filter_size()), df_first(g.filter_size());
  REQUIRE(detail::direct_conv2d_backprop_filter(g, images(x, g), output_images(grad, g), df.data(),
                                                set));
  REQUIRE(detail::direct_conv2d_backprop_filter(g, x_images, grad_images, df_first.data(), set));
  REQUIRE(df_first == df);

  // x with its width reversed in memory, read through a negative stride.
  std::vector<T> mirrored(x.size());
  for (std::size_t row = 0; row < g.batch * g.in_h; ++row) {
    for (std::size_t j = 0; j < g.in_w; ++j) {
      std::copy_n(
          x.begin() + static_cast<std::ptrdiff_t>((row * g.in_w + j) * g.in_c), g.in_c,
          mirrored.begin() + static_cast<std::ptrdiff_t>((row * g.in_w + g.in_w - 1 - j) * g.in_c));
    }
  }
  detail::StridedImages<T> reversed =
      detail::StridedImages<T>::row_major(mirrored.data(), g.in_h, g.in_w, g.in_c);
  reversed.data += (g.in_w - 1) * g.in_c;
  reversed.strides[2] = -static_cast<std::ptrdiff_t>(g.in_c);
  std::vector<T> out_reversed(g.output_size());
  REQUIRE(detail::direct_conv2d_forward(g, reversed, f.data(), out_reversed.data(), false, set));
  REQUIRE(out_reversed == out);
}

}  // namespace

TEST_CASE(
    "direct convolutions read channels-first and strided images and write channels first, "
    "bit for bit as row-major",
    "[conv][direct]") {
  unsigned seed = 7;
  for (InstructionSet set : kSets) {
    if (!detail::instruction_set_available(set)) continue;
    const std::size_t w = width_of<float>(set);
    const Case cases[] = {
        {2, 7, 6, 5, 3, 3, w + 3, 1, 1, 1, 1, true},   // padded: copied channel by channel
        {2, 6, 7, w, 3, 3, 2 * w, 1, 1, 1, 1, false},  // VALID: read where it lies
        {1, 9, 8, 3, 3, 2, w, 2, 1, 1, 2, true},
    };
    for (const Case& c : cases) {
      check_layouts<float>(c, set, seed++);
      check_layouts<double>(c, set, seed++);
    }
  }
}
