// The activations whose kernels run on vector_math (src/kernels/vector_math.hpp), against the
// loops they ran before, in the same process: the exact GELU and its gradient (GeluGrad), the
// tanh-approximated GELU and its gradient, SiLU, and softplus's gradient (SoftplusGrad,
// g sigmoid(x)), of [512, 256] (a transformer block's MLP activation, bench_attention),
// float32 and float64, one thread; and ELU, SELU, softplus, log sigmoid, erf and erfc. The
// baselines compute each element as the ops did before, with the C library (in double where
// the op computed in double) or the sigmoid's scalar function, into a fresh array.
//
//   ./bench_activations --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;
using tg::Tensor;

namespace {

// Pre-activations in [-4, 4), reproducible.
template <class T>
Tensor activations() {
  std::vector<double> v(512 * 256);
  unsigned state = 21;
  for (double& x : v) {
    state = state * 1664525U + 1013904223U;
    x = 8.0 * (static_cast<double>(state >> 8) / 16777216.0 - 0.5);
  }
  return tg::from_values(v, {512, 256}, tg::dtype_of<T>::value);
}

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

// An activation and its gradient through a tape: the forward and the fused gradient of x and
// g = 1.
template <class T, Tensor (*activation)(const Tensor&)>
void time_with_gradient(benchmark::State& state) {
  const Tensor x = activations<T>();
  for (auto _ : state) {
    tg::GradientTape tape;
    tape.watch(x);
    const Tensor y = activation(x);
    benchmark::DoNotOptimize(tape.gradient(y, x));
  }
}
Tensor exact_gelu(const Tensor& x) { return tg::gelu(x); }

template <class T>
void BM_gelu_gradient(benchmark::State& state) {
  time_with_gradient<T, &exact_gelu>(state);
}
BENCHMARK_TEMPLATE(BM_gelu_gradient, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_gelu_gradient, double)->Unit(benchmark::kMicrosecond);

Tensor tanh_gelu(const Tensor& x) { return tg::gelu(x, true); }

template <class T>
void BM_gelu_tanh_gradient(benchmark::State& state) {
  time_with_gradient<T, &tanh_gelu>(state);
}
BENCHMARK_TEMPLATE(BM_gelu_tanh_gradient, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_gelu_tanh_gradient, double)->Unit(benchmark::kMicrosecond);

// ---- Forward: each op against the loop it ran before (its scalar form per element: the C
// library, in double where the op computed in double) ----------------------------------------

struct GeluLoop {
  template <class T>
  static T at(T v) {
    const double d = v;
    return static_cast<T>(0.5 * d * std::erfc(-d * kSqrtHalf));
  }
};
struct GeluTanhLoop {
  template <class T>
  static T at(T v) {
    const double d = v;
    return static_cast<T>(0.5 * d * (1 + std::tanh(kSqrt2OverPi * (d + kGeluCubic * d * d * d))));
  }
};
// The slopes GeluGrad and GeluTanhGrad computed before, in double.
struct GeluSlopeLoop {
  template <class T>
  static T at(T v) {
    const double d = v;
    return static_cast<T>(0.5 * std::erfc(-d * kSqrtHalf) +
                          d * kInvSqrt2Pi * std::exp(-0.5 * d * d));
  }
};
struct GeluTanhSlopeLoop {
  template <class T>
  static T at(T v) {
    const double d = v;
    const double t = std::tanh(kSqrt2OverPi * (d + kGeluCubic * d * d * d));
    return static_cast<T>(0.5 * (1 + t) +
                          0.5 * d * ((1 - t * t) * (kSqrt2OverPi * (1 + 3 * kGeluCubic * d * d))));
  }
};
struct SiluLoop {  // v times the sigmoid's scalar function (one exp), in double
  template <class T>
  static T at(T v) {
    const double d = v;
    const double e = std::exp(-std::fabs(d));
    return static_cast<T>(d * (d >= 0 ? 1 / (1 + e) : e / (1 + e)));
  }
};
struct EluLoop {
  template <class T>
  static T at(T v) {
    return v < 0 ? static_cast<T>(std::expm1(v)) : v;
  }
};
struct SeluLoop {
  template <class T>
  static T at(T v) {
    constexpr double alpha = 1.6732632423543772848170429916717;
    constexpr double scale = 1.0507009873554804934193349852946;
    const double d = v;
    return static_cast<T>(d < 0 ? scale * alpha * std::expm1(d) : scale * d);
  }
};
struct SoftplusLoop {
  template <class T>
  static T at(T v) {
    return std::max(v, T(0)) + std::log1p(std::exp(-std::fabs(v)));
  }
};
struct LogSigmoidLoop {
  template <class T>
  static T at(T v) {
    const double d = v;
    return static_cast<T>(std::fmin(d, 0.0) - std::log1p(std::exp(-std::fabs(d))));
  }
};
struct ErfLoop {
  template <class T>
  static T at(T v) {
    return static_cast<T>(std::erf(static_cast<double>(v)));
  }
};
struct ErfcLoop {
  template <class T>
  static T at(T v) {
    return static_cast<T>(std::erfc(static_cast<double>(v)));
  }
};

// leaky_relu (alpha 0.2), compiled here without -fno-trapping-math, as the library was before:
// alpha x might trap, so it is not computed on both sides of the select and the loop branches.
struct LeakyReluLoop {
  template <class T>
  static T at(T v) {
    return v > 0 ? v : static_cast<T>(0.2 * v);
  }
};
// sqrt, compiled here without -fno-math-errno, as the library was before: a sqrt that may set
// errno is not vectorized (the benchmarks below take its square root of |x|).
struct SqrtLoop {
  template <class T>
  static T at(T v) {
    return std::sqrt(v);
  }
};

// The inputs of a benchmark: the activations, or their absolute values (for sqrt).
enum class Inputs { Signed, Absolute };
template <class T>
Tensor inputs(Inputs kind) {
  return kind == Inputs::Absolute ? tg::abs(activations<T>()) : activations<T>();
}

template <class T, Tensor (*op)(const Tensor&), Inputs kind = Inputs::Signed>
void BM_op(benchmark::State& state) {
  const Tensor x = inputs<T>(kind);
  for (auto _ : state) benchmark::DoNotOptimize(op(x));
}
template <class T, class Loop, Inputs kind = Inputs::Signed>
void BM_loop(benchmark::State& state) {
  const Tensor x = inputs<T>(kind);
  const auto& in = x.array<T>();
  for (auto _ : state) {
    std::vector<T> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = Loop::template at<T>(in.data()[i]);
    benchmark::DoNotOptimize(out.data());
  }
}
// An activation's forward and gradient loops before (g = 1): the baseline of
// BM_gelu_gradient and BM_gelu_tanh_gradient.
template <class T, class Forward, class Slope>
void BM_gradient_loops(benchmark::State& state) {
  const Tensor x = activations<T>();
  const auto& in = x.array<T>();
  for (auto _ : state) {
    std::vector<T> forward(in.size()), slope(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      forward[i] = Forward::template at<T>(in.data()[i]);
      slope[i] = Slope::template at<T>(in.data()[i]);
    }
    benchmark::DoNotOptimize(forward.data());
    benchmark::DoNotOptimize(slope.data());
  }
}
BENCHMARK_TEMPLATE(BM_gradient_loops, float, GeluLoop, GeluSlopeLoop)
    ->Name("BM_gelu_gradient_loops<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_gradient_loops, double, GeluLoop, GeluSlopeLoop)
    ->Name("BM_gelu_gradient_loops<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_gradient_loops, float, GeluTanhLoop, GeluTanhSlopeLoop)
    ->Name("BM_gelu_tanh_gradient_loops<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_gradient_loops, double, GeluTanhLoop, GeluTanhSlopeLoop)
    ->Name("BM_gelu_tanh_gradient_loops<double>")
    ->Unit(benchmark::kMicrosecond);

Tensor gelu_op(const Tensor& x) { return tg::gelu(x); }
Tensor gelu_tanh_op(const Tensor& x) { return tg::gelu(x, true); }
Tensor silu_op(const Tensor& x) { return tg::silu(x); }
Tensor sqrt_op(const Tensor& x) { return tg::sqrt(x); }
Tensor leaky_relu_op(const Tensor& x) { return tg::leaky_relu(x); }
BENCHMARK_TEMPLATE(BM_op, float, &leaky_relu_op)
    ->Name("BM_leaky_relu<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, LeakyReluLoop)
    ->Name("BM_leaky_relu_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &leaky_relu_op)
    ->Name("BM_leaky_relu<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, LeakyReluLoop)
    ->Name("BM_leaky_relu_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &gelu_op)->Name("BM_gelu<float>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, GeluLoop)
    ->Name("BM_gelu_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &gelu_op)->Name("BM_gelu<double>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, GeluLoop)
    ->Name("BM_gelu_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &gelu_tanh_op)
    ->Name("BM_gelu_tanh<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, GeluTanhLoop)
    ->Name("BM_gelu_tanh_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &gelu_tanh_op)
    ->Name("BM_gelu_tanh<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, GeluTanhLoop)
    ->Name("BM_gelu_tanh_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &silu_op)->Name("BM_silu<float>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, SiluLoop)
    ->Name("BM_silu_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &silu_op)->Name("BM_silu<double>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, SiluLoop)
    ->Name("BM_silu_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &sqrt_op, Inputs::Absolute)
    ->Name("BM_sqrt<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, SqrtLoop, Inputs::Absolute)
    ->Name("BM_sqrt_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &sqrt_op, Inputs::Absolute)
    ->Name("BM_sqrt<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, SqrtLoop, Inputs::Absolute)
    ->Name("BM_sqrt_loop<double>")
    ->Unit(benchmark::kMicrosecond);
Tensor elu_op(const Tensor& x) { return tg::elu(x); }
Tensor selu_op(const Tensor& x) { return tg::selu(x); }
Tensor softplus_op(const Tensor& x) { return tg::softplus(x); }
Tensor log_sigmoid_op(const Tensor& x) { return tg::log_sigmoid(x); }
Tensor erf_op(const Tensor& x) { return tg::erf(x); }
Tensor erfc_op(const Tensor& x) { return tg::erfc(x); }
BENCHMARK_TEMPLATE(BM_op, float, &elu_op)->Name("BM_elu<float>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, EluLoop)
    ->Name("BM_elu_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &elu_op)->Name("BM_elu<double>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, EluLoop)
    ->Name("BM_elu_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &selu_op)->Name("BM_selu<float>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, SeluLoop)
    ->Name("BM_selu_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &softplus_op)
    ->Name("BM_softplus<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, SoftplusLoop)
    ->Name("BM_softplus_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &softplus_op)
    ->Name("BM_softplus<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, SoftplusLoop)
    ->Name("BM_softplus_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &log_sigmoid_op)
    ->Name("BM_log_sigmoid<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, LogSigmoidLoop)
    ->Name("BM_log_sigmoid_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, float, &erf_op)->Name("BM_erf<float>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, float, ErfLoop)
    ->Name("BM_erf_loop<float>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &erf_op)->Name("BM_erf<double>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, ErfLoop)
    ->Name("BM_erf_loop<double>")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_op, double, &erfc_op)->Name("BM_erfc<double>")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_loop, double, ErfcLoop)
    ->Name("BM_erfc_loop<double>")
    ->Unit(benchmark::kMicrosecond);

// Softplus's gradient alone: SoftplusGrad of x and g = 1 (the forward's tensor made once).
template <class T>
void BM_softplus_gradient(benchmark::State& state) {
  const Tensor x = activations<T>();
  const Tensor g = tg::ones_like(x);
  tg::GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = tg::softplus(x);
  const auto paused = tape.stop_recording();  // or the tape would record every backward
  tg::GradientOptions options;
  options.output_gradients = {g};
  for (auto _ : state) benchmark::DoNotOptimize(tape.gradient({y}, {x}, options));
}
BENCHMARK_TEMPLATE(BM_softplus_gradient, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_softplus_gradient, double)->Unit(benchmark::kMicrosecond);

// SoftplusGrad's loop before: g times the sigmoid's scalar function (the C library's exp).
template <class T>
void BM_softplus_gradient_c_library(benchmark::State& state) {
  const Tensor x = activations<T>();
  const auto& in = x.array<T>();
  for (auto _ : state) {
    std::vector<T> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const T v = in.data()[i];
      const T sigmoid =
          v >= T(0) ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v));
      out[i] = T(1) * sigmoid;
    }
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK_TEMPLATE(BM_softplus_gradient_c_library, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_softplus_gradient_c_library, double)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
