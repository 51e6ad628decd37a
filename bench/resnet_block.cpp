// A residual block as PyTorch users write it (NCHW): one training step (forward + backward
// w.r.t. all 8 parameters, no update) of conv 3x3 -> batch norm (batch statistics) -> relu ->
// conv 3x3 -> batch norm -> + input -> relu -> global average pool -> dense -> softmax cross
// entropy; batch 32 of 16 x 32 x 32 images, float32, one thread. tapegrad against LibTorch's
// autograd in the same process when CMake found LibTorch (TAPEGRAD_HAVE_TORCH); both start
// from the same weights, and the program aborts unless their gradients agree (relative
// difference below 1e-4).
//
//   ./bench_resnet_block --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cblas.h>

#include <cmath>
#include <cstdint>
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

constexpr int kBatch = 32, kChannels = 16, kSize = 32, kClasses = 10;
constexpr double kEpsilon = 1e-5;

// The parameters in tapegrad's layouts: filters HWIO [3, 3, in, out], the rest as PyTorch's.
struct Weights : ported::Weights {
  Weights() {
    const std::size_t c = kChannels;
    add({3, 3, c, c}, 1, 0.5F);  // the two convolutions
    add({3, 3, c, c}, 2, 0.5F);
    add({c}, 3, 0.2F);  // the two batch norms' gammas (near 1) and betas
    add({c}, 4, 0.2F);
    add({c}, 5, 0.2F);
    add({c}, 6, 0.2F);
    add({c, kClasses}, 7, 0.6F);  // the classifier
    add({kClasses}, 8, 0.2F);
    for (float& x : data[2]) x += 1.0F;
    for (float& x : data[4]) x += 1.0F;
  }
};

std::vector<std::int64_t> labels() {
  std::vector<std::int64_t> l(kBatch);
  for (int i = 0; i < kBatch; ++i) l[i] = (i * 7 + 3) % kClasses;
  return l;
}

struct TapegradBlock {
  std::vector<Tensor> w;
  Tensor x, y;
  tg::DataFormat layout;
  explicit TapegradBlock(const Weights& weights, tg::DataFormat data_format = tg::DataFormat::NCHW)
      : layout(data_format) {
    w = weights.tensors();
    x = ported::float32_tensor(
        ported::values(std::size_t{kBatch} * kChannels * kSize * kSize, 99, 2.0F),
        {kBatch, kChannels, kSize, kSize});
    if (layout == tg::DataFormat::NHWC) x = tg::identity(tg::transpose(x, {0, 2, 3, 1}));
    const std::vector<std::int64_t> l = labels();
    y = tg::from_values(std::vector<double>(l.begin(), l.end()), {kBatch}, tg::DType::Int64);
  }
  Tensor loss() const {
    using namespace tg;
    const bool first = layout == DataFormat::NCHW;
    auto batch_norm = [&](const Tensor& t, const Tensor& gamma, const Tensor& beta) {
      const MeanAndVariance m =
          moments(t, first ? std::vector<int>{0, 2, 3} : std::vector<int>{0, 1, 2}, true);
      if (!first) return batch_normalization(t, m.mean, m.variance, beta, gamma, kEpsilon);
      return batch_normalization(t, m.mean, m.variance, reshape(beta, {kChannels, 1, 1}),
                                 reshape(gamma, {kChannels, 1, 1}), kEpsilon);
    };
    auto conv = [&](const Tensor& t, const Tensor& filters) {
      return conv2d(t, filters, {1, 1}, Padding::Same, layout);
    };
    const Tensor h = relu(batch_norm(conv(x, w[0]), w[2], w[3]));
    const Tensor out = relu(add(x, batch_norm(conv(h, w[1]), w[4], w[5])));
    const Tensor logits =
        add(matmul(reduce_mean(out, first ? std::vector<int>{2, 3} : std::vector<int>{1, 2}), w[6]),
            w[7]);
    return reduce_mean(sparse_softmax_cross_entropy_with_logits(y, logits));
  }
  std::vector<Tensor> gradients() const {
    tg::GradientTape tape;
    for (const Tensor& t : w) tape.watch(t);
    return tape.gradient(loss(), w);
  }
};

