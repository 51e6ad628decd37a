// The Jacobian of tanh(W x), x in R^256, W 256x256, float64, one thread: tapegrad's
// GradientTape::jacobian, vectorized (the default: one batched backward pass) and as a loop
// (vectorize = false: one backward run per row), against the analytic (1 - y^2) W computed in
// the same run; the Jacobian of a 10-op elementwise chain on 1000 elements, and batch_jacobian
// of a 64-128-10 MLP on a batch of 64 against one gradient of the batch. Each timed iteration
// includes the forward pass.
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
Tensor jacobian_loop_of(tapegrad::GradientTape& tape, const Tensor& y, const Tensor& x) {
  tapegrad::JacobianOptions options;
  options.vectorize = false;
  return tape.jacobian(y, x, options);
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

void BM_TapegradJacobianColumnLoop(benchmark::State& state) {
  time_tape(state, kSize, 1, column_forward, jacobian_loop_of);
}
BENCHMARK(BM_TapegradJacobianColumnLoop)->Unit(benchmark::kMillisecond);

void BM_TapegradJacobianRowLoop(benchmark::State& state) {
  time_tape(state, 1, kSize, row_forward, jacobian_loop_of);
}
BENCHMARK(BM_TapegradJacobianRowLoop)->Unit(benchmark::kMillisecond);

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
      cblas_dgemv(CblasRowMajor, CblasTrans, kSize, kSize, 1.0, w, kSize, v, 1, 0.0, out.data(), 1);
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

// A 10-op elementwise chain on 1000 elements (issue 12: vectorized >= 20x faster than the loop).
Tensor chain10(const Tensor& x) {
  using namespace tapegrad;
  Tensor y = tanh(x);
  y = y * x;
  y = exp(y);
  y = sin(y);
  y = y + x;
  y = sigmoid(y);
  y = square(y);
  y = y / (x * x + 1.0);
  return log1p(y);
}

void time_chain(benchmark::State& state, bool vectorize) {
  single_thread();
  const Tensor x = random_matrix(1000, 1, 3);
  tapegrad::JacobianOptions options;
  options.vectorize = vectorize;
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(x);
    const Tensor y = chain10(x);
    const Tensor j = tape.jacobian(y, x, options);
    benchmark::DoNotOptimize(j.array<double>().data());
  }
}
void BM_JacobianChain10(benchmark::State& state) { time_chain(state, true); }
BENCHMARK(BM_JacobianChain10)->Unit(benchmark::kMillisecond);
void BM_JacobianChain10Loop(benchmark::State& state) { time_chain(state, false); }
BENCHMARK(BM_JacobianChain10Loop)->Unit(benchmark::kMillisecond);

// A per-example MLP 64-128-10 (tanh hidden layer) on a batch of 64: batch_jacobian of the
// logits [64, 10] with respect to the inputs [64, 64], against one gradient of the batch.
struct Mlp {
  Tensor w1 = random_inputs::matrix(64, 128, 11, 64);
  Tensor b1 = random_inputs::matrix(1, 128, 12, 64);
  Tensor w2 = random_inputs::matrix(128, 10, 13, 128);
  Tensor b2 = random_inputs::matrix(1, 10, 14, 128);
  Tensor x = random_inputs::matrix(64, 64, 15, 64);
  Tensor logits(const Tensor& in) const {
    using namespace tapegrad;
    return matmul(tanh(matmul(in, w1) + b1), w2) + b2;
  }
};

void time_mlp(benchmark::State& state, int mode) {
  single_thread();
  const Mlp mlp;
  tapegrad::JacobianOptions options;
  options.vectorize = mode == 0;
  for (auto _ : state) {
    tapegrad::GradientTape tape;
    tape.watch(mlp.x);
    const Tensor y = mlp.logits(mlp.x);
    const Tensor r = mode == 2 ? tape.gradient(y, mlp.x) : tape.batch_jacobian(y, mlp.x, options);
    benchmark::DoNotOptimize(r.array<double>().data());
  }
}
void BM_BatchJacobianMlp(benchmark::State& state) { time_mlp(state, 0); }
BENCHMARK(BM_BatchJacobianMlp)->Unit(benchmark::kMillisecond);
void BM_BatchJacobianMlpLoop(benchmark::State& state) { time_mlp(state, 1); }
BENCHMARK(BM_BatchJacobianMlpLoop)->Unit(benchmark::kMillisecond);
void BM_GradientMlpBatch(benchmark::State& state) { time_mlp(state, 2); }
BENCHMARK(BM_GradientMlpBatch)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
