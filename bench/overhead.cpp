// The cost of autodiff per op: a chain of 999 ops (333 x [multiply by a constant tensor,
// add a constant tensor, tanh]) on 1-element float64 tensors, four ways in one process:
// raw xt::xarray ops, tapegrad with no tape, tapegrad recording, and recording + backward (the
// last and the no-tape one again under DetectAnomaly); plus tanh of a 100,000-element tensor,
// raw and through tapegrad.
#include <benchmark/benchmark.h>

#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>

#include <tapegrad/tapegrad.hpp>

#include "chain_workload.hpp"

namespace tg = tapegrad;
using chain_workload::kSteps;
using chain_workload::report_ns_per_op;

namespace {

void BM_raw_xarray(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(chain_workload::run_raw_xarray().data());
  report_ns_per_op(state);
}

void no_tape_chain(benchmark::State& state) {
  const chain_workload::Inputs in;
  for (auto _ : state) benchmark::DoNotOptimize(chain_workload::run(in).id());
  report_ns_per_op(state);
}

void record_and_backward_chain(benchmark::State& state) {
  const chain_workload::Inputs in;
  for (auto _ : state) {
    tg::GradientTape tape;
    tape.watch(in.x);
    tg::Tensor y = chain_workload::run(in);
    benchmark::DoNotOptimize(tape.gradient(y, in.x).id());
  }
  report_ns_per_op(state);
}

void BM_tapegrad_no_tape(benchmark::State& state) { no_tape_chain(state); }

void BM_tapegrad_recording(benchmark::State& state) {
  const chain_workload::Inputs in;
  for (auto _ : state) {
    tg::GradientTape tape;
    tape.watch(in.x);
    benchmark::DoNotOptimize(chain_workload::run(in).id());
  }
  report_ns_per_op(state);
}

void BM_tapegrad_record_and_backward(benchmark::State& state) { record_and_backward_chain(state); }

// DetectAnomaly's own cost when on: every op's output scanned, every gradient too.
void BM_tapegrad_no_tape_detect_anomaly(benchmark::State& state) {
  tg::DetectAnomaly anomaly;
  no_tape_chain(state);
}

void BM_tapegrad_record_and_backward_detect_anomaly(benchmark::State& state) {
  tg::DetectAnomaly anomaly;
  record_and_backward_chain(state);
}

// Large tensors, where xsimd's vectorised tanh pays for its aligned allocations.
constexpr std::size_t kLarge = 100000;

void BM_raw_xarray_tanh_large(benchmark::State& state) {
  const xt::xarray<double> x = xt::linspace<double>(-3.0, 3.0, kLarge);
  for (auto _ : state) {
    xt::xarray<double> y = xt::tanh(x);
    benchmark::DoNotOptimize(y.data());
  }
}

void BM_tapegrad_tanh_large(benchmark::State& state) {
  const tg::Tensor x(xt::xarray<double>(xt::linspace<double>(-3.0, 3.0, kLarge)));
  for (auto _ : state) benchmark::DoNotOptimize(tg::tanh(x).id());
}

}  // namespace

BENCHMARK(BM_raw_xarray_tanh_large);
BENCHMARK(BM_tapegrad_tanh_large);
BENCHMARK(BM_raw_xarray);
BENCHMARK(BM_tapegrad_no_tape);
BENCHMARK(BM_tapegrad_recording);
BENCHMARK(BM_tapegrad_record_and_backward);
BENCHMARK(BM_tapegrad_no_tape_detect_anomaly);
BENCHMARK(BM_tapegrad_record_and_backward_detect_anomaly);
BENCHMARK_MAIN();
