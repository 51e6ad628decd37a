// GradientTape::jacobian and batch_jacobian vectorized (JacobianOptions::vectorize, the
// default) against the loop (vectorize = false) on the functions of test_jacobian, in passes of
// parallel_iterations rows, under an outer tape, and with a user primitive in the walk.
#include <catch2/catch.hpp>

#include "jacobian_cases.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::JacobianCase;
using tapegrad::testing::op_family_jacobian_cases;
using tapegrad::testing::random_tensor;
using tapegrad::testing::require_close;
using tapegrad::testing::UnaryFn;
using tapegrad::testing::values;

namespace {

// The op-family functions of test_jacobian, and two more families.
std::vector<JacobianCase> cases() {
  std::vector<JacobianCase> all = op_family_jacobian_cases();
  const std::vector<JacobianCase> more{
      {"nn: softmax, relu, maximum, where",
       [](const Tensor& x) {
         return softmax(relu(x) + maximum(x, scalar(0.1, DType::Float64))) *
                where(greater(x, scalar(0.0, DType::Float64)), x, -x);
       }},
      {"array: gather, concat, slice, tile",
       [](const Tensor& x) {
         const Tensor g = gather(x, from_values({2, 0}, {2}, DType::Int64), 0);
         return concat({slice(tile(g, {1, 2}), {0, 1}, {2, 3}), transpose(x * x)}, 0);
       }},
  };
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

JacobianOptions loop_options() {
  JacobianOptions options;
  options.vectorize = false;
  return options;
}

void require_same(const Tensor& actual, const Tensor& expected, double tolerance = 1e-12) {
  REQUIRE(actual.defined());
  require_close(actual, expected.shape(), values(expected), tolerance);
}

Tensor jacobian_of(const UnaryFn& f, const Tensor& x, const JacobianOptions& options) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.jacobian(y, x, options);
}

}  // namespace

TEST_CASE("vectorized jacobian equals the loop on every function, in any number of passes",
          "[jacobian][vectorize]") {
  const Tensor x = random_tensor({3, 2}, 7);
  for (const JacobianCase& c : cases()) {
    INFO(c.name);
    const Tensor loop = jacobian_of(c.f, x, loop_options());
    require_same(jacobian_of(c.f, x, JacobianOptions{}), loop);
    for (const std::size_t rows : {1, 2, 5, 100}) {
      INFO("parallel_iterations " << rows);
      JacobianOptions options;
      options.parallel_iterations = rows;
      require_same(jacobian_of(c.f, x, options), loop);
    }
  }
}

TEST_CASE(
    "vectorized jacobian of a matrix times a column or a row, every transpose, equals the loop",
    "[jacobian][vectorize]") {
  // The identity seed stays diagonal through the tanh gradient, and the matrix product with a
  // diagonal batch is a scaled copy of the matrix: checked against the loop in every layout.
  const Tensor w = random_tensor({4, 4}, 21);
  const Tensor column = random_tensor({4, 1}, 22);
  const Tensor row = random_tensor({1, 4}, 23);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      INFO("transpose_a " << ta << ", transpose_b " << tb);
      const UnaryFn right = [&](const Tensor& x) {
        return tanh(matmul(w, tb ? transpose(x) : x, ta, tb));
      };
      const UnaryFn left = [&](const Tensor& x) {
        return sigmoid(matmul(ta ? transpose(x) : x, w, ta, tb)) * x;
      };
      require_same(jacobian_of(right, column, JacobianOptions{}),
                   jacobian_of(right, column, loop_options()));
      require_same(jacobian_of(left, row, JacobianOptions{}),
                   jacobian_of(left, row, loop_options()));
    }
  }
  // The analytic Jacobian of tanh(W x): (1 - y^2) W.
  const Tensor y = tanh(matmul(w, column));
  const Tensor analytic = multiply(subtract(scalar(1.0, DType::Float64), y * y), w);
  require_same(
      jacobian_of([&](const Tensor& x) { return tanh(matmul(w, x)); }, column, JacobianOptions{}),
      reshape(analytic, {4, 1, 4, 1}));
}

