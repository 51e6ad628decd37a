// One training step (forward + backward, no optimizer update) of a 784-256-256-10 tanh MLP
// with softmax cross-entropy averaged over a batch of 64, in float32 and float64, with 1 and
// 2 BLAS threads, three ways in one process:
//   handwritten  the same network with its backward pass written out by hand on preallocated
//                xtensor buffers and cblas (the limit: no autodiff, no allocation);
//   tapegrad     the network written with tapegrad ops, gradients from a GradientTape;
//   function     the same step as one tapegrad::function (traced once, replayed per step);
//   libtorch     LibTorch's C++ autograd (only when CMake found Torch: TAPEGRAD_HAVE_TORCH).
// Before timing, the program checks that all three give the same loss and gradients (max abs
// difference at most 1e-9 in float64, 1e-3 in float32) and aborts otherwise. After the runs it
// prints the median ms per step and the ratios to the hand-written step.
//
//   ./bench_mlp --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cblas.h>
#include "median_collector.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>

#include <tapegrad/tapegrad.hpp>

#ifdef TAPEGRAD_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tg = tapegrad;

namespace {

constexpr std::size_t kBatch = 64;
constexpr std::size_t kInputs = 784;
constexpr std::size_t kHidden = 256;
constexpr std::size_t kClasses = 10;

// ---- The problem: inputs, one-hot labels and parameters, the same for every implementation.

struct Problem {
  std::vector<double> x;       // [kBatch, kInputs], uniform in [0, 1)
  std::vector<double> labels;  // [kBatch, kClasses], one-hot
  // w1 [784, 256], b1 [256], w2 [256, 256], b2 [256], w3 [256, 10], b3 [10]
  std::array<std::vector<double>, 6> params;
};

const std::array<std::pair<std::size_t, std::size_t>, 6> kParamShapes = {{{kInputs, kHidden},
                                                                          {1, kHidden},
                                                                          {kHidden, kHidden},
                                                                          {1, kHidden},
                                                                          {kHidden, kClasses},
                                                                          {1, kClasses}}};

const Problem& problem() {
  static const Problem p = [] {
    Problem out;
    std::mt19937 generator(2024);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    out.x.resize(kBatch * kInputs);
    for (double& v : out.x) v = unit(generator);
    out.labels.assign(kBatch * kClasses, 0.0);
    std::uniform_int_distribution<std::size_t> label(0, kClasses - 1);
    for (std::size_t i = 0; i < kBatch; ++i) out.labels[i * kClasses + label(generator)] = 1.0;
    for (std::size_t p = 0; p < 6; ++p) {
      const auto [rows, cols] = kParamShapes[p];
      // Weights: Glorot uniform; biases: small non-zero values, so their path is exercised.
      const bool is_bias = rows == 1;
      const double limit = is_bias ? 0.1 : std::sqrt(6.0 / static_cast<double>(rows + cols));
      std::uniform_real_distribution<double> uniform(-limit, limit);
      out.params[p].resize(rows * cols);
      for (double& v : out.params[p]) v = uniform(generator);
    }
    return out;
  }();
  return p;
}

// A step's outcome as doubles, to compare implementations.
struct StepResult {
  double loss = 0.0;
  std::array<std::vector<double>, 6> grads;
};

template <class T>
std::vector<double> to_doubles(const T* data, std::size_t n) {
  return std::vector<double>(data, data + n);
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

// ---- (a) Hand-written forward and backward: cblas with transpose flags, fused loops.

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::size_t m, std::size_t n, std::size_t k,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::size_t m, std::size_t n, std::size_t k,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
          double* c, std::size_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}
// out[n] = column sums of a [m, n] (a^T times a vector of ones).
void column_sums(const float* a, std::size_t m, std::size_t n, const float* ones, float* out) {
  cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(m), static_cast<int>(n), 1.0f, a,
              static_cast<int>(n), ones, 1, 0.0f, out, 1);
}
void column_sums(const double* a, std::size_t m, std::size_t n, const double* ones, double* out) {
  cblas_dgemv(CblasRowMajor, CblasTrans, static_cast<int>(m), static_cast<int>(n), 1.0, a,
              static_cast<int>(n), ones, 1, 0.0, out, 1);
}

