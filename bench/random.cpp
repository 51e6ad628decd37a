// The random ops on 2^20 elements: random_uniform and random_normal (float32, float64) and
// dropout (float32), against filling the same array from the standard library's mt19937_64
// with its uniform_real_distribution / normal_distribution in the same process (the usual
// sequential C++ generator; not counter-based, so not reproducible across threads).
#include <benchmark/benchmark.h>

#include <random>

#include <xtensor/xarray.hpp>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

constexpr std::size_t kElements = std::size_t{1} << 20;

template <class T>
tg::DType dtype() {
  return tg::dtype_of<T>::value;
}

template <class T>
void BM_random_uniform(benchmark::State& state) {
  tg::Generator generator(1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tg::random_uniform({kElements}, generator, 0.0, 1.0, dtype<T>()).id());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElements));
}

template <class T>
void BM_random_normal(benchmark::State& state) {
  tg::Generator generator(1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tg::random_normal({kElements}, generator, 0.0, 1.0, dtype<T>()).id());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElements));
}

template <class T, class Distribution>
void BM_mt19937_64(benchmark::State& state) {
  std::mt19937_64 engine(1);
  Distribution distribution;
  for (auto _ : state) {
    xt::xarray<T> a = xt::xarray<T>::from_shape({kElements});
    for (auto& v : a) v = distribution(engine);
    benchmark::DoNotOptimize(a.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElements));
}

void BM_dropout_float32(benchmark::State& state) {
  tg::Generator generator(1);
  const tg::Tensor x = tg::ones({kElements}, tg::DType::Float32);
  for (auto _ : state) benchmark::DoNotOptimize(tg::dropout(x, 0.5, generator).id());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElements));
}

BENCHMARK_TEMPLATE(BM_random_uniform, float)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_random_uniform, double)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_mt19937_64, float, std::uniform_real_distribution<float>)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_mt19937_64, double, std::uniform_real_distribution<double>)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_random_normal, float)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_random_normal, double)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_mt19937_64, float, std::normal_distribution<float>)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_mt19937_64, double, std::normal_distribution<double>)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_dropout_float32)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