TEST_CASE("vectorized jacobian: several sources, unconnected ones, scalars, empty targets",
          "[jacobian][vectorize]") {
  const Tensor x = random_tensor({3}, 8);
  const Tensor w = random_tensor({2, 3}, 9);
  const Tensor z = random_tensor({2}, 10);
  for (const auto unconnected : {UnconnectedGradients::None, UnconnectedGradients::Zero}) {
    JacobianOptions vectorized;
    vectorized.unconnected = unconnected;
    JacobianOptions loop = vectorized;
    loop.vectorize = false;
    auto run = [&](const JacobianOptions& options) {
      GradientTape tape;
      for (const Tensor* t : {&x, &w, &z}) tape.watch(*t);
      const Tensor y = tanh(reduce_sum(w * x, {1}));
      return tape.jacobian(y, {x, w, z}, options);
    };
    const std::vector<Tensor> got = run(vectorized);
    const std::vector<Tensor> want = run(loop);
    require_same(got[0], want[0]);
    require_same(got[1], want[1]);
    CHECK(got[2].defined() == want[2].defined());
    CHECK(got[2].defined() == (unconnected == UnconnectedGradients::Zero));
    if (got[2].defined()) require_same(got[2], want[2], 0);
  }
  // A scalar target and a scalar source.
  const Tensor s = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(s);
  tape.watch(x);
  const Tensor scalar_target = reduce_sum(x * x * s);
  require_same(tape.jacobian(scalar_target, s, JacobianOptions{}),
               tape.jacobian(scalar_target, s, loop_options()));
  require_same(tape.jacobian(x * s, s, JacobianOptions{}), tape.jacobian(x * s, s, loop_options()));
  require_close(tape.jacobian(scalar_target, x, JacobianOptions{}), {3}, values(x * 6.0));
  // An empty target: an empty Jacobian either way.
  const Tensor empty = slice(x, {0}, {0});
  const Tensor j = tape.jacobian(empty * s, x, JacobianOptions{});
  CHECK(j.shape() == Shape{0, 3});
}

TEST_CASE("vectorized batch_jacobian equals the loop, in any number of passes",
          "[jacobian][vectorize]") {
  const Tensor w = random_tensor({4, 3}, 11);
  const Tensor x = random_tensor({5, 4}, 12);
  auto run = [&](const JacobianOptions& options) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = softmax(tanh(matmul(x, w))) * reduce_sum(x, {1}, true);
    return tape.batch_jacobian(y, x, options);
  };
  const Tensor loop = run(loop_options());
  CHECK(loop.shape() == Shape{5, 3, 4});
  require_same(run(JacobianOptions{}), loop);
  for (const std::size_t rows : {1, 2}) {
    JacobianOptions options;
    options.parallel_iterations = rows;
    require_same(run(options), loop);
  }
  // An unconnected source: zeros, as the loop.
  GradientTape tape;
  tape.watch(x);
  const Tensor z = random_tensor({5, 2}, 13);
  tape.watch(z);
  const Tensor y = x * x;
  require_close(tape.batch_jacobian(y, z, JacobianOptions{}), {5, 4, 2},
                std::vector<double>(40, 0.0));
}

TEST_CASE("a vectorized jacobian under an outer tape is differentiable like the loop's",
          "[jacobian][vectorize]") {
  const Tensor x = constant({0.3, -0.7, 1.1});
  auto hessian_sum_gradient = [&](const JacobianOptions& options) {
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
        g = inner.gradient(reduce_sum(tanh(x) * x * x), x);
      }
      h = middle.jacobian(g, x, options);
    }
    return std::make_pair(h, outer.gradient(reduce_sum(h * h), x));
  };
  const auto [h_vectorized, d_vectorized] = hessian_sum_gradient(JacobianOptions{});
  const auto [h_loop, d_loop] = hessian_sum_gradient(loop_options());
  require_same(h_vectorized, h_loop);
  require_same(d_vectorized, d_loop);
}

TEST_CASE(
    "a jacobian through a user op whose gradient has no batching rule loops, with the "
    "loop's result",
    "[jacobian][vectorize]") {
  // The gradient of TestJacobianUserSquare is itself computed outside tapegrad and recorded:
  // the walk runs an op without a batching rule.
  register_gradient("TestJacobianUserSquareGrad", [](const OpContext&, const std::vector<Tensor>&) {
    return std::vector<Tensor>{Tensor(), Tensor()};
  });
  register_gradient("TestJacobianUserSquare",
                    [](const OpContext& op, const std::vector<Tensor>& g) {
                      const Tensor& x = op.inputs()[0];
                      std::vector<double> v = values(g[0]);
                      const std::vector<double> xs = values(x);
                      for (std::size_t i = 0; i < v.size(); ++i) v[i] *= 2 * xs[i];
                      const Tensor out = from_values(v, x.shape());
                      record_operation("TestJacobianUserSquareGrad", {x, g[0]}, {out});
                      return std::vector<Tensor>{out};
                    });
  const Tensor x = constant({1.0, 2.0, 3.0});
  auto run = [&](const JacobianOptions& options) {
    GradientTape tape;
    tape.watch(x);
    std::vector<double> v = values(x);
    for (double& e : v) e *= e;
    const Tensor y = from_values(v, x.shape());
    record_operation("TestJacobianUserSquare", {x}, {y});
    return tape.jacobian(sin(y), x, options);
  };
  const Tensor loop = run(loop_options());
  require_close(loop, {3, 3},
                {2 * std::cos(1.0), 0, 0, 0, 4 * std::cos(4.0), 0, 0, 0, 6 * std::cos(9.0)}, 1e-12);
  require_same(run(JacobianOptions{}), loop, 0);
}

