// The backward walk alone: the 999-op chain of bench_chain with its recording untimed, and
// the walk through one op with many outputs (split into 10,000 parts, concatenated again),
// whose cost must grow linearly with the number of outputs.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <optional>

#include <tapegrad/tapegrad.hpp>

#include "chain_workload.hpp"

namespace tg = tapegrad;

namespace {

// Recording is paused out of the timing: only gradient() is measured. The tape is created
// and destroyed outside the timed region too.
void BM_chain_backward_only(benchmark::State& state) {
  const chain_workload::Inputs in;
  for (auto _ : state) {
    state.PauseTiming();
    std::optional<tg::GradientTape> tape;
    tape.emplace();
    tape->watch(in.x);
    const tg::Tensor y = chain_workload::run(in);
    state.ResumeTiming();
    benchmark::DoNotOptimize(tape->gradient(y, in.x));
    state.PauseTiming();
    tape.reset();
    state.ResumeTiming();
  }
  chain_workload::report_ns_per_op(state);
}
BENCHMARK(BM_chain_backward_only);

// split(x, n) -> concat -> weighted sum, recorded and differentiated: one step with n outputs
// whose consumer delivers n gradients.
void BM_split_record_backward(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const tg::Tensor x = tg::fill({static_cast<std::size_t>(n)}, 0.5, tg::DType::Float64);
  const tg::Tensor w = tg::fill({static_cast<std::size_t>(n)}, 2.0, tg::DType::Float64);
  for (auto _ : state) {
    tg::GradientTape tape;
    tape.watch(x);
    const tg::Tensor y = tg::reduce_sum(tg::multiply(tg::concat(tg::split(x, n), 0), w));
    benchmark::DoNotOptimize(tape.gradient(y, x));
  }
}
BENCHMARK(BM_split_record_backward)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
