// Every name and signature of shared/API.md, used exactly as an outside program would (the
// contract other work is written against), each with a value that can fail.
#include "support.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <type_traits>

using namespace tapegrad;
using tapegrad::testing::require_close;

TEST_CASE("API: types, factories and Variable") {
  static_assert(std::is_same_v<Shape, std::vector<std::size_t>>);
  CHECK(is_floating(DType::Float32));
  Tensor undefined;
  CHECK_FALSE(undefined.defined());
  CHECK_FALSE(static_cast<bool>(undefined));
  Tensor a(xt::xarray<std::int64_t>{1, 2, 3});
  CHECK(a.dtype() == DType::Int64);
  CHECK(a.shape() == Shape{3});
  CHECK(a.rank() == 1);
  CHECK(a.size() == 3);
  CHECK(a.id() != 0);
  CHECK(a.array<std::int64_t>()(2) == 3);
  CHECK(constant(2.0).item<double>() == 2.0);
  CHECK(constant(2.0f).dtype() == DType::Float32);
  require_close(constant({1.0, 2.0}), {2}, {1, 2});
  require_close(constant({{1.0, 2.0}}), {1, 2}, {1, 2});
  require_close(zeros({2}), {2}, {0, 0});
  require_close(ones({2}, DType::Float32), {2}, {1, 1});
  require_close(fill({2}, 3.0, DType::Int32), {2}, {3, 3});
  require_close(zeros_like(a), {3}, {0, 0, 0});
  require_close(ones_like(a), {3}, {1, 1, 1});
  std::ostringstream os;
  os << a;
  CHECK_FALSE(os.str().empty());

  Variable v(constant({1.0, 2.0}), /*trainable=*/true, "v");
  Tensor read = v;  // operator Tensor
  require_close(read, {2}, {1, 2});
  v.assign(constant({3.0, 4.0}));
  v.assign_add(constant({1.0, 1.0}));
  v.assign_sub(constant({2.0, 2.0}));
  require_close(v.value(), {2}, {2, 3});
  CHECK(v.trainable());
  CHECK(v.name() == "v");
  CHECK(v.id() > 0);
}

TEST_CASE("API: errors derive from Error, a runtime_error") {
  static_assert(std::is_base_of_v<std::runtime_error, Error>);
  static_assert(std::is_base_of_v<Error, InvalidArgument>);
  static_assert(std::is_base_of_v<Error, LookupError>);
  static_assert(std::is_base_of_v<Error, TapeError>);
  CHECK_THROWS_AS(add(constant(1.0), constant(1.0f)), InvalidArgument);
}

TEST_CASE("API: GradientTape") {
  Tensor x = constant(3.0);
  Variable w(constant(2.0));
  GradientTape tape(/*persistent=*/true, /*watch_accessed_variables=*/false);
  tape.watch(x);
  tape.watch(std::vector<Tensor>{x});
  tape.watch(w);
  Tensor y = x * x * w.value();
  {
    auto paused = tape.stop_recording();
    Tensor ignored = x * x;
  }
  CHECK(tape.persistent());
  CHECK(tape.watched_variables().size() == 1);
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(y, x).item<double>() == 12.0);
  CHECK(tape.gradient(y, w).item<double>() == 9.0);
  CHECK(tape.gradient(y, std::vector<Tensor>{x})[0].item<double>() == 12.0);
  CHECK(tape.gradient(std::vector<Tensor>{y}, std::vector<Tensor>{x}, {constant(2.0)},
                      UnconnectedGradients::None)[0]
            .item<double>() == 24.0);
  CHECK(tape.gradient(y, std::vector<Variable>{w}, UnconnectedGradients::Zero)[0].item<double>() ==
        9.0);
  CHECK(tape.gradient(y, constant(1.0), UnconnectedGradients::Zero).item<double>() == 0.0);
  Tensor v = constant({1.0, 2.0});
  GradientTape jt(true);
  jt.watch(v);
  Tensor vv = v * v;
  Tensor m = reshape(v, {1, 2}) * reshape(v, {1, 2});
  auto jp = jt.stop_recording();
  require_close(jt.jacobian(vv, v), {2, 2}, {2, 0, 0, 4});
  require_close(jt.batch_jacobian(m, reshape(v, {1, 2}), UnconnectedGradients::None), {1, 2, 2},
                {0, 0, 0, 0});  // the reshape is a new tensor: unconnected -> zeros (TF)
  tape.reset();
}