template <class T>
xt::xtensor<T, 2> matrix_from(const std::vector<double>& values, std::size_t rows,
                              std::size_t cols) {
  xt::xtensor<T, 2> out = xt::xtensor<T, 2>::from_shape({rows, cols});
  std::transform(values.begin(), values.end(), out.begin(),
                 [](double v) { return static_cast<T>(v); });
  return out;
}

template <class T>
class HandwrittenMlp {
 public:
  HandwrittenMlp() {
    const Problem& p = problem();
    x_ = matrix_from<T>(p.x, kBatch, kInputs);
    labels_ = matrix_from<T>(p.labels, kBatch, kClasses);
    for (std::size_t i = 0; i < 6; ++i) {
      params_[i] = matrix_from<T>(p.params[i], kParamShapes[i].first, kParamShapes[i].second);
      grads_[i] = xt::zeros<T>({kParamShapes[i].first, kParamShapes[i].second});
    }
    h1_ = xt::zeros<T>({kBatch, kHidden});
    h2_ = xt::zeros<T>({kBatch, kHidden});
    dz1_ = xt::zeros<T>({kBatch, kHidden});
    dz2_ = xt::zeros<T>({kBatch, kHidden});
    logits_ = xt::zeros<T>({kBatch, kClasses});
    ones_ = xt::ones<T>({kBatch});
  }

  // Forward and backward; returns the loss, the gradients are in grads_.
  T step() {
    const auto& [w1, b1, w2, b2, w3, b3] = params_;
    auto& [dw1, db1, dw2, db2, dw3, db3] = grads_;
    // h = tanh(x W + b): rows start as b, gemm adds x W (beta = 1), tanh in place (xsimd).
    dense_tanh(x_.data(), kInputs, w1, b1, h1_);
    dense_tanh(h1_.data(), kHidden, w2, b2, h2_);
    fill_rows(b3, logits_);
    gemm(CblasNoTrans, CblasNoTrans, kBatch, kClasses, kHidden, h2_.data(), kHidden, w3.data(),
         kClasses, T(1), logits_.data(), kClasses);

    // Loss and d loss / d logits in one pass per row; logits_ becomes the gradient.
    const T loss = softmax_cross_entropy_and_gradient();
    T* dlogits = logits_.data();

    gemm(CblasTrans, CblasNoTrans, kHidden, kClasses, kBatch, h2_.data(), kHidden, dlogits,
         kClasses, T(0), dw3.data(), kClasses);
    column_sums(dlogits, kBatch, kClasses, ones_.data(), db3.data());
    gemm(CblasNoTrans, CblasTrans, kBatch, kHidden, kClasses, dlogits, kClasses, w3.data(),
         kClasses, T(0), dz2_.data(), kHidden);
    xt::noalias(dz2_) = dz2_ * (T(1) - h2_ * h2_);  // tanh' = 1 - tanh^2

    gemm(CblasTrans, CblasNoTrans, kHidden, kHidden, kBatch, h1_.data(), kHidden, dz2_.data(),
         kHidden, T(0), dw2.data(), kHidden);
    column_sums(dz2_.data(), kBatch, kHidden, ones_.data(), db2.data());
    gemm(CblasNoTrans, CblasTrans, kBatch, kHidden, kHidden, dz2_.data(), kHidden, w2.data(),
         kHidden, T(0), dz1_.data(), kHidden);
    xt::noalias(dz1_) = dz1_ * (T(1) - h1_ * h1_);

    gemm(CblasTrans, CblasNoTrans, kInputs, kHidden, kBatch, x_.data(), kInputs, dz1_.data(),
         kHidden, T(0), dw1.data(), kHidden);
    column_sums(dz1_.data(), kBatch, kHidden, ones_.data(), db1.data());
    return loss;
  }

  StepResult result() {
    StepResult r;
    r.loss = static_cast<double>(step());
    for (std::size_t i = 0; i < 6; ++i) r.grads[i] = to_doubles(grads_[i].data(), grads_[i].size());
    return r;
  }

