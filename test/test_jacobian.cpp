// GradientTape::jacobian and batch_jacobian: TF's numbers, shapes, tape rules, unconnected
// sources, and every result against central differences for several op families.
#include "jacobian_cases.hpp"
#include "numerical_jacobian.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

TEST_CASE("jacobian of x*x at [1, 2] is [[2, 0], [0, 4]] (TF's example)") {
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  require_close(tape.jacobian(y, x), {2, 2}, {2, 0, 0, 4});
}

TEST_CASE("jacobian has shape target.shape ++ source.shape and matches central differences") {
  const Tensor x0 = random_tensor({3, 2}, 7);
  for (const JacobianCase& c : op_family_jacobian_cases()) {
    INFO(c.name);
    GradientTape tape;
    tape.watch(x0);
    Tensor y = c.f(x0);
    Tensor j = tape.jacobian(y, x0);
    require_close(j, concat_shapes(y.shape(), x0.shape()), numerical_jacobian(c.f, x0), 1e-7);
  }
}

TEST_CASE("jacobian with several sources gives one Jacobian per source") {
  Tensor x = random_tensor({2}, 3);
  Tensor w = random_tensor({3, 2}, 4);
  GradientTape tape;
  tape.watch(x);
  tape.watch(w);
  Tensor y = tanh(reduce_sum(w * x, {1}));  // [3]
  std::vector<Tensor> js = tape.jacobian(y, {x, w});
  REQUIRE(js.size() == 2);
  require_close(
      js[0], {3, 2},
      numerical_jacobian([&](const Tensor& v) { return tanh(reduce_sum(w * v, {1})); }, x), 1e-7);
  require_close(
      js[1], {3, 3, 2},
      numerical_jacobian([&](const Tensor& v) { return tanh(reduce_sum(v * x, {1})); }, w), 1e-7);
}

