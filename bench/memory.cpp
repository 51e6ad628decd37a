// Memory of a tape, counted exactly: this program replaces malloc and friends with glibc's
// own allocator plus a count of the bytes in use (malloc_usable_size of every live block)
// and of their peak, so forward and backward peaks are measured in bytes, not pages.
//
// 1. A 100,003-op chain (33,334 x [multiply by a constant tensor, add a constant tensor,
//    tanh], then reduce_sum) on 1000-element float64 tensors, on a non-persistent and on a
//    persistent tape. The least any tape can keep is the tanh outputs (each tanh's gradient
//    needs its output; the multiplies need the same tensors): 8,000 bytes per tanh, 2,667
//    bytes per op. Also the kernel's view (VmRSS / VmHWM, reset through clear_refs).
// 2. The bookkeeping per recorded tiny op: a 1,000,000-op chain of the same ops on 1-element
//    tensors (the heap in use after the forward, per op).
// 3. An MLP step (784-256-256-10 tanh, batch 64, float64): forward peak vs backward peak.
// Every run also prints bytes_held(), the tape's own count, next to the measured bytes.
// Blocks of 2 MiB and more are mappings of the library's own (src/kernels/buffer_cache.cpp),
// which this count does not see: no tensor of these programs is that large (the MLP's biggest,
// its 784x256 kernel, is 1.6 MB), and no trace or hash map of theirs reaches it.
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "chain_workload.hpp"

// ---- the counting allocator --------------------------------------------------------------

