// clip_by_norm and clip_by_global_norm: values below and above the limit, per-axis norms,
// gradients (by hand and against central differences), undefined entries, NaN/inf, errors.
#include "support.hpp"

#include <cmath>
#include <limits>

using namespace tapegrad;
using namespace tapegrad::testing;

TEST_CASE("clip_by_norm leaves a small tensor alone and rescales a large one", "[clip]") {
  const Tensor x = constant({3.0, 4.0});  // norm 5
  require_close(clip_by_norm(x, 10.0), {2}, {3.0, 4.0}, 1e-15);
  require_close(clip_by_norm(x, 5.0), {2}, {3.0, 4.0}, 1e-15);  // at the limit: unchanged
  require_close(clip_by_norm(x, 2.5), {2}, {1.5, 2.0}, 1e-15);
  // The norm of a matrix over every axis (default) is the Frobenius norm: 13 here.
  require_close(clip_by_norm(constant({{3.0, 4.0}, {12.0, 0.0}}), 6.5), {2, 2},
                {1.5, 2.0, 6.0, 0.0}, 1e-15);
  // Zero stays zero (no 0/0).
  require_close(clip_by_norm(zeros({3}), 1.0), {3}, {0.0, 0.0, 0.0}, 0.0);
  // float32 in, float32 out.
  const Tensor x32 = clip_by_norm(fill({4}, 1.0, DType::Float32), 1.0);  // norm 2
  CHECK(x32.dtype() == DType::Float32);
  require_close(x32, {4}, {0.5, 0.5, 0.5, 0.5}, 1e-7);
}

TEST_CASE("clip_by_norm with axes clips each slice by its own norm", "[clip]") {
  const Tensor x = constant({{3.0, 4.0}, {0.3, 0.4}});  // row norms 5 and 0.5
  // One norm per row: row 0 is rescaled to norm 1, row 1 is below the limit.
  require_close(clip_by_norm(x, 1.0, {1}), {2, 2}, {0.6, 0.8, 0.3, 0.4}, 1e-15);
  require_close(clip_by_norm(x, 1.0, {-1}), {2, 2}, {0.6, 0.8, 0.3, 0.4}, 1e-15);
  // One norm per column: sqrt(9.09) and sqrt(16.16), both above 2.
  const double c0 = std::sqrt(9.09), c1 = std::sqrt(16.16);
  require_close(clip_by_norm(x, 2.0, {0}), {2, 2},
                {3.0 * 2.0 / c0, 4.0 * 2.0 / c1, 0.3 * 2.0 / c0, 0.4 * 2.0 / c1}, 1e-15);
  // Both axes named: the same as the default.
  require_close(clip_by_norm(x, 1.0, {0, 1}), {2, 2}, values(clip_by_norm(x, 1.0)), 1e-15);
}

TEST_CASE("clip_by_norm's gradient", "[clip]") {
  // Above the limit y = x / |x| (clip 1): d sum(w y)/dx = (w - y (y.w)) / |x|.
  // x = [3, 4], w = [1, 0]: y = [0.6, 0.8], (w - 0.6 y) / 5 = [0.128, -0.096].
  Tensor x = constant({3.0, 4.0});
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = reduce_sum(clip_by_norm(x, 1.0) * constant({1.0, 0.0}));
    require_close(tape.gradient(y, x), {2}, {0.128, -0.096}, 1e-15);
  }
  // Below the limit and at zero it is the identity's: w itself (not NaN at 0).
  for (const Tensor& at : {constant({0.3, 0.4}), zeros({2})}) {
    Tensor z = at;
    GradientTape tape;
    tape.watch(z);
    const Tensor y = reduce_sum(clip_by_norm(z, 1.0) * constant({2.0, -1.0}));
    require_close(tape.gradient(y, z), {2}, {2.0, -1.0}, 0.0);
  }
  // Against central differences, per-row norms on both sides of the limit.
  const Fn per_row = [](const std::vector<Tensor>& a) { return clip_by_norm(a[0], 1.0, {1}); };
  require_gradient_matches(per_row, {constant({{3.0, -4.0, 1.0}, {0.1, 0.2, -0.3}})});
  const Fn whole = [](const std::vector<Tensor>& a) { return clip_by_norm(a[0], 0.7); };
  require_gradient_matches(whole, {random_tensor({2, 3}, 7)});
  // Differentiable again.
  require_second_order_matches(whole, {random_tensor({2, 3}, 8)});
}