TEST_CASE("API: ops and operators") {
  Tensor x = constant({1.0, 4.0});
  Tensor y = constant({2.0, 2.0});
  require_close(x + y, {2}, {3, 6});
  require_close(x - 1.0, {2}, {0, 3});
  require_close(2.0 * x, {2}, {2, 8});
  require_close(1.0 / y, {2}, {0.5, 0.5});
  require_close(-x, {2}, {-1, -4});
  require_close(pow(x, y), {2}, {1, 16});
  require_close(reduce_sum(x, {}, false), {}, {5});
  require_close(reduce_mean(x, {0}, true), {1}, {2.5});
  require_close(reshape(x, {2, -1}), {2, 1}, {1, 4});
  require_close(transpose(reshape(x, {1, 2}), {}), {2, 1}, {1, 4});
  require_close(expand_dims(x, 0), {1, 2}, {1, 4});
  require_close(squeeze(expand_dims(x, 0), {}), {2}, {1, 4});
  require_close(concat({x, y}, 0), {4}, {1, 4, 2, 2});
  require_close(stack({x, y}), {2, 2}, {1, 4, 2, 2});
  CHECK(split(concat({x, y}, 0), 2).size() == 2);
  require_close(slice(x, {1}, {-1}), {1}, {4});
  require_close(gather(x, Tensor(xt::xarray<std::int32_t>{1, 0})), {2}, {4, 1});
  require_close(tile(x, std::vector<std::size_t>{2}), {4}, {1, 4, 1, 4});
  require_close(matmul(reshape(x, {1, 2}), reshape(y, {2, 1}), false, false), {1, 1}, {10});
  require_close(where(greater(x, y), x, y), {2}, {2, 4});
  require_close(cast(x, DType::Int32), {2}, {1, 4});
  require_close(softmax_cross_entropy_with_logits(constant({{1.0, 0.0}}), constant({{0.0, 0.0}})),
                {1}, {std::log(2.0)});
  require_close(matrix_determinant(constant({{2.0, 0.0}, {0.0, 3.0}})), {}, {6});
}

TEST_CASE("API: custom gradients, primitives, functional forms, check_gradient") {
  auto f = custom_gradient([](const Tensor& x) {
    Tensor y = x * x;
    return std::make_pair(
        y, std::function<Tensor(const Tensor&)>([x](const Tensor& dy) { return dy * 10.0 * x; }));
  });
  Tensor x = constant(2.0);
  {
    GradientTape tape;
    tape.watch(x);
    CHECK(tape.gradient(f(x), x).item<double>() == 20.0);
  }
  auto r = recompute_grad([](const Tensor& t) { return t * t; });
  auto p = grad_pass_through([](const Tensor& t) { return stop_gradient(t) * 3.0; });
  {
    GradientTape tape;
    tape.watch(x);
    CHECK(tape.gradient(r(x), x).item<double>() == 4.0);
  }
  {
    GradientTape tape;
    tape.watch(x);
    Tensor passed = p(x);
    CHECK(passed.item<double>() == 6.0);
    CHECK(tape.gradient(passed, x).item<double>() == 1.0);  // identity gradient
  }
  Fn g = [](const std::vector<Tensor>& a) { return a[0] * a[1]; };
  auto [value, grads] = value_and_gradients(g, {constant(2.0), constant(3.0)});
  CHECK(value.item<double>() == 6.0);
  CHECK(grads[1].item<double>() == 2.0);
  CHECK(gradients(g, {constant(2.0), constant(3.0)})[0].item<double>() == 3.0);
  auto [y, vjp] = make_vjp(g, {constant(2.0), constant(3.0)});
  CHECK(y.item<double>() == 6.0);
  CHECK(vjp()[0].item<double>() == 3.0);
  CHECK(vjp(constant(2.0))[1].item<double>() == 4.0);
  Variable w(constant(5.0));
  auto [loss, pairs] = implicit_value_and_gradients([&] { return w.value() * 2.0; });
  CHECK(loss.item<double>() == 10.0);
  CHECK(pairs[0].first.item<double>() == 2.0);
  std::function<Tensor(const Tensor&)> sq = [](const Tensor& t) { return reduce_sum(t * t); };
  require_close(tapegrad::jacobian([](const Tensor& t) { return t * t; }, constant({1.0, 2.0})),
                {2, 2}, {2, 0, 0, 4});
  require_close(hessian(sq, constant({1.0, 2.0})), {2, 2}, {2, 0, 0, 2});
  require_close(hessian_vector_product(sq, constant({1.0, 2.0}), constant({1.0, -1.0})), {2},
                {2, -2});
  GradientCheck check = check_gradient(g, {constant(2.0), constant(3.0)}, 0, 1e-6);
  CHECK(check.max_error < 1e-8);
  CHECK(check.theoretical.shape() == Shape{1, 1});
  CHECK(check.numerical.shape() == Shape{1, 1});
}

