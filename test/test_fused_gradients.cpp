// The fused activation gradients (src/ops/internal_ops.hpp; TF's TanhGrad, ReluGrad, ...): a
// first-order backward of each activation writes exactly its one fused op; each op equals the
// chain of elementwise ops it replaced, on finite, infinite and NaN operands, in float64 and
// float32; the activations' first and second derivatives (the second runs through the fused
// op's own gradient, and through its tangent in forward-over-reverse) against closed forms; and
// the vectorized Jacobian's diagonal seed stays diagonal through each op.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/internal_ops.hpp"
#include "runtime/batching_context.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/op_trace.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

using Activation = Tensor (*)(const Tensor&);
using Fused = Tensor (*)(const Tensor&, const Tensor&);

struct FusedCase {
  std::string op;  // the fused gradient op of the activation
  Activation activation;
  Fused fused;
  bool from_output;         // the op's first operand is the activation's output (else its input)
  Fused unfused;            // the chain of elementwise ops the op replaced, as a function of (x, g)
  double (*first)(double);  // f'(x)
  double (*second)(double);  // f''(x)
  double lo, hi;             // a domain where f is smooth (relu: away from 0 below)
};

Tensor constant_like(double v, const Tensor& like) { return scalar(v, like.dtype()); }

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

Tensor gelu_exact(const Tensor& x) { return gelu(x, false); }
Tensor gelu_approximate(const Tensor& x) { return gelu(x, true); }

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

// ---- The cases: each activation's rule before it was fused, and its derivatives ------------

Tensor tanh_unfused(const Tensor& x, const Tensor& g) {
  const Tensor y = tanh(x);
  return multiply(g, subtract(constant_like(1, y), multiply(y, y)));
}
double tanh_first(double x) { return 1 - std::tanh(x) * std::tanh(x); }
double tanh_second(double x) { return -2 * std::tanh(x) * tanh_first(x); }

Tensor sigmoid_unfused(const Tensor& x, const Tensor& g) {
  const Tensor y = sigmoid(x);
  return multiply(g, multiply(y, subtract(constant_like(1, y), y)));
}
double sigmoid_first(double x) { return sigmoid_ref(x) * (1 - sigmoid_ref(x)); }
double sigmoid_second(double x) { return sigmoid_first(x) * (1 - 2 * sigmoid_ref(x)); }

Tensor relu_unfused(const Tensor& x, const Tensor& g) {
  const Tensor y = relu(x);
  return where(greater(y, constant_like(0, y)), g, constant_like(0, g));
}
double relu_first(double x) { return x > 0 ? 1 : 0; }
double relu_second(double) { return 0; }

Tensor softplus_unfused(const Tensor& x, const Tensor& g) { return multiply(g, sigmoid(x)); }
double softplus_second(double x) { return sigmoid_first(x); }

Tensor elu_unfused(const Tensor& x, const Tensor& g) {
  const Tensor y = elu(x);
  const Tensor one = constant_like(1, y);
  return multiply(g, where(less(y, constant_like(0, y)), add(y, one), one));
}
double elu_first(double x) { return x < 0 ? std::exp(x) : 1; }
double elu_second(double x) { return x < 0 ? std::exp(x) : 0; }

// Phi(x) + x phi(x), Phi written with erf as the rule wrote it.
Tensor gelu_unfused(const Tensor& x, const Tensor& g) {
  const Tensor erf_term = erf(multiply(x, constant_like(kSqrtHalf, x)));
  const Tensor cdf = multiply(constant_like(0.5, x), add(constant_like(1, x), erf_term));
  const Tensor pdf =
      multiply(constant_like(kInvSqrt2Pi, x), exp(multiply(constant_like(-0.5, x), square(x))));
  return multiply(g, add(cdf, multiply(x, pdf)));
}
double gelu_pdf(double x) { return kInvSqrt2Pi * std::exp(-0.5 * x * x); }
double gelu_first(double x) { return 0.5 * std::erfc(-x * kSqrtHalf) + x * gelu_pdf(x); }
double gelu_second(double x) { return gelu_pdf(x) * (2 - x * x); }

