// memory_recompute: what a 50-layer tanh MLP's forward keeps on the tape, plain versus
// recompute_grad segments (gradient checkpointing), and the time of forward + backward.
//
// Counters per benchmark (from the last iteration, measured after the forward, before the
// backward):
//   tape_bytes        GradientTape::bytes_held(): tensors the tape's entries keep alive
//   checkpoint_bytes  the segment inputs that recompute_grad closures keep (one activation
//                     per segment; 0 for the plain forward)
//   activations_kept  (tape_bytes - weights kept by the tape) + checkpoint_bytes
// Run: ./build/bench/bench/bench_memory_recompute --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

constexpr std::size_t kLayers = 50;
constexpr std::size_t kBatch = 256;
constexpr std::size_t kWidth = 128;
constexpr double kActivationBytes = kBatch * kWidth * sizeof(double);
constexpr double kWeightBytes = kWidth * kWidth * sizeof(double);

tg::Tensor random_matrix(std::size_t rows, std::size_t cols, unsigned seed, double scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(rows * cols);
  for (auto& x : v) x = dist(gen);
  return tg::from_values(v, {rows, cols});
}

struct Mlp {
  tg::Tensor input = random_matrix(kBatch, kWidth, 1, 1.0);
  std::vector<tg::Tensor> weights;
  Mlp() {
    for (std::size_t i = 0; i < kLayers; ++i) {
      weights.push_back(random_matrix(kWidth, kWidth, 100 + static_cast<unsigned>(i),
                                      1.0 / std::sqrt(static_cast<double>(kWidth))));
    }
  }
};

const Mlp& mlp() {
  static const Mlp model;
  return model;
}

// Layers [first, first + count) applied to h; args = {h, W_first, ..., W_first+count-1}.
std::vector<tg::Tensor> segment(const std::vector<tg::Tensor>& args) {
  tg::Tensor h = args[0];
  for (std::size_t i = 1; i < args.size(); ++i) h = tg::tanh(tg::matmul(h, args[i]));
  return {h};
}

// The loss and its gradient w.r.t. the first weight; reports the tape's bytes after the forward.
tg::Tensor forward_backward(std::size_t segment_length, std::size_t& tape_bytes) {
  const Mlp& m = mlp();
  tg::GradientTape tape;
  tape.watch(m.input);
  tape.watch(m.weights);
  tg::Tensor h = m.input;
  if (segment_length == 0) {
    for (const auto& w : m.weights) h = tg::tanh(tg::matmul(h, w));
  } else {
    auto checkpointed = tg::recompute_grad(segment);
    for (std::size_t first = 0; first < kLayers; first += segment_length) {
      std::vector<tg::Tensor> args{h};
      for (std::size_t i = first; i < std::min(kLayers, first + segment_length); ++i) {
        args.push_back(m.weights[i]);
      }
      h = checkpointed(args)[0];
    }
  }
  tg::Tensor loss = tg::reduce_sum(tg::square(h));
  tape_bytes = tape.bytes_held();
  return tape.gradient(loss, m.weights.front());
}

void check_same_gradient(std::size_t segment_length) {
  std::size_t ignored = 0;
  const tg::Tensor plain = forward_backward(0, ignored);
  const tg::Tensor recomputed = forward_backward(segment_length, ignored);
  const auto& a = plain.array<double>();
  const auto& b = recomputed.array<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a.data()[i] - b.data()[i]) > 1e-9 * (1.0 + std::abs(a.data()[i]))) {
      std::cerr << "recompute_grad gradient differs from the plain one at " << i << "\n";
      std::abort();
    }
  }
}

void BM_plain(benchmark::State& state) {
  std::size_t tape_bytes = 0;
  for (auto _ : state) benchmark::DoNotOptimize(forward_backward(0, tape_bytes));
  state.counters["tape_bytes"] = static_cast<double>(tape_bytes);
  state.counters["checkpoint_bytes"] = 0;
  state.counters["activations_kept"] = static_cast<double>(tape_bytes) - kLayers * kWeightBytes;
}

void BM_recompute(benchmark::State& state) {
  const auto length = static_cast<std::size_t>(state.range(0));
  check_same_gradient(length);
  std::size_t tape_bytes = 0;
  for (auto _ : state) benchmark::DoNotOptimize(forward_backward(length, tape_bytes));
  const double segments = static_cast<double>((kLayers + length - 1) / length);
  state.counters["segment_layers"] = static_cast<double>(length);
  state.counters["tape_bytes"] = static_cast<double>(tape_bytes);
  state.counters["checkpoint_bytes"] = segments * kActivationBytes;
  state.counters["activations_kept"] =
      static_cast<double>(tape_bytes) + segments * kActivationBytes;
}

}  // namespace

BENCHMARK(BM_plain)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_recompute)->Arg(1)->Arg(5)->Arg(10)->Arg(25)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