TEST_CASE("API: GradientTape::register_hook and HookHandle (Diagnostics)") {
  Tensor x = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  std::function<Tensor(const Tensor& grad)> triple = [](const Tensor& g) { return g * 3.0; };
  HookHandle handle = tape.register_hook(x, triple);
  static_assert(std::is_same_v<decltype(tape.register_hook(x, triple)), HookHandle>);
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(y, x).item<double>() == 18.0);
  handle.remove();
  CHECK(tape.gradient(y, x).item<double>() == 6.0);
}

TEST_CASE("API: ForwardAccumulator, jvp, jacobian_forward (Forward mode)") {
  Tensor x = constant({1.0, 2.0});
  Tensor y;
  {
    ForwardAccumulator acc(std::vector<Tensor>{x}, std::vector<Tensor>{constant({1.0, 0.0})});
    ForwardAccumulator single(x, constant({0.0, 1.0}));
    y = x * x;
    require_close(acc.jvp(y), {2}, {2, 0});
    require_close(single.jvp(y), {2}, {0, 4});
    CHECK_FALSE(acc.jvp(constant(1.0)).defined());
    require_close(acc.jvp(constant(1.0), UnconnectedGradients::Zero), {}, {0});
  }
  const Fn f = [](const std::vector<Tensor>& a) { return reduce_sum(a[0] * a[1]); };
  std::pair<Tensor, Tensor> value_and_tangent =
      tapegrad::jvp(f, {x, constant({3.0, 4.0})}, {constant({1.0, 1.0}), constant({0.0, 0.0})});
  CHECK(value_and_tangent.first.item<double>() == 11.0);
  CHECK(value_and_tangent.second.item<double>() == 7.0);
  require_close(jacobian_forward([](const Tensor& t) { return t * t; }, x), {2, 2}, {2, 0, 0, 4});
}

// ---- issue 11: the array and indexing block of "Ops added in 0.2", as an outside program
// spells it (braced lists, defaults, structured bindings).
TEST_CASE("API 0.2: array and indexing ops") {
  const Tensor x = constant({{3.0, 1.0, 2.0}, {0.0, 5.0, 4.0}});
  const Tensor idx = Tensor(xt::xarray<std::int64_t>{1, 0});
  require_close(one_hot(idx, 3), {2, 3}, {0, 1, 0, 1, 0, 0});
  require_close(one_hot(idx, 2, DType::Int32), {2, 2}, {0, 1, 1, 0});
  CHECK(argmax(x, 1).dtype() == DType::Int64);
  require_close(argmax(x, 1), {2}, {0, 1});
  require_close(argmin(x, -1), {2}, {1, 0});
  auto [values, indices] = top_k(x, 1);
  require_close(values, {2, 1}, {3, 5});
  require_close(indices, {2, 1}, {0, 1});
  require_close(sort(x), {2, 3}, {1, 2, 3, 0, 4, 5});
  require_close(sort(x, 0, true), {2, 3}, {3, 5, 4, 0, 1, 2});
  require_close(argsort(x), {2, 3}, {1, 2, 0, 0, 2, 1});
  require_close(cumsum(x, 1), {2, 3}, {3, 4, 6, 0, 5, 9});
  require_close(cumsum(x, 1, true, true), {2, 3}, {3, 2, 0, 9, 4, 0});
  require_close(cumprod(x, 0), {2, 3}, {3, 1, 2, 0, 5, 8});
  require_close(reverse(x, {0, 1}), {2, 3}, {4, 5, 0, 2, 1, 3});
  require_close(pad(x, {{0, 0}, {1, 0}}), {2, 4}, {0, 3, 1, 2, 0, 0, 5, 4});
  require_close(pad(x, {{0, 0}, {1, 1}}, PadMode::Reflect, 0), {2, 5},
                {1, 3, 1, 2, 1, 5, 0, 5, 4, 5});
  require_close(pad(x, {{1, 0}, {0, 0}}, PadMode::Symmetric), {3, 3}, {3, 1, 2, 3, 1, 2, 0, 5, 4});
  const Tensor nd = Tensor(xt::xarray<std::int32_t>{{1, 2}});
  require_close(gather_nd(x, nd), {1}, {4});
  require_close(scatter_nd(nd, constant({7.0}), Shape{2, 3}), {2, 3}, {0, 0, 0, 0, 0, 7});
  require_close(tensor_scatter_nd_add(x, nd, constant({7.0})), {2, 3}, {3, 1, 2, 0, 5, 11});
  require_close(tensor_scatter_nd_update(x, nd, constant({7.0})), {2, 3}, {3, 1, 2, 0, 5, 7});
  require_close(boolean_mask(x, Tensor(xt::xarray<bool>{false, true})), {1, 3}, {0, 5, 4});
  require_close(range(0, 3, 1, DType::Float64), {3}, {0, 1, 2});
  require_close(eye(2, DType::Float32), {2, 2}, {1, 0, 0, 1});
  require_close(linspace(0, 1, 3), {3}, {0, 0.5, 1});
  require_close(einsum("ij->j", {x}), {3}, {3, 6, 6});
  require_close(tensordot(x, transpose(x), 1), {2, 2}, {14, 13, 13, 41});
  require_close(norm(x), {}, {std::sqrt(55.0)});
  require_close(norm(x, "1", {1}), {2}, {6, 9});
}

