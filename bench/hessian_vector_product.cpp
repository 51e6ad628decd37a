// hessian_vector_product (forward-over-reverse since issue 12) against one gradient of the same
// function, n = 1000, float64, one thread, and against the reverse-over-reverse HVP it replaced
// (written out here with two tapes, as 0.1 computed it). The ratio should be a small constant,
// not n; the full Hessian is timed for contrast, both ways.
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

// 0.1's hessian_vector_product: d/dx <grad f(x), v> with a tape around a tape.
Tensor reverse_over_reverse_hvp(const Tensor& x, const Tensor& v) {
  using namespace tapegrad;
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(objective(x), x);
  }
  return outer.gradient(reduce_sum(g * v), x);
}

void BM_HessianVectorProductReverseOverReverse(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  const Tensor v = random_vector(2);
  for (auto _ : state) {
    Tensor hv = reverse_over_reverse_hvp(x, v);
    benchmark::DoNotOptimize(hv.array<double>().data());
  }
}
BENCHMARK(BM_HessianVectorProductReverseOverReverse)->Unit(benchmark::kMicrosecond);

// 0.1's hessian: one recorded gradient, then n backward runs through it.
void BM_FullHessianReverseOverReverse(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_vector(1);
  for (auto _ : state) {
    tapegrad::GradientTape outer;
    outer.watch(x);
    Tensor g;
    {
      tapegrad::GradientTape inner;
      inner.watch(x);
      g = inner.gradient(objective(x), x);
    }
    Tensor h = outer.jacobian(g, x);
    benchmark::DoNotOptimize(h.array<double>().data());
  }
}
BENCHMARK(BM_FullHessianReverseOverReverse)->Unit(benchmark::kMicrosecond)->Iterations(5);

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
