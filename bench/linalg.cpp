// Decompositions and solves, forward + backward, float64, on 64 x 64 and 256 x 256 matrices,
// tapegrad against LibTorch's torch::linalg in the same process (LibTorch only when CMake found
// Torch: TAPEGRAD_HAVE_TORCH). One BLAS/LAPACK thread for both (openblas_set_num_threads,
// torch::set_num_threads), so the figures compare the libraries, not the thread pools.
//
// Each step is one scalar loss and its gradient with respect to the matrix a:
//   eigh      sum(c * eigenvalues) + sum(W * V * V)           (a symmetric)
//   svd       sum(c * s) + sum(W * U * U) + sum(W * V * V)     (a general)
//   cholesky  sum(W * L)                                       (a symmetric positive definite)
//   solve     sum(W2 * x) with a x = b, b [n, 16]              (a well conditioned)
// Squares of the singular vectors and eigenvectors make the losses independent of LAPACK's
// sign choices, so both libraries' gradients can be compared: before timing, the program checks
// that <grad, S> agrees for a random symmetric S (relative 1e-8) and aborts otherwise (the two
// libraries put the gradient of a symmetric input's unread triangle in different places; its
// inner product with a symmetric direction is the same).
//
//   ./bench_linalg --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

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

extern "C" void openblas_set_num_threads(int);

namespace tg = tapegrad;

namespace {

constexpr std::size_t kRightHandSides = 16;
const char* const kOps[] = {"eigh", "svd", "cholesky", "solve"};
constexpr std::size_t kSizes[] = {64, 256};

std::vector<double> uniform(std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = dist(gen);
  return v;
}

// The inputs of one op at one size, as plain row-major values.
struct Problem {
  std::string op;
  std::size_t n;
  std::vector<double> a, b, weights, weights_b, coefficients, direction;

  Problem(std::string op_name, std::size_t size) : op(std::move(op_name)), n(size) {
    std::vector<double> x = uniform(n * n, 1);
    a.assign(n * n, 0.0);
    if (op == "eigh" || op == "cholesky") {
      // Symmetric: (x + x^T) / 2, and for cholesky x x^T / n + I.
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < n; ++c) {
          if (op == "eigh") {
            a[r * n + c] = 0.5 * (x[r * n + c] + x[c * n + r]);
          } else {
            double sum = 0;
            for (std::size_t t = 0; t < n; ++t) sum += x[r * n + t] * x[c * n + t];
            a[r * n + c] = sum / static_cast<double>(n) + (r == c ? 1.0 : 0.0);
          }
        }
      }
    } else {
      a = x;
      if (op == "solve") {
        for (std::size_t d = 0; d < n; ++d) a[d * n + d] += static_cast<double>(n) / 4;
      }
    }
    b = uniform(n * kRightHandSides, 2);
    weights = uniform(n * n, 3);
    weights_b = uniform(n * kRightHandSides, 4);
    coefficients = uniform(n, 5);
    const std::vector<double> s = uniform(n * n, 6);
    direction.assign(n * n, 0.0);
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t c = 0; c < n; ++c) direction[r * n + c] = s[r * n + c] + s[c * n + r];
    }
  }
};

// ---- tapegrad ---------------------------------------------------------------------------------

class TapegradStep {
 public:
  explicit TapegradStep(const Problem& p)
      : op_(p.op),
        a_(tg::from_values(p.a, {p.n, p.n})),
        b_(tg::from_values(p.b, {p.n, kRightHandSides})),
        w_(tg::from_values(p.weights, {p.n, p.n})),
        w_b_(tg::from_values(p.weights_b, {p.n, kRightHandSides})),
        c_(tg::from_values(p.coefficients, {p.n})) {}

  tg::Tensor loss(const tg::Tensor& a) const {
    using namespace tg;
    if (op_ == "eigh") {
      const auto [l, v] = eigh(a);
      return add(reduce_sum(multiply(c_, l)), reduce_sum(multiply(w_, multiply(v, v))));
    }
    if (op_ == "svd") {
      const auto [s, u, v] = svd(a);
      return add(reduce_sum(multiply(c_, s)), add(reduce_sum(multiply(w_, multiply(u, u))),
                                                  reduce_sum(multiply(w_, multiply(v, v)))));
    }
    if (op_ == "cholesky") return reduce_sum(multiply(w_, cholesky(a)));
    return reduce_sum(multiply(w_b_, solve(a, b_)));
  }

  tg::Tensor gradient() const {
    tg::GradientTape tape;
    tape.watch(a_);
    const tg::Tensor y = loss(a_);
    return tape.gradient(y, a_);
  }

  std::vector<double> gradient_values() const {
    const tg::Tensor g = gradient();
    const auto& arr = g.array<double>();
    return std::vector<double>(arr.begin(), arr.end());
  }

 private:
  std::string op_;
  tg::Tensor a_, b_, w_, w_b_, c_;
};

// ---- LibTorch ---------------------------------------------------------------------------------

#ifdef TAPEGRAD_HAVE_TORCH
class TorchStep {
 public:
  explicit TorchStep(const Problem& p)
      : op_(p.op),
        a_(from(p.a, {static_cast<long>(p.n), static_cast<long>(p.n)}).requires_grad_(true)),
        b_(from(p.b, {static_cast<long>(p.n), static_cast<long>(kRightHandSides)})),
        w_(from(p.weights, {static_cast<long>(p.n), static_cast<long>(p.n)})),
        w_b_(from(p.weights_b, {static_cast<long>(p.n), static_cast<long>(kRightHandSides)})),
        c_(from(p.coefficients, {static_cast<long>(p.n)})) {}

