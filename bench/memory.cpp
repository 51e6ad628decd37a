// Peak memory of a 100,002-op chain (33,334 x [multiply by a constant tensor, add a constant
// tensor, tanh]) on 1000-element float64 tensors, forward + backward, on a non-persistent and
// on a persistent tape. The least any tape can keep is the tanh outputs (each tanh's gradient
// needs its output; the multiplies need the same tensors): 8,000 bytes per tanh, 2,667 bytes
// per op. Peak RSS comes from the kernel (VmHWM, reset through /proc/self/clear_refs).
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <tapegrad/tapegrad.hpp>

#include "chain_workload.hpp"

namespace tg = tapegrad;

namespace {

constexpr int kSteps = 33334;
constexpr std::size_t kWidth = 1000;
constexpr double kOps = 3.0 * kSteps + 1;  // + the final reduce_sum
constexpr double kMinimumBytesPerOp = kSteps * kWidth * 8.0 / kOps;

struct Memory {
  double rss_mb;
  double peak_mb;
};

Memory read_memory() {
  std::ifstream status("/proc/self/status");
  std::string line;
  Memory m{0, 0};
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string key;
    double kb = 0;
    fields >> key >> kb;
    if (key == "VmRSS:") m.rss_mb = kb / 1024.0;
    if (key == "VmHWM:") m.peak_mb = kb / 1024.0;
  }
  return m;
}

void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

void run(bool persistent) {
  const tg::Tensor c = tg::fill({kWidth}, 0.5, tg::DType::Float64);
  const tg::Tensor b = tg::fill({kWidth}, 0.1, tg::DType::Float64);
  const tg::Tensor x = tg::fill({kWidth}, 0.3, tg::DType::Float64);
  malloc_trim(0);
  const Memory before = read_memory();
  reset_peak();
  Memory after_forward{}, after_backward{};
  std::size_t held = 0;
  double gradient = 0;
  {
    tg::GradientTape tape(persistent);
    tape.watch(x);
    tg::Tensor loss = tg::reduce_sum(chain_workload::run(x, c, b, kSteps));
    after_forward = read_memory();
    held = tape.bytes_held();
    auto paused = tape.stop_recording();  // a persistent tape would otherwise record the backward
    gradient = tape.gradient(loss, x).array<double>()(0);
    after_backward = read_memory();
  }
  const double peak_bytes = (after_backward.peak_mb - before.rss_mb) * 1024 * 1024;
  const double forward_bytes = (after_forward.rss_mb - before.rss_mb) * 1024 * 1024;
  std::printf(
      "%-14s  tape keeps %7.1f MB (%5.0f B/op)  | RSS after forward +%7.1f MB (%5.0f B/op) | "
      "peak over forward+backward +%7.1f MB (%5.0f B/op, %.3fx the minimum) | backward raised "
      "the peak by %5.1f MB | gradient[0] %.6g\n",
      persistent ? "persistent" : "non-persistent", held / 1e6, held / kOps,
      forward_bytes / 1e6, forward_bytes / kOps, peak_bytes / 1e6, peak_bytes / kOps,
      peak_bytes / kOps / kMinimumBytesPerOp,
      (after_backward.peak_mb - after_forward.peak_mb) * 1024 * 1024 / 1e6, gradient);
}

}  // namespace

int main() {
  std::printf("chain of %.0f ops on %zu-element float64 tensors; minimum %.0f bytes per op\n",
              kOps, kWidth, kMinimumBytesPerOp);
  run(/*persistent=*/false);
  run(/*persistent=*/true);
  return 0;
}
