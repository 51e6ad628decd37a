// The Jacobian of tanh(W x), x in R^256, W 256x256, float64, one thread: tapegrad's
// GradientTape::jacobian (one backward run per row) against the analytic (1 - y^2) W
// computed in the same run. Each timed iteration includes the forward pass.
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

void single_thread() { openblas_set_num_threads(1); }

// Records y = forward(W, x) on a tape watching x, then runs `backward(tape, y, x)`; the
// result's storage is the benchmark's output.
template <class Forward, class Backward>
void time_tape(benchmark::State& state, std::size_t x_rows, std::size_t x_cols, Forward forward,
               Backward backward) {
  single_thread();
  const Tensor w = random_matrix(kSize, kSize, 1);
  const Tensor x = random_matrix(x_rows, x_cols, 2);
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(x);
    Tensor y = forward(w, x);
    Tensor result = backward(tape, y, x);
    benchmark::DoNotOptimize(result.array<double>().data());
  }
}

Tensor column_forward(const Tensor& w, const Tensor& x) {
  return tapegrad::tanh(tapegrad::matmul(w, x));
}
Tensor row_forward(const Tensor& w, const Tensor& x) {
  return tapegrad::tanh(tapegrad::matmul(x, w, false, true));
}
Tensor jacobian_of(tapegrad::GradientTape& tape, const Tensor& y, const Tensor& x) {
  return tape.jacobian(y, x);
}
Tensor gradient_of(tapegrad::GradientTape& tape, const Tensor& y, const Tensor& x) {
  return tape.gradient(y, x);
}

// x as a column [256, 1]: y = tanh(W x); the gradient of each row is W^T dy (gemv, n = 1).
void BM_TapegradJacobianColumn(benchmark::State& state) {
  time_tape(state, kSize, 1, column_forward, jacobian_of);
}
BENCHMARK(BM_TapegradJacobianColumn)->Unit(benchmark::kMillisecond);

// x as a row [1, 256]: y = tanh(x W^T); the gradient of each row is dy W (gemv, m = 1).
void BM_TapegradJacobianRow(benchmark::State& state) {
  time_tape(state, 1, kSize, row_forward, jacobian_of);
}
BENCHMARK(BM_TapegradJacobianRow)->Unit(benchmark::kMillisecond);

// One backward run of the same function (the cost of one Jacobian row, plus the forward).
void BM_TapegradGradientColumn(benchmark::State& state) {
  time_tape(state, kSize, 1, column_forward, gradient_of);
}
BENCHMARK(BM_TapegradGradientColumn)->Unit(benchmark::kMillisecond);

// The baseline: y = tanh(W x) by gemv, then J[i, :] = (1 - y_i^2) W[i, :].
void BM_AnalyticJacobian(benchmark::State& state) {
  single_thread();
  const Tensor w_tensor = random_matrix(kSize, kSize, 1);
  const Tensor x_tensor = random_matrix(kSize, 1, 2);
  const double* w = w_tensor.array<double>().data();
  const double* x = x_tensor.array<double>().data();
  std::vector<double> y(kSize);
  for (auto _ : state) {
    cblas_dgemv(CblasRowMajor, CblasNoTrans, kSize, kSize, 1.0, w, kSize, x, 1, 0.0, y.data(), 1);
    xt::xarray<double> j = xt::empty<double>(tapegrad::Shape{kSize, kSize});
    double* out = j.data();
    for (std::size_t i = 0; i < kSize; ++i) {
      const double t = std::tanh(y[i]);
      const double scale = 1.0 - t * t;
      for (std::size_t k = 0; k < kSize; ++k) out[i * kSize + k] = scale * w[i * kSize + k];
    }
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_AnalyticJacobian)->Unit(benchmark::kMillisecond);

// Where the time goes. The matmul gradient of each row is one product of W^T with a
// vector; these two loops do the 256 products of one Jacobian as dgemm with n = 1 (what the
// matmul kernel calls today) and as dgemv.
void BM_RowProductsGemm(benchmark::State& state) {
  single_thread();
  const Tensor w_tensor = random_matrix(kSize, kSize, 1);
  const Tensor v_tensor = random_matrix(kSize, 1, 2);
  const double* w = w_tensor.array<double>().data();
  const double* v = v_tensor.array<double>().data();
  std::vector<double> out(kSize);
  for (auto _ : state) {
    for (std::size_t r = 0; r < kSize; ++r) {
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kSize, 1, kSize, 1.0, w, kSize, v, 1,
                  0.0, out.data(), 1);
      benchmark::DoNotOptimize(out.data());
    }
  }
}
BENCHMARK(BM_RowProductsGemm)->Unit(benchmark::kMillisecond);

void BM_RowProductsGemv(benchmark::State& state) {
  single_thread();
  const Tensor w_tensor = random_matrix(kSize, kSize, 1);
  const Tensor v_tensor = random_matrix(kSize, 1, 2);
  const double* w = w_tensor.array<double>().data();
  const double* v = v_tensor.array<double>().data();
  std::vector<double> out(kSize);
  for (auto _ : state) {
    for (std::size_t r = 0; r < kSize; ++r) {
      cblas_dgemv(CblasRowMajor, CblasTrans, kSize, kSize, 1.0, w, kSize, v, 1, 0.0, out.data(),
                  1);
      benchmark::DoNotOptimize(out.data());
    }
  }
}
BENCHMARK(BM_RowProductsGemv)->Unit(benchmark::kMillisecond);

// The tape's own cost per row, without the product: the Jacobian of tanh(x * c) for x in
// R^256 (elementwise, so each row's backward run is a few 256-element ops).
void BM_TapegradJacobianElementwise(benchmark::State& state) {
  single_thread();
  const Tensor c = random_matrix(kSize, 1, 1);
  const Tensor x = random_matrix(kSize, 1, 2);
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(x);
    Tensor y = tapegrad::tanh(tapegrad::multiply(x, c));
    Tensor j = tape.jacobian(y, x);
    benchmark::DoNotOptimize(j.array<double>().data());
  }
}
BENCHMARK(BM_TapegradJacobianElementwise)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
