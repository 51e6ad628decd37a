// The worked example of docs/extending.md, verbatim in substance, so the document cannot rot:
// a fused Swish op x * sigmoid(x) computed with xtensor, its gradient registered with tapegrad
// ops, checked with check_gradient.
#include "support.hpp"

#include <xtensor/xmath.hpp>

#include <cmath>

namespace tg = tapegrad;

namespace {

// ---- docs/extending.md, step 1: the forward, computed with xtensor ----------------------
tg::Tensor swish(const tg::Tensor& x) {
  const xt::xarray<double>& a = x.array<double>();
  xt::xarray<double> out = a / (1.0 + xt::exp(-a));  // x * sigmoid(x), evaluated now
  tg::Tensor y(std::move(out));
  tg::record_operation("Swish", {x}, {y});  // a no-op unless a tape watches x
  return y;
}

// ---- step 2: the gradient, written with tapegrad ops ------------------------------------
// d/dx x*s(x) = s + x*s*(1 - s), s = 1 / (1 + exp(-x)).
std::vector<tg::Tensor> swish_grad(const tg::OpContext& ctx, const std::vector<tg::Tensor>& dy) {
  const tg::Tensor& x = ctx.inputs()[0];
  tg::Tensor s = 1.0 / (1.0 + tg::exp(-x));
  return {dy[0] * (s + x * s * (1.0 - s))};
}

// ---- step 3: register once, keeping only the input --------------------------------------
void register_swish() {
  static const bool done = [] {
    tg::register_gradient("Swish", swish_grad, tg::Keep::only({0}), tg::Keep::none());
    return true;
  }();
  (void)done;
}

}  // namespace

TEST_CASE("extending.md: Swish forward values", "[extending]") {
  register_swish();
  tg::Tensor y = swish(tg::constant({0.0, 1.0, -2.0}));
  const double s1 = 1.0 / (1.0 + std::exp(-1.0)), s2 = 1.0 / (1.0 + std::exp(2.0));
  tg::testing::require_close(y, {3}, {0.0, s1, -2.0 * s2});
}

TEST_CASE("extending.md: Swish gradient at 0 is 1/2 and matches the analytic form", "[extending]") {
  register_swish();
  tg::Tensor x = tg::constant({0.0, 1.0});
  tg::GradientTape tape;
  tape.watch(x);
  tg::Tensor y = swish(x);
  const double s1 = 1.0 / (1.0 + std::exp(-1.0));
  tg::testing::require_close(tape.gradient(y, x), {2}, {0.5, s1 + s1 * (1.0 - s1)});
}

TEST_CASE("extending.md: check_gradient agrees, first and second order", "[extending]") {
  register_swish();
  tg::Fn f = [](const std::vector<tg::Tensor>& args) { return swish(args[0]); };
  tg::Tensor x = tg::constant({{-3.0, -0.5, 0.0}, {0.25, 1.0, 4.0}});
  tg::GradientCheck check = tg::check_gradient(f, {x});
  CHECK(check.max_error < 1e-8);
  tg::testing::require_second_order_matches(f, {x});
}
