// The neural-network family's samples (src/ops/nn/): activations and their fused gradient
// ops, softmax and the cross entropies, convolutions and pooling with their gradient ops.
#include "ops/internal_ops.hpp"
#include "ops/nn/conv_ops.hpp"
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {
namespace {

// ---- samples --------------------------------------------------------------------------------

std::vector<OpSample> activation_samples() {
  const Tensor a = random_tensor({2, 3}, 1);
  const Tensor b = random_tensor({2, 3}, 2);
  const std::string kinks = "piecewise linear: its second derivative is zero where it exists";
  std::vector<OpSample> s;
  // nn.cpp
  s.push_back(with_integers(no_second_order(unary_sample("Relu", tapegrad::relu, a), kinks)));
  {
    // y = relu(a) has exact zeros, at the kink of y > 0 ? g : 0: central differences there jump.
    OpSample at_zeros = binary_sample("ReluGrad", detail::relu_grad_op, tapegrad::relu(a), b);
    at_zeros.no_gradient = at_zeros.no_second_order =
        "y has exact zeros at the kink of y > 0 ? g : 0; the variant y = a checks the gradient";
    s.push_back(at_zeros);
    s.push_back(named(no_second_order(binary_sample("ReluGrad", detail::relu_grad_op, a, b),
                                      "linear in g, piecewise constant in y"),
                      "y = a, away from the kink"));
  }
  s.push_back(unary_sample("Sigmoid", tapegrad::sigmoid, a));
  s.push_back(binary_sample("SigmoidGrad", detail::sigmoid_grad_op, tapegrad::sigmoid(a), b));
  s.push_back(unary_sample("Softplus", tapegrad::softplus, a));
  s.push_back(binary_sample("SoftplusGrad", detail::softplus_grad_op, a, b));
  s.push_back(sample("Softmax", {a}, [](const auto& in) { return Outputs{softmax(in[0], 0)}; }));
  s.push_back(
      sample("LogSoftmax", {a}, [](const auto& in) { return Outputs{log_softmax(in[0], -1)}; }));
  s.push_back(binary_sample("SoftmaxCrossEntropyWithLogits",
                            tapegrad::softmax_cross_entropy_with_logits, softmax(b, -1), a));
  s.push_back(binary_sample("SigmoidCrossEntropyWithLogits",
                            tapegrad::sigmoid_cross_entropy_with_logits, tapegrad::sigmoid(b), a));
  // nn_activations.cpp
  s.push_back(no_second_order(
      sample("LeakyRelu", {a}, [](const auto& in) { return Outputs{leaky_relu(in[0], 0.1)}; }),
      kinks));
  s.push_back(unary_sample("Elu", tapegrad::elu, a));
  s.push_back(binary_sample("EluGrad", detail::elu_grad_op, tapegrad::elu(a), b));
  s.push_back(unary_sample("Selu", tapegrad::selu, a));
  s.push_back(sample("Gelu", {a}, [](const auto& in) { return Outputs{gelu(in[0], false)}; }));
  s.push_back(sample("GeluTanh", {a}, [](const auto& in) { return Outputs{gelu(in[0], true)}; }));
  s.push_back(binary_sample("GeluGrad", detail::gelu_grad_op, a, b));
  s.push_back(binary_sample("GeluTanhGrad", detail::gelu_tanh_grad_op, a, b));
  s.push_back(unary_sample("Silu", tapegrad::silu, a));
  s.push_back(unary_sample("LogSigmoid", tapegrad::log_sigmoid, a));
  s.push_back(unary_sample("Softsign", tapegrad::softsign, a));
  s.push_back(sample("SparseSoftmaxCrossEntropyWithLogits",
                     {from_values({2, 0}, {2}, DType::Int32), a}, [](const auto& in) {
                       return Outputs{sparse_softmax_cross_entropy_with_logits(in[0], in[1])};
                     }));
  return s;
}

// conv.cpp, pooling.cpp: a [1, 5, 4, 2] image, [3, 2, 2, 3] filters, stride 2 SAME.
std::vector<OpSample> conv_and_pooling_samples() {
  const Tensor image = random_tensor({1, 5, 4, 2}, 20);
  const Tensor filters = random_tensor({3, 2, 2, 3}, 21);
  const Tensor conv_grad = random_tensor({1, 3, 2, 3}, 22);  // conv2d's output
  const Shape image_shape = image.shape(), filter_shape = filters.shape();
  const std::string linear = "linear in its input";
  const std::string maxima = "piecewise linear (the maxima's positions are piecewise constant)";
  std::vector<OpSample> s;
  s.push_back(sample("Conv2D", {image, filters}, [](const auto& in) {
    return Outputs{conv2d(in[0], in[1], {2, 2}, Padding::Same, {1, 1})};
  }));
  s.push_back(sample("Conv2DBackpropInput", {conv_grad, filters}, [image_shape](const auto& in) {
    return Outputs{conv2d_transpose(in[0], in[1], image_shape, {2, 2}, Padding::Same)};
  }));
  s.push_back(sample("Conv2DBackpropFilter", {image, conv_grad}, [filter_shape](const auto& in) {
    return Outputs{
        detail::conv2d_backprop_filter(in[0], filter_shape, in[1], {2, 2}, Padding::Same)};
  }));
  s.push_back(
      no_second_order(sample("MaxPool", {image},
                             [](const auto& in) {
                               return Outputs{max_pool2d(in[0], {2, 2}, {2, 1}, Padding::Same)};
                             }),
                      maxima));
  s.push_back(
      no_second_order(sample("AvgPool", {image},
                             [](const auto& in) {
                               return Outputs{avg_pool2d(in[0], {3, 2}, {2, 2}, Padding::Same)};
                             }),
                      linear));
  // x is an input too: its tangent must not reach the output (the maxima's positions are
  // piecewise constant in x).
  s.push_back(no_second_order(
      sample("MaxPoolGrad", {image, random_tensor({1, 3, 4, 2}, 24)},
             [](const auto& in) {
               return Outputs{detail::max_pool_grad(in[0], in[1], {2, 2}, {2, 1}, Padding::Same)};
             }),
      maxima));
  s.push_back(no_second_order(
      sample(
          "MaxPoolGradGrad", {image, random_tensor({1, 5, 4, 2}, 25)},
          [](const auto& in) {
            return Outputs{detail::max_pool_grad_grad(in[0], in[1], {2, 2}, {2, 1}, Padding::Same)};
          }),
      maxima));
  s.push_back(no_second_order(sample("AvgPoolGrad", {random_tensor({1, 3, 2, 2}, 23)},
                                     [image_shape](const auto& in) {
                                       return Outputs{detail::avg_pool_grad(
                                           in[0], image_shape, {3, 2}, {2, 2}, Padding::Same)};
                                     }),
                              linear));
  return s;
}

// ---- batching ---------------------------------------------------------------------------------

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> cases;
  for (const auto& [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"Relu", relu}, {"Sigmoid", sigmoid}, {"Softplus", softplus}}) {
    cases.push_back({name, {name}, unary(f), {batch_of({2, 3}, 21, 0.1, 0.9)}});
  }
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> activations = {
      {"LeakyRelu", [](const Tensor& x) { return leaky_relu(x, 0.3); }},
      {"Elu", [](const Tensor& x) { return elu(x); }},
      {"Selu", [](const Tensor& x) { return selu(x); }},
      {"Gelu", [](const Tensor& x) { return gelu(x, false); }},
      {"GeluTanh", [](const Tensor& x) { return gelu(x, true); }},
      {"Silu", [](const Tensor& x) { return silu(x); }},
      {"LogSigmoid", [](const Tensor& x) { return log_sigmoid(x); }},
      {"Softsign", [](const Tensor& x) { return softsign(x); }}};
  for (const auto& [name, f] : activations) {
    cases.push_back({name, {name}, unary_fn(f), {batch_of({2, 3}, 101, -2.0, 2.0)}});
    cases.push_back(
        {name + " float32", {name}, unary_fn(f), {as_f32(batch_of({4}, 102, -2.0, 2.0))}});
  }
  cases.push_back(
      {"SigmoidGrad, g batched",
       {"SigmoidGrad"},
       gradient_at(random_tensor({2, 3}, 51), [](const Tensor& x) { return sigmoid(x); }),
       {batch_of({2, 3}, 52)}});
  add_fused_gradient_cases(
      cases, "ReluGrad", [](const Tensor& x) { return relu(x); }, -1.0, 179);
  add_fused_gradient_cases(
      cases, "SoftplusGrad", [](const Tensor& x) { return softplus(x); }, -1.0, 182);
  add_fused_gradient_cases(
      cases, "EluGrad", [](const Tensor& x) { return elu(x); }, -1.0, 185);
  add_fused_gradient_cases(
      cases, "GeluGrad", [](const Tensor& x) { return gelu(x, false); }, -1.0, 188);
  add_fused_gradient_cases(
      cases, "GeluTanhGrad", [](const Tensor& x) { return gelu(x, true); }, -1.0, 191);
  const Tensor labels = softmax(random_tensor({2, 4}, 66));
  cases.push_back(
      {"Softmax, LogSoftmax, cross entropies, logits batched",
       {"Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogits"},
       [labels](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{softmax(in[0]), log_softmax(in[0], 0),
                                    softmax_cross_entropy_with_logits(labels, in[0]),
                                    sigmoid_cross_entropy_with_logits(sigmoid(labels), in[0])};
       },
       {batch_of({2, 4}, 67)}});
  cases.push_back({"cross entropies, both batched",
                   {"SoftmaxCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogits"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor p = softmax(in[0]);
                     return std::vector<Tensor>{
                         softmax_cross_entropy_with_logits(p, in[1]),
                         sigmoid_cross_entropy_with_logits(sigmoid(in[0]), in[1])};
                   },
                   {batch_of({2, 4}, 68), batch_of({2, 4}, 69)}});
  // Convolutions and pooling: the batch merged into the examples axis, or one call per row.
  const Tensor images = random_tensor({2, 5, 5, 2}, 137);
  const Tensor filters = random_tensor({3, 3, 2, 3}, 138);
  cases.push_back({"Conv2D",
                   {"Conv2D"},
                   [images, filters](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         conv2d(in[0], filters, {1, 1}, Padding::Same),
                         conv2d(images, in[1], {2, 2}, Padding::Valid),
                         conv2d(in[0], in[1], {1, 2}, Padding::Valid, {2, 1})};
                   },
                   {batch_of({2, 5, 5, 2}, 139), batch_of({3, 3, 2, 3}, 140)}});
  const Tensor transposed_in = random_tensor({2, 3, 3, 3}, 141);
  cases.push_back({"Conv2DBackpropInput",
                   {"Conv2DBackpropInput"},
                   [transposed_in, filters](const std::vector<Tensor>& in) {
                     const Shape out{2, 5, 5, 2};
                     return std::vector<Tensor>{
                         conv2d_transpose(in[0], filters, out, {2, 2}, Padding::Same),
                         conv2d_transpose(transposed_in, in[1], out, {2, 2}, Padding::Same),
                         conv2d_transpose(in[0], in[1], out, {2, 2}, Padding::Same)};
                   },
                   {batch_of({2, 3, 3, 3}, 142), batch_of({3, 3, 2, 3}, 143)}});
  cases.push_back({"Conv2DBackpropFilter, g batched",
                   {"Conv2DBackpropFilter"},
                   [images](const std::vector<Tensor>& in) {
                     const Tensor w = random_tensor({3, 3, 2, 3}, 144);
                     GradientTape tape;
                     tape.watch(w);
                     const Tensor y = conv2d(images, w, {1, 1}, Padding::Same);
                     return tape.gradient({y}, {w}, {in[0]});
                   },
                   {batch_of({2, 5, 5, 3}, 145)}});
  cases.push_back({"Conv2DBackpropFilter, x batched, with g batched or fixed",
                   {"Conv2DBackpropFilter"},
                   [filters](const std::vector<Tensor>& in) {
                     const Tensor w = as_f32(filters);
                     GradientTape tape;
                     tape.watch(w);
                     const Tensor y = conv2d(in[0], w, {2, 1}, Padding::Valid);
                     // g = 2 y batched too (one call per row), then a fixed g (x alone batched).
                     const Tensor both = tape.gradient(reduce_sum(square(y)), w);
                     GradientTape fixed_g;
                     fixed_g.watch(w);
                     const Tensor y2 = conv2d(in[0], w, {2, 1}, Padding::Valid);
                     const Tensor u = as_f32(random_tensor({2, 2, 3, 3}, 157));
                     return std::vector<Tensor>{both, fixed_g.gradient({y2}, {w}, {u})[0]};
                   },
                   {as_f32(batch_of({2, 5, 5, 2}, 146))}});
  cases.push_back({"MaxPool, AvgPool",
                   {"MaxPool", "AvgPool"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{max_pool2d(in[0], {2, 2}, {2, 2}, Padding::Same),
                                                avg_pool2d(in[0], {3, 2}, {1, 2}, Padding::Valid),
                                                max_pool2d(in[1], {2, 2}, {1, 1}, Padding::Valid)};
                   },
                   {batch_of({2, 5, 5, 2}, 147), as_f32(batch_of({1, 4, 4, 3}, 148))}});
  // The maxima's gradient ops with x and the gradient batched, one of them, or both.
  const Tensor pool_x = random_tensor({2, 5, 5, 2}, 158);
  cases.push_back(
      {"MaxPoolGrad, MaxPoolGradGrad",
       {"MaxPoolGrad", "MaxPoolGradGrad"},
       [pool_x](const std::vector<Tensor>& in) {
         const auto grad = [](const Tensor& x, const Tensor& g) {
           return detail::max_pool_grad(x, g, {2, 2}, {2, 2}, Padding::Same);
         };
         const auto grad_grad = [](const Tensor& x, const Tensor& h) {
           return detail::max_pool_grad_grad(x, h, {2, 2}, {2, 2}, Padding::Same);
         };
         return std::vector<Tensor>{grad(in[0], in[1]), grad(pool_x, in[1]),
                                    grad_grad(in[0], in[2]), grad_grad(in[0], pool_x),
                                    grad_grad(pool_x, in[2])};
       },
       {batch_of({2, 5, 5, 2}, 159), batch_of({2, 3, 3, 2}, 160), batch_of({2, 5, 5, 2}, 161)}});
  cases.push_back({"AvgPoolGrad, g batched",
                   {"AvgPoolGrad"},
                   gradient_at(random_tensor({2, 5, 5, 2}, 149),
                               [](const Tensor& x) {
                                 return avg_pool2d(x, {2, 2}, {2, 2}, Padding::Same);
                               }),
                   {batch_of({2, 3, 3, 2}, 150)}});

  // Sparse cross entropy.
  const Tensor class_ids = ints({3, 0}, {2}, DType::Int32);
  const Tensor logits_fixed = random_tensor({2, 4}, 151);
  cases.push_back({"SparseSoftmaxCrossEntropyWithLogits",
                   {"SparseSoftmaxCrossEntropyWithLogits"},
                   [class_ids, logits_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         sparse_softmax_cross_entropy_with_logits(class_ids, in[0]),
                         sparse_softmax_cross_entropy_with_logits(in[1], logits_fixed),
                         sparse_softmax_cross_entropy_with_logits(in[1], in[0])};
                   },
                   {batch_of({2, 4}, 152), ints({1, 2, 0, 3, 3, 3}, {kBatch, 2})}});
  return cases;
}