TEST_CASE("jacobian of a scalar target and of a scalar source") {
  Tensor x = constant(3.0);
  Tensor v = constant({1.0, 2.0, 3.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(v);
  Tensor s = reduce_sum(v * v) * x;  // scalar target
  Tensor vec = v * x;                // vector target, scalar source
  require_close(tape.jacobian(s, v), {3}, {6, 12, 18});
  require_close(tape.jacobian(vec, x), {3}, {1, 2, 3});
  require_close(tape.jacobian(s, x), {}, {14});
}

TEST_CASE("jacobian on a non-persistent tape is one call that consumes it") {
  Tensor x = constant({1.0, 2.0, 3.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x * x;
  require_close(tape.jacobian(y, x), {3, 3}, {3, 0, 0, 0, 12, 0, 0, 0, 27});
  CHECK_FALSE(tape.recording());
  const std::string second = message_of<TapeError>([&] { tape.jacobian(y, x); });
  CHECK_THAT(second, Catch::Contains("non-persistent"));
  CHECK_THAT(message_of<TapeError>([&] { tape.gradient(y, x); }),
             Catch::Contains("non-persistent"));
  CHECK_THAT(message_of<TapeError>([&] { tape.batch_jacobian(y, x); }),
             Catch::Contains("non-persistent"));
}

TEST_CASE("jacobian on a persistent tape can be called again and mixed with gradient") {
  Tensor x = constant({0.5, -1.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = exp(x);
  auto stop = tape.stop_recording();
  const std::vector<double> expected{std::exp(0.5), 0, 0, std::exp(-1.0)};
  require_close(tape.jacobian(y, x), {2, 2}, expected);
  require_close(tape.gradient(y, x), {2}, {std::exp(0.5), std::exp(-1.0)});
  require_close(tape.jacobian(y, x), {2, 2}, expected);
}

TEST_CASE("jacobian of an unconnected source: undefined (None) or zeros (Zero)") {
  Tensor x = constant({1.0, 2.0});
  Tensor z = constant({{1.0, 2.0, 3.0}});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(z);
  Tensor y = x * 2.0;
  CHECK_FALSE(tape.jacobian(y, z).defined());
  require_close(tape.jacobian(y, z, UnconnectedGradients::Zero), {2, 1, 3},
                std::vector<double>(6, 0));
  std::vector<Tensor> both = tape.jacobian(y, {x, z});
  require_close(both[0], {2, 2}, {2, 0, 0, 2});
  CHECK_FALSE(both[1].defined());
}

TEST_CASE("jacobian of an empty target has an empty result of the right shape") {
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = reshape(x, {2, 1}) * zeros({2, 0});  // [2, 0]
  Tensor j = tape.jacobian(y, x);
  REQUIRE(j.defined());
  CHECK(j.shape() == Shape{2, 0, 2});
}

TEST_CASE("jacobian rejects undefined arguments, naming them") {
  Tensor x = constant({1.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  CHECK_THAT(message_of<InvalidArgument>([&] { tape.jacobian(Tensor(), x); }),
             Catch::Contains("jacobian") && Catch::Contains("target"));
  CHECK_THAT(message_of<InvalidArgument>([&] { tape.jacobian(y, Tensor()); }),
             Catch::Contains("jacobian") && Catch::Contains("source"));
}

TEST_CASE("a jacobian computed under an outer tape is differentiable: a Hessian by nesting") {
  // f(x) = sum(x^3 * x0) has the gradient g, whose Jacobian is the Hessian; and the
  // Jacobian of that Hessian along v by one more tape checks the third order.
  Tensor x = constant({1.0, 2.0});
  GradientTape outer;
  outer.watch(x);
  Tensor h;
  {
    GradientTape middle;
    middle.watch(x);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      Tensor f = reduce_sum(x * x * x);
      g = inner.gradient(f, x);  // 3 x^2
    }
    h = middle.jacobian(g, x);  // diag(6 x)
  }
  require_close(h, {2, 2}, {6, 0, 0, 12});
  // d/dx of sum(H) = d/dx sum(6 x) = [6, 6].
  require_close(outer.gradient(h, x), {2}, {6, 6});
}

TEST_CASE("a persistent tape that records its own jacobian can differentiate it") {
  Tensor x = constant({1.0, 3.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x * x;
  Tensor j = tape.jacobian(y, x);  // recorded on the tape itself (warns once)
  require_close(j, {2, 2}, {3, 0, 0, 27});
  require_close(tape.gradient(j, x), {2}, {6, 18});
}

TEST_CASE("batch_jacobian of x*x at [[1, 2], [3, 4]] (TF's example)") {
  Tensor x = constant({{1.0, 2.0}, {3.0, 4.0}});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  require_close(tape.batch_jacobian(y, x), {2, 2, 2}, {2, 0, 0, 4, 6, 0, 0, 8});
}

TEST_CASE("batch_jacobian equals the per-example blocks of central differences") {
  const Tensor a = random_tensor({4, 3}, 11);
  const Tensor x0 = random_tensor({2, 4}, 12);
  // [b, 4] -> [b, 3, 2]: per example, rank 2 target rows through matmul, tanh, reshape.
  UnaryFn f = [a](const Tensor& x) {
    Tensor h = tanh(matmul(x, a)) * reduce_mean(exp(x), {1}, true);  // [b, 3]
    return reshape(h * h / (1.0 + h * h) + h, {-1, 3, 1}) * constant({1.0, -2.0});
  };
  GradientTape tape;
  tape.watch(x0);
  Tensor y = f(x0);
  REQUIRE(y.shape() == Shape{2, 3, 2});
  Tensor bj = tape.batch_jacobian(y, x0);
  REQUIRE(bj.shape() == Shape{2, 3, 2, 4});
  const std::vector<double> full = numerical_jacobian(f, x0);  // [12, 8]
  std::vector<double> blocks;
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t i = 0; i < 6; ++i) {
      for (std::size_t j = 0; j < 4; ++j) blocks.push_back(full[(b * 6 + i) * 8 + b * 4 + j]);
    }
  }
  require_close(bj, {2, 3, 2, 4}, blocks, 1e-7);
}

TEST_CASE("batch_jacobian of a rank-3 source") {
  Tensor x = random_tensor({2, 2, 3}, 5);
  GradientTape tape;
  tape.watch(x);
  Tensor y = reduce_sum(x * x, {2});  // [2, 2]
  Tensor bj = tape.batch_jacobian(y, x);
  REQUIRE(bj.shape() == Shape{2, 2, 2, 3});
  const auto xs = values(x);
  std::vector<double> expected(24, 0.0);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 3; ++k)
        expected[((b * 2 + i) * 2 + i) * 3 + k] = 2 * xs[(b * 2 + i) * 3 + k];
  require_close(bj, {2, 2, 2, 3}, expected);
}

TEST_CASE("batch_jacobian returns zeros for an unconnected source, as TF") {
  Tensor x = constant({{1.0, 2.0}, {3.0, 4.0}});
  Tensor z = constant({{1.0, 1.0, 1.0}, {2.0, 2.0, 2.0}});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(z);
  Tensor y = x * 3.0;
  require_close(tape.batch_jacobian(y, z), {2, 2, 3}, std::vector<double>(12, 0));
  require_close(tape.batch_jacobian(y, z, UnconnectedGradients::None), {2, 2, 3},
                std::vector<double>(12, 0));
}

TEST_CASE("batch_jacobian rejects ranks below 2 and different batch sizes") {
  Tensor x = constant({{1.0, 2.0}, {3.0, 4.0}});
  Tensor v = constant({1.0, 2.0});
  Tensor x3 = from_values({1.0, 2.0, 3.0}, {3, 1});
  GradientTape tape;
  tape.watch(x);
  tape.watch(v);
  tape.watch(x3);
  Tensor y = x * 2.0;
  Tensor yv = v * 2.0;
  const std::string low_rank = message_of<InvalidArgument>([&] { tape.batch_jacobian(yv, v); });
  CHECK_THAT(low_rank, Catch::Contains("batch_jacobian") && Catch::Contains("[2]") &&
                           Catch::Contains("rank 2"));
  const std::string batch = message_of<InvalidArgument>([&] { tape.batch_jacobian(y, x3); });
  CHECK_THAT(batch, Catch::Contains("batch_jacobian") && Catch::Contains("[2, 2]") &&
                        Catch::Contains("[3, 1]"));
  // A rejected call does not consume the tape.
  require_close(tape.batch_jacobian(y, x), {2, 2, 2}, {2, 0, 0, 2, 2, 0, 0, 2});
}
