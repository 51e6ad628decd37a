// hessian_vector_product (reverse over reverse: a tape around a tape) against one gradient of
// the same function, n = 1000, float64, one thread, and against the forward-over-reverse HVP
// (a ForwardAccumulator around the gradient's tape) that it moves to once the ops have forward
// rules. The ratio should be a small constant, not n; the full Hessian is timed for contrast,
// both ways.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>

#include <tapegrad/tapegrad.hpp>

namespace {

using tapegrad::Tensor;
constexpr std::size_t kSize = 1000;

Tensor random_vector(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(kSize);
  for (auto& x : v) x = dist(gen);
  return tapegrad::from_values(v, {kSize});
}

// Elementwise and reductions: sum(tanh(x) exp(x / 2) / (1 + x^2)) + mean(x^3).
Tensor objective(const Tensor& x) {
  using namespace tapegrad;
  return reduce_sum(tanh(x) * exp(x * 0.5) / (x * x + 1.0)) + reduce_mean(x * x * x);
}

void BM_Gradient(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(x);
    Tensor g = tape.gradient(objective(x), x);
    benchmark::DoNotOptimize(g.array<double>().data());
  }
}
BENCHMARK(BM_Gradient)->Unit(benchmark::kMicrosecond);

void BM_HessianVectorProduct(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  const Tensor v = random_vector(2);
  for (auto _ : state) {
    Tensor hv = tapegrad::hessian_vector_product(objective, x, v);
    benchmark::DoNotOptimize(hv.array<double>().data());
  }
}
BENCHMARK(BM_HessianVectorProduct)->Unit(benchmark::kMicrosecond);

// Forward over reverse: the tangent, along v, of the gradient.
Tensor forward_over_reverse_hvp(const Tensor& x, const Tensor& v) {
  tapegrad::ForwardAccumulator accumulator(x, v);
  tapegrad::GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(objective(x), x);
  return accumulator.jvp(g);
}

void BM_HessianVectorProductForwardOverReverse(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  const Tensor v = random_vector(2);
  for (auto _ : state) {
    Tensor hv = forward_over_reverse_hvp(x, v);
    benchmark::DoNotOptimize(hv.array<double>().data());
  }
}
BENCHMARK(BM_HessianVectorProductForwardOverReverse)->Unit(benchmark::kMicrosecond);

// Forward over reverse: jacobian_forward of the recorded gradient, one tangent pass per column.
void BM_FullHessianForwardOverReverse(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  for (auto _ : state) {
    Tensor h = tapegrad::jacobian_forward(
        [](const Tensor& at) {
          tapegrad::GradientTape tape;
          tape.watch(at);
          return tape.gradient(objective(at), at);
        },
        x);
    benchmark::DoNotOptimize(h.array<double>().data());
  }
}
BENCHMARK(BM_FullHessianForwardOverReverse)->Unit(benchmark::kMicrosecond)->Iterations(5);

void BM_FullHessian(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  for (auto _ : state) {
    Tensor h = tapegrad::hessian(objective, x);
    benchmark::DoNotOptimize(h.array<double>().data());
  }
}
BENCHMARK(BM_FullHessian)->Unit(benchmark::kMicrosecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