  torch::Tensor gradient() const {
    torch::Tensor loss;
    if (op_ == "eigh") {
      const auto [l, v] = torch::linalg::eigh(a_, "L");
      loss = (c_ * l).sum() + (w_ * v * v).sum();
    } else if (op_ == "svd") {
      const auto [u, s, vh] = torch::linalg::svd(a_, false, c10::nullopt);
      const auto v = vh.transpose(0, 1);
      loss = (c_ * s).sum() + (w_ * u * u).sum() + (w_ * v * v).sum();
    } else if (op_ == "cholesky") {
      loss = (w_ * torch::linalg::cholesky(a_)).sum();
    } else {
      loss = (w_b_ * torch::linalg::solve(a_, b_, true)).sum();
    }
    return torch::autograd::grad({loss}, {a_})[0];
  }

  std::vector<double> gradient_values() const {
    const torch::Tensor g = gradient().contiguous();
    return std::vector<double>(g.data_ptr<double>(), g.data_ptr<double>() + g.numel());
  }

 private:
  static torch::Tensor from(const std::vector<double>& values, std::vector<long> shape) {
    return torch::from_blob(const_cast<double*>(values.data()), shape, torch::kFloat64).clone();
  }
  std::string op_;
  torch::Tensor a_, b_, w_, w_b_, c_;
};
#endif

// ---- Same derivatives before timing ------------------------------------------------------------

#ifdef TAPEGRAD_HAVE_TORCH
double along(const std::vector<double>& grad, const std::vector<double>& direction) {
  double sum = 0;
  for (std::size_t i = 0; i < grad.size(); ++i) sum += grad[i] * direction[i];
  return sum;
}
#endif

void check_against_torch(const Problem& p) {
#ifdef TAPEGRAD_HAVE_TORCH
  const double ours = along(TapegradStep(p).gradient_values(), p.direction);
  const double theirs = along(TorchStep(p).gradient_values(), p.direction);
  const double relative = std::abs(ours - theirs) / std::max(1.0, std::abs(theirs));
  std::printf("derivative check %-8s n=%-4zu tapegrad %.12g libtorch %.12g (relative %.2g)\n",
              p.op.c_str(), p.n, ours, theirs, relative);
  if (!(relative <= 1e-8)) {
    std::fprintf(stderr, "bench_linalg: %s n=%zu: the derivatives differ: aborting before timing\n",
                 p.op.c_str(), p.n);
    std::abort();
  }
#else
  (void)p;
#endif
}

// ---- Benchmarks ---------------------------------------------------------------------------------

void run_tapegrad(benchmark::State& state, const Problem* p) {
  openblas_set_num_threads(1);
  const TapegradStep step(*p);
  for (auto _ : state) benchmark::DoNotOptimize(step.gradient());
}

#ifdef TAPEGRAD_HAVE_TORCH
void run_torch(benchmark::State& state, const Problem* p) {
  openblas_set_num_threads(1);
  torch::set_num_threads(1);
  const TorchStep step(*p);
  for (auto _ : state) benchmark::DoNotOptimize(step.gradient());
}
#endif

std::string name_of(const std::string& op, std::size_t n, const char* implementation) {
  return "linalg/" + op + "/n:" + std::to_string(n) + "/" + implementation;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Problem> problems;
  for (const char* op : kOps) {
    for (std::size_t n : kSizes) problems.emplace_back(op, n);
  }
  for (const Problem& p : problems) check_against_torch(p);
#ifndef TAPEGRAD_HAVE_TORCH
  std::printf("(LibTorch not found at configure time: only tapegrad is timed)\n");
#endif
  for (const Problem& p : problems) {
    benchmark::RegisterBenchmark(name_of(p.op, p.n, "tapegrad").c_str(), run_tapegrad, &p)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
#ifdef TAPEGRAD_HAVE_TORCH
  // After tapegrad's: LibTorch's OpenMP threads may spin on after a parallel region.
  for (const Problem& p : problems) {
    benchmark::RegisterBenchmark(name_of(p.op, p.n, "libtorch").c_str(), run_torch, &p)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  MedianCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  // Real time is what a user waits; CPU time (one thread each) is what is left of it when
  // other work shares the cores.
  std::printf("\nmedian ms per forward + backward (float64, 1 thread), real time | CPU time:\n");
  std::printf("%-9s %5s %10s %10s %7s | %10s %10s %7s\n", "op", "n", "tapegrad", "libtorch",
              "ratio", "tapegrad", "libtorch", "ratio");
  for (const Problem& p : problems) {
    std::printf("%-9s %5zu", p.op.c_str(), p.n);
    for (bool cpu : {false, true}) {
      const double ours = collector.median_ms(name_of(p.op, p.n, "tapegrad"), cpu);
      const double theirs = collector.median_ms(name_of(p.op, p.n, "libtorch"), cpu);
      if (cpu) std::printf(" |");
      if (ours <= 0.0) {
        std::printf(" %10s %10s %7s", "-", "-", "-");
      } else if (theirs <= 0.0) {
        std::printf(" %7.3f ms %10s %7s", ours, "-", "-");
      } else {
        std::printf(" %7.3f ms %7.3f ms %6.2fx", ours, theirs, ours / theirs);
      }
    }
    std::printf("\n");
  }
  benchmark::Shutdown();
  return 0;
}
