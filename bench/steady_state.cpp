// A training loop's steady state with glibc's default malloc settings (no mallopt, no
// environment): after 20 warm-up steps, 200 steps of the digits MLP (64-128-10, float64,
// batch 64) and of the digits CNN (conv-pool-conv-dense, float32, batch 32), each with Adam.
// Prints, per model: the buffers obtained from the system during the 200 steps
// (memory_stats().system_allocations), the minor page faults per step (getrusage), and the
// median step time. Built against a tapegrad without memory_stats (before the buffer cache),
// it prints the faults and times only, for comparison.
//
//   ./bench_steady_state            (one thread for OpenBLAS, as the GradBench C++ tools)
#include <cblas.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#if __has_include(<tapegrad/memory.hpp>)
#define STEADY_STATE_HAS_MEMORY_STATS 1
#endif

#include "random_inputs.hpp"

namespace tg = tapegrad;

namespace {

constexpr int kWarmUp = 20;
constexpr int kSteps = 200;

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// One-hot labels [batch, 10] in `dtype`, label (7 b) mod 10 for row b.
tg::Tensor one_hot_labels(std::size_t batch, tg::DType dtype) {
  std::vector<double> v(batch * 10, 0.0);
  for (std::size_t b = 0; b < batch; ++b) v[b * 10 + (b * 7) % 10] = 1.0;
  return tg::cast(tg::from_values(v, {batch, 10}), dtype);
}

struct Mlp : tg::Module {
  tg::layers::Dense& hidden;
  tg::layers::Dense& output;
  explicit Mlp(tg::Generator& generator)
      : hidden(
            add_module("hidden", tg::layers::Dense(64, 128, generator, true, tg::DType::Float64))),
        output(add_module("output",
                          tg::layers::Dense(128, 10, generator, true, tg::DType::Float64))) {}
  tg::Tensor logits(const tg::Tensor& x) const { return output(tg::relu(hidden(x))); }
};

struct Cnn : tg::Module {
  tg::layers::Conv2D& conv1;
  tg::layers::Conv2D& conv2;
  tg::layers::Dense& hidden;
  tg::layers::Dense& output;
  explicit Cnn(tg::Generator& generator)
      : conv1(add_module("conv1", tg::layers::Conv2D(1, 16, {3, 3}, generator, tg::Padding::Same))),
        conv2(
            add_module("conv2", tg::layers::Conv2D(16, 32, {3, 3}, generator, tg::Padding::Same))),
        hidden(add_module("hidden", tg::layers::Dense(512, 128, generator))),
        output(add_module("output", tg::layers::Dense(128, 10, generator))) {}
  tg::Tensor logits(const tg::Tensor& images) const {
    const auto n = static_cast<std::int64_t>(images.shape()[0]);
    tg::Tensor h = tg::relu(conv1(images));
    h = tg::max_pool2d(h, {2, 2}, {2, 2}, tg::Padding::Valid);
    h = tg::relu(conv2(h));
    h = tg::reshape(h, {n, 512});
    return output(tg::relu(hidden(h)));
  }
};

// Runs `step` kWarmUp times, then kSteps times measured, and prints one line.
void measure(const char* name, const std::function<void()>& step) {
  for (int i = 0; i < kWarmUp; ++i) step();
#ifdef STEADY_STATE_HAS_MEMORY_STATS
  const tg::MemoryStats before = tg::memory_stats();
#endif
  const long faults_before = minor_faults();
  std::vector<double> times;
  for (int i = 0; i < kSteps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  const long faults = minor_faults() - faults_before;
  std::sort(times.begin(), times.end());
  std::printf("%-4s %d steps: median step %.1f us, minor page faults per step %.3f", name, kSteps,
              times[times.size() / 2], static_cast<double>(faults) / kSteps);
#ifdef STEADY_STATE_HAS_MEMORY_STATS
  const tg::MemoryStats after = tg::memory_stats();
  std::printf(", system allocations %llu, cache hits per step %.1f, in use %.2f MB, cached %.2f MB",
              static_cast<unsigned long long>(after.system_allocations - before.system_allocations),
              static_cast<double>(after.cache_hits - before.cache_hits) / kSteps,
              static_cast<double>(after.bytes_in_use) / 1e6,
              static_cast<double>(after.bytes_cached) / 1e6);
#endif
  std::printf("\n");
}

// One step: the mean softmax cross-entropy of model.logits(x) against y, its gradient, Adam.
template <class Model>
void training_step(const Model& model, tg::Adam& adam, const tg::Tensor& x, const tg::Tensor& y) {
  tg::GradientTape tape;
  const tg::Tensor loss =
      tg::reduce_mean(tg::softmax_cross_entropy_with_logits(y, model.logits(x)));
  const std::vector<tg::Variable> variables = model.trainable_variables();
  const std::vector<tg::Tensor> grads = tape.gradient(loss, variables);
  std::vector<std::pair<tg::Tensor, tg::Variable>> pairs;
  for (std::size_t i = 0; i < grads.size(); ++i) pairs.emplace_back(grads[i], variables[i]);
  adam.apply_gradients(pairs);
}

}  // namespace

int main() {
  openblas_set_num_threads(1);
  tg::Generator generator(42);

  Mlp mlp(generator);
  tg::Adam mlp_adam(1e-3);
  const tg::Tensor mlp_x = random_inputs::matrix(64, 64, 5, 1);
  const tg::Tensor mlp_y = one_hot_labels(64, tg::DType::Float64);
  measure("mlp", [&] { training_step(mlp, mlp_adam, mlp_x, mlp_y); });

  Cnn cnn(generator);
  tg::Adam cnn_adam(1e-3);
  const tg::Tensor cnn_x =
      tg::cast(tg::reshape(random_inputs::matrix(32, 64, 6, 1), {32, 8, 8, 1}), tg::DType::Float32);
  const tg::Tensor cnn_y = one_hot_labels(32, tg::DType::Float32);
  measure("cnn", [&] { training_step(cnn, cnn_adam, cnn_x, cnn_y); });
  return 0;
}