TEST_CASE(
    "API: JacobianOptions, jacobian/batch_jacobian with options, vectorized_map "
    "(Vectorized derivatives)") {
  JacobianOptions defaults;
  CHECK(defaults.unconnected == UnconnectedGradients::None);
  CHECK(defaults.vectorize);
  CHECK(defaults.parallel_iterations == 0);
  Tensor x = constant({1.0, 2.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  JacobianOptions loop;
  loop.vectorize = false;
  loop.parallel_iterations = 1;
  require_close(tape.jacobian(y, x, JacobianOptions{}), {2, 2}, {2, 0, 0, 4});
  require_close(tape.jacobian(y, std::vector<Tensor>{x}, loop)[0], {2, 2}, {2, 0, 0, 4});
  Tensor m = reshape(x, {1, 2});
  Tensor my = m * m;
  require_close(tape.batch_jacobian(my, m, JacobianOptions{}), {1, 2, 2}, {2, 0, 0, 4});
  const std::vector<Tensor> mapped = vectorized_map(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 3.0}; }, {x},
      /*fallback_to_loop=*/false);
  require_close(mapped[0], {2}, {3, 6});
}

// ---- "Ops added in 0.2": math, nn and linalg, as an outside program spells them (defaults,
// braced lists, structured bindings and the result fields' names).
TEST_CASE("API 0.2: math, nn, random and linalg ops") {
  const double pi = 3.14159265358979323846;
  require_close(erf(constant(0.0)), {}, {0});
  require_close(erfc(constant(0.0)), {}, {1});
  require_close(lgamma(constant(4.0)), {}, {std::log(6.0)});
  require_close(digamma(constant(1.0)), {}, {-0.57721566490153286});
  require_close(atan2(constant(1.0), constant(1.0)), {}, {pi / 4});
  require_close(floormod(constant(-7.0), constant(3.0)), {}, {2});
  require_close(clip_by_value(constant({-1.0, 0.5, 2.0}), 0.0, 1.0), {3}, {0, 0.5, 1});
  require_close(squared_difference(constant(3.0), constant(1.0)), {}, {4});

  const Tensor x = constant({-1.0, 0.0, 1.0});
  require_close(leaky_relu(x), {3}, {-0.2, 0, 1});
  require_close(elu(x), {3}, {std::exp(-1.0) - 1, 0, 1});
  require_close(selu(constant(0.0)), {}, {0});
  require_close(gelu(constant(0.0)), {}, {0});
  require_close(gelu(constant(0.0), /*approximate=*/true), {}, {0});
  require_close(silu(constant(0.0)), {}, {0});
  require_close(log_sigmoid(constant(0.0)), {}, {-std::log(2.0)});
  require_close(softsign(constant(1.0)), {}, {0.5});
  const Tensor labels = from_values({1}, {1}, DType::Int64);
  require_close(sparse_softmax_cross_entropy_with_logits(labels, constant({{0.0, 0.0}})), {1},
                {std::log(2.0)});

  const Tensor image = ones({1, 3, 3, 1});
  require_close(conv2d(image, ones({2, 2, 1, 1}), {1, 1}, Padding::Valid), {1, 2, 2, 1},
                {4, 4, 4, 4});
  CHECK(conv2d(image, ones({2, 2, 1, 1}), {1, 1}, Padding::Same, {1, 1}).shape() ==
        Shape{1, 3, 3, 1});
  require_close(conv1d(ones({1, 3, 1}), ones({2, 1, 1}), 1, Padding::Valid), {1, 2, 1}, {2, 2});
  require_close(conv2d_transpose(ones({1, 2, 2, 1}), ones({2, 2, 1, 1}), {1, 3, 3, 1}, {1, 1},
                                 Padding::Valid),
                {1, 3, 3, 1}, {1, 2, 1, 2, 4, 2, 1, 2, 1});
  const Tensor grid = reshape(constant({1.0, 2.0, 3.0, 4.0}), {1, 2, 2, 1});
  require_close(max_pool2d(grid, {2, 2}, {1, 1}, Padding::Valid), {1, 1, 1, 1}, {4});
  require_close(avg_pool2d(grid, {2, 2}, {1, 1}, Padding::Valid), {1, 1, 1, 1}, {2.5});

  const Tensor rows = constant({{1.0, 3.0}, {2.0, 6.0}});
  auto [mean, variance] = moments(rows, {0});
  require_close(mean, {2}, {1.5, 4.5});
  require_close(moments(rows, {0}, /*keepdims=*/true).variance, {1, 2}, {0.25, 2.25});
  require_close(batch_normalization(rows, mean, variance, Tensor(), Tensor(), 0.0), {2, 2},
                {-1, -1, 1, 1});
  require_close(layer_normalization(constant({{1.0, 3.0}}), {-1}, Tensor(), Tensor(), 0.0), {1, 2},
                {-1, 1});
  require_close(l2_normalize(constant({3.0, 4.0}), {0}), {2}, {0.6, 0.8});

  Generator generator(7);
  require_close(dropout(x, 0.0, generator), {3}, {-1, 0, 1});
  const Tensor uniform = random_uniform({1000}, generator, 2.0, 3.0, DType::Float32);
  CHECK(uniform.dtype() == DType::Float32);
  CHECK(reduce_min(uniform).item<float>() >= 2.0f);
  CHECK(reduce_max(uniform).item<float>() < 3.0f);
  CHECK(random_normal({4, 2}, generator, 0.0, 1.0).shape() == Shape{4, 2});

  const Tensor a = constant({{4.0, 2.0}, {2.0, 3.0}});
  require_close(diag(constant({1.0, 2.0})), {2, 2}, {1, 0, 0, 2});
  require_close(diag_part(a), {2}, {4, 3});
  require_close(trace(a), {}, {7});
  require_close(band_part(a, 0, -1), {2, 2}, {4, 2, 0, 3});
  require_close(cross(constant({1.0, 0.0, 0.0}), constant({0.0, 1.0, 0.0})), {3}, {0, 0, 1});
  const Tensor lower = constant({{2.0, 0.0}, {1.0, 1.0}});
  require_close(triangular_solve(lower, reshape(constant({2.0, 3.0}), {2, 1})), {2, 1}, {1, 2});
  require_close(
      triangular_solve(lower, reshape(constant({4.0, 1.0}), {2, 1}), true, /*adjoint=*/true),
      {2, 1}, {1.5, 1});
  require_close(cholesky_solve(cholesky(a), matmul(a, reshape(constant({1.0, -1.0}), {2, 1}))),
                {2, 1}, {1, -1});
  auto [sign, log_abs_det] = slogdet(a);
  require_close(sign, {}, {1});
  require_close(log_abs_det, {}, {std::log(8.0)});
  require_close(logdet(a), {}, {std::log(8.0)});
  auto [eigenvalues, eigenvectors] = eigh(a);
  require_close(eigenvalues, {2}, {(7 - std::sqrt(17.0)) / 2, (7 + std::sqrt(17.0)) / 2});
  require_close(matmul(a, eigenvectors), {2, 2},
                testing::values(matmul(eigenvectors, diag(eigenvalues))));
  auto [s, u, v] = svd(a, /*full_matrices=*/false);
  require_close(matmul(matmul(u, diag(s)), v, false, true), {2, 2}, {4, 2, 2, 3});
  auto [q, r] = qr(a);
  require_close(matmul(q, r), {2, 2}, {4, 2, 2, 3});
  require_close(lstsq(a, reshape(constant({6.0, 5.0}), {2, 1})), {2, 1}, {1, 1});
  require_close(lstsq(a, reshape(constant({6.0, 5.0}), {2, 1}), /*l2=*/0.0), {2, 1}, {1, 1});
}

