// conv2d forward + backward (gradients for x and the filters, given an output gradient), in
// float32, 3x3 filters, SAME padding, unit strides, NHWC / HWIO, on:
//   digits16   64x8x8x1 -> 16 filters    (the first layer of examples/train_digits_cnn)
//   digits32   64x8x8x1 -> 32 filters
//   cnn2       64x4x4x16 -> 32 filters   (its second layer, after the 2x2 pool)
//   large      32x32x32x16 -> 32 filters
// with 1 and 2 BLAS threads, timed as:
//   tapegrad          conv2d under a GradientTape and tape.gradient (forward + backward);
//   libtorch          torch::conv2d (NCHW, the same numbers) + torch::autograd::grad, when
//                     CMake found LibTorch (TAPEGRAD_HAVE_TORCH);
//   tapegrad_forward  conv2d alone (im2col + one gemm), no tape;
//   bare_gemm         one cblas_sgemm of the shape inside it: [N*H*W, 9*C] x [9*C, O].
// Before timing, tapegrad's output and gradients are checked against LibTorch's (max abs
// difference 1e-5 of the largest value). The summary prints medians (wall time, and CPU time
// for one thread, which other jobs on the machine disturb less), the ratio to LibTorch and
// the FLOP rate of conv2d's forward (2*M*N*K of its gemm over the whole forward: im2col
// included) as a share of the bare gemm's.
//
//   ./bench_conv --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cblas.h>
#include "median_collector.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#ifdef TAPEGRAD_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tg = tapegrad;

