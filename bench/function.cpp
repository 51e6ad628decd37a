// tapegrad::function against the eager calls it replays, in one process:
//   chain   value + gradient of the 999-op chain on 1-element float64 tensors (chain_workload):
//           the raw xt::xarray forward ops alone (the baseline), eager (a tape and a backward
//           walk every call), and one Function whose trace holds the forward and backward ops
//           (and the first call of a new Function: its trace and planning);
//           also the forward alone, eager with no tape and through a Function; and, when
//           ADOL-C is installed (Debian: libadolc-dev), the same chain taped once by ADOL-C
//           and evaluated per call (zos_forward for the value, fos_reverse for the gradient);
//   mlp     one training step of a 784-256-256-10 tanh MLP, softmax cross-entropy over a
//           batch of 64, float32: eager, and the same step as one Function; with SGD written
//           as ops (tape, gradient, assign_sub) and with tg::Adam (its update a host step).
// Before timing, the Function's results are checked to equal the eager ones exactly.
//
//   ./bench_function --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "chain_workload.hpp"

#ifdef TAPEGRAD_HAVE_ADOLC
#include <adolc/adolc.h>
#endif

namespace tg = tapegrad;
using chain_workload::report_ns_per_op;

namespace {

// ---- chain ------------------------------------------------------------------------------

void BM_chain_raw_xarray_forward(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(chain_workload::run_raw_xarray().data());
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_raw_xarray_forward);

const chain_workload::Inputs& chain_inputs() {
  static const chain_workload::Inputs inputs;
  return inputs;
}

std::vector<tg::Tensor> chain_value_and_gradient(const std::vector<tg::Tensor>& args) {
  const chain_workload::Inputs& in = chain_inputs();
  tg::GradientTape tape;
  tape.watch(args[0]);
  tg::Tensor y = chain_workload::run(args[0], in.c, in.b);
  return {y, tape.gradient(y, args[0])};
}

std::vector<tg::Tensor> chain_forward(const std::vector<tg::Tensor>& args) {
  const chain_workload::Inputs& in = chain_inputs();
  return {chain_workload::run(args[0], in.c, in.b)};
}

void BM_chain_eager_value_and_gradient(benchmark::State& state) {
  const std::vector<tg::Tensor> args = {chain_inputs().x};
  for (auto _ : state) benchmark::DoNotOptimize(chain_value_and_gradient(args)[1].id());
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_eager_value_and_gradient);

void BM_chain_function_value_and_gradient(benchmark::State& state) {
  const tg::Function f = tg::function(chain_value_and_gradient);
  const std::vector<tg::Tensor> args = {chain_inputs().x};
  f(args);  // the trace
  for (auto _ : state) benchmark::DoNotOptimize(f(args)[1].id());
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_function_value_and_gradient);

// The first call of a new Function: the trace (an eager call that records every op) and the
// planning of its replay. Compare with BM_chain_eager_value_and_gradient.
void BM_chain_function_first_call(benchmark::State& state) {
  const std::vector<tg::Tensor> args = {chain_inputs().x};
  for (auto _ : state) {
    const tg::Function f = tg::function(chain_value_and_gradient);
    benchmark::DoNotOptimize(f(args)[1].id());
  }
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_function_first_call);

void BM_chain_eager_forward(benchmark::State& state) {
  const std::vector<tg::Tensor> args = {chain_inputs().x};
  for (auto _ : state) benchmark::DoNotOptimize(chain_forward(args)[0].id());
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_eager_forward);

void BM_chain_function_forward(benchmark::State& state) {
  const tg::Function f = tg::function(chain_forward);
  const std::vector<tg::Tensor> args = {chain_inputs().x};
  f(args);
  for (auto _ : state) benchmark::DoNotOptimize(f(args)[0].id());
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_function_forward);

#ifdef TAPEGRAD_HAVE_ADOLC
// The chain taped once by ADOL-C (its operation sequence, as a Function's trace), with the
// constants passive as tapegrad's are constants.
constexpr short kAdolcTag = 1;

void tape_chain_with_adolc() {
  static const bool taped = [] {
    const double x0 = 0.3;
    double y0 = 0.0;
    trace_on(kAdolcTag, 1);  // keep: the first zos_forward may reuse the taping sweep
    adouble x;
    x <<= x0;
    adouble y = x;
    for (int i = 0; i < chain_workload::kSteps; ++i) y = tanh(y * 0.5 + 0.1);
    y >>= y0;
    trace_off();
    return true;
  }();
  (void)taped;
}

// Value (zos_forward, keeping the sweep) and gradient (fos_reverse), as ADOL-C's gradient().
void adolc_value_and_gradient(double x, double& value, double& gradient) {
  zos_forward(kAdolcTag, 1, 1, 1, &x, &value);
  double seed = 1.0;
  fos_reverse(kAdolcTag, 1, 1, &seed, &gradient);
}

void BM_chain_adolc_value_and_gradient(benchmark::State& state) {
  tape_chain_with_adolc();
  double value = 0.0, gradient = 0.0;
  for (auto _ : state) {
    adolc_value_and_gradient(0.3, value, gradient);
    benchmark::DoNotOptimize(gradient);
  }
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_adolc_value_and_gradient);

void BM_chain_adolc_forward(benchmark::State& state) {
  tape_chain_with_adolc();
  double x = 0.3, value = 0.0;
  for (auto _ : state) {
    zos_forward(kAdolcTag, 1, 1, 0, &x, &value);
    benchmark::DoNotOptimize(value);
  }
  report_ns_per_op(state);
}
BENCHMARK(BM_chain_adolc_forward);
#endif

// ---- mlp --------------------------------------------------------------------------------

constexpr std::size_t kBatch = 64;

struct Mlp {
  std::vector<tg::Variable> params;
  tg::Tensor x, labels;

