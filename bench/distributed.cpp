// Data-parallel step time over MPI: one training step (forward, backward, gradient
// allreduce, SGD update) of a 784-256-256-10 tanh MLP with softmax cross-entropy over a
// global batch of 64 (each rank takes its shard), timed three ways in one run:
//   local       no communication at all (the single-process step on this rank's shard)
//   overlap     BucketedAllreduce with its hooks: buckets start during the backward pass
//   no-overlap  BucketedAllreduce(overlap = false): every bucket starts after the backward
// Prints, on rank 0, the median step time of each, the median share of the step spent in
// finish() waiting for the collectives, and how long before the end of the backward pass the
// first bucket started (the window its allreduce had to overlap). The modes alternate in
// rounds so that the machine's noise spreads over all of them. Not a Google Benchmark program: it
// runs under mpirun, one process per rank.
//
//   OPENBLAS_NUM_THREADS=1 mpirun -np 2 ./bench_distributed [--steps N] [--rounds N]
//       [--bucket-kb N] [--dtype float32|float64]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;
namespace td = tapegrad::distributed;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kBatch = 64;
constexpr std::size_t kInputs = 784;
constexpr std::size_t kHidden = 256;
constexpr std::size_t kClasses = 10;

struct Settings {
  int steps = 20;  // per mode and round
  int rounds = 10;
  std::size_t bucket_kb = 1024;
  tg::DType dtype = tg::DType::Float32;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--steps")
      s.steps = std::stoi(value);
    else if (flag == "--rounds")
      s.rounds = std::stoi(value);
    else if (flag == "--bucket-kb")
      s.bucket_kb = std::stoul(value);
    else if (flag == "--dtype")
      s.dtype = value == "float64" ? tg::DType::Float64 : tg::DType::Float32;
    else
      throw std::invalid_argument("unknown option " + flag);
  }
  return s;
}

tg::Tensor uniform(const tg::Shape& shape, double limit, std::mt19937& g, tg::DType dtype) {
  std::uniform_real_distribution<double> u(-limit, limit);
  std::vector<double> v(tg::num_elements(shape));
  for (double& x : v) x = u(g);
  return tg::from_values(v, shape, dtype);
}