extern "C" {
void* __libc_malloc(std::size_t);
void __libc_free(void*);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {

std::atomic<long long> g_in_use{0};
std::atomic<long long> g_peak{0};

void counted_alloc(void* p) {
  if (p == nullptr) return;
  const long long now = g_in_use += static_cast<long long>(malloc_usable_size(p));
  long long peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

void counted_free(void* p) {
  if (p != nullptr) g_in_use -= static_cast<long long>(malloc_usable_size(p));
}

}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  void* p = __libc_malloc(n);
  counted_alloc(p);
  return p;
}
void free(void* p) {
  counted_free(p);
  __libc_free(p);
}
void* calloc(std::size_t n, std::size_t size) {
  void* p = __libc_calloc(n, size);
  counted_alloc(p);
  return p;
}
void* realloc(void* old, std::size_t n) {
  counted_free(old);
  void* p = __libc_realloc(old, n);
  counted_alloc(p != nullptr || n == 0 ? p : old);  // a failed realloc keeps the old block
  return p;
}
void* memalign(std::size_t alignment, std::size_t n) {
  void* p = __libc_memalign(alignment, n);
  counted_alloc(p);
  return p;
}
void* aligned_alloc(std::size_t alignment, std::size_t n) { return memalign(alignment, n); }
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  void* p = memalign(alignment, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace tg = tapegrad;

namespace {

long long in_use() { return g_in_use.load(); }
// Starts a new peak measurement from the bytes in use now.
void reset_counted_peak() { g_peak.store(g_in_use.load()); }
long long counted_peak() { return g_peak.load(); }

struct Rss {
  double rss_mb;
  double peak_mb;
};

Rss read_rss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  Rss m{0, 0};
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

void reset_rss_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// One forward + backward; `forward` records on the tape and returns the loss, `backward`
// computes the gradients from it. Bytes are relative to what was in use before the tape.
struct Measured {
  long long forward_peak = 0;   // the peak while recording
  long long after_forward = 0;  // in use when the forward is done
  long long backward_peak = 0;  // the peak during gradient()
  std::size_t bytes_held = 0;   // the tape's own count after the forward
  double rss_after_forward_mb = 0;
  double rss_peak_mb = 0;
};

template <class Forward, class Backward>
Measured measure(bool persistent, Forward forward, Backward backward) {
  tg::release_cached_memory();  // what the last workload left cached is not this one's
  malloc_trim(0);
  Measured m;
  const Rss rss_before = read_rss();
  reset_rss_peak();
  const long long base = in_use();
  reset_counted_peak();
  {
    tg::GradientTape tape(persistent);
    tg::Tensor loss = forward(tape);
    m.forward_peak = counted_peak() - base;
    m.after_forward = in_use() - base;
    m.bytes_held = tape.bytes_held();
    m.rss_after_forward_mb = read_rss().rss_mb - rss_before.rss_mb;
    auto paused = tape.stop_recording();  // a persistent tape would otherwise record the backward
    reset_counted_peak();
    backward(tape, loss);
    m.backward_peak = counted_peak() - base;
    m.rss_peak_mb = read_rss().peak_mb - rss_before.rss_mb;
  }
  return m;
}

void big_chain(bool persistent) {
  constexpr int kSteps = 33334;
  constexpr std::size_t kWidth = 1000;
  constexpr double kOps = 3.0 * kSteps + 1;  // + the final reduce_sum
  constexpr double kMinimumBytesPerOp = kSteps * kWidth * 8.0 / kOps;
  const tg::Tensor c = tg::fill({kWidth}, 0.5, tg::DType::Float64);
  const tg::Tensor b = tg::fill({kWidth}, 0.1, tg::DType::Float64);
  const tg::Tensor x = tg::fill({kWidth}, 0.3, tg::DType::Float64);
  double gradient = 0;
  const Measured m = measure(
      persistent,
      [&](tg::GradientTape& tape) {
        tape.watch(x);
        return tg::reduce_sum(chain_workload::run(x, c, b, kSteps));
      },
      [&](tg::GradientTape& tape, const tg::Tensor& loss) {
        gradient = tape.gradient(loss, x).array<double>()(0);
      });
  const double peak = static_cast<double>(std::max(m.forward_peak, m.backward_peak));
  std::printf(
      "chain, 1000 elements, %-14s | heap after forward %6.1f MB (%5.0f B/op, %.3fx min) | "
      "bytes_held %6.1f MB (%5.0f B/op) | forward peak %6.1f MB | backward peak %6.1f MB "
      "(%+5.2f %%) | overall peak %5.0f B/op = %.3fx the minimum | RSS after forward +%6.1f MB "
      "(%5.0f B/op), peak +%6.1f MB (%5.0f B/op, %.3fx) | gradient[0] %.6g\n",
      persistent ? "persistent" : "non-persistent", m.after_forward / 1e6, m.after_forward / kOps,
      m.after_forward / kOps / kMinimumBytesPerOp, m.bytes_held / 1e6, m.bytes_held / kOps,
      m.forward_peak / 1e6, m.backward_peak / 1e6,
      100.0 * (static_cast<double>(m.backward_peak) / static_cast<double>(m.forward_peak) - 1.0),
      peak / kOps, peak / kOps / kMinimumBytesPerOp, m.rss_after_forward_mb * 1.048576,
      m.rss_after_forward_mb * 1048576 / kOps, m.rss_peak_mb * 1.048576,
      m.rss_peak_mb * 1048576 / kOps, m.rss_peak_mb * 1048576 / kOps / kMinimumBytesPerOp,
      gradient);
}

void tiny_chain(bool persistent) {
  constexpr int kSteps = 333334;
  constexpr double kOps = 3.0 * kSteps;
  chain_workload::Inputs in;
  double gradient = 0;
  const Measured m = measure(
      persistent,
      [&](tg::GradientTape& tape) {
        tape.watch(in.x);
        return chain_workload::run(in.x, in.c, in.b, kSteps);
      },
      [&](tg::GradientTape& tape, const tg::Tensor& loss) {
        gradient = tape.gradient(loss, in.x).item<double>();
      });
  std::printf(
      "chain, 1 element,     %-14s | heap after forward %6.1f MB (%5.0f B/op) | bytes_held %6.1f "
      "MB (%5.0f B/op) | forward peak %6.1f MB | backward peak %6.1f MB (%+5.2f %%) | gradient "
      "%.6g\n",
      persistent ? "persistent" : "non-persistent", m.after_forward / 1e6, m.after_forward / kOps,
      m.bytes_held / 1e6, m.bytes_held / kOps, m.forward_peak / 1e6, m.backward_peak / 1e6,
      100.0 * (static_cast<double>(m.backward_peak) / static_cast<double>(m.forward_peak) - 1.0),
      gradient);
}

tg::Tensor uniform(const tg::Shape& shape, unsigned seed, double scale) {
  std::vector<double> v(tg::num_elements(shape));
  unsigned state = seed;
  for (auto& x : v) {
    state = state * 1664525u + 1013904223u;
    x = scale * (static_cast<double>(state >> 8) / static_cast<double>(1u << 24) - 0.5);
  }
  return tg::from_values(v, shape, tg::DType::Float64);
}

void mlp(bool persistent) {
  const tg::Tensor x = uniform({64, 784}, 1, 1.0);
  std::vector<double> label_values(64 * 10, 0.0);
  for (std::size_t i = 0; i < 64; ++i) label_values[i * 10 + i % 10] = 1.0;
  const tg::Tensor labels = tg::from_values(label_values, {64, 10}, tg::DType::Float64);
  std::vector<tg::Variable> vars{
      tg::Variable(uniform({784, 256}, 2, 0.1)), tg::Variable(tg::zeros({256})),
      tg::Variable(uniform({256, 256}, 3, 0.1)), tg::Variable(tg::zeros({256})),
      tg::Variable(uniform({256, 10}, 4, 0.1)),  tg::Variable(tg::zeros({10}))};
  double first = 0;
  const Measured m = measure(
      persistent,
      [&](tg::GradientTape&) {
        tg::Tensor h = x;
        for (std::size_t i = 0; i + 2 < vars.size(); i += 2) {
          h = tg::tanh(tg::matmul(h, vars[i].value()) + vars[i + 1].value());
        }
        const tg::Tensor logits = tg::matmul(h, vars[4].value()) + vars[5].value();
        return tg::reduce_mean(tg::softmax_cross_entropy_with_logits(labels, logits));
      },
      [&](tg::GradientTape& tape, const tg::Tensor& loss) {
        const std::vector<tg::Tensor> grads = tape.gradient(loss, vars);
        first = grads[0].array<double>()(0, 0);
      });
  std::size_t weight_bytes = 0;
  for (const auto& v : vars) weight_bytes += v.value().size() * 8;
  std::printf(
      "MLP 784-256-256-10, batch 64, %-14s | heap after forward %6.2f MB | bytes_held %6.2f MB | "
      "forward peak %6.2f MB | backward peak %6.2f MB (%+5.1f %%; the gradients returned: %.2f MB) "
      "| dW1[0,0] %.6g\n",
      persistent ? "persistent" : "non-persistent", m.after_forward / 1e6, m.bytes_held / 1e6,
      m.forward_peak / 1e6, m.backward_peak / 1e6,
      100.0 * (static_cast<double>(m.backward_peak) / static_cast<double>(m.forward_peak) - 1.0),
      weight_bytes / 1e6, first);
}

// One 1000-element tensor read by 10,000 ops: its gradient gets 10,000 contributions of 8,000
// bytes. Summed as they arrive (issue 14), the backward holds one running sum, not the list.
void fan_in(bool persistent) {
  constexpr std::size_t kUses = 10000;
  constexpr std::size_t kWidth = 1000;
  const tg::Tensor x = tg::fill({kWidth}, 0.3, tg::DType::Float64);
  const tg::Tensor c = tg::fill({kWidth}, 0.5, tg::DType::Float64);
  double gradient = 0;
  const Measured m = measure(
      persistent,
      [&](tg::GradientTape& tape) {
        tape.watch(x);
        tg::Tensor total = tg::scalar(0.0, tg::DType::Float64);
        for (std::size_t i = 0; i < kUses; ++i) total = total + tg::reduce_sum(x * c);
        return total;
      },
      [&](tg::GradientTape& tape, const tg::Tensor& loss) {
        gradient = tape.gradient(loss, x).array<double>()(0);
      });
  std::printf(
      "fan-in, 1 tensor x 10,000 uses, %-14s | heap after forward %6.2f MB | forward peak %6.2f MB "
      "| backward peak %6.2f MB (%+6.1f %%; one contribution is %.3f MB) | gradient[0] %.6g\n",
      persistent ? "persistent" : "non-persistent", m.after_forward / 1e6, m.forward_peak / 1e6,
      m.backward_peak / 1e6,
      100.0 * (static_cast<double>(m.backward_peak) / static_cast<double>(m.forward_peak) - 1.0),
      kWidth * 8 / 1e6, gradient);
}

}  // namespace

int main() {
  for (bool persistent : {false, true}) big_chain(persistent);
  for (bool persistent : {false, true}) tiny_chain(persistent);
  for (bool persistent : {false, true}) mlp(persistent);
  for (bool persistent : {false, true}) fan_in(persistent);
  return 0;
}
