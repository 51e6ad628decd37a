// Per-example gradients, one thread: vectorized_map of the per-example gradient (one traced
// pass replayed on the batch) against a loop of per-example gradient calls, and one gradient
// of the whole batch's mean loss for scale. The digits MLP (examples/train_digits: 64-128-10,
// ReLU, softmax cross-entropy), batch 64, float64; and the digits CNN (below), batch 32,
// float32.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <tapegrad/tapegrad.hpp>

#include "random_inputs.hpp"

namespace {

using tapegrad::Tensor;
constexpr std::size_t kBatch = 64;

struct Model {
  Tensor w1 = random_inputs::matrix(64, 128, 1, 64);
  Tensor b1 = random_inputs::matrix(1, 128, 2, 64);
  Tensor w2 = random_inputs::matrix(128, 10, 3, 128);
  Tensor b2 = random_inputs::matrix(1, 10, 4, 128);
  Tensor images = random_inputs::matrix(kBatch, 64, 5, 1);
  Tensor labels;

  Model() {
    std::vector<double> v(kBatch * 10, 0.0);
    for (std::size_t b = 0; b < kBatch; ++b) v[b * 10 + (b * 7) % 10] = 1.0;
    labels = tapegrad::from_values(v, {kBatch, 10});
  }

  // Gradients of the loss of examples x [n, 64], y [n, 10] with respect to the parameters.
  std::vector<Tensor> gradients(const Tensor& x, const Tensor& y) const {
    using namespace tapegrad;
    GradientTape tape;
    for (const Tensor* p : {&w1, &b1, &w2, &b2}) tape.watch(*p);
    const Tensor logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
    const Tensor loss = reduce_mean(softmax_cross_entropy_with_logits(y, logits));
    return tape.gradient(loss, {w1, b1, w2, b2});
  }
  std::vector<Tensor> example_gradients(const std::vector<Tensor>& in) const {
    return gradients(tapegrad::reshape(in[0], {1, 64}), tapegrad::reshape(in[1], {1, 10}));
  }
};

void BM_PerExampleGradientsVectorized(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Model model;
  for (auto _ : state) {
    const std::vector<Tensor> g = tapegrad::vectorized_map(
        [&](const std::vector<Tensor>& in) { return model.example_gradients(in); },
        {model.images, model.labels});
    benchmark::DoNotOptimize(g[0].array<double>().data());
  }
}
BENCHMARK(BM_PerExampleGradientsVectorized)->Unit(benchmark::kMillisecond);

void BM_PerExampleGradientsLoop(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Model model;
  for (auto _ : state) {
    std::vector<std::vector<Tensor>> rows(4);
    for (std::size_t b = 0; b < kBatch; ++b) {
      const auto i = static_cast<std::int64_t>(b);
      const std::vector<Tensor> g =
          model.example_gradients({tapegrad::slice(model.images, {i, 0}, {1, 64}),
                                   tapegrad::slice(model.labels, {i, 0}, {1, 10})});
      for (std::size_t k = 0; k < 4; ++k) rows[k].push_back(g[k]);
    }
    std::vector<Tensor> stacked;
    for (auto& r : rows) stacked.push_back(tapegrad::stack(r, 0));
    benchmark::DoNotOptimize(stacked[0].array<double>().data());
  }
}
BENCHMARK(BM_PerExampleGradientsLoop)->Unit(benchmark::kMillisecond);

void BM_BatchGradient(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Model model;
  for (auto _ : state) {
    const std::vector<Tensor> g = model.gradients(model.images, model.labels);
    benchmark::DoNotOptimize(g[0].array<double>().data());
  }
}
BENCHMARK(BM_BatchGradient)->Unit(benchmark::kMillisecond);

// The digits CNN of examples/train_digits_cnn (conv 3x3x16 SAME, relu, max_pool 2x2, conv
// 3x3x32 SAME, relu, dense 512-128 relu, dense 128-10, softmax cross-entropy), float32, batch
// 32: per-example gradients of all eight parameters. The images have zeros where a digit has
// no ink (half the pixels), so the pooled windows' maxima, ties and zeros differ per example.
constexpr std::size_t kCnnBatch = 32;

struct Cnn {
  static Tensor f32(const Tensor& t) { return tapegrad::cast(t, tapegrad::DType::Float32); }
  static Tensor shaped(const Tensor& t, std::vector<std::int64_t> shape) {
    return f32(tapegrad::reshape(t, std::move(shape)));
  }
  Tensor conv1 = shaped(random_inputs::matrix(9, 16, 11, 9), {3, 3, 1, 16});
  Tensor conv1_bias = f32(random_inputs::matrix(1, 16, 12, 100));
  Tensor conv2 = shaped(random_inputs::matrix(9 * 16, 32, 13, 144), {3, 3, 16, 32});
  Tensor conv2_bias = f32(random_inputs::matrix(1, 32, 14, 100));
  Tensor hidden = f32(random_inputs::matrix(512, 128, 15, 512));
  Tensor hidden_bias = f32(random_inputs::matrix(1, 128, 16, 100));
  Tensor out = f32(random_inputs::matrix(128, 10, 17, 128));
  Tensor out_bias = f32(random_inputs::matrix(1, 10, 18, 100));
  Tensor images = shaped(tapegrad::relu(random_inputs::matrix(kCnnBatch, 64, 19, 1)),
                         {static_cast<std::int64_t>(kCnnBatch), 8, 8, 1});
  Tensor labels;

