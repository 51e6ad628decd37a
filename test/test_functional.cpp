// The functional forms: value_and_gradients, gradients, make_vjp,
// implicit_value_and_gradients, jacobian, hessian, hessian_vector_product.
#include <cmath>

#include "numerical_jacobian.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// f(x, y) = x^3 y - x y^2 (TF's example).
Tensor cubic(const std::vector<Tensor>& a) {
  return a[0] * a[0] * a[0] * a[1] - a[0] * a[1] * a[1];
}

// 1/2 x^T A x for a fixed non-symmetric A; its Hessian is (A + A^T) / 2.
struct Quadratic {
  Tensor a = constant({{1.0, 2.0, 0.5}, {-1.0, 3.0, 4.0}, {2.0, 0.0, -2.0}});
  Tensor operator()(const Tensor& x) const {
    Tensor column = reshape(x, {3, 1});
    return reshape(matmul(column, matmul(a, column), true, false), {}) * 0.5;
  }
  std::vector<double> symmetric_part() const {
    const auto v = values(a);
    std::vector<double> s(9);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j) s[i * 3 + j] = (v[i * 3 + j] + v[j * 3 + i]) / 2;
    return s;
  }
};

struct Case {
  const char* name;
  UnaryFn f;
};

// Functions of one [2, 3] tensor from several op families.
std::vector<Case> op_family_cases() {
  const Tensor w = random_tensor({3, 2}, 31);
  return {
      {"math: tanh, exp, multiply, divide",
       [](const Tensor& x) { return tanh(x) * exp(x * 0.5) / (x * x + 1.5); }},
      {"reduce: reduce_sum, reduce_mean",
       [](const Tensor& x) { return reduce_mean(x * x * x, {1}) + reduce_sum(exp(x)); }},
      {"linalg: matmul", [w](const Tensor& x) { return tanh(matmul(x, w)) * matmul(x, w); }},
      {"array: reshape, transpose",
       [](const Tensor& x) {
         return transpose(reshape(exp(x) * x, {3, 2})) * x;
       }},
  };
}

}  // namespace

TEST_CASE("value_and_gradients of x^3 y - x y^2 at (2, 3): 6, 27 and -4 (TF)") {
  auto [value, grads] = value_and_gradients(cubic, {constant(2.0), constant(3.0)});
  require_close(value, {}, {6});
  REQUIRE(grads.size() == 2);
  require_close(grads[0], {}, {27});
  require_close(grads[1], {}, {-4});
  const std::vector<Tensor> only = gradients(cubic, {constant(2.0), constant(3.0)});
  require_close(only[0], {}, {27});
  require_close(only[1], {}, {-4});
}

TEST_CASE("gradients of gradients: d2f/dx2 of x^3 y - x y^2 at (2, 3) is 36 (TF)") {
  Fn df_dx = [](const std::vector<Tensor>& a) { return gradients(cubic, a)[0]; };
  const std::vector<Tensor> second = gradients(df_dx, {constant(2.0), constant(3.0)});
  require_close(second[0], {}, {36});      // 6 x y
  require_close(second[1], {}, {12 - 6});  // 3 x^2 - 2 y
}

TEST_CASE("gradients treats each argument as a distinct tensor") {
  Fn product = [](const std::vector<Tensor>& a) { return a[0] * a[1]; };
  Tensor one = constant(1.0);
  const std::vector<Tensor> g = gradients(product, {one, one});
  require_close(g[0], {}, {1});
  require_close(g[1], {}, {1});
}

TEST_CASE("gradients: an unconnected or integer argument gets an undefined gradient") {
  Fn f = [](const std::vector<Tensor>& a) { return a[0] * 2.0; };
  const std::vector<Tensor> g =
      gradients(f, {constant(1.0), constant(5.0), zeros({2}, DType::Int32)});
  require_close(g[0], {}, {2});
  CHECK_FALSE(g[1].defined());
  CHECK_FALSE(g[2].defined());
}

TEST_CASE("gradients match central differences for several op families") {
  const Tensor x = random_tensor({2, 3}, 41);
  for (const Case& c : op_family_cases()) {
    INFO(c.name);
    const UnaryFn f = c.f;
    const std::vector<Tensor> g =
        gradients([f](const std::vector<Tensor>& a) { return f(a[0]); }, {x});
    const UnaryFn total = [f](const Tensor& v) { return reduce_sum(f(v)); };
    require_close(g[0], x.shape(), numerical_jacobian(total, x), 1e-7);
  }
}