// With u = k (x + c x^3), t = tanh u: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2).
Tensor gelu_tanh_unfused(const Tensor& x, const Tensor& g) {
  const Tensor x2 = square(x);
  const Tensor u = multiply(constant_like(kSqrt2OverPi, x),
                            add(x, multiply(constant_like(kGeluCubic, x), multiply(x2, x))));
  const Tensor t = tanh(u);
  const Tensor cubic = multiply(constant_like(3 * kGeluCubic, x), x2);
  const Tensor du = multiply(constant_like(kSqrt2OverPi, x), add(constant_like(1, x), cubic));
  const Tensor half = constant_like(0.5, x);
  const Tensor slope =
      add(multiply(half, add(constant_like(1, x), t)),
          multiply(multiply(half, x), multiply(subtract(constant_like(1, x), square(t)), du)));
  return multiply(g, slope);
}
double gelu_tanh_t(double x) { return std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)); }
double gelu_tanh_du(double x) { return kSqrt2OverPi * (1 + 3 * kGeluCubic * x * x); }
double gelu_tanh_first(double x) {
  const double t = gelu_tanh_t(x);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * gelu_tanh_du(x);
}
// d/dx of the above, with d2u/dx2 = 6 k c x: (1 - t^2) (2 du - k - x t du^2).
double gelu_tanh_second(double x) {
  const double t = gelu_tanh_t(x);
  const double du = gelu_tanh_du(x);
  return (1 - t * t) * (2 * du - kSqrt2OverPi - x * t * du * du);
}

Tensor reciprocal_unfused(const Tensor& x, const Tensor& g) {
  const Tensor y = reciprocal(x);
  return negative(multiply(g, multiply(y, y)));
}
double reciprocal_first(double x) { return -1 / (x * x); }
double reciprocal_second(double x) { return 2 / (x * x * x); }

Tensor sqrt_unfused(const Tensor& x, const Tensor& g) {
  const Tensor y = sqrt(x);
  return divide(g, multiply(y, constant_like(2, y)));
}
double sqrt_first(double x) { return 0.5 / std::sqrt(x); }
double sqrt_second(double x) { return -0.25 / (x * std::sqrt(x)); }

// The rule read the input then: g (-1/2) rsqrt(x) / x.
Tensor rsqrt_unfused(const Tensor& x, const Tensor& g) {
  return multiply(g, multiply(constant_like(-0.5, x), divide(rsqrt(x), x)));
}
double rsqrt_first(double x) { return -0.5 / (x * std::sqrt(x)); }
double rsqrt_second(double x) { return 0.75 / (x * x * std::sqrt(x)); }

const std::vector<FusedCase>& fused_cases() {
  static const std::vector<FusedCase> cases = {
      {"TanhGrad", tapegrad::tanh, detail::tanh_grad_op, true, tanh_unfused, tanh_first,
       tanh_second, -2, 2},
      {"SigmoidGrad", sigmoid, detail::sigmoid_grad_op, true, sigmoid_unfused, sigmoid_first,
       sigmoid_second, -3, 3},
      {"ReluGrad", relu, detail::relu_grad_op, true, relu_unfused, relu_first, relu_second, -2, 2},
      {"SoftplusGrad", softplus, detail::softplus_grad_op, false, softplus_unfused, sigmoid_ref,
       softplus_second, -3, 3},
      {"EluGrad", elu, detail::elu_grad_op, true, elu_unfused, elu_first, elu_second, -2, 2},
      {"GeluGrad", gelu_exact, detail::gelu_grad_op, false, gelu_unfused, gelu_first, gelu_second,
       -3, 3},
      {"GeluTanhGrad", gelu_approximate, detail::gelu_tanh_grad_op, false, gelu_tanh_unfused,
       gelu_tanh_first, gelu_tanh_second, -3, 3},
      {"ReciprocalGrad", reciprocal, detail::reciprocal_grad_op, true, reciprocal_unfused,
       reciprocal_first, reciprocal_second, 0.3, 3},
      {"SqrtGrad", tapegrad::sqrt, detail::sqrt_grad_op, true, sqrt_unfused, sqrt_first,
       sqrt_second, 0.3, 3},
      {"RsqrtGrad", rsqrt, detail::rsqrt_grad_op, true, rsqrt_unfused, rsqrt_first, rsqrt_second,
       0.3, 3},
  };
  return cases;
}

