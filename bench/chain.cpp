// Forward + backward of the 999-op chain (333 x [multiply by a constant tensor, add a
// constant tensor, tanh]) on 1-element float64 tensors: tapegrad against LibTorch's C++
// autograd in the same process when LibTorch is found (TAPEGRAD_HAVE_TORCH), one thread.
// The two gradients are compared before anything is timed.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <tapegrad/tapegrad.hpp>

#include "chain_workload.hpp"

#ifdef TAPEGRAD_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tg = tapegrad;

namespace {

using chain_workload::kSteps;
using chain_workload::report_ns_per_op;

double tapegrad_gradient() {
  const chain_workload::Inputs in;
  tg::GradientTape tape;
  tape.watch(in.x);
  tg::Tensor y = chain_workload::run(in);
  return tape.gradient(y, in.x).item<double>();
}

void BM_tapegrad_forward_backward(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(tapegrad_gradient());
  report_ns_per_op(state);
}
BENCHMARK(BM_tapegrad_forward_backward);

#ifdef TAPEGRAD_HAVE_TORCH
double torch_gradient() {
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor c = torch::full({1}, 0.5, options);
  const torch::Tensor b = torch::full({1}, 0.1, options);
  torch::Tensor x = torch::full({1}, 0.3, options.requires_grad(true));
  torch::Tensor y = x;
  for (int i = 0; i < kSteps; ++i) y = torch::tanh(y * c + b);
  y.backward();
  return x.grad().item<double>();
}

void BM_libtorch_forward_backward(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(torch_gradient());
  report_ns_per_op(state);
}
BENCHMARK(BM_libtorch_forward_backward);
#endif

}  // namespace

int main(int argc, char** argv) {
  const double ours = tapegrad_gradient();
#ifdef TAPEGRAD_HAVE_TORCH
  torch::set_num_threads(1);
  const double theirs = torch_gradient();
  std::printf("gradient: tapegrad %.17g, LibTorch %.17g\n", ours, theirs);
  if (std::abs(ours - theirs) > 1e-12 * std::abs(theirs)) {
    std::fprintf(stderr, "the gradients differ: not timing\n");
    return 1;
  }
#else
  std::printf("gradient: tapegrad %.17g (LibTorch not found: tapegrad only)\n", ours);
#endif
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