 private:
  static void fill_rows(const xt::xtensor<T, 2>& bias, xt::xtensor<T, 2>& out) {
    const std::size_t cols = out.shape()[1];
    for (std::size_t i = 0; i < out.shape()[0]; ++i) {
      std::copy_n(bias.data(), cols, out.data() + i * cols);
    }
  }
  static void dense_tanh(const T* input, std::size_t inputs, const xt::xtensor<T, 2>& weights,
                         const xt::xtensor<T, 2>& bias, xt::xtensor<T, 2>& out) {
    fill_rows(bias, out);
    gemm(CblasNoTrans, CblasNoTrans, kBatch, kHidden, inputs, input, inputs, weights.data(),
         kHidden, T(1), out.data(), kHidden);
    xt::noalias(out) = xt::tanh(out);
  }
  // mean over rows of -sum(labels * log_softmax(logits)); the gradient of that mean w.r.t.
  // the logits is (softmax * sum(labels) - labels) / batch, written over the logits.
  T softmax_cross_entropy_and_gradient() {
    T total = 0;
    const T inverse_batch = T(1) / static_cast<T>(kBatch);
    for (std::size_t i = 0; i < kBatch; ++i) {
      T* row = logits_.data() + i * kClasses;
      const T* labels = labels_.data() + i * kClasses;
      const T max = *std::max_element(row, row + kClasses);
      T sum = 0;
      for (std::size_t j = 0; j < kClasses; ++j) sum += std::exp(row[j] - max);
      const T log_sum = max + std::log(sum);
      T label_sum = 0;
      for (std::size_t j = 0; j < kClasses; ++j) {
        total += labels[j] * (log_sum - row[j]);
        label_sum += labels[j];
      }
      for (std::size_t j = 0; j < kClasses; ++j) {
        row[j] = (std::exp(row[j] - log_sum) * label_sum - labels[j]) * inverse_batch;
      }
    }
    return total * inverse_batch;
  }

  xt::xtensor<T, 2> x_, labels_;
  std::array<xt::xtensor<T, 2>, 6> params_, grads_;
  xt::xtensor<T, 2> h1_, h2_, dz1_, dz2_, logits_;
  xt::xtensor<T, 1> ones_;
};

// ---- (b) tapegrad: the network as a user writes it, parameters as Variables.

template <class T>
class TapegradMlp {
 public:
  TapegradMlp() {
    const Problem& p = problem();
    const tg::DType dtype = tg::dtype_of<T>::value;
    x_ = tg::from_values(p.x, {kBatch, kInputs}, dtype);
    labels_ = tg::from_values(p.labels, {kBatch, kClasses}, dtype);
    for (std::size_t i = 0; i < 6; ++i) {
      const auto [rows, cols] = kParamShapes[i];
      const tg::Shape shape = rows == 1 ? tg::Shape{cols} : tg::Shape{rows, cols};
      params_.emplace_back(tg::from_values(p.params[i], shape, dtype));
    }
  }

  std::pair<tg::Tensor, std::vector<tg::Tensor>> step() const {
    const auto& w = params_;
    tg::GradientTape tape;
    const tg::Tensor h1 = tg::tanh(tg::matmul(x_, w[0]) + w[1]);
    const tg::Tensor h2 = tg::tanh(tg::matmul(h1, w[2]) + w[3]);
    const tg::Tensor logits = tg::matmul(h2, w[4]) + w[5];
    const tg::Tensor loss = tg::reduce_mean(tg::softmax_cross_entropy_with_logits(labels_, logits));
    return {loss, tape.gradient(loss, params_)};
  }

  StepResult result() const { return result_of(step()); }

  static StepResult result_of(const std::pair<tg::Tensor, std::vector<tg::Tensor>>& outcome) {
    const auto& [loss, grads] = outcome;
    StepResult r;
    r.loss = static_cast<double>(loss.template item<T>());
    for (std::size_t i = 0; i < 6; ++i) {
      const auto& g = grads[i].template array<T>();
      r.grads[i] = to_doubles(g.data(), g.size());
    }
    return r;
  }

 private:
  tg::Tensor x_, labels_;
  std::vector<tg::Variable> params_;
};

