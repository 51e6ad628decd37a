// The chain every per-op benchmark uses: y = tanh(y * c + b), repeated, so one third of the
// ops are multiplies by a constant tensor, one third adds, one third tanh; 1-element float64
// tensors unless a benchmark builds its own.
#pragma once

#include <benchmark/benchmark.h>

#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>

#include <tapegrad/tapegrad.hpp>

namespace chain_workload {

constexpr int kSteps = 333;  // 3 ops each
constexpr int kOps = 3 * kSteps;

struct Inputs {
  tapegrad::Tensor x{xt::xarray<double>{0.3}};
  tapegrad::Tensor c{xt::xarray<double>{0.5}};
  tapegrad::Tensor b{xt::xarray<double>{0.1}};
};

inline tapegrad::Tensor run(const tapegrad::Tensor& x, const tapegrad::Tensor& c,
                            const tapegrad::Tensor& b, int steps = kSteps) {
  tapegrad::Tensor y = x;
  for (int i = 0; i < steps; ++i) y = tapegrad::tanh(tapegrad::add(tapegrad::multiply(y, c), b));
  return y;
}

inline tapegrad::Tensor run(const Inputs& in) { return run(in.x, in.c, in.b); }

// The same chain on raw xt::xarray<double>s, each op into a fresh array as tapegrad's ops: the
// baseline of the per-op figures.
inline xt::xarray<double> run_raw_xarray() {
  const xt::xarray<double> c = {0.5};
  const xt::xarray<double> b = {0.1};
  xt::xarray<double> y = {0.3};
  for (int i = 0; i < kSteps; ++i) {
    xt::xarray<double> m = y * c;
    xt::xarray<double> a = m + b;
    y = xt::tanh(a);
  }
  return y;
}

// Reports the time per op of a benchmark whose every iteration runs the chain once.
inline void report_ns_per_op(benchmark::State& state) {
  state.counters["ns_per_op"] = benchmark::Counter(
      kOps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace chain_workload
