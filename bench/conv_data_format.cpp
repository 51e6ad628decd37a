// DataFormat::NCHW against writing the transposes by hand: forward + backward (gradients for
// x and, for the convolutions, the filters, given a fixed output gradient) of PyTorch-like
// CNN layers in float32, one BLAS thread, on channels-first images:
//   conv1   32x3x32x32 -> 16 filters 3x3, Same     (a first layer on CIFAR-sized images)
//   pool1   32x16x32x32, max_pool2d 2x2 stride 2   (its pooling)
//   conv2   32x16x16x16 -> 32 filters 3x3, Same    (the second layer, after the pool)
// each timed three ways in one process:
//   nchw        the op with DataFormat::NCHW (the library transposes around the NHWC op);
//   transposes  transpose(x, {0, 2, 3, 1}), the NHWC op, transpose(y, {0, 3, 1, 2}) written by
//               the user, under the same tape;
//   nhwc        the NHWC op on channels-last data, no transposes (what the layout costs).
// Before timing, nchw and transposes are checked to give bit-equal outputs and gradients. The
// summary prints Google Benchmark's medians (wall time and CPU time) and the ratio nchw /
// transposes, which should be 1.0 within noise: both record the same three ops. On a shared
// machine the load drifts between one benchmark's repetitions and the next, so a second
// table times the three ways in alternating rounds (the order rotating each round) and
// gives the median of the per-round ratios, which such drifts cancel out of.
//
// Run (one command line; bench/README.md has it ready to paste):
//   OPENBLAS_NUM_THREADS=1 ./bench_conv_data_format --benchmark_repetitions=15
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "median_collector.hpp"

namespace {

namespace tg = tapegrad;
using tg::Tensor;

Tensor random_float32(const tg::Shape& shape, unsigned seed, double scale) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> uniform(-scale, scale);
  std::vector<double> v(tg::num_elements(shape));
  for (double& value : v) value = uniform(generator);
  return tg::from_values(v, shape, tg::DType::Float32);
}

Tensor to_channels_last(const Tensor& t) { return tg::transpose(t, {0, 2, 3, 1}); }
Tensor to_channels_first(const Tensor& t) { return tg::transpose(t, {0, 3, 1, 2}); }

enum class Way { Nchw, Transposes, Nhwc };
const char* name_of(Way way) {
  switch (way) {
    case Way::Nchw:
      return "nchw";
    case Way::Transposes:
      return "transposes";
    case Way::Nhwc:
      return "nhwc";
  }
  return "?";
}

// One layer: its op in both layouts; `filters` is undefined for pooling.
struct Layer {
  const char* name;
  tg::Shape x_shape;  // NCHW
  tg::Shape filter_shape;
  std::function<Tensor(const Tensor& x, const Tensor& filters, tg::DataFormat)> op;
};

const std::vector<Layer>& layers() {
  static const std::vector<Layer> all = {
      {"conv1",
       {32, 3, 32, 32},
       {3, 3, 3, 16},
       [](const Tensor& x, const Tensor& f, tg::DataFormat format) {
         return tg::conv2d(x, f, {1, 1}, tg::Padding::Same, format);
       }},
      {"pool1",
       {32, 16, 32, 32},
       {},
       [](const Tensor& x, const Tensor&, tg::DataFormat format) {
         return tg::max_pool2d(x, {2, 2}, {2, 2}, tg::Padding::Valid, format);
       }},
      {"conv2",
       {32, 16, 16, 16},
       {3, 3, 16, 32},
       [](const Tensor& x, const Tensor& f, tg::DataFormat format) {
         return tg::conv2d(x, f, {1, 1}, tg::Padding::Same, format);
       }},
  };
  return all;
}

// The layer's inputs: x in both layouts, the filters, and an output gradient for each layout.
struct Inputs {
  Tensor x_first, x_last, filters, g_first, g_last;

  explicit Inputs(const Layer& layer) {
    x_first = random_float32(layer.x_shape, 1, 1.0);
    x_last = to_channels_last(x_first);
    if (!layer.filter_shape.empty()) filters = random_float32(layer.filter_shape, 2, 0.2);
    g_first = random_float32(layer.op(x_first, filters, tg::DataFormat::NCHW).shape(), 3, 1.0);
    g_last = to_channels_last(g_first);
  }

  // Forward + backward one way: the output and the gradients for x (and the filters).
  std::vector<Tensor> step(const Layer& layer, Way way) const {
    const Tensor& x = way == Way::Nhwc ? x_last : x_first;
    std::vector<Tensor> sources{x};
    if (filters.defined()) sources.push_back(filters);
    tg::GradientTape tape;
    tape.watch(sources);
    Tensor y;
    switch (way) {
      case Way::Nchw:
        y = layer.op(x, filters, tg::DataFormat::NCHW);
        break;
      case Way::Transposes:
        y = to_channels_first(layer.op(to_channels_last(x), filters, tg::DataFormat::NHWC));
        break;
      case Way::Nhwc:
        y = layer.op(x, filters, tg::DataFormat::NHWC);
        break;
    }
    const Tensor& g = way == Way::Nhwc ? g_last : g_first;
    std::vector<Tensor> out =
        tape.gradient(std::vector<Tensor>{y}, sources, std::vector<Tensor>{g});
    out.insert(out.begin(), y);
    return out;
  }
};