// ---- (b') the tapegrad step as one tapegrad::function: traced on the first step, replayed
// after (no recording, no backward walk, elementwise runs fused).

template <class T>
class TapegradFunctionMlp {
 public:
  TapegradFunctionMlp()
      : step_(tg::function([this](const std::vector<tg::Tensor>&) {
          auto [loss, grads] = model_.step();
          grads.insert(grads.begin(), loss);
          return grads;
        })) {
    step_({});  // the trace
  }

  std::pair<tg::Tensor, std::vector<tg::Tensor>> step() const {
    std::vector<tg::Tensor> out = step_({});
    tg::Tensor loss = out.front();
    out.erase(out.begin());
    return {loss, out};
  }

  StepResult result() const { return TapegradMlp<T>::result_of(step()); }

 private:
  TapegradMlp<T> model_;
  tg::Function step_;
};

// ---- (c) LibTorch autograd, written as torch::nn::Linear would compute it (addmm).

#ifdef TAPEGRAD_HAVE_TORCH
template <class T>
class TorchMlp {
 public:
  TorchMlp() {
    const Problem& p = problem();
    x_ = tensor_from(p.x, {static_cast<long>(kBatch), static_cast<long>(kInputs)});
    labels_ = tensor_from(p.labels, {static_cast<long>(kBatch), static_cast<long>(kClasses)});
    for (std::size_t i = 0; i < 6; ++i) {
      const auto [rows, cols] = kParamShapes[i];
      std::vector<long> shape = {static_cast<long>(rows), static_cast<long>(cols)};
      if (rows == 1) shape = {static_cast<long>(cols)};
      params_.push_back(tensor_from(p.params[i], shape).requires_grad_(true));
    }
  }

  std::pair<torch::Tensor, std::vector<torch::Tensor>> step() const {
    const auto& w = params_;
    const auto h1 = torch::tanh(torch::addmm(w[1], x_, w[0]));
    const auto h2 = torch::tanh(torch::addmm(w[3], h1, w[2]));
    const auto logits = torch::addmm(w[5], h2, w[4]);
    const auto loss = (-(labels_ * torch::log_softmax(logits, 1)).sum(1)).mean();
    return {loss, torch::autograd::grad({loss}, params_)};
  }

  StepResult result() const {
    const auto [loss, grads] = step();
    StepResult r;
    r.loss = loss.template item<double>();
    for (std::size_t i = 0; i < 6; ++i) {
      const auto g = grads[i].contiguous();
      r.grads[i] = to_doubles(g.template data_ptr<T>(), static_cast<std::size_t>(g.numel()));
    }
    return r;
  }

 private:
  static torch::Tensor tensor_from(const std::vector<double>& values, std::vector<long> shape) {
    const auto dtype = std::is_same_v<T, float> ? torch::kFloat32 : torch::kFloat64;
    auto as_double = torch::from_blob(const_cast<double*>(values.data()), shape, torch::kFloat64);
    return as_double.to(dtype).clone();
  }

  torch::Tensor x_, labels_;
  std::vector<torch::Tensor> params_;
};
#endif

// ---- Same gradients before timing.

double max_abs_difference(const StepResult& a, const StepResult& b) {
  double worst = std::abs(a.loss - b.loss);
  for (std::size_t i = 0; i < 6; ++i) {
    if (a.grads[i].size() != b.grads[i].size()) return INFINITY;
    for (std::size_t j = 0; j < a.grads[i].size(); ++j) {
      worst = std::max(worst, std::abs(a.grads[i][j] - b.grads[i][j]));
    }
  }
  return worst;
}

void require_same(const char* dtype, const char* what, double difference, double tolerance) {
  std::printf("gradient check %s: %-24s max abs difference %.3g (tolerance %.0e)\n", dtype, what,
              difference, tolerance);
  if (!(difference <= tolerance)) {
    std::fprintf(stderr,
                 "bench_mlp: %s %s gradients differ from the hand-written ones by %.3g"
                 " (tolerance %.0e): aborting before timing\n",
                 dtype, what, difference, tolerance);
    std::abort();
  }
}

