// Memory over time: identical training steps must not grow the heap or the resident set,
// and everything a tape allocates goes back to the allocator when the tape dies.
//
// The heap is measured exactly: glibc's mallinfo2() (bytes in use, small and mmapped), or
// under AddressSanitizer (CI runs the suite with ASan+UBSan) the sanitizer's own count, since
// ASan replaces malloc. The resident set (/proc/self/statm) is only compared without ASan,
// whose quarantine holds freed memory by design; sizes are also scaled down under ASan.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/buffer_cache.hpp"
#include "kernels/impl_blocks.hpp"
#include "support.hpp"

#ifdef TAPEGRAD_TEST_UNDER_ASAN
// From the sanitizer runtime (sanitizer/allocator_interface.h, not installed with every
// compiler): the bytes its allocator has handed out and not taken back.
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

using namespace tapegrad;

namespace {

#ifdef TAPEGRAD_TEST_UNDER_ASAN
constexpr int kScale = 10;
#else
constexpr int kScale = 1;
#endif

// What the allocator and the buffer cache's own mappings have handed out, less the buffers
// tapegrad's cache holds for reuse (they are free from the program's point of view:
// docs/guide.md, "Memory").
std::size_t heap_in_use() {
  // What the caches hold is not in use: element buffers, freed tensor handles, and freed
  // bookkeeping blocks.
  const std::size_t cached =
      memory_stats().bytes_cached + detail::impl_blocks_cached() + detail::bookkeeping_bytes_kept();
  const std::size_t mapped = detail::buffer_bytes_mapped();
#ifdef TAPEGRAD_TEST_UNDER_ASAN
  return __sanitizer_get_current_allocated_bytes() + mapped - cached;
#else
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd + mapped - cached;
#endif
}

// The resident set's high-water mark (VmHWM) in bytes.
std::size_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoul(line.substr(6)) * 1024;
  }
  return 0;
}

// Resident set size in bytes.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages_total = 0;
  std::size_t pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// A 64-256-10 tanh MLP trained by SGD on a fixed batch: every step records the same ops on a
// fresh tape, so every step allocates and frees the same sizes.
struct TrainingLoop {
  Tensor x = testing::random_tensor({64, 64}, 1);
  Tensor labels = testing::random_tensor({x.shape()[0], 10}, 2);
  std::vector<Variable> variables{
      Variable(testing::random_tensor({64, 256}, 3, -0.1, 0.1)), Variable(zeros({256})),
      Variable(testing::random_tensor({256, 10}, 4, -0.1, 0.1)), Variable(zeros({10}))};
  SGD optimizer{0.1};

  double step() {
    GradientTape tape;
    const Tensor h = tanh(matmul(x, variables[0].value()) + variables[1].value());
    const Tensor out = matmul(h, variables[2].value()) + variables[3].value();
    const Tensor loss = reduce_mean(square(out - labels));
    const std::vector<Tensor> grads = tape.gradient(loss, variables);
    std::vector<std::pair<Tensor, Variable>> updates;
    for (std::size_t i = 0; i < grads.size(); ++i) updates.emplace_back(grads[i], variables[i]);
    optimizer.apply_gradients(updates);
    return loss.item<double>();
  }
};

}  // namespace

TEST_CASE("50 identical training steps: heap and resident set flat after step 2", "[memory]") {
  TrainingLoop loop;
  std::vector<double> losses;
  std::vector<std::size_t> heap;
  std::vector<std::size_t> resident;
  std::vector<std::size_t> peak;
  for (int step = 1; step <= 50; ++step) {
    losses.push_back(loop.step());
    heap.push_back(heap_in_use());
    resident.push_back(resident_bytes());
    peak.push_back(peak_resident_bytes());
  }
  // The loop trains: the loss falls.
  CHECK(losses.back() < 0.9 * losses.front());
  // Steps are identical, so what is allocated after a step is identical too (the optimizer's
  // state and the arena cache exist from step 1 on). The slack is glibc's per-thread cache of
  // small freed blocks (tcache), which mallinfo2 counts as in use and which fills up in a few
  // steps (measured: +4.5 KB over the 48 steps, in plateaus). A leak of one small tensor per
  // step (its storage block alone is over 300 bytes) would add more than 14 KB.
  INFO("heap in use after step 2: " << heap[1] << ", after step 50: " << heap[49]);
  CHECK(heap[49] <= heap[1] + 8192);
#ifndef TAPEGRAD_TEST_UNDER_ASAN
  INFO("RSS after step 2: " << resident[1] << ", after step 50: " << resident[49]);
  CHECK(resident[49] <= resident[1] + 256 * 1024);
  INFO("peak RSS after step 2: " << peak[1] << ", after step 50: " << peak[49]);
  CHECK(peak[49] <= peak[1] + 256 * 1024);
#endif
}