TEST_CASE("API 0.3: AdamOptions, AdamW, LBFGSOptions, LBFGSResult, minimize_lbfgs") {
  AdamOptions options;
  static_assert(std::is_same_v<decltype(options.learning_rate), double>);
  static_assert(std::is_same_v<decltype(options.beta1), double>);
  static_assert(std::is_same_v<decltype(options.beta2), double>);
  static_assert(std::is_same_v<decltype(options.epsilon), double>);
  static_assert(std::is_same_v<decltype(options.pytorch_epsilon), bool>);
  CHECK(options.epsilon == 1e-7);
  options.pytorch_epsilon = true;
  static_assert(!std::is_convertible_v<AdamOptions, Adam>);  // explicit
  Adam adam(options);
  Variable w(constant(1.0), true, "w");
  adam.apply_gradients({{constant(2.0), w}});
  require_close(w.peek(), {}, {1.0 - 1e-3 * 2.0 / (2.0 + 1e-7)});

  static_assert(std::is_base_of_v<Optimizer, AdamW>);
  static_assert(std::is_constructible_v<AdamW, double, double, double, double, double>);
  AdamW adamw;  // 1e-3, 1e-2, 0.9, 0.999, 1e-8
  Variable u(constant(1.0), true, "u");
  adamw.apply_gradients({{constant(2.0), u}});
  require_close(u.peek(), {}, {1.0 - 1e-5 - 1e-3 * 2.0 / (2.0 + 1e-8)});

  LBFGSOptions lbfgs;
  CHECK(lbfgs.max_iterations == 100);
  CHECK(lbfgs.history_size == 10);
  CHECK(lbfgs.tolerance_grad == 1e-7);
  CHECK(lbfgs.tolerance_change == 1e-9);
  CHECK(lbfgs.strong_wolfe);
  Variable x(constant({3.0, -1.0}), true, "x");
  const std::function<Tensor()> loss = [&] { return reduce_sum(square(x.value() - 1.0)); };
  const std::vector<Variable> variables{x};
  LBFGSResult result = minimize_lbfgs(loss, variables);
  static_assert(std::is_same_v<decltype(result.loss), Tensor>);
  static_assert(std::is_same_v<decltype(result.iterations), int>);
  static_assert(std::is_same_v<decltype(result.function_evaluations), int>);
  static_assert(std::is_same_v<decltype(result.converged), bool>);
  CHECK(result.converged);
  require_close(x.peek(), {2}, {1.0, 1.0}, 1e-7);
  result = minimize_lbfgs(loss, variables, lbfgs);
  CHECK(result.iterations == 0);

  Tensor clipped = clip_by_norm(constant({3.0, 4.0}), 1.0);
  require_close(clipped, {2}, {0.6, 0.8});
  std::pair<std::vector<Tensor>, Tensor> global =
      clip_by_global_norm({constant({3.0, 4.0}), Tensor()}, 1.0);
  require_close(global.second, {}, {5.0});
  require_close(clip_by_norm(constant({{3.0, 4.0}}), 1.0, std::vector<int>{1}), {1, 2}, {0.6, 0.8});
}

