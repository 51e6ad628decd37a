// The strided kernels of the array and reduce ops, forward only, no tape: transpose (2-D and
// a 3-D rotation), reductions over a middle axis (the general strided case) and over leading or
// trailing axes (the contiguous fast paths), slice, concat, split and tile; each on a large
// float64 tensor (memory-bound) and on a small one (per-call cost); and the tile and scans of
// llsq's Vandermonde matrix. Whole-array sums (pairwise, float32 and float64) against a running
// sum in eight interleaved partial sums over a plain array (the library's sum before it summed
// pairwise: the baseline, in the same process), sums over outer and inner axes, log_softmax
// over long rows, float32 scans and segment sums.
#include <cstddef>
#include <vector>

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

template <class T>
tg::Tensor ramp_of(std::size_t n) {
  xt::xarray<T> a = xt::empty<T>({n});
  for (std::size_t i = 0; i < n; ++i) a(i) = static_cast<T>(i % 97) * T(0.25);
  return tg::Tensor(a);
}

template <class T>
void BM_reduce_sum_all(benchmark::State& state) {
  const tg::Tensor x = ramp_of<T>(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_sum(x).id());
}

// The baseline: eight running sums, term j into sum j % 8, as the library summed before.
template <class T>
T running_sum(const T* b, std::size_t count) {
  T lane[8] = {};
  std::size_t j = 0;
  for (; j + 8 <= count; j += 8) {
#pragma GCC unroll 1
    for (std::size_t k = 0; k < 8; ++k) lane[k] += b[j + k];
  }
  T acc = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (; j < count; ++j) acc += b[j];
  return acc;
}

template <class T>
void BM_running_sum_baseline(benchmark::State& state) {
  const tg::Tensor x = ramp_of<T>(static_cast<std::size_t>(state.range(0)));
  const auto& a = x.array<T>();
  for (auto _ : state) benchmark::DoNotOptimize(running_sum(a.data(), a.size()));
}

void BM_reduce_sum_outer_and_inner_axes(benchmark::State& state) {
  const tg::Tensor x = ramp({16, 64, static_cast<std::size_t>(state.range(0))});
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_sum(x, {0, 2}).id());
}

// GradBench lse's primal: the log-sum-exp of 1,280,000 float64 values.
void BM_reduce_logsumexp_all(benchmark::State& state) {
  const tg::Tensor x = ramp_of<double>(1280000);
  for (auto _ : state) benchmark::DoNotOptimize(tg::reduce_logsumexp(x).id());
}

void BM_log_softmax_long_rows(benchmark::State& state) {
  const tg::Tensor x =
      tg::reshape(ramp_of<float>(100 * static_cast<std::size_t>(state.range(0))), {100, -1});
  for (auto _ : state) benchmark::DoNotOptimize(tg::log_softmax(x).id());
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

// float32 scans (their lines run in float64).
void BM_cumsum_first_axis_float32(benchmark::State& state) {
  const tg::Tensor x =
      tg::cast(ramp({static_cast<std::size_t>(state.range(0)), 128}), tg::DType::Float32);
  for (auto _ : state) benchmark::DoNotOptimize(tg::cumsum(x, 0).id());
}

void BM_cumprod_last_axis_float32(benchmark::State& state) {
  const tg::Tensor x =
      tg::cast(ramp({128, static_cast<std::size_t>(state.range(0))}), tg::DType::Float32);
  for (auto _ : state) benchmark::DoNotOptimize(tg::cumprod(x, 1, true).id());
}

// float32 unsorted_segment_sum: an embedding's gradient made dense (4,096 rows of 64 into
// 50,000 segments, most touched once) and 2^20 one-element rows into 16 segments (each busy:
// summed in float64 after its first 32 rows).
void BM_segment_sum_float32_embedding(benchmark::State& state) {
  xt::xarray<std::int64_t> ids = xt::empty<std::int64_t>({std::size_t{4096}});
  for (std::size_t k = 0; k < ids.size(); ++k) ids(k) = static_cast<std::int64_t>(k * 7919 % 50000);
  const tg::Tensor rows = tg::cast(ramp({4096, 64}), tg::DType::Float32);
  const tg::Tensor segment_ids(ids);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tg::unsorted_segment_sum(rows, segment_ids, 50000).id());
  }
}

void BM_segment_sum_float32_busy(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << 20;
  xt::xarray<std::int64_t> ids = xt::empty<std::int64_t>({n});
  for (std::size_t k = 0; k < n; ++k) ids(k) = static_cast<std::int64_t>(k % 16);
  const tg::Tensor rows = ramp_of<float>(n);
  const tg::Tensor segment_ids(ids);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tg::unsorted_segment_sum(rows, segment_ids, 16).id());
  }
}

}  // namespace

// Arg = the size of every dimension: 4 (per-call cost) and 64 or 512 (memory-bound).
BENCHMARK(BM_transpose_2d)->Arg(4)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_transpose_3d_rotate)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_sum_middle_axis)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_max_outer_axes)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_sum_leading_axis)->Arg(4)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_sum_trailing_axis)->Arg(4)->Arg(512)->Unit(benchmark::kMicrosecond);
// Elements: 4,096 (in cache) and 2^20 (memory-bound).
BENCHMARK_TEMPLATE(BM_reduce_sum_all, float)
    ->Arg(4096)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_running_sum_baseline, float)
    ->Arg(4096)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_reduce_sum_all, double)
    ->Arg(4096)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_running_sum_baseline, double)
    ->Arg(4096)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond);
// [16, 64, Arg] over axes 0 and 2 (an NCHW batch's moments).
BENCHMARK(BM_reduce_sum_outer_and_inner_axes)->Arg(4)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reduce_logsumexp_all)->Unit(benchmark::kMicrosecond);
// 100 rows of Arg float32 logits.
BENCHMARK(BM_log_softmax_long_rows)->Arg(10)->Arg(10000)->Unit(benchmark::kMicrosecond);
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
BENCHMARK(BM_cumsum_first_axis_float32)->Arg(16392)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cumprod_last_axis_float32)->Arg(16392)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_segment_sum_float32_embedding)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_segment_sum_float32_busy)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