TEST_CASE("functions returning an undefined tensor cannot be differentiated") {
  Fn none = [](const std::vector<Tensor>&) { return Tensor(); };
  const UnaryFn none1 = [](const Tensor&) { return Tensor(); };
  const Tensor x = constant(1.0);
  CHECK_THAT(message_of<InvalidArgument>([&] { value_and_gradients(none, {x}); }),
             Catch::Contains("value_and_gradients") && Catch::Contains("returns None"));
  CHECK_THAT(message_of<InvalidArgument>([&] { gradients(none, {x}); }),
             Catch::Contains("returns None"));
  CHECK_THAT(message_of<InvalidArgument>([&] { make_vjp(none, {x}); }),
             Catch::Contains("make_vjp") && Catch::Contains("returns None"));
  CHECK_THAT(message_of<InvalidArgument>([&] { jacobian(none1, x); }),
             Catch::Contains("jacobian") && Catch::Contains("returns None"));
  CHECK_THAT(message_of<InvalidArgument>([&] { hessian(none1, x); }),
             Catch::Contains("hessian") && Catch::Contains("returns None"));
  CHECK_THAT(message_of<InvalidArgument>([&] { hessian_vector_product(none1, x, x); }),
             Catch::Contains("hessian_vector_product") && Catch::Contains("returns None"));
  CHECK_THAT(
      message_of<InvalidArgument>([&] { implicit_value_and_gradients([] { return Tensor(); }); }),
      Catch::Contains("implicit_value_and_gradients") && Catch::Contains("returns None"));
}

TEST_CASE("make_vjp: vjp() uses ones, vjp(dy) uses dy, and it can be called many times") {
  Fn f = [](const std::vector<Tensor>& a) { return a[0] * a[0] * a[1]; };  // [2]
  Tensor x = constant({1.0, 2.0});
  Tensor y = constant({3.0, -1.0});
  auto [value, vjp] = make_vjp(f, {x, y});
  require_close(value, {2}, {3, -4});
  for (int round = 0; round < 3; ++round) {
    const std::vector<Tensor> ones_product = vjp();
    require_close(ones_product[0], {2}, {6, -4});  // 2 x y
    require_close(ones_product[1], {2}, {1, 4});   // x^2
    const std::vector<Tensor> weighted = vjp(constant({2.0, 0.5}));
    require_close(weighted[0], {2}, {12, -2});
    require_close(weighted[1], {2}, {2, 2});
  }
  const VJP copy = vjp;
  require_close(copy()[0], {2}, {6, -4});
}

TEST_CASE("make_vjp leaves no tape recording and outlives its scope") {
  VJP vjp = [] {
    Fn f = [](const std::vector<Tensor>& a) { return exp(a[0]); };
    return make_vjp(f, {constant({0.0, 1.0})}).second;
  }();
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor z = x * x;
  CHECK(tape.gradient(z, x).item<double>() == Approx(4.0));
  require_close(vjp()[0], {2}, {1.0, std::exp(1.0)});
}

TEST_CASE("make_vjp of a function returning its argument, and the same tensor twice") {
  Fn first = [](const std::vector<Tensor>& a) { return a[0]; };
  Tensor x = constant({1.0, 2.0});
  auto [value, vjp] = make_vjp(first, {x, x});
  require_close(value, {2}, {1, 2});
  const std::vector<Tensor> g = vjp(constant({5.0, 7.0}));
  require_close(g[0], {2}, {5, 7});
  CHECK_FALSE(g[1].defined());
}

TEST_CASE("make_vjp rejects a dy of the wrong shape or dtype, naming both") {
  Fn f = [](const std::vector<Tensor>& a) { return a[0] * 3.0; };
  // The VJP by name, not as a binding: C++17 lambdas cannot capture a binding (clang says so).
  const auto vjp = make_vjp(f, {constant({1.0, 2.0})}).second;
  CHECK_THAT(message_of<InvalidArgument>([&] {
               vjp(constant({1.0, 2.0, 3.0}));
             }),
             Catch::Contains("VJP") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  CHECK_THAT(message_of<InvalidArgument>([&] { vjp(ones({2}, DType::Float32)); }),
             Catch::Contains("float32") && Catch::Contains("float64"));
}

TEST_CASE("a vjp called under an outer tape is differentiable") {
  Tensor x = constant(1.5);
  GradientTape outer;
  outer.watch(x);
  Fn cube = [](const std::vector<Tensor>& a) { return a[0] * a[0] * a[0]; };
  auto [value, vjp] = make_vjp(cube, {x});
  Tensor g = vjp()[0];                                 // 3 x^2
  require_close(outer.gradient(g, x), {}, {6 * 1.5});  // 6 x
}

TEST_CASE("implicit_value_and_gradients differentiates the trainable variables f reads") {
  Variable w(constant({1.0, 2.0}), true, "w");
  Variable b(constant(0.5), true, "b");
  Variable frozen(constant(3.0), false, "frozen");
  auto [value, pairs] = implicit_value_and_gradients(
      [&] { return reduce_sum(w.value() * w.value()) * frozen.value() + b.value(); });
  require_close(value, {}, {15.5});
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].second.id() == w.id());
  require_close(pairs[0].first, {2}, {6, 12});
  CHECK(pairs[1].second.id() == b.id());
  require_close(pairs[1].first, {}, {1});
  CHECK_THAT(message_of<InvalidArgument>(
                 [] { implicit_value_and_gradients([] { return constant(1.0); }); }),
             Catch::Contains("implicit_value_and_gradients") &&
                 Catch::Contains("No trainable variables were accessed"));
}