TEST_CASE("API 0.3: scalar operands of every binary op, reshape and slice with a Shape") {
  const Tensor x = constant({-1.0, 2.0});
  require_close(add(x, 1.0), {2}, {0, 3});
  require_close(add(1.0, x), {2}, {0, 3});
  require_close(subtract(x, 1.0), {2}, {-2, 1});
  require_close(subtract(1.0, x), {2}, {2, -1});
  require_close(multiply(x, 2.0), {2}, {-2, 4});
  require_close(multiply(2.0, x), {2}, {-2, 4});
  require_close(divide(x, 2.0), {2}, {-0.5, 1});
  require_close(divide(2.0, x), {2}, {-2, 1});
  require_close(maximum(x, 0.0), {2}, {0, 2});
  require_close(maximum(0.0, x), {2}, {0, 2});
  require_close(minimum(x, 0.0), {2}, {-1, 0});
  require_close(minimum(0.0, x), {2}, {-1, 0});
  require_close(pow(x, 2.0), {2}, {1, 4});
  require_close(pow(x, 2), {2}, {1, 4});
  require_close(pow(2.0, x), {2}, {0.5, 4});
  require_close(atan2(x, 1.0), {2}, {std::atan2(-1.0, 1.0), std::atan2(2.0, 1.0)});
  require_close(atan2(1.0, x), {2}, {std::atan2(1.0, -1.0), std::atan2(1.0, 2.0)});
  require_close(floormod(x, 2.0), {2}, {1, 0});
  require_close(floormod(3.0, x), {2}, {0, 1});
  require_close(squared_difference(x, 1.0), {2}, {4, 1});
  require_close(squared_difference(1.0, x), {2}, {4, 1});
  require_close(greater(x, 0.0), {2}, {0, 1});
  require_close(less_equal(0.0, x), {2}, {0, 1});

  const Tensor m = constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  const Tensor target = zeros({3, 2});
  require_close(reshape(m, target.shape()), {3, 2}, {1, 2, 3, 4, 5, 6});
  require_close(reshape(m, {2, -1}), {2, 3}, {1, 2, 3, 4, 5, 6});
  require_close(slice(m, {0, 1}, {2, 2}), {2, 2}, {2, 3, 5, 6});
  require_close(slice(m, Shape{0, 1}, Shape{2, 2}), {2, 2}, {2, 3, 5, 6});
}