template <class T>
void check_gradients(const char* dtype, double tolerance) {
  set_blas_threads(1);
  const StepResult reference = HandwrittenMlp<T>().result();
  require_same(dtype, "tapegrad vs handwritten",
               max_abs_difference(TapegradMlp<T>().result(), reference), tolerance);
  require_same(dtype, "function vs handwritten",
               max_abs_difference(TapegradFunctionMlp<T>().result(), reference), tolerance);
#ifdef TAPEGRAD_HAVE_TORCH
  torch::set_num_threads(1);
  require_same(dtype, "libtorch vs handwritten",
               max_abs_difference(TorchMlp<T>().result(), reference), tolerance);
#endif
}

// ---- Benchmarks.

void set_threads(int threads) {
  set_blas_threads(threads);
#ifdef TAPEGRAD_HAVE_TORCH
  torch::set_num_threads(threads);
#endif
}

template <class Model>
void run_steps(benchmark::State& state, int threads) {
  set_threads(threads);
  Model model;
  for (auto _ : state) {
    auto outcome = model.step();
    benchmark::DoNotOptimize(outcome);
  }
}

// Names "mlp/<dtype>/threads:<n>/<implementation>".
struct Entry {
  std::string dtype;
  int threads;
  std::string implementation;
  std::string name() const {
    return "mlp/" + dtype + "/threads:" + std::to_string(threads) + "/" + implementation;
  }
};

using StepRunner = void (*)(benchmark::State&, int);

void register_entry(const Entry& entry, StepRunner run, std::vector<Entry>& entries) {
  benchmark::RegisterBenchmark(entry.name().c_str(), run, entry.threads)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  entries.push_back(entry);
}

template <class T>
void register_dtype(const std::string& dtype, std::vector<Entry>& entries) {
  for (int threads : {1, 2}) {
    register_entry({dtype, threads, "handwritten"}, &run_steps<HandwrittenMlp<T>>, entries);
    register_entry({dtype, threads, "tapegrad"}, &run_steps<TapegradMlp<T>>, entries);
    register_entry({dtype, threads, "function"}, &run_steps<TapegradFunctionMlp<T>>, entries);
  }
}

#ifdef TAPEGRAD_HAVE_TORCH
// Registered after all the others: LibTorch's OpenMP threads keep spinning for a while after
// a parallel region, which would slow down whatever runs right after it.
template <class T>
void register_torch(const std::string& dtype, std::vector<Entry>& entries) {
  for (int threads : {1, 2}) {
    register_entry({dtype, threads, "libtorch"}, &run_steps<TorchMlp<T>>, entries);
  }
}
#endif

void print_summary(const std::vector<Entry>& entries, const MedianCollector& collector) {
  std::printf("\nmedian ms/step (ratio to handwritten):\n");
  std::printf("%-8s %-8s %12s %22s %22s %22s\n", "dtype", "threads", "handwritten", "tapegrad",
              "function", "libtorch");
  for (const Entry& e : entries) {
    if (e.implementation != "handwritten") continue;
    const double base = collector.median_ms(e.name());
    if (base <= 0.0) continue;
    std::printf("%-8s %-8d %9.3f ms", e.dtype.c_str(), e.threads, base);
    for (const char* other : {"tapegrad", "function", "libtorch"}) {
      const double t = collector.median_ms(Entry{e.dtype, e.threads, other}.name());
      if (t > 0.0) {
        std::printf("   %8.3f ms (%5.2fx)", t, t / base);
      } else {
        std::printf("   %22s", "-");
      }
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  check_gradients<double>("float64", 1e-9);
  check_gradients<float>("float32", 1e-3);
#ifndef TAPEGRAD_HAVE_TORCH
  std::printf("(LibTorch not found at configure time: its benchmarks are left out)\n");
#endif
  std::vector<Entry> entries;
  register_dtype<float>("f32", entries);
  register_dtype<double>("f64", entries);
#ifdef TAPEGRAD_HAVE_TORCH
  register_torch<float>("f32", entries);
  register_torch<double>("f64", entries);
#endif

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  MedianCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  print_summary(entries, collector);
  benchmark::Shutdown();
  return 0;
}