TEST_CASE("clip_by_global_norm scales the whole list by one factor", "[clip]") {
  const std::vector<Tensor> list{constant({3.0, 4.0}), Tensor(),
                                 from_values({12.0}, {1, 1}, DType::Float64)};
  // global norm sqrt(9 + 16 + 144) = 13.
  auto [clipped, norm] = clip_by_global_norm(list, 6.5);
  REQUIRE(clipped.size() == 3);
  require_close(norm, {}, {13.0}, 1e-15);
  require_close(clipped[0], {2}, {1.5, 2.0}, 1e-15);
  CHECK_FALSE(clipped[1].defined());  // undefined stays undefined, in place
  require_close(clipped[2], {1, 1}, {6.0}, 1e-15);
  // Below the limit: unchanged, same norm.
  auto [same, norm2] = clip_by_global_norm(list, 20.0);
  require_close(norm2, {}, {13.0}, 1e-15);
  require_close(same[0], {2}, {3.0, 4.0}, 1e-15);
  require_close(same[2], {1, 1}, {12.0}, 1e-15);
  // All zeros: unchanged, norm 0.
  auto [zero, zero_norm] = clip_by_global_norm({zeros({2}), zeros({})}, 1.0);
  require_close(zero_norm, {}, {0.0}, 0.0);
  require_close(zero[0], {2}, {0.0, 0.0}, 0.0);
  // Nothing defined: the list back and a float64 0.
  auto [none, none_norm] = clip_by_global_norm({Tensor(), Tensor()}, 1.0);
  CHECK(none.size() == 2);
  CHECK_FALSE(none[0].defined());
  CHECK(none_norm.dtype() == DType::Float64);
  require_close(none_norm, {}, {0.0}, 0.0);
  CHECK(clip_by_global_norm({}, 1.0).first.empty());
  // float32 entries give a float32 norm.
  auto [f32, f32_norm] = clip_by_global_norm({fill({4}, 1.0, DType::Float32)}, 1.0);
  CHECK(f32_norm.dtype() == DType::Float32);
  require_close(f32_norm, {}, {2.0}, 1e-7);
  require_close(f32[0], {4}, {0.5, 0.5, 0.5, 0.5}, 1e-7);
}

TEST_CASE(
    "clip: a norm float holds is found when the squares overflow or underflow, and a tensor "
    "within the limit comes back bit for bit",
    "[clip]") {
  // x^2 overflowed (float32 3e20, float64 1e155) and the norm became infinite: the clipped
  // tensor was all zeros (clip_by_norm) or NaN (clip_by_global_norm), where the norm fits.
  const Tensor big32 = cast(constant({3e20, 4e20}), DType::Float32);  // norm 5e20
  require_close(clip_by_norm(big32, 1.0), {2}, {0.6, 0.8}, 1e-7);
  auto [clipped32, norm32] = clip_by_global_norm({big32, Tensor()}, 1.0);
  CHECK(norm32.item<float>() == Approx(5e20).epsilon(1e-6));
  require_close(clipped32[0], {2}, {0.6, 0.8}, 1e-7);
  const Tensor big64 = constant({1e155, -1e155});
  require_close(clip_by_norm(big64, 1.0), {2}, {std::sqrt(0.5), -std::sqrt(0.5)}, 1e-15);
  auto [clipped64, norm64] = clip_by_global_norm({big64, constant({1e155})}, 3.0);
  CHECK(norm64.item<double>() == Approx(std::sqrt(3.0) * 1e155).epsilon(1e-15));
  require_close(clipped64[1], {1}, {std::sqrt(3.0)}, 1e-15);
  // ... and x^2 (and x * clip_norm) underflowed to 0: the norm was 0 and nothing was clipped.
  const Tensor tiny = cast(constant({3e-30, 4e-30}), DType::Float32);  // norm 5e-30
  require_close(clip_by_norm(tiny, 1e-31), {2}, {6e-32, 8e-32}, 1e-38);
  // Per-row groups at very different scales, each by its own largest element.
  require_close(clip_by_norm(constant({{3e200, 4e200}, {3e-200, 4e-200}}), 1.0, {1}), {2, 2},
                {0.6, 0.8, 3e-200, 4e-200}, 1e-15);
  // The gradient at that scale: (w - y (y.w)) / |x| with w = [1, 0], y = [0.6, 0.8].
  Tensor x = constant({3e200, 4e200});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(clip_by_norm(x, 1.0) * constant({1.0, 0.0}));
  const std::vector<double> g = values(tape.gradient(y, x));
  CHECK(g[0] == Approx(0.128e-200).epsilon(1e-14));
  CHECK(g[1] == Approx(-0.096e-200).epsilon(1e-14));

  // Empty tensors: nothing to clip, norm 0 (there is no largest element to scale by).
  CHECK(clip_by_norm(zeros({3, 0}), 1.0).shape() == Shape{3, 0});
  CHECK(clip_by_norm(zeros({0, 3}), 1.0, {1}).shape() == Shape{0, 3});
  auto [empty_list, empty_norm] = clip_by_global_norm({zeros({3, 0}), zeros({0})}, 1.0);
  CHECK(empty_norm.item<double>() == 0.0);
  CHECK(empty_list[0].shape() == Shape{3, 0});
  auto [mixed, mixed_norm] = clip_by_global_norm({zeros({3, 0}), constant({3e200, 4e200})}, 1.0);
  CHECK(mixed_norm.item<double>() == Approx(5e200).epsilon(1e-15));
  require_close(mixed[1], {2}, {0.6, 0.8}, 1e-15);

  // Within the limit, x itself: the scale is exactly 1 (x * c / c rounded one element in six).
  const Tensor r = random_tensor({10000}, 3);  // norm about 58
  for (const double limit : {58.0 * 10, 58.0 * 1000}) {
    require_close(clip_by_norm(r, limit), {10000}, values(r), 0.0);
    require_close(clip_by_global_norm({r}, limit).first[0], {10000}, values(r), 0.0);
  }
}

