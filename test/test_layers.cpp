// Module (names, order, ownership), glorot_uniform and he_normal (their draws and fans), and
// layers::Dense / layers::Conv2D (outputs and gradients against the ops they are made of,
// errors naming the layer).
#include "identical_support.hpp"
#include "image_layout_support.hpp"
#include "support.hpp"

#include <cmath>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// A model of two layers and a scalar of its own, one of them not trainable.
struct TwoLayers : Module {
  layers::Dense& first;
  layers::Dense& second;
  Variable scale;
  Variable steps;

  explicit TwoLayers(Generator& generator)
      : first(add_module("first", layers::Dense(3, 4, generator))),
        second(add_module("second", layers::Dense(4, 2, generator, /*bias=*/false))),
        scale(add_variable("scale", fill({}, 2.0, DType::Float32))),
        steps(add_variable("steps", zeros({}, DType::Int64), /*trainable=*/false)) {}

  Tensor operator()(const Tensor& x) const { return second(relu(first(x))) * scale; }
};

struct Outer : Module {
  TwoLayers& body;
  explicit Outer(Generator& generator) : body(add_module("body", TwoLayers(generator))) {}
};

struct NamingProbe : Module {
  void variable(const std::string& name) { add_variable(name, zeros({1})); }
  void module(const std::string& name) { add_module(name, NamingProbe()); }
};

std::vector<std::string> names_of(const Module& module) {
  std::vector<std::string> names;
  for (const auto& named : module.named_variables()) names.push_back(named.first);
  return names;
}

}  // namespace

TEST_CASE("a Module names its variables by path, in the order they were added", "[module]") {
  Generator generator(7);
  Outer outer(generator);
  CHECK(names_of(outer) == std::vector<std::string>{"body/first/kernel", "body/first/bias",
                                                    "body/second/kernel", "body/scale",
                                                    "body/steps"});
  CHECK(names_of(outer.body.first) == std::vector<std::string>{"kernel", "bias"});

  // trainable_variables leaves out the non-trainable counter; variables() keeps it.
  const std::vector<Variable> trainable = outer.trainable_variables();
  REQUIRE(trainable.size() == 4);
  CHECK(trainable[0] == outer.body.first.kernel());
  CHECK(trainable[1] == outer.body.first.bias());
  CHECK(trainable[2] == outer.body.second.kernel());
  CHECK(trainable[3] == outer.body.scale);
  const std::vector<Variable> all = outer.variables();
  REQUIRE(all.size() == 5);
  CHECK(all[4] == outer.body.steps);
  CHECK_FALSE(all[4].trainable());

  // The variables are the layers' own: a gradient through the model reaches them.
  const Tensor x = from_values({1, -2, 3, 0.5, 0.25, -1}, {2, 3}, DType::Float32);
  GradientTape tape;
  const Tensor loss = reduce_sum(outer.body(x));
  const std::vector<Tensor> grads = tape.gradient(loss, trainable);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    INFO("variable " << i);
    REQUIRE(grads[i].defined());
    CHECK(grads[i].shape() == trainable[i].shape());
  }
}

TEST_CASE("add_module's reference survives moving the parent", "[module]") {
  Generator generator(3);
  Outer original(generator);
  const Variable kernel = original.body.first.kernel();
  TwoLayers* const body_address = &original.body;
  Outer moved(std::move(original));
  CHECK(&moved.body == body_address);
  CHECK(moved.body.first.kernel() == kernel);
  CHECK(names_of(moved).size() == 5);

  // A module without reference members assigns too.
  Generator other_generator(4);
  layers::Dense assigned(1, 1, other_generator);
  const Variable second_kernel = moved.body.second.kernel();
  assigned = std::move(moved.body.second);
  CHECK(assigned.kernel() == second_kernel);
  CHECK(names_of(assigned) == std::vector<std::string>{"kernel"});
}

TEST_CASE("Module refuses empty, slashed and repeated names", "[module][errors]") {
  NamingProbe probe;
  probe.variable("w");
  probe.module("part");
  CHECK_THAT(message_of<InvalidArgument>([&] { probe.variable(""); }),
             Catch::Contains("Module::add_variable: the name is empty"));
  CHECK_THAT(message_of<InvalidArgument>([&] { probe.variable("a/b"); }),
             Catch::Contains("'a/b' contains '/'"));
  CHECK_THAT(message_of<InvalidArgument>([&] { probe.variable("w"); }),
             Catch::Contains("'w' is already used by a variable"));
  CHECK_THAT(message_of<InvalidArgument>([&] { probe.module("w"); }),
             Catch::Contains("Module::add_module: the name 'w' is already used by a variable"));
  CHECK_THAT(message_of<InvalidArgument>([&] { probe.variable("part"); }),
             Catch::Contains("'part' is already used by a submodule"));
  // Nothing was added by the refused calls.
  CHECK(names_of(probe) == std::vector<std::string>{"w"});
}