struct Model {
  std::vector<tg::Variable> vars;  // w1 b1 w2 b2 w3 b3
  Model(std::mt19937& g, tg::DType dtype) {
    const std::size_t widths[] = {kInputs, kHidden, kHidden, kClasses};
    for (int l = 0; l < 3; ++l) {
      vars.emplace_back(uniform({widths[l], widths[l + 1]}, 0.05, g, dtype));
      vars.emplace_back(tg::zeros({widths[l + 1]}, dtype));
    }
  }
  tg::Tensor loss(const tg::Tensor& x, const tg::Tensor& y) const {
    tg::Tensor h = tg::tanh(tg::matmul(x, vars[0]) + vars[1]);
    h = tg::tanh(tg::matmul(h, vars[2]) + vars[3]);
    const tg::Tensor logits = tg::matmul(h, vars[4]) + vars[5];
    return tg::reduce_sum(tg::softmax_cross_entropy_with_logits(y, logits)) /
           static_cast<double>(kBatch);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  const td::Communicator comm = td::Communicator::world();
  const auto rank = static_cast<std::size_t>(comm.rank());
  const auto ranks = static_cast<std::size_t>(comm.size());

  std::mt19937 g(1234);
  Model model(g, s.dtype);
  // This rank's shard of the global batch.
  const std::size_t first = rank * kBatch / ranks;
  const std::size_t rows = (rank + 1) * kBatch / ranks - first;
  std::mt19937 data_g(77 + static_cast<unsigned>(rank));
  const tg::Tensor x = uniform({rows, kInputs}, 1.0, data_g, s.dtype);
  std::vector<double> onehot(rows * kClasses, 0.0);
  for (std::size_t i = 0; i < rows; ++i) onehot[i * kClasses + (first + i) % kClasses] = 1.0;
  const tg::Tensor y = tg::from_values(onehot, {rows, kClasses}, s.dtype);
  tg::SGD sgd(0.01);

  enum Mode { kLocal, kOverlap, kNoOverlap, kModes };
  const char* names[kModes] = {"local (no communication)", "overlap", "no overlap"};
  std::vector<std::unique_ptr<td::BucketedAllreduce>> reducers(kModes);
  for (int m : {kOverlap, kNoOverlap}) {
    td::BucketOptions o;
    o.bucket_bytes = s.bucket_kb * 1024;
    o.reduction = td::Reduction::Sum;
    o.overlap = m == kOverlap;
    reducers[static_cast<std::size_t>(m)] =
        std::make_unique<td::BucketedAllreduce>(comm, model.vars, o);
  }
  std::vector<std::vector<double>> step_ms(kModes), wait_share(kModes), wait_ms(kModes);
  std::vector<double> window_ms;

  const auto run_step = [&](int mode) {
    td::BucketedAllreduce* reducer = reducers[static_cast<std::size_t>(mode)].get();
    const auto start = Clock::now();
    std::vector<tg::Tensor> grads;
    {
      tg::GradientTape tape;
      if (reducer != nullptr) reducer->attach(tape);
      const tg::Tensor loss = model.loss(x, y);
      grads = tape.gradient(loss, model.vars);
      if (reducer != nullptr) grads = reducer->finish(grads);
    }
    std::vector<std::pair<tg::Tensor, tg::Variable>> pairs;
    for (std::size_t i = 0; i < grads.size(); ++i) pairs.emplace_back(grads[i], model.vars[i]);
    sgd.apply_gradients(pairs);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (mode == kOverlap) {
      // How long before finish() the first bucket started: the time its allreduce had to run
      // alongside the rest of the backward pass.
      double started = -1;
      double finished = -1;
      for (const auto& e : reducer->last_step_events()) {
        if (e.kind == td::BucketEvent::Kind::BucketStarted && started < 0) started = e.seconds;
        if (e.kind == td::BucketEvent::Kind::FinishCalled) finished = e.seconds;
      }
      if (started >= 0 && finished >= started) window_ms.push_back(1e3 * (finished - started));
    }
    return std::make_pair(ms, reducer != nullptr ? 1e3 * reducer->last_wait_seconds() : 0.0);
  };

  for (int m = 0; m < kModes; ++m) {
    for (int i = 0; i < 5; ++i) run_step(m);  // warm-up
  }
  for (int round = 0; round < s.rounds; ++round) {
    for (int m = 0; m < kModes; ++m) {
      comm.barrier();  // every rank starts a mode's block together
      for (int i = 0; i < s.steps; ++i) {
        const auto [ms, wait] = run_step(m);
        step_ms[static_cast<std::size_t>(m)].push_back(ms);
        wait_ms[static_cast<std::size_t>(m)].push_back(wait);
        wait_share[static_cast<std::size_t>(m)].push_back(wait / ms);
      }
    }
  }
  // The collective alone: the gradients' allreduce back to back, no computation between,
  // so no rank waits for another's backward pass.
  std::vector<double> alone_ms;
  {
    std::vector<tg::GradientValue> grads;
    for (const auto& v : model.vars) grads.emplace_back(tg::zeros(v.shape(), v.dtype()));
    comm.barrier();
    for (int i = 0; i < s.rounds * s.steps; ++i) {
      const auto start = Clock::now();
      comm.allreduce(grads, td::Reduction::Sum);
      alone_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
  }
  // The slowest rank sets the pace: report the maximum over ranks of each median.
  std::vector<double> medians;
  for (int m = 0; m < kModes; ++m) {
    medians.push_back(median(step_ms[static_cast<std::size_t>(m)]));
    medians.push_back(median(wait_ms[static_cast<std::size_t>(m)]));
    medians.push_back(median(wait_share[static_cast<std::size_t>(m)]));
  }
  medians.push_back(median(window_ms));
  medians.push_back(median(alone_ms));
  const auto n = medians.size();
  std::vector<double> worst(n);
  MPI_Allreduce(medians.data(), worst.data(), static_cast<int>(n), MPI_DOUBLE, MPI_MAX,
                comm.native());
  if (rank == 0) {
    std::printf(
        "bench_distributed: %zu rank(s), global batch %zu (%zu rows on rank 0), %s, "
        "buckets of %zu KiB (%zu bucket(s)), %d rounds x %d steps per mode\n",
        ranks, kBatch, rows, s.dtype == tg::DType::Float32 ? "float32" : "float64", s.bucket_kb,
        reducers[kOverlap]->num_buckets(), s.rounds, s.steps);
    std::printf("%-26s %14s %16s %14s\n", "mode", "step ms (med)", "wait ms (med)", "wait share");
    for (int m = 0; m < kModes; ++m) {
      std::printf("%-26s %14.3f %16.3f %13.1f%%\n", names[m],
                  worst[3 * static_cast<std::size_t>(m)],
                  worst[3 * static_cast<std::size_t>(m) + 1],
                  100.0 * worst[3 * static_cast<std::size_t>(m) + 2]);
    }
    std::printf("overlap: the first bucket started %.3f ms before the backward pass ended\n",
                worst[worst.size() - 2]);
    std::printf(
        "the gradients' allreduce alone (Communicator::allreduce, no computation "
        "between calls): %.3f ms\n",
        worst.back());
  }
  return 0;
}