TEST_CASE("functional jacobian: x*x at [1, 2] and central differences") {
  require_close(jacobian([](const Tensor& x) { return x * x; }, constant({1.0, 2.0})), {2, 2},
                {2, 0, 0, 4});
  const Tensor x = random_tensor({2, 3}, 43);
  for (const Case& c : op_family_cases()) {
    INFO(c.name);
    Tensor j = jacobian(c.f, x);
    require_close(j, concat_shapes(c.f(x).shape(), x.shape()), numerical_jacobian(c.f, x), 1e-7);
  }
  // Not depending on x: zeros.
  require_close(jacobian(
                    [](const Tensor&) {
                      return constant({1.0, 2.0});
                    },
                    constant(3.0)),
                {2}, {0, 0});
}

TEST_CASE("hessian of 1/2 x^T A x is (A + A^T) / 2") {
  const Quadratic q;
  Tensor h = hessian(q, constant({0.3, -1.0, 2.0}));
  require_close(h, {3, 3}, q.symmetric_part(), 1e-12);
}

TEST_CASE("hessian has shape x.shape ++ x.shape and matches second differences") {
  const Tensor x = random_tensor({2, 3}, 44);
  for (const Case& c : op_family_cases()) {
    INFO(c.name);
    // hessian needs a scalar function (TF): the Hessian of the sum of f.
    const UnaryFn f = c.f;
    const UnaryFn total = [f](const Tensor& v) { return reduce_sum(f(v)); };
    require_close(hessian(total, x), {2, 3, 2, 3}, numerical_hessian(c.f, x), 2e-5);
  }
  // A non-scalar f is rejected rather than summed silently.
  REQUIRE_THROWS_AS(hessian(op_family_cases()[0].f, x), InvalidArgument);
  // Linear in x: the gradient does not depend on x, so the Hessian is zeros.
  require_close(hessian([](const Tensor& v) { return reduce_sum(v * 3.0); }, constant({1.0, 2.0})),
                {2, 2}, {0, 0, 0, 0});
}

TEST_CASE("hessian_vector_product of 1/2 x^T A x is ((A + A^T) / 2) v") {
  const Quadratic q;
  const std::vector<double> s = q.symmetric_part();
  const std::vector<double> v{1.0, -2.0, 0.5};
  std::vector<double> expected(3, 0.0);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) expected[i] += s[i * 3 + j] * v[j];
  require_close(hessian_vector_product(q, constant({0.3, -1.0, 2.0}), constant({1.0, -2.0, 0.5})),
                {3}, expected, 1e-12);
}

TEST_CASE("hessian_vector_product equals the numerical Hessian times v") {
  const Tensor x = random_tensor({2, 3}, 45);
  const Tensor v = random_tensor({2, 3}, 46);
  const auto vs = values(v);
  for (const Case& c : op_family_cases()) {
    INFO(c.name);
    const std::vector<double> h = numerical_hessian(c.f, x);
    std::vector<double> expected(6, 0.0);
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t j = 0; j < 6; ++j) expected[i] += h[i * 6 + j] * vs[j];
    require_close(hessian_vector_product(c.f, x, v), {2, 3}, expected, 2e-5);
  }
}

TEST_CASE("jacobian, hessian and hessian_vector_product reject bad arguments") {
  const UnaryFn square_sum = [](const Tensor& x) { return reduce_sum(x * x); };
  CHECK_THAT(message_of<InvalidArgument>([&] {
               hessian_vector_product(square_sum, constant({1.0, 2.0}), constant({1.0}));
             }),
             Catch::Contains("hessian_vector_product") && Catch::Contains("[1]") &&
                 Catch::Contains("[2]"));
  CHECK_THAT(message_of<InvalidArgument>([&] { hessian(square_sum, zeros({2}, DType::Int32)); }),
             Catch::Contains("hessian") && Catch::Contains("int32"));
  CHECK_THAT(message_of<InvalidArgument>([&] { jacobian(square_sum, Tensor()); }),
             Catch::Contains("jacobian") && Catch::Contains("undefined"));
}

TEST_CASE("functional forms nest: the gradient of a hessian_vector_product") {
  // f = sum(x^4) / 4: H v = 3 x^2 v, and d/dx sum(H v) = 6 x v.
  Tensor x = constant({1.0, -2.0});
  Tensor v = constant({0.5, 3.0});
  const std::vector<Tensor> g = gradients(
      [v](const std::vector<Tensor>& a) {
        return reduce_sum(hessian_vector_product(
            [](const Tensor& t) { return reduce_sum(t * t * t * t) * 0.25; }, a[0], v));
      },
      {x});
  require_close(g[0], {2}, {6 * 1.0 * 0.5, 6 * -2.0 * 3.0});
}