void BM_resnet_block_step_tapegrad(benchmark::State& state) {
  const TapegradBlock block{Weights()};
  for (auto _ : state) benchmark::DoNotOptimize(block.gradients());
}
BENCHMARK(BM_resnet_block_step_tapegrad)->Unit(benchmark::kMicrosecond);

// The same block channels last (the input transposed once, outside the step).
void BM_resnet_block_step_tapegrad_nhwc(benchmark::State& state) {
  const TapegradBlock block{Weights(), tg::DataFormat::NHWC};
  for (auto _ : state) benchmark::DoNotOptimize(block.gradients());
}
BENCHMARK(BM_resnet_block_step_tapegrad_nhwc)->Unit(benchmark::kMicrosecond);

#ifdef TAPEGRAD_HAVE_TORCH
struct TorchBlock {
  std::vector<torch::Tensor> w;
  torch::Tensor x, y;
  explicit TorchBlock(Weights& weights) {
    for (std::size_t i = 0; i < weights.data.size(); ++i) {
      const std::vector<std::int64_t> shape(weights.shapes[i].begin(), weights.shapes[i].end());
      auto t = torch::from_blob(weights.data[i].data(), shape, torch::kFloat32).clone();
      // PyTorch's filters are [out, in, kh, kw].
      if (i < 2) t = t.permute({3, 2, 0, 1}).contiguous();
      w.push_back(t.requires_grad_(true));
    }
    std::vector<float> input =
        ported::values(std::size_t{kBatch} * kChannels * kSize * kSize, 99, 2.0F);
    x = torch::from_blob(input.data(), {kBatch, kChannels, kSize, kSize}, torch::kFloat32).clone();
    std::vector<std::int64_t> l = labels();
    y = torch::from_blob(l.data(), {kBatch}, torch::kInt64).clone();
  }
  void step() {
    for (auto& t : w) t.mutable_grad() = torch::Tensor();
    auto batch_norm = [](const torch::Tensor& t, const torch::Tensor& gamma,
                         const torch::Tensor& beta) {
      return torch::batch_norm(t, gamma, beta, {}, {}, true, 0.1, kEpsilon, false);
    };
    auto conv = [](const torch::Tensor& t, const torch::Tensor& filters) {
      return torch::conv2d(t, filters, {}, 1, 1);
    };
    const auto h = torch::relu(batch_norm(conv(x, w[0]), w[2], w[3]));
    const auto out = torch::relu(x + batch_norm(conv(h, w[1]), w[4], w[5]));
    const auto logits = out.mean({2, 3}).matmul(w[6]) + w[7];
    torch::nn::functional::cross_entropy(logits, y).backward();
  }
  // The filters' gradient in tapegrad's layout.
  torch::Tensor gradient(std::size_t i) const {
    const auto g = w[i].grad();
    return (i < 2 ? g.permute({2, 3, 1, 0}) : g).contiguous();
  }
};

void BM_resnet_block_step_libtorch(benchmark::State& state) {
  torch::set_num_threads(1);
  Weights weights;
  TorchBlock block(weights);
  for (auto _ : state) block.step();
}
BENCHMARK(BM_resnet_block_step_libtorch)->Unit(benchmark::kMicrosecond);

// Both start from the same weights: their gradients must agree before any timing means much.
void check_against_libtorch() {
  Weights weights;
  const std::vector<Tensor> ours = TapegradBlock(weights).gradients();
  TorchBlock theirs(weights);
  theirs.step();
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const auto g = theirs.gradient(i);
    ported::require_same_gradient("bench_resnet_block", i, ours[i], g.data_ptr<float>(), 1e-4);
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