TEST_CASE("clip_by_global_norm: an infinite or NaN norm makes every value NaN", "[clip]") {
  const double inf = std::numeric_limits<double>::infinity();
  auto [clipped, norm] = clip_by_global_norm({constant({1.0, inf}), constant({2.0})}, 1.0);
  CHECK(std::isinf(norm.item<double>()));
  for (const Tensor& t : clipped) {
    for (double v : values(t)) CHECK(std::isnan(v));
  }
  auto [with_nan, nan_norm] = clip_by_global_norm({constant({std::nan(""), 1.0})}, 1.0);
  CHECK(std::isnan(nan_norm.item<double>()));
  CHECK(std::isnan(values(with_nan[0])[1]));
}

TEST_CASE("clip_by_global_norm's gradient reaches every entry", "[clip]") {
  // Above the limit (global norm of these is ~1.9 > 1): the scale depends on both entries.
  const Fn first = [](const std::vector<Tensor>& a) {
    auto [c, n] = clip_by_global_norm({a[0], a[1]}, 1.0);
    return concat({reshape(c[0], {-1}), reshape(c[1], {-1}), reshape(n, {1})}, 0);
  };
  const std::vector<Tensor> args{random_tensor({2, 2}, 3), random_tensor({3}, 4)};
  require_gradient_matches(first, args, 0);
  require_gradient_matches(first, args, 1);
  // Hand value: a = [3, 4] alone, clip 1, w = [1, 0]: as clip_by_norm, [0.128, -0.096].
  Tensor a = constant({3.0, 4.0});
  GradientTape tape;
  tape.watch(a);
  auto [c, n] = clip_by_global_norm({a}, 1.0);
  require_close(tape.gradient(reduce_sum(c[0] * constant({1.0, 0.0})), a), {2}, {0.128, -0.096},
                1e-15);
}

TEST_CASE("clip errors name the function and the value", "[clip]") {
  const Tensor x = constant({1.0, 2.0});
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {0.0, -1.5, std::nan(""), inf}) {
    INFO("clip_norm " << bad);
    std::ostringstream value;
    value << bad;
    CHECK_THAT(message_of<InvalidArgument>([&] { clip_by_norm(x, bad); }),
               Catch::Contains("clip_by_norm") && Catch::Contains("clip_norm") &&
                   Catch::Contains(value.str()));
    CHECK_THAT(message_of<InvalidArgument>([&] { clip_by_global_norm({x}, bad); }),
               Catch::Contains("clip_by_global_norm") && Catch::Contains(value.str()));
  }
  CHECK_THAT(message_of<InvalidArgument>([] { clip_by_norm(fill({2}, 1.0, DType::Int32), 1.0); }),
             Catch::Contains("clip_by_norm") && Catch::Contains("int32"));
  CHECK_THAT(message_of<InvalidArgument>([] { clip_by_norm(Tensor(), 1.0); }),
             Catch::Contains("clip_by_norm"));
  CHECK_THAT(message_of<InvalidArgument>([&] { clip_by_norm(x, 1.0, {1}); }),
             Catch::Contains("clip_by_norm") && Catch::Contains("[2]"));
  CHECK_THAT(message_of<InvalidArgument>([&] {
               clip_by_global_norm({x, Tensor(), fill({1}, 1.0, DType::Float32)}, 1.0);
             }),
             Catch::Contains("clip_by_global_norm") && Catch::Contains("entry 2") &&
                 Catch::Contains("float32") && Catch::Contains("entry 0") &&
                 Catch::Contains("float64"));
  CHECK_THAT(
      message_of<InvalidArgument>([] { clip_by_global_norm({fill({1}, 1.0, DType::Int64)}, 1.0); }),
      Catch::Contains("clip_by_global_norm") && Catch::Contains("entry 0") &&
          Catch::Contains("int64"));
}