  explicit Mlp(std::uint64_t seed) {
    tg::Generator generator(seed);
    const std::vector<std::pair<std::size_t, std::size_t>> layers = {
        {784, 256}, {256, 256}, {256, 10}};
    for (const auto& [in, out] : layers) {
      params.emplace_back(tg::random_normal({in, out}, generator, 0.0, 0.05, tg::DType::Float32));
      params.emplace_back(tg::zeros({out}, tg::DType::Float32));
    }
    x = tg::random_uniform({kBatch, 784}, generator, 0.0, 1.0, tg::DType::Float32);
    std::vector<double> one_hot(kBatch * 10, 0.0);
    for (std::size_t b = 0; b < kBatch; ++b) one_hot[b * 10 + (b * 7) % 10] = 1.0;
    labels = tg::cast(tg::from_values(one_hot, {kBatch, 10}), tg::DType::Float32);
  }

  // The loss and its gradients.
  std::pair<tg::Tensor, std::vector<tg::Tensor>> loss_and_gradients() {
    tg::GradientTape tape;
    tg::Tensor h = x;
    for (std::size_t layer = 0; layer < 3; ++layer) {
      h = tg::add(tg::matmul(h, params[2 * layer].value()), params[2 * layer + 1].value());
      if (layer < 2) h = tg::tanh(h);
    }
    tg::Tensor loss = tg::reduce_mean(tg::softmax_cross_entropy_with_logits(labels, h));
    return {loss, tape.gradient(loss, params)};
  }

  // w <- w - rate g for every parameter; returns the loss.
  std::vector<tg::Tensor> step(const std::vector<tg::Tensor>& args) {
    const auto [loss, grads] = loss_and_gradients();
    for (std::size_t k = 0; k < params.size(); ++k) {
      params[k].assign_sub(tg::multiply(grads[k], args[0]));
    }
    return {loss};
  }