TEST_CASE("glorot_uniform draws uniform values within Keras's limit", "[initializers]") {
  // Dense kernel [5, 3]: limit sqrt(6 / 8); the draw is random_uniform's, same generator state.
  Generator a(11), b(11);
  const Tensor w = glorot_uniform({5, 3}, a);
  CHECK(w.dtype() == DType::Float32);
  require_identical(
      w, random_uniform({5, 3}, b, -std::sqrt(6.0 / 8.0), std::sqrt(6.0 / 8.0), DType::Float32));
  CHECK(a.counter() == b.counter());

  // Conv kernel [3, 3, 2, 4] (HWIO): fans 9*2 and 9*4, limit sqrt(6 / 54).
  Generator c(5), d(5);
  require_identical(glorot_uniform({3, 3, 2, 4}, c, DType::Float64),
                    random_uniform({3, 3, 2, 4}, d, -std::sqrt(6.0 / 54.0), std::sqrt(6.0 / 54.0),
                                   DType::Float64));
  // Rank 1 [n]: fans n and n.
  Generator e(9), f(9);
  require_identical(glorot_uniform({6}, e, DType::Float64),
                    random_uniform({6}, f, -std::sqrt(0.5), std::sqrt(0.5), DType::Float64));

  // Every value inside [-limit, limit) on a large draw, with both ends approached.
  Generator g(1);
  const std::vector<double> drawn = values(glorot_uniform({200, 100}, g, DType::Float64));
  const double limit = std::sqrt(6.0 / 300.0);
  double lowest = 1.0, highest = -1.0;
  for (double v : drawn) {
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  CHECK(lowest >= -limit);
  CHECK(highest < limit);
  CHECK(lowest < -0.99 * limit);
  CHECK(highest > 0.99 * limit);

  // A shape with a zero is empty and draws nothing.
  Generator h(2);
  CHECK(glorot_uniform({0, 4}, h).shape() == Shape{0, 4});
  CHECK(h.counter() == 0);
}

TEST_CASE("he_normal draws normal values of variance 2 / fan_in", "[initializers]") {
  Generator a(21), b(21);
  require_identical(he_normal({3, 3, 8, 16}, a, DType::Float64),
                    random_normal({3, 3, 8, 16}, b, 0.0, std::sqrt(2.0 / 72.0), DType::Float64));
  Generator c(4);
  const std::vector<double> drawn = values(he_normal({400, 50}, c, DType::Float64));
  double sum_of_squares = 0.0;
  for (double v : drawn) sum_of_squares += v * v;
  // 20,000 draws: the sample variance is 2/400 within a few percent.
  CHECK(sum_of_squares / static_cast<double>(drawn.size()) == Approx(2.0 / 400.0).epsilon(0.05));
}

TEST_CASE("the initialisers refuse non-floating dtypes, naming themselves",
          "[initializers][errors]") {
  Generator generator(1);
  CHECK_THAT(message_of<InvalidArgument>([&] {
               glorot_uniform({2, 3}, generator, DType::Int32);
             }),
             Catch::Contains("glorot_uniform: shape [2, 3], dtype int32"));
  CHECK_THAT(message_of<InvalidArgument>([&] { he_normal({4}, generator, DType::Bool); }),
             Catch::Contains("he_normal: shape [4], dtype bool"));
  CHECK(generator.counter() == 0);
}

TEST_CASE("layers::Dense is x kernel + bias, with its gradients", "[layers]") {
  Generator generator(42);
  const layers::Dense dense(3, 2, generator, true, DType::Float64);
  dense.bias().assign(constant({0.5, -1.0}));
  const Tensor kernel = dense.kernel().peek();
  CHECK(kernel.shape() == Shape{3, 2});
  const Tensor x = from_values({1, 2, 3, -1, 0, 2}, {2, 3});
  require_identical(dense(x), matmul(x, kernel) + constant({0.5, -1.0}));

  // A rank-3 input is the rank-2 case on each row.
  const Tensor x3 = from_values({1, 2, 3, -1, 0, 2, 4, 4, 4, 0, 1, 0}, {2, 2, 3});
  require_close(dense(x3), {2, 2, 2}, values(dense(reshape(x3, Shape{4, 3}))), 1e-15);

  // d sum(x K + b) / dK = x^T 1, / db = the row count.
  GradientTape tape;
  const Tensor loss = reduce_sum(dense(x));
  const auto grads = tape.gradient(loss, std::vector<Variable>{dense.kernel(), dense.bias()});
  require_close(grads[0], {3, 2}, {0, 0, 2, 2, 5, 5}, 0.0);
  require_close(grads[1], {2}, {2, 2}, 0.0);

  // Without a bias: one variable, no bias added.
  Generator other(42);
  const layers::Dense plain(3, 2, other, false, DType::Float64);
  CHECK(plain.named_variables().size() == 1);
  require_identical(plain(x), matmul(x, plain.kernel().peek()));
  CHECK_THAT(message_of<InvalidArgument>([&] { plain.bias(); }),
             Catch::Contains("layers::Dense(3 -> 2, float64): the layer was made without a bias"));
}

TEST_CASE("layers::Dense refuses bad sizes and inputs, naming the layer", "[layers][errors]") {
  Generator generator(1);
  CHECK_THAT(message_of<InvalidArgument>([&] { layers::Dense(0, 2, generator); }),
             Catch::Contains("layers::Dense(0 -> 2, float32): in and out must be positive"));
  CHECK_THAT(
      message_of<InvalidArgument>([&] { layers::Dense(2, 2, generator, true, DType::Int32); }),
      Catch::Contains("the dtype must be float32 or float64"));
  CHECK(generator.counter() == 0);  // nothing drawn by a refused layer

  const layers::Dense dense(4, 3, generator);
  const std::string wrong_dtype = message_of<InvalidArgument>([&] {
    dense(zeros({2, 4}, DType::Float64));
  });
  CHECK_THAT(
      wrong_dtype,
      Catch::Contains("layers::Dense(4 -> 3, float32): input of shape [2, 4] and dtype float64; "
                      "the layer takes [..., 4] float32"));
  CHECK_THAT(message_of<InvalidArgument>([&] {
               dense(zeros({2, 5}, DType::Float32));
             }),
             Catch::Contains("input of shape [2, 5] and dtype float32"));
  CHECK_THAT(message_of<InvalidArgument>([&] { dense(zeros({4}, DType::Float32)); }),
             Catch::Contains("input of shape [4]"));
}

TEST_CASE("layers::Conv2D is conv2d + bias in both layouts", "[layers]") {
  Generator generator(8);
  const layers::Conv2D conv(2, 3, {3, 3}, generator, Padding::Same, {1, 1}, DataFormat::NHWC,
                            DType::Float64);
  conv.bias().assign(constant({0.1, 0.2, 0.3}));
  CHECK(conv.kernel().shape() == Shape{3, 3, 2, 3});
  CHECK(names_of(conv) == std::vector<std::string>{"kernel", "bias"});
  const Tensor x = random_tensor({2, 5, 5, 2}, 3);
  require_identical(
      conv(x), conv2d(x, conv.kernel().peek(), {1, 1}, Padding::Same) + constant({0.1, 0.2, 0.3}));

  // The same kernel in NCHW gives the NHWC result transposed, gradients included.
  Generator same_seed(8);
  const layers::Conv2D conv_nchw(2, 3, {3, 3}, same_seed, Padding::Valid, {2, 2}, DataFormat::NCHW,
                                 DType::Float64);
  conv_nchw.bias().assign(constant({0.1, 0.2, 0.3}));
  Generator same_seed_again(8);
  const layers::Conv2D conv_nhwc(2, 3, {3, 3}, same_seed_again, Padding::Valid, {2, 2},
                                 DataFormat::NHWC, DType::Float64);
  conv_nhwc.bias().assign(constant({0.1, 0.2, 0.3}));
  const Tensor x_nchw = to_channels_first(x);
  require_close(conv_nchw(x_nchw), {2, 3, 2, 2}, values(to_channels_first(conv_nhwc(x))), 1e-14);

  const auto gradients = [](const layers::Conv2D& layer, const Tensor& input) {
    GradientTape tape;
    const Tensor loss = reduce_sum(square(layer(input)));
    return tape.gradient(loss, layer.trainable_variables());
  };
  const auto g_nchw = gradients(conv_nchw, x_nchw);
  const auto g_nhwc = gradients(conv_nhwc, x);
  require_close(g_nchw[0], {3, 3, 2, 3}, values(g_nhwc[0]), 1e-12);
  require_close(g_nchw[1], {3}, values(g_nhwc[1]), 1e-12);
}

TEST_CASE("layers::Conv2D refuses bad sizes and inputs, naming the layer", "[layers][errors]") {
  Generator generator(1);
  CHECK_THAT(message_of<InvalidArgument>([&] { layers::Conv2D(1, 4, {3}, generator); }),
             Catch::Contains("layers::Conv2D(1 -> 4, kernel [3], NHWC, float32): the kernel must "
                             "be two positive sizes"));
  CHECK_THAT(message_of<InvalidArgument>([&] {
               layers::Conv2D(0, 4, {3, 3}, generator);
             }),
             Catch::Contains("in_channels and filters must be positive"));
  CHECK(generator.counter() == 0);

  const layers::Conv2D conv(1, 4, {3, 3}, generator, Padding::Valid, {1, 1}, DataFormat::NCHW);
  CHECK_THAT(
      message_of<InvalidArgument>([&] {
        conv(zeros({2, 8, 8, 1}, DType::Float32));
      }),
      Catch::Contains(
          "layers::Conv2D(1 -> 4, kernel [3, 3], NCHW, float32): input of shape [2, 8, 8, 1] "
          "and dtype float32; the layer takes [batch, 1, height, width] float32"));
  CHECK_THAT(message_of<InvalidArgument>([&] {
               conv(zeros({2, 1, 8, 8}, DType::Float64));
             }),
             Catch::Contains("dtype float64"));
}
