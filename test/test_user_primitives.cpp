// User-defined primitives: a forward computed with xtensor, recorded with record_operation,
// differentiated by a gradient registered with register_gradient.
#include "support.hpp"

#include <functional>
#include <stdexcept>

#include <xtensor/xmath.hpp>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// x^3 computed outside tapegrad.
Tensor user_cube(const Tensor& x) {
  xt::xarray<double> out = x.array<double>() * x.array<double>() * x.array<double>();
  Tensor y(std::move(out));
  record_operation("UserCube", {x}, {y});
  return y;
}

// Rounds to the nearest integer: piecewise constant, so declared not differentiable.
Tensor user_round(const Tensor& x) {
  xt::xarray<double> out = xt::round(x.array<double>());
  Tensor y(std::move(out));
  record_operation("UserRound", {x}, {y});
  return y;
}

void register_user_ops() {
  static const bool registered = [] {
    register_gradient(
        "UserCube",
        [](const OpContext& ctx, const std::vector<Tensor>& grads) {
          const Tensor& x = ctx.inputs()[0];
          return std::vector<Tensor>{grads[0] * 3.0 * x * x};
        },
        Keep::only({0}), Keep::none());
    not_differentiable("UserRound");
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("a user op with a registered gradient: values, first and second order",
          "[registry][user_op]") {
  register_user_ops();
  CHECK(is_registered("UserCube"));
  Tensor x = constant({1.0, -2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = user_cube(x);
  require_close(y, {2}, {1.0, -8.0});
  require_close(tape.gradient(y, x), {2}, {3.0, 12.0});
  Fn f = [](const std::vector<Tensor>& a) { return reduce_sum(user_cube(a[0]) * 2.0); };
  require_gradient_matches(f, {random_tensor({3, 2}, 4)});
  require_second_order_matches(f, {random_tensor({3, 2}, 5)});
}

TEST_CASE("Keep says which tensors the tape keeps for a user op", "[registry][user_op]") {
  register_user_ops();
  Tensor x = random_tensor({100}, 6);
  GradientTape tape;
  tape.watch(x);
  Tensor warm = x + x;  // takes the arena's first chunk, keeps nothing
  const std::size_t before = tape.bytes_held();
  Tensor y = user_cube(x);
  // x only (800 bytes and its storage block), not y.
  CHECK(tape.bytes_held() - before >= 100 * sizeof(double));
  CHECK(tape.bytes_held() - before < 2 * 100 * sizeof(double));
}

TEST_CASE("a not_differentiable user op gives no gradient", "[registry][user_op]") {
  register_user_ops();
  Tensor x = constant({0.4, 1.6});
  GradientTape tape;
  tape.watch(x);
  Tensor y = user_round(x) * x;  // only the direct path to x carries a gradient
  require_close(y, {2}, {0.0, 3.2});
  require_close(tape.gradient(y, x), {2}, {0.0, 2.0});
  GradientTape tape2;
  tape2.watch(x);
  Tensor r = user_round(x);
  CHECK_FALSE(tape2.gradient(r, x).defined());
}

TEST_CASE("an op recorded without a gradient raises LookupError naming it at gradient() time",
          "[registry][user_op]") {
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y(xt::xarray<double>(x.array<double>() + 1.0));
  record_operation("UserOpNobodyRegistered", {x}, {y});  // recording itself is fine
  auto msg = message_of<LookupError>([&] { tape.gradient(y * 2.0, x); });
  CHECK_THAT(msg, Catch::Contains("UserOpNobodyRegistered"));
}

TEST_CASE("a gradient registered after recording but before gradient() is used",
          "[registry][user_op]") {
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y(xt::xarray<double>(x.array<double>() * 5.0));
  record_operation("UserScaleByFiveLateRegistration", {x}, {y});
  register_gradient("UserScaleByFiveLateRegistration",
                    [](const OpContext&, const std::vector<Tensor>& g) {
                      return std::vector<Tensor>{g[0] * 5.0};
                    });
  require_close(tape.gradient(y, x), {}, {5.0});
}

TEST_CASE("record_operation is a no-op when no tape watches an input", "[registry][user_op]") {
  register_user_ops();
  Tensor x = constant(2.0);
  Tensor unwatched = constant(1.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = user_cube(unwatched);
  CHECK_FALSE(should_record({unwatched}));
  CHECK(should_record({unwatched, x}));
  CHECK_FALSE(tape.gradient(y, x).defined());
}

TEST_CASE("registering a gradient twice is an error", "[registry][user_op]") {
  register_user_ops();
  auto msg = message_of<InvalidArgument>([] {
    register_gradient("UserCube", [](const OpContext&, const std::vector<Tensor>& g) { return g; });
  });
  CHECK_THAT(msg, Catch::Contains("UserCube"));
  msg = message_of<InvalidArgument>([] { not_differentiable("UserRound"); });
  CHECK_THAT(msg, Catch::Contains("UserRound"));
}

namespace {

// 2 * x, whose gradient function must never run: it is only ever used behind a cut.
Tensor user_never_differentiated(const Tensor& x) {
  static const bool registered = [] {
    register_gradient("UserNeverDifferentiated",
                      [](const OpContext&, const std::vector<Tensor>&) -> std::vector<Tensor> {
                        throw std::runtime_error("UserNeverDifferentiated's gradient ran");
                      });
    return true;
  }();
  (void)registered;
  Tensor y(xt::xarray<double>(x.array<double>() * 2.0));
  record_operation("UserNeverDifferentiated", {x}, {y});
  return y;
}

}  // namespace

TEST_CASE("an op off every differentiable path is never visited: its gradient never runs",
          "[registry][user_op][pruning]") {
  register_user_ops();
  // y = x^2 + user(cut(x)): only x^2 reaches x, so dy/dx = 2x exactly and the user op (whose
  // gradient throws) lies on no path from y to x.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cuts = {
      {"stop_gradient", [](const Tensor& x) { return stop_gradient(x); }},
      {"cast to int32",
       [](const Tensor& x) { return cast(cast(x, DType::Int32), DType::Float64); }},
      {"a comparison",
       [](const Tensor& x) {
         return cast(greater(x, scalar(0.0, DType::Float64)), DType::Float64);
       }},
      {"argmax", [](const Tensor& x) { return cast(argmax(x, 0), DType::Float64); }},
      {"a not_differentiable user op", [](const Tensor& x) { return user_round(x); }},
  };
  for (const auto& [name, cut] : cuts) {
    INFO("cut by " << name);
    Tensor x = constant({1.5, -2.0});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = x * x + user_never_differentiated(cut(x));
    require_close(tape.gradient(y, x), {2}, {3.0, -4.0}, 0.0);
  }
  {
    INFO("cut by GradientOptions::stop_gradients");
    Tensor x = constant({1.5, -2.0});
    GradientTape tape;
    tape.watch(x);
    const Tensor s = tapegrad::sin(x);
    const Tensor y = x * x + user_never_differentiated(s * 3.0);
    GradientOptions options;
    options.stop_gradients = {s};
    require_close(tape.gradient({y}, {x}, options)[0], {2}, {3.0, -4.0}, 0.0);
  }
}

TEST_CASE("an op with no gradient behind a cut is no error (it is never visited)",
          "[registry][user_op][pruning]") {
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor u(xt::xarray<double>(x.array<double>() + 1.0));
  record_operation("UserOpBehindAStopGradient", {x}, {u});
  const Tensor y = x * 3.0 + stop_gradient(u);
  require_close(tape.gradient(y, x), {}, {3.0}, 0.0);
}

TEST_CASE("record_operation rejects an output that is one of its inputs, and records nothing",
          "[registry][user_op][misuse]") {
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor alias = x;  // a shallow copy: the same tensor
  const std::string msg = message_of<InvalidArgument>([&] {
    record_operation("UserOpReturningItsInput", {constant(5.0), x}, {alias});
  });
  CHECK(msg ==
        "record_operation('UserOpReturningItsInput'): output 0 is input 1 (the same tensor, "
        "shape [2] and dtype float64): an op's outputs must be new tensors, not its inputs");
  // The tape is untouched: x is still the watched leaf, so d(3x)/dx is 3, not 6.
  const Tensor y = x * 3.0;
  require_close(tape.gradient(y, x), {2}, {3.0, 3.0}, 0.0);
}