  // Adam's update of every parameter; returns the loss.
  std::vector<tg::Tensor> adam_step(tg::Adam& adam) {
    const auto [loss, grads] = loss_and_gradients();
    std::vector<std::pair<tg::Tensor, tg::Variable>> grads_and_vars;
    for (std::size_t k = 0; k < params.size(); ++k) {
      grads_and_vars.emplace_back(grads[k], params[k]);
    }
    adam.apply_gradients(grads_and_vars);
    return {loss};
  }
};

const tg::Tensor& mlp_rate() {
  static const tg::Tensor rate = tg::scalar(0.01, tg::DType::Float32);
  return rate;
}

void BM_mlp_eager_sgd_step(benchmark::State& state) {
  Mlp mlp(5);
  for (auto _ : state) benchmark::DoNotOptimize(mlp.step({mlp_rate()})[0].id());
}
BENCHMARK(BM_mlp_eager_sgd_step)->Unit(benchmark::kMicrosecond);

void BM_mlp_function_sgd_step(benchmark::State& state) {
  Mlp mlp(5);
  const tg::Function step =
      tg::function([&mlp](const std::vector<tg::Tensor>& args) { return mlp.step(args); });
  step({mlp_rate()});
  for (auto _ : state) benchmark::DoNotOptimize(step({mlp_rate()})[0].id());
}
BENCHMARK(BM_mlp_function_sgd_step)->Unit(benchmark::kMicrosecond);

void BM_mlp_eager_adam_step(benchmark::State& state) {
  Mlp mlp(5);
  tg::Adam adam(1e-3);
  for (auto _ : state) benchmark::DoNotOptimize(mlp.adam_step(adam)[0].id());
}
BENCHMARK(BM_mlp_eager_adam_step)->Unit(benchmark::kMicrosecond);

void BM_mlp_function_adam_step(benchmark::State& state) {
  Mlp mlp(5);
  tg::Adam adam(1e-3);
  const tg::Function step =
      tg::function([&mlp, &adam](const std::vector<tg::Tensor>&) { return mlp.adam_step(adam); });
  step({});
  for (auto _ : state) benchmark::DoNotOptimize(step({})[0].id());
}
BENCHMARK(BM_mlp_function_adam_step)->Unit(benchmark::kMicrosecond);

// ---- lse --------------------------------------------------------------------------------
// GradBench's lse gradient at its largest workload (n = 1,280,000 float64): log(sum(exp(x - m)))
// + m with m = max(x), differentiated by a tape, eagerly and as one Function, against the same
// gradient written by hand (three passes: the max, the sum of exponentials, softmax).

constexpr std::size_t kLseSize = 1280000;

const tg::Tensor& lse_input() {
  static const tg::Tensor x = [] {
    tg::Generator generator(3);
    return tg::random_normal({kLseSize}, generator, 0.0, 1.0);
  }();
  return x;
}

std::vector<tg::Tensor> lse_value_and_gradient(const std::vector<tg::Tensor>& args) {
  tg::GradientTape tape;
  tape.watch(args[0]);
  const tg::Tensor m = tg::reduce_max(args[0]);
  const tg::Tensor y = tg::add(tg::log(tg::reduce_sum(tg::exp(tg::subtract(args[0], m)))), m);
  return {y, tape.gradient(y, args[0])};
}

void BM_lse_handwritten_value_and_gradient(benchmark::State& state) {
  const auto& x = lse_input().array<double>();
  std::vector<double> gradient(kLseSize);
  for (auto _ : state) {
    const double* in = x.data();
    const double m = *std::max_element(in, in + kLseSize);
    double sum = 0.0;
    for (std::size_t i = 0; i < kLseSize; ++i) sum += std::exp(in[i] - m);
    const double value = std::log(sum) + m;
    for (std::size_t i = 0; i < kLseSize; ++i) gradient[i] = std::exp(in[i] - value);
    benchmark::DoNotOptimize(gradient.data());
    benchmark::DoNotOptimize(value);
  }
}
BENCHMARK(BM_lse_handwritten_value_and_gradient)->Unit(benchmark::kMillisecond);

void BM_lse_eager_value_and_gradient(benchmark::State& state) {
  const std::vector<tg::Tensor> args = {lse_input()};
  for (auto _ : state) benchmark::DoNotOptimize(lse_value_and_gradient(args)[1].id());
}
BENCHMARK(BM_lse_eager_value_and_gradient)->Unit(benchmark::kMillisecond);

void BM_lse_function_value_and_gradient(benchmark::State& state) {
  const tg::Function f = tg::function(lse_value_and_gradient);
  const std::vector<tg::Tensor> args = {lse_input()};
  f(args);  // the trace
  for (auto _ : state) benchmark::DoNotOptimize(f(args)[1].id());
}
BENCHMARK(BM_lse_function_value_and_gradient)->Unit(benchmark::kMillisecond);

// ---- checks -----------------------------------------------------------------------------

bool identical(const tg::Tensor& a, const tg::Tensor& b) {
  const tg::Tensor difference = tg::reduce_max(tg::abs(tg::subtract(a, b)));
  return a.shape() == b.shape() && tg::cast(difference, tg::DType::Float64).item<double>() == 0.0;
}

// The replays equal the eager calls, and really are replays (traced once).
void check_or_exit() {
  const std::vector<tg::Tensor> args = {chain_inputs().x};
  const tg::Function f = tg::function(chain_value_and_gradient);
  f(args);
  const std::vector<tg::Tensor> replayed = f(args);
  const std::vector<tg::Tensor> eager = chain_value_and_gradient(args);
  Mlp traced(5), reference(5);
  const tg::Function step =
      tg::function([&traced](const std::vector<tg::Tensor>& a) { return traced.step(a); });
  bool same = identical(replayed[0], eager[0]) && identical(replayed[1], eager[1]);
  for (int k = 0; k < 3 && same; ++k) {
    same = identical(step({mlp_rate()})[0], reference.step({mlp_rate()})[0]);
  }
  for (std::size_t k = 0; k < traced.params.size() && same; ++k) {
    same = identical(traced.params[k].value(), reference.params[k].value());
  }
  Mlp traced_adam_mlp(6), reference_adam_mlp(6);
  tg::Adam traced_adam(1e-3), reference_adam(1e-3);
  int adam_traces = 0;  // fn runs: 1 when the later calls are replays
  const tg::Function adam_step = tg::function([&](const std::vector<tg::Tensor>&) {
    ++adam_traces;
    return traced_adam_mlp.adam_step(traced_adam);
  });
  for (int k = 0; k < 3 && same; ++k) {
    same = identical(adam_step({})[0], reference_adam_mlp.adam_step(reference_adam)[0]);
  }
  for (std::size_t k = 0; k < traced_adam_mlp.params.size() && same; ++k) {
    same = identical(traced_adam_mlp.params[k].value(), reference_adam_mlp.params[k].value());
  }
#ifdef TAPEGRAD_HAVE_ADOLC
  // ADOL-C computes the same chain: equal to rounding (its tanh is libm's too).
  tape_chain_with_adolc();
  double adolc_value = 0.0, adolc_gradient = 0.0;
  adolc_value_and_gradient(0.3, adolc_value, adolc_gradient);
  const double value = tg::cast(replayed[0], tg::DType::Float64).array<double>()(0);
  const double gradient = tg::cast(replayed[1], tg::DType::Float64).array<double>()(0);
  if (std::abs(adolc_value - value) > 1e-12 || std::abs(adolc_gradient - gradient) > 1e-12) {
    std::fprintf(stderr,
                 "bench_function: ADOL-C's chain gives %.17g, %.17g; tapegrad %.17g, %.17g\n",
                 adolc_value, adolc_gradient, value, gradient);
    std::exit(1);
  }
#endif
  if (!same || f.trace_count() != 1 || step.trace_count() != 1 || adam_traces != 1) {
    std::fprintf(stderr, "bench_function: a replay differs from the eager call\n");
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  check_or_exit();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