// The fused op's first operand at x: the activation's output or x itself.
Tensor kept(const FusedCase& fc, const Tensor& x) { return fc.from_output ? fc.activation(x) : x; }

// The names of the ops a first-order backward of f at x writes: every op that reads x, f(x)
// or the output gradient, traced as vectorized_map traces fn.
std::vector<std::string> backward_ops(Activation f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  const Tensor u = cast(random_tensor(y.shape(), 7), y.dtype());
  detail::OpTrace trace;
  for (const Tensor& t : {x, y, u}) trace.add_value(t);
  {
    detail::TraceScope scope(trace);
    tape.gradient({y}, {x}, {u});
  }
  std::vector<std::string> names;
  for (const detail::TracedOp& op : trace.ops) names.push_back(op.op->name);
  return names;
}

// Equal within `tolerance`, NaN where the expected value is NaN, the same infinity.
void require_same_values(const Tensor& actual, const Tensor& expected, double tolerance) {
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(actual.dtype() == expected.dtype());
  const std::vector<double> a = values(actual);
  const std::vector<double> e = values(expected);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " against " << e[i]);
    if (std::isnan(e[i])) {
      CHECK(std::isnan(a[i]));
    } else if (std::isinf(e[i])) {
      CHECK(a[i] == e[i]);
    } else {
      CHECK(a[i] == Approx(e[i]).epsilon(tolerance).margin(tolerance));
    }
  }
}

// Three points spread over [lo, hi].
std::vector<double> points(const FusedCase& fc) {
  std::vector<double> out;
  for (double t : {0.15, 0.55, 0.9}) out.push_back(fc.lo + t * (fc.hi - fc.lo));
  return out;
}

}  // namespace

TEST_CASE("a first-order backward of each activation writes exactly its one fused op", "[fused]") {
  for (const FusedCase& fc : fused_cases()) {
    for (const DType dtype : {DType::Float64, DType::Float32}) {
      INFO(fc.op << " in " << dtype_name(dtype));
      const Tensor x = cast(random_tensor({2, 3}, 1, fc.lo, fc.hi), dtype);
      CHECK(backward_ops(fc.activation, x) == std::vector<std::string>{fc.op});
    }
  }
}

TEST_CASE("each fused op equals the elementwise chain it replaced, also at infinities and NaN",
          "[fused]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Every x against every g.
  std::vector<double> xs, gs;
  for (double x : {-2.0, -0.5, 0.0, 0.5, 3.0, inf, -inf, nan}) {
    for (double g : {1.5, -0.25, 0.0, inf, nan}) {
      xs.push_back(x);
      gs.push_back(g);
    }
  }
  const Shape shape{8, 5};
  for (const FusedCase& fc : fused_cases()) {
    for (const DType dtype : {DType::Float64, DType::Float32}) {
      INFO(fc.op << " in " << dtype_name(dtype));
      const Tensor x = from_values(xs, shape, dtype);
      const Tensor g = from_values(gs, shape, dtype);
      const Tensor v = kept(fc, x);
      const double tolerance = dtype == DType::Float64 ? 1e-15 : 1e-6;
      require_same_values(fc.fused(v, g), fc.unfused(x, g), tolerance);
      // Operands that were transposed (a copy with other strides) give the transposed result.
      require_same_values(fc.fused(transpose(v), transpose(g)), transpose(fc.fused(v, g)), 0);
    }
  }
}