TEST_CASE("API 0.3: GradientTape::end_recording, vectorized_map of Tensor -> Tensor") {
  const Tensor x = constant({1.0, 2.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;
  tape.end_recording();
  CHECK_FALSE(tape.recording());
  require_close(tape.jacobian(y, x), {2, 2}, {2, 0, 0, 4});
  require_close(tape.gradient(y, x), {2}, {2, 4});

  const Tensor rows = constant({{1.0, 2.0}, {3.0, 4.0}});
  require_close(vectorized_map([](const Tensor& row) { return reduce_sum(row); }, rows), {2},
                {3, 7});
}

namespace {
// A Module subclass as a user writes one: add_variable and add_module are protected.
struct ContractModel : Module {
  layers::Dense& dense;
  Variable scale;
  explicit ContractModel(Generator& generator)
      : dense(add_module("dense", layers::Dense(2, 3, generator))),
        scale(add_variable("scale", constant(1.0f))) {}
};
}  // namespace

TEST_CASE("API 0.3: Module, layers, initialisers, NumPy files and Checkpoint") {
  Generator generator(1);
  ContractModel model(generator);
  const std::vector<Variable> trainable = model.trainable_variables();
  const std::vector<std::pair<std::string, Variable>> named = model.named_variables();
  CHECK(trainable.size() == 3);
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "dense/kernel");
  CHECK(named[2].first == "scale");

  // Dense(in, out, Generator&, bool bias = true, DType = Float32); Conv2D's defaults.
  const layers::Dense dense(2, 3, generator);
  CHECK(dense(zeros({4, 2}, DType::Float32)).shape() == Shape{4, 3});
  const layers::Conv2D conv(1, 2, {3, 3}, generator);  // Valid, strides {1, 1}, NHWC, Float32
  CHECK(conv(zeros({1, 5, 5, 1}, DType::Float32)).shape() == Shape{1, 3, 3, 2});
  const layers::Conv2D conv_full(1, 2, {3, 3}, generator, Padding::Same, {2, 2}, DataFormat::NCHW,
                                 DType::Float64);
  CHECK(conv_full(zeros({1, 1, 5, 5})).shape() == Shape{1, 2, 3, 3});
  CHECK(glorot_uniform({2, 2}, generator).dtype() == DType::Float32);
  CHECK(he_normal({2, 2}, generator, DType::Float64).dtype() == DType::Float64);

  const std::string folder = std::filesystem::temp_directory_path().string();
  const std::string path = folder + "/tapegrad_api_contract_" + std::to_string(::getpid()) + ".npz";
  Adam adam;
  Checkpoint checkpoint;
  Checkpoint& chained = checkpoint.track("model", model)
                            .track("scale_again", model.scale)
                            .track("adam", static_cast<Optimizer&>(adam))
                            .track("generator", generator);
  CHECK(&chained == &checkpoint);
  checkpoint.save(path);
  model.scale.assign(constant(5.0f));
  checkpoint.restore(path);
  require_close(model.scale.peek(), {}, {1.0});
  std::filesystem::remove(path);
}

TEST_CASE("API 0.3: MemoryStats, memory_stats, reset_peak_memory, release_cached_memory") {
  static_assert(std::is_same_v<decltype(memory_stats()), MemoryStats>);
  static_assert(std::is_same_v<decltype(MemoryStats::bytes_in_use), std::size_t>);
  static_assert(std::is_same_v<decltype(MemoryStats::bytes_cached), std::size_t>);
  static_assert(std::is_same_v<decltype(MemoryStats::peak_bytes_in_use), std::size_t>);
  static_assert(std::is_same_v<decltype(MemoryStats::system_allocations), std::uint64_t>);
  static_assert(std::is_same_v<decltype(MemoryStats::cache_hits), std::uint64_t>);
  release_cached_memory();
  reset_peak_memory();
  const MemoryStats before = memory_stats();
  CHECK(before.bytes_cached == 0);
  CHECK(before.peak_bytes_in_use == before.bytes_in_use);
  { const Tensor t = zeros({4096}); }  // 32 KiB: a multiple of 64 bytes, kept exactly
  const MemoryStats after = memory_stats();
  CHECK(after.peak_bytes_in_use == before.bytes_in_use + 32768);
  CHECK(after.bytes_cached == 32768);
  CHECK(after.system_allocations == before.system_allocations + 1);
  { const Tensor t = zeros({4096}); }  // the same size again: from the cache
  CHECK(memory_stats().cache_hits == after.cache_hits + 1);
  CHECK(memory_stats().system_allocations == after.system_allocations);
}

TEST_CASE("API 0.3: shares_storage and Tensor::view<T>()") {
  static_assert(std::is_same_v<decltype(shares_storage(std::declval<const Tensor&>(),
                                                       std::declval<const Tensor&>())),
                               bool>);
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = transpose(x);
  CHECK(shares_storage(x, t));
  CHECK(shares_storage(x, x));
  CHECK_FALSE(shares_storage(x, from_values({1, 2, 3, 4, 5, 6}, {2, 3})));
  const auto v = t.view<double>();  // an xtensor expression: shape, indexing, iteration
  CHECK(v.shape().size() == 2);
  CHECK(v.shape()[0] == 3);
  CHECK(v(2, 1) == 6.0);
  CHECK(std::vector<double>(v.begin(), v.end()) == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(&v(0, 1) == x.array<double>().data() + 3);  // x's own buffer: nothing was copied
}

TEST_CASE("API 0.3: function, Function, FunctionOptions") {
  FunctionOptions options;
  static_assert(std::is_same_v<decltype(options.max_traces), std::size_t>);
  static_assert(std::is_same_v<decltype(options.optimize), bool>);
  CHECK(options.max_traces == 16);
  CHECK(options.optimize);
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  static_assert(std::is_same_v<decltype(function(std::declval<Body>())), Function>);
  static_assert(std::is_same_v<decltype(function(std::declval<Body>(), options)), Function>);
  const Function square = function([](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{multiply(args[0], args[0])};
  });
  static_assert(std::is_same_v<decltype(square(std::declval<const std::vector<Tensor>&>())),
                               std::vector<Tensor>>);
  static_assert(std::is_same_v<decltype(square.trace_count()), std::size_t>);
  CHECK(testing::values(square({from_values({3, -2}, {2})})[0]) == std::vector<double>{9, 4});
  CHECK(testing::values(square({from_values({1, 5}, {2})})[0]) == std::vector<double>{1, 25});
  CHECK(square.trace_count() == 1);
}
