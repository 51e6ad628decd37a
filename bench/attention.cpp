// A transformer encoder block as PyTorch users write it: one training step (forward +
// backward w.r.t. all 12 parameters, no update) of a pre-norm block: layer norm, causal 4-head
// self-attention (d = 64), a residual, layer norm, a 64-256-64 GELU MLP, a residual, the mean
// of the squared output; batch 8 of 64 tokens, float32, one thread. tapegrad against
// LibTorch's autograd in the same process when CMake found LibTorch (TAPEGRAD_HAVE_TORCH);
// both start from the same weights, and the program aborts unless their gradients agree
// (relative difference below 1e-5). The block's GELU alone: bench_activations.
//
//   ./bench_attention --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "ported_weights.hpp"

#ifdef TAPEGRAD_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tg = tapegrad;
using tg::Tensor;

namespace {

constexpr int kBatch = 8, kTokens = 64, kModel = 64, kHeads = 4, kHidden = 256;

struct Weights : ported::Weights {
  Weights() {
    const std::size_t d = kModel, h = kHidden;
    add({d, d}, 1, 0.3F);  // query, key, value, output projections
    add({d, d}, 2, 0.3F);
    add({d, d}, 3, 0.3F);
    add({d, d}, 4, 0.3F);
    add({d, h}, 5, 0.3F);  // the MLP
    add({h}, 6, 0.1F);
    add({h, d}, 7, 0.15F);
    add({d}, 8, 0.1F);
    add({d}, 9, 0.2F);  // the two layer norms' gammas (near 1) and betas
    add({d}, 10, 0.2F);
    add({d}, 11, 0.2F);
    add({d}, 12, 0.2F);
    for (float& x : data[8]) x += 1.0F;
    for (float& x : data[10]) x += 1.0F;
  }
};

struct TapegradBlock {
  std::vector<Tensor> w;
  Tensor x, mask;
  explicit TapegradBlock(const Weights& weights) {
    w = weights.tensors();
    x = ported::float32_tensor(ported::values(std::size_t{kBatch} * kTokens * kModel, 99, 2.0F),
                               {kBatch, kTokens, kModel});
    std::vector<double> causal(std::size_t{kTokens} * kTokens);
    for (int i = 0; i < kTokens; ++i) {
      for (int j = 0; j < kTokens; ++j) causal[i * kTokens + j] = j > i ? -INFINITY : 0.0;
    }
    mask = tg::from_values(causal, {kTokens, kTokens}, tg::DType::Float32);
  }
  Tensor loss() const {
    using namespace tg;
    constexpr int head = kModel / kHeads;
    const Tensor h = layer_normalization(x, {-1}, w[8], w[9], 1e-5);
    auto heads = [&](const Tensor& t) {
      return transpose(reshape(t, {kBatch, kTokens, kHeads, head}), {0, 2, 1, 3});
    };
    const Tensor q = heads(matmul(h, w[0])), k = heads(matmul(h, w[1])), v = heads(matmul(h, w[2]));
    const Tensor scores =
        add(multiply(matmul(q, k, false, true), 1.0 / std::sqrt(double{head})), mask);
    const Tensor attended =
        reshape(transpose(matmul(softmax(scores), v), {0, 2, 1, 3}), {kBatch, kTokens, kModel});
    const Tensor x2 = add(x, matmul(attended, w[3]));
    const Tensor h2 = layer_normalization(x2, {-1}, w[10], w[11], 1e-5);
    const Tensor mlp = add(matmul(gelu(add(matmul(h2, w[4]), w[5])), w[6]), w[7]);
    return reduce_mean(square(add(x2, mlp)));
  }
  std::vector<Tensor> gradients() const {
    tg::GradientTape tape;
    for (const Tensor& t : w) tape.watch(t);
    return tape.gradient(loss(), w);
  }
};

void BM_attention_step_tapegrad(benchmark::State& state) {
  const TapegradBlock block{Weights()};
  for (auto _ : state) benchmark::DoNotOptimize(block.gradients());
}
BENCHMARK(BM_attention_step_tapegrad)->Unit(benchmark::kMicrosecond);

#ifdef TAPEGRAD_HAVE_TORCH
struct TorchBlock {
  std::vector<torch::Tensor> w;
  torch::Tensor x, mask;
  explicit TorchBlock(Weights& weights) {
    for (std::size_t i = 0; i < weights.data.size(); ++i) {
      const std::vector<std::int64_t> shape(weights.shapes[i].begin(), weights.shapes[i].end());
      w.push_back(torch::from_blob(weights.data[i].data(), shape, torch::kFloat32)
                      .clone()
                      .requires_grad_(true));
    }
    std::vector<float> input = ported::values(std::size_t{kBatch} * kTokens * kModel, 99, 2.0F);
    x = torch::from_blob(input.data(), {kBatch, kTokens, kModel}, torch::kFloat32).clone();
    mask = torch::full({kTokens, kTokens}, -INFINITY).triu(1);
  }
  void step() {
    constexpr int head = kModel / kHeads;
    for (auto& t : w) t.mutable_grad() = torch::Tensor();
    const auto h = torch::layer_norm(x, {kModel}, w[8], w[9], 1e-5);
    auto heads = [&](const torch::Tensor& t) {
      return t.reshape({kBatch, kTokens, kHeads, head}).permute({0, 2, 1, 3});
    };
    const auto q = heads(h.matmul(w[0])), k = heads(h.matmul(w[1])), v = heads(h.matmul(w[2]));
    const auto scores = q.matmul(k.transpose(-1, -2)) * (1.0 / std::sqrt(double{head})) + mask;
    const auto attended = torch::softmax(scores, -1)
                              .matmul(v)
                              .permute({0, 2, 1, 3})
                              .reshape({kBatch, kTokens, kModel});
    const auto x2 = x + attended.matmul(w[3]);
    const auto h2 = torch::layer_norm(x2, {kModel}, w[10], w[11], 1e-5);
    const auto mlp = torch::gelu(h2.matmul(w[4]) + w[5]).matmul(w[6]) + w[7];
    (x2 + mlp).square().mean().backward();
  }
};

void BM_attention_step_libtorch(benchmark::State& state) {
  torch::set_num_threads(1);
  Weights weights;
  TorchBlock block(weights);
  for (auto _ : state) block.step();
}
BENCHMARK(BM_attention_step_libtorch)->Unit(benchmark::kMicrosecond);

// Both start from the same weights: their gradients must agree before any timing means much.
void check_against_libtorch() {
  Weights weights;
  const std::vector<Tensor> ours = TapegradBlock(weights).gradients();
  TorchBlock theirs(weights);
  theirs.step();
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const auto g = theirs.w[i].grad().contiguous();
    ported::require_same_gradient("bench_attention", i, ours[i], g.data_ptr<float>(), 1e-5);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
#ifdef TAPEGRAD_HAVE_TORCH
  torch::set_num_threads(1);
  check_against_libtorch();
#endif
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
