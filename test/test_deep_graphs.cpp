// Deep and wide graphs: a 3x10^6-op chain walked back (also on a thread with a 256 KB stack,
// so any recursion per op would overflow), a tensor used 10^5 times, and a DAG of diamonds.
// Every gradient is compared with its closed form.
//
// Under AddressSanitizer (CI runs the suite with ASan+UBSan) every op costs ~10x more time and
// memory, so the sizes are scaled down there (kScale); the normal build runs the full sizes.
#include <pthread.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>

#include "support.hpp"

using namespace tapegrad;

namespace {

#ifdef TAPEGRAD_TEST_UNDER_ASAN
constexpr std::int64_t kScale = 10;
#else
constexpr std::int64_t kScale = 1;
#endif

// The chain: 10^6 / kScale blocks of three ops, y = -(y + b), then every 100th block also
// y = y * a. d y_N / d x = (-1)^blocks * a^multiplies, x = 0.5 with b = 0.25 keeps y bounded.
constexpr std::int64_t kBlocks = 1000000 / kScale;
constexpr double kA = 1.00005;

struct ChainResult {
  std::int64_t ops = 0;
  std::int64_t multiplies = 0;
  double gradient = 0;
  double second_gradient = 0;  // persistent tape: a second walk of the same tape
};

ChainResult run_chain(bool persistent) {
  const Tensor x = scalar(0.5, DType::Float64);
  const Tensor b = scalar(0.25, DType::Float64);
  const Tensor a = scalar(kA, DType::Float64);
  ChainResult r;
  GradientTape tape(persistent);
  tape.watch(x);
  Tensor y = x;
  for (std::int64_t i = 0; i < kBlocks; ++i) {
    y = negative(add(y, b));
    r.ops += 2;
    if (i % 100 == 0) {
      y = multiply(y, a);
      ++r.ops;
      ++r.multiplies;
    }
  }
  // A persistent tape would otherwise record its own backward pass.
  std::optional<GradientTape::RecordingGuard> paused;
  if (persistent) paused.emplace(tape.stop_recording());
  r.gradient = tape.gradient(y, x).item<double>();
  if (persistent) r.second_gradient = tape.gradient(y, x).item<double>();
  return r;
}

double expected_chain_gradient(std::int64_t multiplies) {
  return (kBlocks % 2 == 0 ? 1.0 : -1.0) * std::pow(kA, static_cast<double>(multiplies));
}

// Runs `body` on a new thread whose stack is `stack_bytes` (std::thread cannot set it);
// rethrows what it threw.
void run_with_stack(std::size_t stack_bytes, const std::function<void()>& body) {
  struct Job {
    const std::function<void()>* body;
    std::exception_ptr error;
  } job{&body, nullptr};
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, stack_bytes) == 0);
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attr,
      [](void* arg) -> void* {
        auto* j = static_cast<Job*>(arg);
        try {
          (*j->body)();
        } catch (...) {
          j->error = std::current_exception();
        }
        return nullptr;
      },
      &job);
  pthread_attr_destroy(&attr);
  REQUIRE(created == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace

TEST_CASE("a 3x10^6-op chain walks back on a non-persistent tape", "[deep]") {
  const ChainResult r = run_chain(/*persistent=*/false);
  CHECK(r.ops == 2 * kBlocks + (kBlocks + 99) / 100);
  CHECK(r.gradient == Approx(expected_chain_gradient(r.multiplies)).epsilon(1e-9));
}

TEST_CASE("a 3x10^6-op chain walks back on a persistent tape, twice", "[deep]") {
  const ChainResult r = run_chain(/*persistent=*/true);
  CHECK(r.gradient == Approx(expected_chain_gradient(r.multiplies)).epsilon(1e-9));
  CHECK(r.second_gradient == r.gradient);
}

TEST_CASE("the 3x10^6-op chain records and walks back on a thread with a 256 KB stack", "[deep]") {
  ChainResult r;
  run_with_stack(256 * 1024, [&] { r = run_chain(/*persistent=*/false); });
  CHECK(r.gradient == Approx(expected_chain_gradient(r.multiplies)).epsilon(1e-9));
}

TEST_CASE("a tensor used 10^5 times gets the sum of its 10^5 gradients", "[deep]") {
  constexpr std::int64_t kUses = 100000 / kScale;
  const Tensor x = from_values({1.0, -2.0, 3.0}, {3}, DType::Float64);
  GradientTape tape;
  tape.watch(x);
  // acc = sum_k (x + x * c_k), c_k = k / 64 (exact in binary), so d sum(acc) / dx_i =
  // kUses + sum_k c_k; x is read 2 * kUses times.
  Tensor acc = zeros({3}, DType::Float64);
  double sum_c = 0;
  for (std::int64_t k = 0; k < kUses; ++k) {
    const double c = static_cast<double>(k % 128) / 64.0;
    sum_c += c;
    acc = acc + (x + x * c);
  }
  const Tensor g = tape.gradient(reduce_sum(acc), x);
  const double expected = static_cast<double>(kUses) + sum_c;
  testing::require_close(g, {3}, {expected, expected, expected}, 0.0);
}

TEST_CASE("a DAG of 1000 diamonds gives a gradient of 2^1000", "[deep]") {
  // Each level forks y into y * 0.5 and y * 1.5 and joins them: y doubles, and so does the
  // gradient. Powers of two stay exact up to 2^1023.
  constexpr int kDepth = 1000;
  for (const bool persistent : {false, true}) {
    INFO("persistent " << persistent);
    const Tensor x = from_values({1.0, 0.5}, {2}, DType::Float64);
    GradientTape tape(persistent);
    tape.watch(x);
    Tensor y = x;
    for (int level = 0; level < kDepth; ++level) y = y * 0.5 + y * 1.5;
    testing::require_close(y, {2}, {std::ldexp(1.0, kDepth), std::ldexp(1.0, kDepth - 1)}, 0.0);
    const Tensor loss = reduce_sum(y);
    std::optional<GradientTape::RecordingGuard> paused;  // else the walk is recorded too
    if (persistent) paused.emplace(tape.stop_recording());
    const Tensor g = tape.gradient(loss, x);
    testing::require_close(g, {2}, {std::ldexp(1.0, kDepth), std::ldexp(1.0, kDepth)}, 0.0);
  }
}

TEST_CASE("a wide DAG: 64 branches per level, 200 levels, every branch rejoined", "[deep]") {
  // y_{l+1} = sum of 64 branches y_l / 32: y and its gradient double per level, exactly.
  constexpr int kBranches = 64;
  constexpr int kLevels = 200;
  const Tensor x = scalar(1.0, DType::Float64);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x;
  for (int level = 0; level < kLevels; ++level) {
    Tensor next = y * (1.0 / 32.0);
    for (int j = 1; j < kBranches; ++j) next = next + y * (1.0 / 32.0);
    y = next;
  }
  CHECK(y.item<double>() == std::ldexp(1.0, kLevels));
  CHECK(tape.gradient(y, x).item<double>() == std::ldexp(1.0, kLevels));
}
