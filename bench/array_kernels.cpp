// The strided kernels of the array and reduce ops, forward only, no tape: transpose (2-D and
// a 3-D rotation), reductions over a middle axis (the general strided case) and over leading or
// trailing axes (the contiguous fast paths), slice, concat, split and tile; each on a large
// float64 tensor (memory-bound) and on a small one (per-call cost); and the tile and scans of
// llsq's Vandermonde matrix.
#include <benchmark/benchmark.h>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

tg::Tensor ramp(const tg::Shape& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i % 97) * 0.25;
  return tg::from_values(values, shape, tg::DType::Float64);
}

tg::Shape shape_arg(const benchmark::State& state, std::size_t rank) {
  return tg::Shape(rank, static_cast<std::size_t>(state.range(0)));
}

void BM_transpose_2d(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 2));
  for (auto _ : state) benchmark::DoNotOptimize(tg::transpose(x, {1, 0}).id());
}

void BM_transpose_3d_rotate(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) benchmark::DoNotOptimize(tg::transpose(x, {2, 0, 1}).id());
}

void BM_reduce_sum_middle_axis(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_sum(x, {1}).id());
}

void BM_reduce_max_outer_axes(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_max(x, {0, 2}).id());
}

void BM_reduce_sum_leading_axis(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 2));
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_sum(x, {0}).id());
}

void BM_reduce_sum_trailing_axis(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 2));
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_sum(x, {1}).id());
}

void BM_slice_center(benchmark::State& state) {
  const auto n = state.range(0);
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) {
    benchmark::DoNotOptimize(tg::slice(x, {n / 4, n / 4, n / 4}, {n / 2, n / 2, n / 2}).id());
  }
}

void BM_concat_axis1(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) benchmark::DoNotOptimize(tg::concat({x, x}, 1).id());
}

void BM_split_axis1(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) benchmark::DoNotOptimize(tg::split(x, 2, 1).front().id());
}

void BM_tile(benchmark::State& state) {
  const tg::Tensor x = ramp(shape_arg(state, 3));
  for (auto _ : state) benchmark::DoNotOptimize(tg::tile(x, {2, 2, 2}).id());
}

// llsq's Vandermonde matrix: a column of n points tiled into 128 columns, then an exclusive
// cumprod along the rows (last axis) of [n, 128], and along the columns of [128, n] (long lines).
void BM_tile_column(benchmark::State& state) {
  const tg::Tensor x = ramp({static_cast<std::size_t>(state.range(0)), 1});
  for (auto _ : state) benchmark::DoNotOptimize(tg::tile(x, {1, 128}).id());
}

void BM_cumprod_last_axis(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0));
  const tg::Tensor x = ramp({rows, static_cast<std::size_t>(state.range(1))});
  for (auto _ : state) benchmark::DoNotOptimize(tg::cumprod(x, 1, true).id());
}

void BM_cumsum_first_axis(benchmark::State& state) {
  const tg::Tensor x = ramp({static_cast<std::size_t>(state.range(0)), 128});
  for (auto _ : state) benchmark::DoNotOptimize(tg::cumsum(x, 0).id());
}

}  // namespace

// Arg = the size of every dimension: 4 (per-call cost) and 64 or 512 (memory-bound).
BENCHMARK(BM_transpose_2d)->Arg(4)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_transpose_3d_rotate)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_sum_middle_axis)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_max_outer_axes)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_sum_leading_axis)->Arg(4)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_sum_trailing_axis)->Arg(4)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_slice_center)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_concat_axis1)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_split_axis1)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_tile)->Arg(4)->Arg(32)->Unit(benchmark::kMicrosecond);
// Rows of the llsq matrix: 16 (per-call cost) and 16392 (GradBench's largest workload, 16 MB).
BENCHMARK(BM_tile_column)->Arg(16)->Arg(16392)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cumprod_last_axis)
    ->Args({16, 128})
    ->Args({16392, 128})
    ->Args({128, 16392})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cumsum_first_axis)->Arg(16)->Arg(16392)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