// nchw and transposes run the same kernels on the same numbers: anything but bit-equal
// results means the timings compare different work.
void check_same_results(const Layer& layer) {
  const Inputs inputs(layer);
  const std::vector<Tensor> a = inputs.step(layer, Way::Nchw);
  const std::vector<Tensor> b = inputs.step(layer, Way::Transposes);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double difference = tg::reduce_max(tg::abs(a[i] - b[i])).item<float>();
    if (a[i].shape() != b[i].shape() || difference != 0.0) {
      std::fprintf(stderr, "%s: result %zu differs between nchw and transposes (%g)\n", layer.name,
                   i, difference);
      std::exit(1);
    }
  }
}

std::string benchmark_name(const Layer& layer, Way way) {
  return std::string(layer.name) + "/" + name_of(way);
}

void register_all() {
  for (const Layer& layer : layers()) {
    for (Way way : {Way::Nchw, Way::Transposes, Way::Nhwc}) {
      benchmark::RegisterBenchmark(benchmark_name(layer, way).c_str(),
                                   [&layer, way](benchmark::State& state) {
                                     openblas_set_num_threads(1);
                                     const Inputs inputs(layer);
                                     for (auto _ : state) {
                                       const std::vector<Tensor> r = inputs.step(layer, way);
                                       benchmark::DoNotOptimize(r[0].array<float>().data());
                                     }
                                   })
          ->Unit(benchmark::kMillisecond);
    }
  }
}

double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Alternating rounds: each round times one step of every way back to back (the first way
// rotating), so a change of the machine's load hits the ways of a round alike.
void print_paired(int rounds) {
  const Way ways[] = {Way::Nchw, Way::Transposes, Way::Nhwc};
  std::printf(
      "\npaired rounds (%d per layer, one step of each way per round), median of the "
      "per-round ratios\n",
      rounds);
  std::printf("%-7s %18s %16s %22s %20s\n", "layer", "nchw/transposes", "nchw/nhwc",
              "nchw/transposes (CPU)", "nchw/nhwc (CPU)");
  for (const Layer& layer : layers()) {
    const Inputs inputs(layer);
    for (Way way : ways) inputs.step(layer, way);  // warm the allocator and the caches
    std::vector<double> by_hand_wall, nhwc_wall, by_hand_cpu, nhwc_cpu;
    for (int round = 0; round < rounds; ++round) {
      double wall[3] = {}, cpu[3] = {};
      for (int k = 0; k < 3; ++k) {
        const int w = (round + k) % 3;
        const auto start = std::chrono::steady_clock::now();
        const double cpu_start = thread_cpu_ms();
        const std::vector<Tensor> r = inputs.step(layer, ways[w]);
        benchmark::DoNotOptimize(r[0].array<float>().data());
        cpu[w] = thread_cpu_ms() - cpu_start;
        wall[w] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
      }
      by_hand_wall.push_back(wall[0] / wall[1]);
      nhwc_wall.push_back(wall[0] / wall[2]);
      by_hand_cpu.push_back(cpu[0] / cpu[1]);
      nhwc_cpu.push_back(cpu[0] / cpu[2]);
    }
    std::printf("%-7s %17.3fx %15.3fx %21.3fx %19.3fx\n", layer.name, median(by_hand_wall),
                median(nhwc_wall), median(by_hand_cpu), median(nhwc_cpu));
  }
}

void print_summary(const MedianCollector& collector) {
  for (const bool cpu : {false, true}) {
    std::printf("\n%s, median (ms)\n", cpu ? "CPU time" : "wall time");
    std::printf("%-7s %10s %12s %10s %18s %16s\n", "layer", "nchw", "transposes", "nhwc",
                "nchw/transposes", "nchw/nhwc");
    for (const Layer& layer : layers()) {
      const double nchw = collector.median_ms(benchmark_name(layer, Way::Nchw), cpu);
      const double by_hand = collector.median_ms(benchmark_name(layer, Way::Transposes), cpu);
      const double nhwc = collector.median_ms(benchmark_name(layer, Way::Nhwc), cpu);
      if (nchw <= 0.0 || by_hand <= 0.0 || nhwc <= 0.0) continue;
      std::printf("%-7s %10.3f %12.3f %10.3f %17.3fx %15.3fx\n", layer.name, nchw, by_hand, nhwc,
                  nchw / by_hand, nchw / nhwc);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  for (const Layer& layer : layers()) check_same_results(layer);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  MedianCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  print_summary(collector);
  print_paired(200);
  benchmark::Shutdown();
  return 0;
}