namespace {

// The benchmark's 10-op elementwise chain (bench/jacobian.cpp): its walk keeps the identity
// seed diagonal from the first op to the last.
Tensor elementwise_chain(const Tensor& x) {
  Tensor y = tanh(x) * x;
  y = sin(exp(y)) + x;
  y = square(sigmoid(y));
  y = y / (x * x + 1.0);
  return log1p(y);
}

void require_identical(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.defined());
  CHECK(actual.shape() == expected.shape());
  CHECK(actual.dtype() == expected.dtype());
  CHECK(values(actual) == values(expected));
}

}  // namespace

TEST_CASE("vectorized jacobian of an elementwise chain (kept diagonal) equals the loop exactly",
          "[jacobian][vectorize]") {
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    INFO(dtype_name(dtype));
    // A [7, 1] target: the diagonal is written once, straight into shape [7, 1, 7, 1].
    const Tensor x = cast(random_tensor({7, 1}, 31), dtype);
    const Tensor loop = jacobian_of(elementwise_chain, x, loop_options());
    CHECK(loop.shape() == Shape{7, 1, 7, 1});
    require_identical(jacobian_of(elementwise_chain, x, JacobianOptions{}), loop);
    // In passes of fewer rows than the target's size the identity is built and the walk runs
    // dense, on batched shapes whose kernels may round differently: close, not identical.
    JacobianOptions passes;
    passes.parallel_iterations = 3;
    require_same(jacobian_of(elementwise_chain, x, passes), loop,
                 dtype == DType::Float64 ? 1e-12 : 1e-6);
  }
  // The analytic Jacobian of tanh: diag(1 - tanh(x)^2).
  const Tensor x = constant({0.5, -1.5, 2.0});
  const std::vector<double> t = values(tanh(x));
  require_close(jacobian_of([](const Tensor& v) { return tanh(v); }, x, JacobianOptions{}), {3, 3},
                {1 - t[0] * t[0], 0, 0, 0, 1 - t[1] * t[1], 0, 0, 0, 1 - t[2] * t[2]}, 1e-15);
}

TEST_CASE(
    "vectorized jacobian: a diagonal meeting an op it does not cover becomes dense, "
    "with the loop's result",
    "[jacobian][vectorize]") {
  const Tensor x = random_tensor({2, 3}, 32);
  const std::vector<UnaryFn> fns{
      // Add of the diagonal and a dense batch (the gradient of the broadcast scalar).
      [](const Tensor& v) { return sin(v) * v + reduce_sum(v * v); },
      // A transpose in the middle of a chain, then more elementwise ops.
      [](const Tensor& v) { return exp(transpose(tanh(v) * v)) * transpose(v); },
      // Only the seed itself is needed dense (the first op's gradient has no diagonal form).
      [](const Tensor& v) { return transpose(v) * 2.0; },
  };
  for (std::size_t k = 0; k < fns.size(); ++k) {
    INFO("function " << k);
    require_same(jacobian_of(fns[k], x, JacobianOptions{}), jacobian_of(fns[k], x, loop_options()),
                 0);
  }
}

TEST_CASE("a diagonal vectorized jacobian is differentiable, also in forward mode",
          "[jacobian][vectorize]") {
  const Tensor x = constant({0.3, -0.7, 1.1, 0.4});
  auto sum_of_squares_gradient = [&](const JacobianOptions& options) {
    GradientTape outer;
    outer.watch(x);
    Tensor j;
    {
      GradientTape tape;
      tape.watch(x);
      j = tape.jacobian(elementwise_chain(x), x, options);
    }
    return std::make_pair(j, outer.gradient(reduce_sum(j * j), x));
  };
  const auto [j_vectorized, d_vectorized] = sum_of_squares_gradient(JacobianOptions{});
  const auto [j_loop, d_loop] = sum_of_squares_gradient(loop_options());
  require_identical(j_vectorized, j_loop);
  require_same(d_vectorized, d_loop);
  // f = tanh: d/dx sum(J^2) = d/dx sum((1 - t^2)^2) = -4 t (1 - t^2)^2.
  GradientTape outer;
  outer.watch(x);
  Tensor j;
  {
    GradientTape tape;
    tape.watch(x);
    j = tape.jacobian(tanh(x), x, JacobianOptions{});
  }
  std::vector<double> expected;
  for (const double t : values(tanh(x))) expected.push_back(-4 * t * (1 - t * t) * (1 - t * t));
  require_close(outer.gradient(reduce_sum(j * j), x), {4}, expected, 1e-12);
  // Forward mode through the diagonal op: the tangent of J along v is diag(f''(x) v).
  const Tensor v = constant({1.0, 2.0, -1.0, 0.5});
  ForwardAccumulator acc(x, v);
  Tensor jf;
  {
    GradientTape tape;
    tape.watch(x);
    jf = tape.jacobian(tanh(x), x, JacobianOptions{});
  }
  const std::vector<double> t = values(tanh(x));
  const std::vector<double> vs = values(v);
  std::vector<double> tangent(16, 0.0);
  for (std::size_t i = 0; i < 4; ++i) tangent[i * 4 + i] = -2 * t[i] * (1 - t[i] * t[i]) * vs[i];
  require_close(acc.jvp(jf), {4, 4}, tangent, 1e-12);
}
