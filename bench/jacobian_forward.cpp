// jacobian_forward (one forward pass with a ForwardAccumulator per element of x) against
// GradientTape::jacobian (one backward run per element of y) on tanh(W x), x in R^256 as a
// [256, 1] column, W 256x256, float64, one thread; and jvp (one direction) against one
// gradient. Each timed iteration includes the forward pass.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <random>

#include <tapegrad/tapegrad.hpp>

#include "random_inputs.hpp"

namespace {

using tapegrad::Tensor;
constexpr std::size_t kSize = 256;

Tensor random_matrix(std::size_t rows, std::size_t cols, unsigned seed) {
  return random_inputs::matrix(rows, cols, seed, kSize);
}

const Tensor& weights() {
  static const Tensor w = random_matrix(kSize, kSize, 1);
  return w;
}

Tensor tanh_wx(const Tensor& x) { return tapegrad::tanh(tapegrad::matmul(weights(), x)); }

void BM_ReverseJacobian(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_matrix(kSize, 1, 2);
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(x);
    Tensor j = tape.jacobian(tanh_wx(x), x);
    benchmark::DoNotOptimize(j.array<double>().data());
  }
}
BENCHMARK(BM_ReverseJacobian)->Unit(benchmark::kMillisecond);

void BM_JacobianForward(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_matrix(kSize, 1, 2);
  for (auto _ : state) {
    Tensor j = tapegrad::jacobian_forward(tanh_wx, x);
    benchmark::DoNotOptimize(j.array<double>().data());
  }
}
BENCHMARK(BM_JacobianForward)->Unit(benchmark::kMillisecond);

void BM_Gradient(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_matrix(kSize, 1, 2);
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(x);
    Tensor g = tape.gradient(tanh_wx(x), x);
    benchmark::DoNotOptimize(g.array<double>().data());
  }
}
BENCHMARK(BM_Gradient)->Unit(benchmark::kMillisecond);

void BM_Jvp(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Tensor x = random_matrix(kSize, 1, 2);
  const Tensor v = random_matrix(kSize, 1, 3);
  for (auto _ : state) {
    auto [y, tangent] =
        tapegrad::jvp([](const std::vector<Tensor>& a) { return tanh_wx(a[0]); }, {x}, {v});
    benchmark::DoNotOptimize(tangent.array<double>().data());
  }
}
BENCHMARK(BM_Jvp)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