TEST_CASE("memory returns to the allocator when the tape dies", "[memory]") {
  const Tensor x = testing::random_tensor({1000}, 5);
  const Tensor c = testing::random_tensor({1000}, 6);
  constexpr int kSteps = 3000 / kScale;
  // No Catch assertion runs between the two measurements: its bookkeeping allocates too.
  // Returns the gradient's first element (0 without one) and the heap in use at the forward's end.
  auto run = [&](bool persistent, bool call_gradient, std::size_t* during) {
    GradientTape tape(persistent);
    tape.watch(x);
    Tensor y = x;
    for (int i = 0; i < kSteps; ++i) y = tanh(y * c + c);
    const Tensor loss = reduce_sum(y);
    *during = heap_in_use();
    if (!call_gradient) return 0.0;
    std::optional<GradientTape::RecordingGuard> paused;  // else the walk is recorded too
    if (persistent) paused.emplace(tape.stop_recording());
    return tape.gradient(loss, x).array<double>()(0);
  };
  for (const bool persistent : {false, true}) {
    for (const bool call_gradient : {false, true}) {
      INFO("persistent " << persistent << ", gradient " << call_gradient);
      std::size_t during = 0;
      // Two rounds first: they fill this thread's arena chunk cache and glibc's tcache.
      const double first = run(persistent, call_gradient, &during);
      run(persistent, call_gradient, &during);
      const std::size_t before = heap_in_use();
      const double again = run(persistent, call_gradient, &during);
      const std::size_t after = heap_in_use();
      CHECK(again == first);
      // The tape held thousands of 8 KB tensors, and none of it stays.
      CHECK(during > before + kSteps * 8000);
      INFO("heap in use before: " << before << ", after: " << after);
      // Slack: mallinfo2 counts the small blocks glibc's per-thread cache (tcache) holds as in
      // use, and that cache may still grow by a few of them. A leak of anything per op would
      // be thousands of times larger; one leaked 8 KB tensor is already over.
      CHECK(after <= before + 4096);
    }
  }
}

TEST_CASE("bytes_held() is what the tape adds to the heap, within 5 %", "[memory]") {
  const Tensor x = testing::random_tensor({1000}, 7);
  const Tensor c = testing::random_tensor({1000}, 8);
  for (const bool persistent : {false, true}) {
    INFO("persistent " << persistent);
    const std::size_t before = heap_in_use();
    GradientTape tape(persistent);
    tape.watch(x);
    Tensor y = x;
    for (int i = 0; i < 3000 / kScale; ++i) y = tanh(y * c + c);
    const std::size_t grown = heap_in_use() - before;
    const std::size_t held = tape.bytes_held();
    INFO("heap grew by " << grown << ", bytes_held " << held);
    // Each tanh output is kept: 8000 bytes of elements and a storage block.
    CHECK(held > static_cast<std::size_t>(3000 / kScale) * 8000);
    CHECK(static_cast<double>(held) == Approx(static_cast<double>(grown)).epsilon(0.05));
  }
}