TEST_CASE("a fused op takes operands of one shape and one floating dtype, naming itself",
          "[fused][errors]") {
  for (const FusedCase& fc : fused_cases()) {
    INFO(fc.op);
    const Tensor v = random_tensor({2, 3}, 2, 0.5, 1);
    CHECK_THAT(message_of<InvalidArgument>([&] { fc.fused(v, random_tensor({3}, 3)); }),
               Catch::Contains(fc.op) && Catch::Contains("the shapes must be equal"));
    CHECK_THAT(message_of<InvalidArgument>([&] { fc.fused(v, cast(v, DType::Float32)); }),
               Catch::Contains(fc.op));
    const Tensor ints = ones({2, 3}, DType::Int32);
    CHECK_THAT(message_of<InvalidArgument>([&] { fc.fused(ints, ints); }),
               Catch::Contains(fc.op) && Catch::Contains("float32 or float64"));
  }
}

TEST_CASE("activations' first and second derivatives through the fused ops: closed forms",
          "[fused][grad][grad2]") {
  for (const FusedCase& fc : fused_cases()) {
    for (const double at : points(fc)) {
      INFO(fc.op << " at x = " << at);
      const Tensor x = constant(at);
      GradientTape outer;
      outer.watch(x);
      Tensor first;
      {
        GradientTape inner;
        inner.watch(x);
        first = inner.gradient(fc.activation(x), x);
      }
      CHECK(first.item<double>() == Approx(fc.first(at)).epsilon(1e-12).margin(1e-12));
      // Defined, also where it is 0 (relu: the fused op gives y a zero gradient, not none).
      const Tensor second = outer.gradient(first, x);
      REQUIRE(second.defined());
      CHECK(second.item<double>() == Approx(fc.second(at)).epsilon(1e-12).margin(1e-12));
      // Forward over reverse: the fused op's tangent, along v = 1.5.
      ForwardAccumulator acc(x, constant(1.5));
      GradientTape tape;
      tape.watch(x);
      const Tensor gradient = tape.gradient(fc.activation(x), x);
      CHECK(acc.jvp(gradient).item<double>() ==
            Approx(1.5 * fc.second(at)).epsilon(1e-12).margin(1e-12));
    }
  }
}

TEST_CASE("the vectorized Jacobian keeps a diagonal seed diagonal through each fused op",
          "[fused][jacobian]") {
  unsigned seed = 20;
  for (const FusedCase& fc : fused_cases()) {
    INFO(fc.op);
    const Tensor x = random_tensor({2, 3}, seed++, fc.lo, fc.hi);
    const Tensor v = kept(fc, x);
    const Tensor d = random_tensor({2, 3}, seed++);
    // The op's structure rule on (constant v, diagonal g) gives the output's diagonal: the op
    // on (v, d).
    const detail::OpDefinition& op = detail::op_named(fc.op);
    REQUIRE(op.structure_rule != nullptr);
    std::vector<detail::StructuredValue> structured(2);
    structured[1].diagonal = d;
    const std::vector<Shape> output_shapes{x.shape()};
    const std::vector<DType> output_dtypes{x.dtype()};
    const detail::StructureContext context{{{op, nullptr}, output_shapes, output_dtypes}};
    const auto diagonal = op.structure_rule(context, structured, {v, Tensor()});
    REQUIRE(diagonal.has_value());
    REQUIRE(diagonal->size() == 1);
    REQUIRE(diagonal->front().is_diagonal());
    CHECK_FALSE(diagonal->front().dense.defined());
    require_same_values(diagonal->front().diagonal, fc.fused(v, d), 0);
    // End to end: the Jacobian is diag(f'(x)), as the loop of backward passes finds it.
    GradientTape tape;
    tape.watch(x);
    const Tensor j = tape.jacobian(fc.activation(x), x);
    std::vector<double> expected(36, 0.0);
    const std::vector<double> xs = values(x);
    for (std::size_t i = 0; i < 6; ++i) expected[i * 6 + i] = fc.first(xs[i]);
    require_close(j, {2, 3, 2, 3}, expected, 1e-12);
  }
}