  Cnn() {
    std::vector<double> v(kCnnBatch * 10, 0.0);
    for (std::size_t b = 0; b < kCnnBatch; ++b) v[b * 10 + (b * 3) % 10] = 1.0;
    labels = tapegrad::from_values(v, {kCnnBatch, 10}, tapegrad::DType::Float32);
  }

  std::vector<Tensor> parameters() const {
    return {conv1, conv1_bias, conv2, conv2_bias, hidden, hidden_bias, out, out_bias};
  }

  // Gradients of the mean loss of images x [n, 8, 8, 1], labels y [n, 10].
  std::vector<Tensor> gradients(const Tensor& x, const Tensor& y) const {
    using namespace tapegrad;
    GradientTape tape;
    const std::vector<Tensor> p = parameters();
    tape.watch(p);
    const auto n = static_cast<std::int64_t>(x.shape()[0]);
    Tensor h = relu(conv2d(x, conv1, {1, 1}, Padding::Same) + reshape(conv1_bias, {16}));
    h = max_pool2d(h, {2, 2}, {2, 2}, Padding::Valid);
    h = relu(conv2d(h, conv2, {1, 1}, Padding::Same) + reshape(conv2_bias, {32}));
    h = relu(matmul(reshape(h, {n, 512}), hidden) + hidden_bias);
    const Tensor logits = matmul(h, out) + out_bias;
    return tape.gradient(reduce_mean(softmax_cross_entropy_with_logits(y, logits)), p);
  }
  std::vector<Tensor> example_gradients(const std::vector<Tensor>& in) const {
    return gradients(tapegrad::reshape(in[0], {1, 8, 8, 1}), tapegrad::reshape(in[1], {1, 10}));
  }
};

void BM_PerExampleCnnVectorized(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Cnn model;
  for (auto _ : state) {
    const std::vector<Tensor> g = tapegrad::vectorized_map(
        [&](const std::vector<Tensor>& in) { return model.example_gradients(in); },
        {model.images, model.labels}, /*fallback_to_loop=*/false);
    benchmark::DoNotOptimize(g[0].array<float>().data());
  }
}
BENCHMARK(BM_PerExampleCnnVectorized)->Unit(benchmark::kMillisecond);

void BM_PerExampleCnnLoop(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Cnn model;
  for (auto _ : state) {
    std::vector<std::vector<Tensor>> rows(8);
    for (std::size_t b = 0; b < kCnnBatch; ++b) {
      const auto i = static_cast<std::int64_t>(b);
      const std::vector<Tensor> g =
          model.example_gradients({tapegrad::slice(model.images, {i, 0, 0, 0}, {1, 8, 8, 1}),
                                   tapegrad::slice(model.labels, {i, 0}, {1, 10})});
      for (std::size_t k = 0; k < 8; ++k) rows[k].push_back(g[k]);
    }
    std::vector<Tensor> stacked;
    for (auto& r : rows) stacked.push_back(tapegrad::stack(r, 0));
    benchmark::DoNotOptimize(stacked[0].array<float>().data());
  }
}
BENCHMARK(BM_PerExampleCnnLoop)->Unit(benchmark::kMillisecond);

void BM_CnnBatchGradient(benchmark::State& state) {
  openblas_set_num_threads(1);
  const Cnn model;
  for (auto _ : state) {
    const std::vector<Tensor> g = model.gradients(model.images, model.labels);
    benchmark::DoNotOptimize(g[0].array<float>().data());
  }
}
BENCHMARK(BM_CnnBatchGradient)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
