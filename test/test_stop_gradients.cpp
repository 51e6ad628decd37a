// GradientOptions::stop_gradients (TF tf.gradients' stop_gradients): partial derivatives.
#include <catch2/catch.hpp>

#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::message_of;
using tapegrad::testing::values;

TEST_CASE("stop_gradients gives TF's partial derivatives", "[stop_gradients]") {
  // TF's documented example: a = 0, b = 2a; d(a + b)/d[a, b] is [3, 1], and [1, 1] with both
  // stopped (each treated as a constant with respect to the other).
  const Tensor a = constant(0.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(a);
  const Tensor b = multiply(scalar(2.0, DType::Float64), a);
  const Tensor total = add(a, b);
  auto paused = tape.stop_recording();  // the gradients below are not recorded
  const auto full = tape.gradient({total}, {a, b}, GradientOptions{});
  CHECK(values(full[0]) == std::vector<double>{3.0});
  CHECK(values(full[1]) == std::vector<double>{1.0});
  GradientOptions stop_both;
  stop_both.stop_gradients = {a, b};
  const auto partial = tape.gradient({total}, {a, b}, stop_both);
  CHECK(values(partial[0]) == std::vector<double>{1.0});
  CHECK(values(partial[1]) == std::vector<double>{1.0});
}

TEST_CASE("stop_gradients holds an intermediate constant", "[stop_gradients]") {
  const Tensor x = constant({1.5, -2.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = square(x);       // x^2
  const Tensor z = multiply(y, x);  // x^3
  auto paused = tape.stop_recording();
  GradientOptions options;
  options.stop_gradients = {y};
  // y constant: dz/dx = y = x^2, not 3x^2.
  CHECK(values(tape.gradient({z}, {x}, options)[0]) == std::vector<double>{2.25, 4.0});
  CHECK(values(tape.gradient(z, x)) == std::vector<double>{6.75, 12.0});
  // With output gradients: weights w give w * x^2.
  options.output_gradients = {constant({2.0, 0.5})};
  CHECK(values(tape.gradient({z}, {x}, options)[0]) == std::vector<double>{4.5, 2.0});
}

TEST_CASE("stop_gradients that cut every path leave the source unconnected", "[stop_gradients]") {
  const Tensor x = constant({1.0, 2.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = exp(x);
  const Tensor z = reduce_sum(tanh(y));
  auto paused = tape.stop_recording();
  GradientOptions options;
  options.stop_gradients = {y};
  CHECK_FALSE(tape.gradient({z}, {x}, options)[0].defined());
  options.unconnected = UnconnectedGradients::Zero;
  CHECK(values(tape.gradient({z}, {x}, options)[0]) == std::vector<double>{0.0, 0.0});
  // The target itself stopped: a constant; only a source that is the target gets its seed.
  options.stop_gradients = {z};
  CHECK(values(tape.gradient({z}, {x}, options)[0]) == std::vector<double>{0.0, 0.0});
}

TEST_CASE("stop_gradients with nested tapes: the partial derivative is differentiable",
          "[stop_gradients]") {
  const Tensor x = constant({0.5});
  GradientTape outer;
  outer.watch(x);
  Tensor dz;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = sin(x);
    const Tensor z = multiply(y, square(x));  // y x^2
    GradientOptions options;
    options.stop_gradients = {y};
    dz = inner.gradient({z}, {x}, options)[0];  // 2 x y (y constant for the inner tape)
  }
  // The outer tape saw y = sin(x) and 2 x y: d/dx (2 x sin x) = 2 sin x + 2 x cos x.
  const double expected = 2 * std::sin(0.5) + 2 * 0.5 * std::cos(0.5);
  CHECK(values(outer.gradient(dz, x))[0] == Approx(expected).epsilon(1e-14));
}

TEST_CASE("stop_gradients rejects an undefined tensor", "[stop_gradients]") {
  const Tensor x = constant({1.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = square(x);
  GradientOptions options;
  options.stop_gradients = {y, Tensor()};
  CHECK(message_of<InvalidArgument>([&] { (void)tape.gradient({y}, {x}, options); }) ==
        "GradientTape::gradient: stop_gradients[1] is undefined");
}
