// grad_pass_through: the wrapped function's values with an identity gradient.
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

TEST_CASE("TF's example: y = grad_pass_through(x.assign)(z^2) at z = 3 gives dy/dz = 6",
          "[grad_pass_through]") {
  Variable x(constant(1.0), true, "x");
  Variable z(constant(3.0), true, "z");
  auto assign_x = [&](const Tensor& value) {
    x.assign(value);
    return x.value();
  };
  GradientTape tape;
  Tensor y = grad_pass_through(assign_x)(square(z.value()));
  require_close(y, {}, {9.0});
  require_close(x.peek(), {}, {9.0});
  auto grads = tape.gradient(y, std::vector<Variable>{z, x});
  require_close(grads[0], {}, {6.0});
  CHECK_FALSE(grads[1].defined());  // the variable touched by the wrapped op gets none
}

TEST_CASE("a non-differentiable forward gets an identity gradient", "[grad_pass_through]") {
  // A stand-in for a moving average: the forward ignores x's value entirely.
  Tensor running = constant({10.0, 20.0});
  auto average =
      grad_pass_through([&](const Tensor& v) { return stop_gradient(running + 0.0 * v); });
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = average(x) * constant({3.0, 5.0});
  require_close(y, {2}, {30.0, 100.0});
  require_close(tape.gradient(y, x), {2}, {3.0, 5.0});
}

TEST_CASE("grad_pass_through on several tensors", "[grad_pass_through]") {
  auto swap_signs = grad_pass_through([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{-in[0], in[1] * in[1]};
  });
  Tensor a = constant(2.0), b = constant(4.0);
  GradientTape tape;
  tape.watch(std::vector<Tensor>{a, b});
  auto out = swap_signs({a, b});
  require_close(out[0], {}, {-2.0});
  require_close(out[1], {}, {16.0});
  auto grads = tape.gradient(out[0] * 3.0 + out[1] * 7.0, std::vector<Tensor>{a, b});
  require_close(grads[0], {}, {3.0});
  require_close(grads[1], {}, {7.0});
}

TEST_CASE("grad_pass_through needs one output per input", "[grad_pass_through]") {
  auto bad = grad_pass_through(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; });
  auto msg = message_of<InvalidArgument>([&] { bad({constant(1.0), constant(2.0)}); });
  CHECK_THAT(msg, Catch::Contains("grad_pass_through") && Catch::Contains("1 outputs") &&
                      Catch::Contains("2 inputs"));
}

TEST_CASE("grad_pass_through whose output shape differs from its input", "[grad_pass_through]") {
  auto summed = grad_pass_through([](const Tensor& v) { return reduce_sum(v); });
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = summed(x);
  require_close(y, {}, {3.0});
  auto msg = message_of<InvalidArgument>([&] { tape.gradient(y, x); });
  CHECK_THAT(msg,
             Catch::Contains("GradPassThrough") && Catch::Contains("[]") && Catch::Contains("[2]"));
}
