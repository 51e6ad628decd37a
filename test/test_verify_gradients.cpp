// verify_gradients: passes correct derivatives (first, second, mixed), and names the argument,
// element, analytic and numeric values of a wrong one.
#include <catch2/catch.hpp>

#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::message_of;

namespace {

// x^3 computed outside tapegrad ops, with a gradient rule given by the caller.
Tensor cube(const Tensor& x, const std::string& op_type) {
  Tensor y = Tensor(xt::xarray<double>(xt::pow(x.array<double>(), 3.0)));
  record_operation(op_type, {x}, {y});
  return y;
}

void register_cube_gradients() {
  static const bool registered = [] {
    // 2x^2 instead of 3x^2: wrong at first order.
    register_gradient("VerifyWrongCube", [](const OpContext& op, const std::vector<Tensor>& g) {
      const Tensor& x = op.inputs()[0];
      return std::vector<Tensor>{multiply(g[0], multiply(scalar(2.0, x.dtype()), square(x)))};
    });
    // 3x^2, but through stop_gradient: right at first order, its own derivative is lost.
    register_gradient("VerifyFlatCube", [](const OpContext& op, const std::vector<Tensor>& g) {
      const Tensor& x = op.inputs()[0];
      return std::vector<Tensor>{
          multiply(g[0], stop_gradient(multiply(scalar(3.0, x.dtype()), square(x))))};
    });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("verify_gradients accepts correct first, second and mixed derivatives", "[verify]") {
  const Fn f = [](const std::vector<Tensor>& a) {
    // x * y * sin(x) + tanh(x @ y) summed over a broadcast: every pair of arguments interacts.
    return add(multiply(multiply(a[0], a[1]), sin(a[0])), tanh(matmul(a[0], a[1])));
  };
  const Tensor x = constant({{0.3, -0.7}, {1.1, 0.4}});
  const Tensor y = constant({{0.5, 0.2}, {-0.6, 0.9}});
  CHECK_NOTHROW(verify_gradients(f, {x, y}));
  CHECK_NOTHROW(verify_gradients(f, {x, y}, VerifyOptions{1, 1e-6, 1e-6, 1e-5}));
}

TEST_CASE("verify_gradients holds integer arguments constant", "[verify]") {
  const Fn f = [](const std::vector<Tensor>& a) {
    return multiply(exp(a[0]), cast(a[1], DType::Float64));
  };
  const Tensor x = constant({0.1, -0.2, 0.3});
  const Tensor k = from_values({1, 2, 3}, {3}, DType::Int32);
  CHECK_NOTHROW(verify_gradients(f, {x, k}));
}

TEST_CASE("verify_gradients names a wrong first derivative", "[verify]") {
  register_cube_gradients();
  const Fn f = [](const std::vector<Tensor>& a) { return cube(a[0], "VerifyWrongCube"); };
  const Tensor x = constant({{1.0, 2.0}});
  const std::string message = message_of<GradientCheckError>([&] { verify_gradients(f, {x}); });
  // d(x^3)/dx at x = 1 is 3; the rule says 2.
  CHECK(message.rfind("verify_gradients: argument 0, first derivative of output element [0, 0] "
                      "with respect to element [0, 0]: analytic 2, numeric 3",
                      0) == 0);
  CHECK(message.find("> atol + rtol * |numeric| = 3.1e-05)") != std::string::npos);
}

TEST_CASE("verify_gradients names a wrong second derivative that first order misses", "[verify]") {
  register_cube_gradients();
  const Fn f = [](const std::vector<Tensor>& a) { return cube(a[0], "VerifyFlatCube"); };
  const Tensor x = constant({2.0, -1.0});
  CHECK_NOTHROW(verify_gradients(f, {x}, VerifyOptions{1}));
  const std::string message = message_of<GradientCheckError>([&] { verify_gradients(f, {x}); });
  // The gradient of sum(w * x^3) is 3 w x^2; its derivative 6 w x is lost (analytic 0).
  CHECK(message.rfind("verify_gradients: arguments 0 and 0, second derivative: element [0] of the "
                      "gradient of sum(w * f) with respect to argument 0, differentiated with "
                      "respect to element [0] of argument 0: analytic 0, numeric ",
                      0) == 0);
}

TEST_CASE("verify_gradients rejects bad options and arguments", "[verify]") {
  const Fn f = [](const std::vector<Tensor>& a) { return square(a[0]); };
  const Tensor x = constant({1.0});
  CHECK(message_of<InvalidArgument>([&] { verify_gradients(f, {x}, VerifyOptions{3}); }) ==
        "verify_gradients: order must be 1 or 2, got 3");
  CHECK(message_of<InvalidArgument>([&] {
          verify_gradients(f, {x}, VerifyOptions{2, 0.0});
        }) ==
        "verify_gradients: delta must be positive and atol, rtol non-negative; got delta 0, "
        "atol 1e-06, rtol 1e-05");
  CHECK(message_of<InvalidArgument>([&] { verify_gradients(f, {Tensor()}); }) ==
        "verify_gradients: argument 0 is undefined");
}

TEST_CASE("verify_gradients rejects an f whose output is not floating, naming its dtype",
          "[verify]") {
  const Tensor x = constant({1.118, -2.5});
  const Fn to_int = [](const std::vector<Tensor>& a) { return cast(a[0], DType::Int32); };
  const Fn to_bool = [](const std::vector<Tensor>& a) {
    return greater(a[0], scalar(0.0, DType::Float64));
  };
  for (const int order : {1, 2}) {
    INFO("order " << order);
    VerifyOptions options;
    options.order = order;
    CHECK(message_of<InvalidArgument>([&] { verify_gradients(to_int, {x}, options); }) ==
          "verify_gradients: f's output is not floating point: it has dtype int32 and shape [2] "
          "(only a float32 or float64 output has derivatives to verify)");
    CHECK(message_of<InvalidArgument>([&] { verify_gradients(to_bool, {x}, options); }) ==
          "verify_gradients: f's output is not floating point: it has dtype bool and shape [2] "
          "(only a float32 or float64 output has derivatives to verify)");
  }
}