// ---- structure: the fused activation gradients, y (or x) constant, g diagonal -------------------

void attach_structure_cases(std::vector<OpSample>& s) {
  // g y (1 - y), y > 0 ? g : 0, g sigmoid(x), y < 0 ? g (y + 1) : g.
  attach(s, "SigmoidGrad", fused_structure({0.5, 0.25, 0.75}, {0.125, -0.375, 0.5625}));
  attach(s, "ReluGrad", fused_structure({1, -1, 0}, {0.5, 0, 0}));
  attach(s, "SoftplusGrad", fused_structure({0, 40, -800}, {0.25, -2, 0}));
  attach(s, "EluGrad", fused_structure({-0.5, 2, -0.75}, {0.25, -2, 0.75}));
  // Phi(x) + x phi(x), and its tanh form: 1/2 at 0, 1 and 0 far out.
  attach(s, "GeluGrad", fused_structure({0, 40, -40}, {0.25, -2, 0}));
  attach(s, "GeluTanhGrad", fused_structure({0, 40, -40}, {0.25, -2, 0}));
}

// ---- misuse -----------------------------------------------------------------------------------

MisuseCases nn_misuse() {
  MisuseCases t;
  const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  using AxisOp = std::function<Tensor(const Tensor&, int)>;
  const std::vector<std::pair<std::string, AxisOp>> axis_ops = {
      {"softmax", [](const Tensor& x, int a) { return softmax(x, a); }},
      {"log_softmax", [](const Tensor& x, int a) { return log_softmax(x, a); }},
  };
  for (const auto& [name, fn] : axis_ops) {
    const AxisOp op = fn;
    misuse(t, name + ": a scalar", [op] { op(constant(1.0), -1); }, {name, "[]", "float64"});
    misuse(t, name + ": int32", [op] { op(i32({1, 2}), -1); }, {name, "int32", "[2]"});
    misuse(t, name + ": axis 2 of rank 2", [op, m] { op(m, 2); }, {name, "axis 2", "[2, 3]"});
    misuse(t, name + ": a variable handle", [op] { op(variable_handle(), -1); },
           {name, "variable handle"});
    defined(t, name + ": an empty row axis gives an empty result", [op] {
      REQUIRE(op(zeros({0, 3}), -1).shape() == Shape{0, 3});
    });
  }
  defined(t, "softmax: a NaN logit makes its row NaN, other rows finite", [] {
    const auto r = elements<double>(softmax(f64({kNaN, 0, 1, 1}, {2, 2})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(std::isnan(r[1]));
    REQUIRE(r[2] == Approx(0.5));
  });
  defined(t, "softmax: an +inf logit gives NaN (inf - inf) and 0 elsewhere, no error", [] {
    const auto r = elements<double>(softmax(f64({kInf, 0})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(r[1] == 0.0);
  });
  using Loss = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Loss>> losses = {
      {"softmax_cross_entropy_with_logits",
       [](const Tensor& z, const Tensor& x) { return softmax_cross_entropy_with_logits(z, x); }},
      {"sigmoid_cross_entropy_with_logits",
       [](const Tensor& z, const Tensor& x) { return sigmoid_cross_entropy_with_logits(z, x); }},
  };
  for (const auto& [name, fn] : losses) {
    const Loss op = fn;
    misuse(t, name + ": shapes [2, 3] and [3]",
           [op, m] {
             op(m, f64({1, 2, 3}));
           },
           {name, "[2, 3]", "[3]"});
    misuse(t, name + ": dtypes differ",
           [op] {
             op(f32({1, 0}), f64({1, 2}));
           },
           {name, "float32", "float64"});
    misuse(t, name + ": int32", [op] { op(i32({1, 0}), i32({1, 2})); }, {name, "int32", "[2]"});
    misuse(t, name + ": a variable handle",
           [op] {
             op(f64({1, 0, 0}), variable_handle());
           },
           {name, "variable handle"});
  }
  misuse(t, "softmax_cross_entropy_with_logits: scalars",
         [] { softmax_cross_entropy_with_logits(constant(1.0), constant(1.0)); },
         {"softmax_cross_entropy_with_logits", "[]"});
  defined(t, "softmax_cross_entropy_with_logits: empty batch gives an empty loss", [] {
    REQUIRE(softmax_cross_entropy_with_logits(zeros({0, 3}), zeros({0, 3})).shape() == Shape{0});
  });
  defined(t, "relu: NaN stays NaN, -inf is 0", [] {
    const auto r = elements<double>(relu(f64({kNaN, -kInf, 2})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(r[1] == 0.0);
    REQUIRE(r[2] == 2.0);
  });
  defined(t, "relu: int32 INT_MIN is 0", [] {
    REQUIRE(elements<std::int32_t>(relu(i32({kInt32Min, 3}))) == std::vector<std::int32_t>{0, 3});
  });
  misuse(t, "relu: bool", [] { relu(b8({1})); }, {"relu", "bool", "[1]"});
  misuse(t, "sigmoid: int64", [] { sigmoid(i64({1})); }, {"sigmoid", "int64", "[1]"});
  misuse(t, "softplus: a variable handle", [] { softplus(variable_handle()); },
         {"softplus", "variable handle"});
  return t;
}

}  // namespace

std::vector<OpSample> nn_samples() {
  std::vector<OpSample> s = activation_samples();
  for (OpSample& c : conv_and_pooling_samples()) s.push_back(std::move(c));
  attach(s, batch_cases());
  attach_structure_cases(s);
  attach_by_function(s, nn_misuse(),
                     {{"softmax", "Softmax"},
                      {"log_softmax", "LogSoftmax"},
                      {"softmax_cross_entropy_with_logits", "SoftmaxCrossEntropyWithLogits"},
                      {"sigmoid_cross_entropy_with_logits", "SigmoidCrossEntropyWithLogits"},
                      {"relu", "Relu"},
                      {"sigmoid", "Sigmoid"},
                      {"softplus", "Softplus"}});
  return s;
}

}  // namespace tapegrad::samples
