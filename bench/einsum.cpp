// einsum against the matmul it lowers to (forward, no tape, and forward + backward on a tape),
// and the scans and sort of issue 11 on a large and a small float64 tensor. What einsum adds
// over its gemm is the equation's parsing and the reshapes around the product; the ratio
// einsum / matmul is the figure to quote.
#include <benchmark/benchmark.h>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

tg::Tensor ramp(const tg::Shape& shape, double scale = 1.0) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> values(n);
  for (std::size_t i = 0; i < n; ++i)
    values[i] = (static_cast<double>(i % 97) - 48.0) * 0.01 * scale;
  return tg::from_values(values, shape, tg::DType::Float64);
}

std::size_t arg(const benchmark::State& state) { return static_cast<std::size_t>(state.range(0)); }

// [n, n] x [n, n]
void BM_matmul(benchmark::State& state) {
  const tg::Tensor a = ramp({arg(state), arg(state)}), b = ramp({arg(state), arg(state)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(a, b).id());
}
void BM_einsum_ij_jk(benchmark::State& state) {
  const tg::Tensor a = ramp({arg(state), arg(state)}), b = ramp({arg(state), arg(state)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tg::einsum("ij,jk->ik", {a, b}).id());
}
// b transposed: a transpose flag, no copy.
void BM_matmul_bt(benchmark::State& state) {
  const tg::Tensor a = ramp({arg(state), arg(state)}), b = ramp({arg(state), arg(state)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(a, b, false, true).id());
}
void BM_einsum_ij_kj(benchmark::State& state) {
  const tg::Tensor a = ramp({arg(state), arg(state)}), b = ramp({arg(state), arg(state)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tg::einsum("ij,kj->ik", {a, b}).id());
}
// 16 batched [n, n] products.
void BM_matmul_batched(benchmark::State& state) {
  const tg::Tensor a = ramp({16, arg(state), arg(state)}),
                   b = ramp({16, arg(state), arg(state)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tg::matmul(a, b).id());
}
void BM_einsum_bij_bjk(benchmark::State& state) {
  const tg::Tensor a = ramp({16, arg(state), arg(state)}),
                   b = ramp({16, arg(state), arg(state)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tg::einsum("bij,bjk->bik", {a, b}).id());
}
// Forward + backward of sum(a b) on a tape.
void BM_matmul_backward(benchmark::State& state) {
  const tg::Tensor a = ramp({arg(state), arg(state)}), b = ramp({arg(state), arg(state)}, 2);
  for (auto _ : state) {
    tg::GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    benchmark::DoNotOptimize(tape.gradient(tg::reduce_sum(tg::matmul(a, b)), {a, b})[0].id());
  }
}
void BM_einsum_backward(benchmark::State& state) {
  const tg::Tensor a = ramp({arg(state), arg(state)}), b = ramp({arg(state), arg(state)}, 2);
  for (auto _ : state) {
    tg::GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    benchmark::DoNotOptimize(
        tape.gradient(tg::reduce_sum(tg::einsum("ij,jk->ik", {a, b})), {a, b})[0].id());
  }
}

// Scans and sort along the last axis of [n, n], and a middle axis of [n, n, 8].
void BM_cumsum_last(benchmark::State& state) {
  const tg::Tensor x = ramp({arg(state), arg(state)});
  for (auto _ : state) benchmark::DoNotOptimize(tg::cumsum(x, 1).id());
}
void BM_cumsum_middle(benchmark::State& state) {
  const tg::Tensor x = ramp({arg(state), arg(state), 8});
  for (auto _ : state) benchmark::DoNotOptimize(tg::cumsum(x, 1, false, true).id());
}
void BM_sort_last(benchmark::State& state) {
  const tg::Tensor x = ramp({arg(state), arg(state)});
  for (auto _ : state) benchmark::DoNotOptimize(tg::sort(x, -1).id());
}

void BM_top_k_10(benchmark::State& state) {
  const tg::Tensor x = ramp({arg(state), arg(state)});
  for (auto _ : state) benchmark::DoNotOptimize(tg::top_k(x, 10).values.id());
}

}  // namespace

BENCHMARK(BM_matmul)->Arg(8)->Arg(256);
BENCHMARK(BM_einsum_ij_jk)->Arg(8)->Arg(256);
BENCHMARK(BM_matmul_bt)->Arg(8)->Arg(256);
BENCHMARK(BM_einsum_ij_kj)->Arg(8)->Arg(256);
BENCHMARK(BM_matmul_batched)->Arg(8)->Arg(64);
BENCHMARK(BM_einsum_bij_bjk)->Arg(8)->Arg(64);
BENCHMARK(BM_matmul_backward)->Arg(8)->Arg(256);
BENCHMARK(BM_einsum_backward)->Arg(8)->Arg(256);
BENCHMARK(BM_cumsum_last)->Arg(16)->Arg(1024);
BENCHMARK(BM_cumsum_middle)->Arg(16)->Arg(256);
BENCHMARK(BM_sort_last)->Arg(16)->Arg(1024);
BENCHMARK(BM_top_k_10)->Arg(16)->Arg(1024);

BENCHMARK_MAIN();