namespace {

struct Workload {
  const char* name;
  std::size_t batch, side, in_c, out_c;
  // The gemm inside conv2d's forward: [m, k] x [k, n].
  std::size_t m() const { return batch * side * side; }
  std::size_t k() const { return 9 * in_c; }
  std::size_t n() const { return out_c; }
  double gemm_flops() const { return 2.0 * double(m()) * double(n()) * double(k()); }
};

const std::vector<Workload> kWorkloads = {
    {"digits16", 64, 8, 1, 16},
    {"digits32", 64, 8, 1, 32},
    {"cnn2", 64, 4, 16, 32},
    {"large", 32, 32, 16, 32},
};

std::vector<float> uniform(std::size_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(generator);
  return v;
}

// The same numbers for every implementation: x NHWC, filters HWIO, output gradient NHWC.
struct Data {
  std::vector<float> x, w, g;
  explicit Data(const Workload& c)
      : x(uniform(c.batch * c.side * c.side * c.in_c, 1)),
        w(uniform(9 * c.in_c * c.out_c, 2)),
        g(uniform(c.batch * c.side * c.side * c.out_c, 3)) {}
};

tg::Tensor tensor_of(const std::vector<float>& v, const tg::Shape& shape) {
  auto a = xt::xarray<float>::from_shape(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return tg::Tensor(std::move(a));
}

struct TapegradConv {
  tg::Tensor x, w, g;
  explicit TapegradConv(const Workload& c) {
    const Data d(c);
    x = tensor_of(d.x, {c.batch, c.side, c.side, c.in_c});
    w = tensor_of(d.w, {3, 3, c.in_c, c.out_c});
    g = tensor_of(d.g, {c.batch, c.side, c.side, c.out_c});
  }
  // {y, dx, dw}
  std::vector<tg::Tensor> step() const {
    tg::GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    const tg::Tensor y = tg::conv2d(x, w, {1, 1}, tg::Padding::Same);
    std::vector<tg::Tensor> grads = tape.gradient({y}, {x, w}, {g});
    return {y, grads[0], grads[1]};
  }
  tg::Tensor forward() const { return tg::conv2d(x, w, {1, 1}, tg::Padding::Same); }
};

#ifdef TAPEGRAD_HAVE_TORCH
struct TorchConv {
  torch::Tensor x, w, g;
  explicit TorchConv(const Workload& c) {
    Data d(c);  // from_blob views it: clone() copies out before it goes
    const auto b = static_cast<long>(c.batch), s = static_cast<long>(c.side);
    const auto ci = static_cast<long>(c.in_c), co = static_cast<long>(c.out_c);
    x = torch::from_blob(d.x.data(), {b, s, s, ci})
            .permute({0, 3, 1, 2})
            .clone(at::MemoryFormat::Contiguous);
    w = torch::from_blob(d.w.data(), {3, 3, ci, co})
            .permute({3, 2, 0, 1})
            .clone(at::MemoryFormat::Contiguous);
    g = torch::from_blob(d.g.data(), {b, s, s, co})
            .permute({0, 3, 1, 2})
            .clone(at::MemoryFormat::Contiguous);
    x.set_requires_grad(true);
    w.set_requires_grad(true);
  }
  // {y, dx, dw}, in tapegrad's layouts.
  std::vector<torch::Tensor> step() const {
    const torch::Tensor y = torch::conv2d(x, w, {}, 1, 1);  // padding 1 = SAME for 3x3
    std::vector<torch::Tensor> grads = torch::autograd::grad({y}, {x, w}, {g});
    return {y, grads[0], grads[1]};
  }
};

// The largest |a - b| relative to max(1, the largest |b|): float32 sums over up to 32768 terms.
double max_difference(const tg::Tensor& a, const torch::Tensor& b_nchw_or_oihw, bool filter) {
  const torch::Tensor b =
      (filter ? b_nchw_or_oihw.permute({2, 3, 1, 0}) : b_nchw_or_oihw.permute({0, 2, 3, 1}))
          .contiguous();
  const float* pb = b.data_ptr<float>();
  const auto& va = a.array<float>();
  double worst = 0, scale = 1;
  for (std::size_t i = 0; i < va.size(); ++i) {
    worst = std::max(worst, std::abs(double(va.data()[i]) - double(pb[i])));
    scale = std::max(scale, std::abs(double(pb[i])));
  }
  return worst / scale;
}

void check_against_torch(const Workload& c) {
  const auto ours = TapegradConv(c).step();
  const auto theirs = TorchConv(c).step();
  const double worst = std::max({max_difference(ours[0], theirs[0], false),
                                 max_difference(ours[1], theirs[1], false),
                                 max_difference(ours[2], theirs[2], true)});
  std::printf("check %-9s tapegrad vs libtorch: max relative difference %.3g\n", c.name, worst);
  if (!(worst <= 1e-5)) {
    std::fprintf(stderr, "bench_conv: %s differs from LibTorch by %.3g: aborting\n", c.name, worst);
    std::abort();
  }
}
#endif

void set_threads(int threads) {
  openblas_set_num_threads(threads);
#ifdef TAPEGRAD_HAVE_TORCH
  torch::set_num_threads(threads);
#endif
}

// Names "conv/<workload>/threads:<n>/<implementation>".
std::string name_of(const Workload& c, int threads, const std::string& implementation) {
  return std::string("conv/") + c.name + "/threads:" + std::to_string(threads) + "/" +
         implementation;
}

void register_all(int threads) {
  for (const Workload& c : kWorkloads) {
    benchmark::RegisterBenchmark(name_of(c, threads, "tapegrad").c_str(),
                                 [c, threads](benchmark::State& state) {
                                   set_threads(threads);
                                   const TapegradConv conv(c);
                                   for (auto _ : state) benchmark::DoNotOptimize(conv.step());
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(name_of(c, threads, "tapegrad_forward").c_str(),
                                 [c, threads](benchmark::State& state) {
                                   set_threads(threads);
                                   const TapegradConv conv(c);
                                   for (auto _ : state) benchmark::DoNotOptimize(conv.forward());
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(name_of(c, threads, "bare_gemm").c_str(),
                                 [c, threads](benchmark::State& state) {
                                   set_threads(threads);
                                   const auto a = uniform(c.m() * c.k(), 4);
                                   const auto b = uniform(c.k() * c.n(), 5);
                                   std::vector<float> out(c.m() * c.n());
                                   for (auto _ : state) {
                                     cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
                                                 int(c.m()), int(c.n()), int(c.k()), 1.0f, a.data(),
                                                 int(c.k()), b.data(), int(c.n()), 0.0f, out.data(),
                                                 int(c.n()));
                                     benchmark::DoNotOptimize(out.data());
                                   }
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

#ifdef TAPEGRAD_HAVE_TORCH
// After all the others: LibTorch's OpenMP threads keep spinning for a while after a parallel
// region and would slow down whatever runs next.
void register_torch(int threads) {
  for (const Workload& c : kWorkloads) {
    benchmark::RegisterBenchmark(name_of(c, threads, "libtorch").c_str(),
                                 [c, threads](benchmark::State& state) {
                                   set_threads(threads);
                                   const TorchConv conv(c);
                                   for (auto _ : state) benchmark::DoNotOptimize(conv.step());
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}
#endif

using Time = double (MedianCollector::*)(const std::string&) const;

void print_table(const MedianCollector& collector, Time time, const char* what,
                 const std::vector<int>& thread_counts) {
  std::printf(
      "\nmedian %s, ms per forward + backward; conv2d forward's FLOP rate vs a bare gemm:\n", what);
  std::printf("%-9s %-7s %11s %11s %7s %12s %12s %7s\n", "workload", "threads", "tapegrad",
              "libtorch", "ratio", "fwd GFLOP/s", "gemm GFLOP/s", "share");
  for (int threads : thread_counts) {
    for (const Workload& c : kWorkloads) {
      const double ours = (collector.*time)(name_of(c, threads, "tapegrad"));
      if (ours <= 0.0) continue;
      const double torch_ms = (collector.*time)(name_of(c, threads, "libtorch"));
      const double forward = (collector.*time)(name_of(c, threads, "tapegrad_forward"));
      const double gemm = (collector.*time)(name_of(c, threads, "bare_gemm"));
      std::printf("%-9s %-7d %8.3f ms", c.name, threads, ours);
      if (torch_ms > 0.0) {
        std::printf(" %8.3f ms %6.2fx", torch_ms, ours / torch_ms);
      } else {
        std::printf(" %11s %7s", "-", "-");
      }
      if (forward > 0.0 && gemm > 0.0) {
        const double rate = c.gemm_flops() / (forward * 1e6);
        const double bare = c.gemm_flops() / (gemm * 1e6);
        std::printf(" %12.2f %12.2f %6.0f%%", rate, bare, 100.0 * rate / bare);
      }
      std::printf("\n");
    }
  }
}

void print_summary(const MedianCollector& collector) {
  print_table(collector, &MedianCollector::real_ms, "wall time", {1, 2});
  print_table(collector, &MedianCollector::cpu_ms, "CPU time (one thread)", {1});
}

}  // namespace

int main(int argc, char** argv) {
#ifdef TAPEGRAD_HAVE_TORCH
  set_threads(1);
  for (const Workload& c : kWorkloads) check_against_torch(c);
#else
  std::printf("(LibTorch not found at configure time: its benchmarks are left out)\n");
#endif
  for (int threads : {1, 2}) register_all(threads);
#ifdef TAPEGRAD_HAVE_TORCH
  for (int threads : {1, 2}) register_torch(threads);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  MedianCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  print_summary(collector);
  benchmark::Shutdown();
  return 0;
}