TEST_CASE("a tape's id map starts at the size the thread's last tape of its depth reached",
          "[memory]") {
  // A program records the same ops step after step: the map of ids to ops (12 bytes a cell,
  // at most 7/8 full, a power of two of at least 16 cells, allocated at the first id) starts
  // where the last tape of the same nesting depth ended instead of doubling its way there. At
  // most 16,384 ids are expected, so one huge tape costs the next one at most 32,768 cells.
  constexpr std::size_t kCell = 12;
  std::size_t fresh_watch = 0, fresh_op = 0, outer_after_2000 = 0, inner_after_2000 = 0,
              after_gradient = 0, after_huge = 0;
  std::thread([&] {  // a thread of its own: no earlier tape of this process counts
    const Tensor x = constant({1.0, 2.0});
    const auto one_op_tape = [&] {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = x * 2.0;
      return tape.bytes_held();
    };
    const auto long_tape = [&](int ops, bool gradient) {
      GradientTape tape;
      tape.watch(x);
      Tensor y = x;
      for (int i = 0; i < ops; ++i) y = y * 1.0;
      if (gradient) (void)tape.gradient(reduce_sum(y), x);  // the map is freed when planned
    };
    {
      GradientTape tape;
      tape.watch(x);
      fresh_watch = tape.bytes_held();
    }
    fresh_op = one_op_tape();
    long_tape(2000, false);  // x and 2,000 outputs: 2,001 ids, 4,096 cells
    {
      GradientTape outer;
      outer.watch(x);
      outer_after_2000 = outer.bytes_held();
      inner_after_2000 = one_op_tape();  // depth 1: nothing expected there yet
    }
    long_tape(300, true);  // x, 300 outputs and their sum: 302 ids, 512 cells
    after_gradient = one_op_tape();
    long_tape(40000 / kScale, false);  // 40,001 ids: 65,536 cells, but 16,384 expected
    after_huge = one_op_tape();
  })
      .join();
  CHECK(outer_after_2000 == fresh_watch + (4096 - 16) * kCell);
  CHECK(inner_after_2000 == fresh_op);
  CHECK(after_gradient == fresh_op + (512 - 16) * kCell);
  // The cells for n ids: the smallest power of two of at least 16 that n fills to 7/8 at most.
  const auto cells_for = [](std::size_t ids) {
    std::size_t cells = 16;
    while (ids * 8 > cells * 7) cells *= 2;
    return cells;
  };
  const std::size_t huge_ids = std::min<std::size_t>(40000 / kScale + 1, 16384);
  CHECK(after_huge == fresh_op + (cells_for(huge_ids) - 16) * kCell);
  CHECK(cells_for(16384) == 32768);  // the cap: 384 KiB of cells at most
}

TEST_CASE("freed tensor handles wait in the freeing thread's lists for its next tensors",
          "[memory]") {
  // Each tensor's handle (its TensorImpl and control block) is one block; a freed one joins
  // the freeing thread's list of its size (at most 32,768), the next tensor takes it back, and
  // release_cached_memory() hands the list back to the system. Under ASan nothing is kept,
  // so that a use after free is still caught.
  release_cached_memory();
  CHECK(detail::impl_blocks_cached() == 0);
  std::vector<Tensor> tensors;
  for (int i = 0; i < 100; ++i) tensors.push_back(fill({3}, static_cast<double>(i)));
  tensors.clear();
  const std::size_t hundred = detail::impl_blocks_cached();
#ifdef TAPEGRAD_TEST_UNDER_ASAN
  CHECK(hundred == 0);
#else
  const std::size_t block = hundred / 100;
  CHECK(hundred == 100 * block);
  CHECK(block >= 64);
  // Taken back by the next tensors, whose values are their own.
  for (int i = 0; i < 100; ++i) tensors.push_back(fill({3}, static_cast<double>(2 * i)));
  CHECK(detail::impl_blocks_cached() == 0);
  for (int i = 0; i < 100; ++i) CHECK(tensors[i].array<double>()(1) == 2.0 * i);
  tensors.clear();
  // Made on another thread, freed here: this thread's list.
  std::thread([&tensors] {
    for (int i = 0; i < 50; ++i) tensors.push_back(zeros({3}));
  }).join();
  tensors.clear();
  CHECK(detail::impl_blocks_cached() == 150 * block);
  // At most 32,768 of a size.
  for (int i = 0; i < 40000; ++i) tensors.push_back(zeros({3}));
  tensors.clear();
  CHECK(detail::impl_blocks_cached() == 32768 * block);
#endif
  release_cached_memory();
  CHECK(detail::impl_blocks_cached() == 0);
}
