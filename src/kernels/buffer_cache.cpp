// The buffer cache behind buffer_allocator (include/tapegrad/buffer_allocator.hpp) and the
// memory figures (include/tapegrad/memory.hpp).
//
// Requests are rounded up to size classes, four per doubling from 64 bytes (at most 25 % more).
// A freed buffer goes to the freeing thread's own lists when it is small (no lock), otherwise
// to the process pool (one mutex); a request looks in the same places before asking the
// system. Why: glibc's malloc hands large freed blocks back to the kernel (munmap, or a trimmed
// heap top) and the next step pays for fresh pages again, thousands of times a second in an
// eager training loop. The system allocator stays behind the cache (docs/performance.md says
// why not mimalloc or jemalloc).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "kernels/buffer_cache.hpp"
#include "tapegrad/buffer_allocator.hpp"
#include "tapegrad/memory.hpp"

namespace tapegrad {
namespace detail {
namespace {

constexpr std::size_t kSmallestClass = 64;
constexpr std::size_t kClassCount = 4 * (64 - 6) + 1;
// A thread keeps buffers up to this size in its own lists, up to kThreadBytes in all.
constexpr std::size_t kThreadLargest = std::size_t{1} << 20;
constexpr std::size_t kThreadBytes = std::size_t{8} << 20;
// The cache may always hold this much; beyond it, no more than the most ever in use at once.
constexpr std::size_t kCacheFloor = std::size_t{256} << 20;

// Class 0 is 64 bytes; then 80, 96, 112, 128, 160, ...: (4 + s + 1) << (k - 2) for the k-th
// power of two and its quarter s.
constexpr std::size_t class_of(std::size_t bytes) {
  if (bytes <= kSmallestClass) return 0;
  const std::size_t v = bytes - 1;
  const auto k = static_cast<std::size_t>(63 - __builtin_clzll(v));
  const std::size_t quarter = (v >> (k - 2)) & 3;
  return (k - 6) * 4 + quarter + 1;
}

constexpr std::size_t class_bytes(std::size_t index) {
  if (index == 0) return kSmallestClass;
  const std::size_t k = (index - 1) / 4 + 6;
  const std::size_t quarter = (index - 1) % 4;
  return (5 + quarter) << (k - 2);
}

constexpr std::size_t kThreadClasses = class_of(kThreadLargest) + 1;
static_assert(class_bytes(class_of(kThreadLargest)) == kThreadLargest);
static_assert(class_of(65) == 1 && class_bytes(1) == 80 && class_bytes(class_of(129)) == 160);

struct BufferCounters {
  std::atomic<std::size_t> in_use{0};
  std::atomic<std::size_t> cached{0};
  std::atomic<std::size_t> peak{0};
  std::atomic<std::size_t> all_time_peak{0};
  std::atomic<std::uint64_t> system_allocations{0};
  std::atomic<std::uint64_t> cache_hits{0};
  // Bumped by release_cached_memory: a thread whose lists are older empties them.
  std::atomic<std::uint64_t> release_epoch{0};
};
BufferCounters buffer_counters;  // constant-initialised and never destroyed: usable during exit

void raise_to(std::atomic<std::size_t>& maximum, std::size_t value) {
  std::size_t seen = maximum.load(std::memory_order_relaxed);
  while (value > seen && !maximum.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

bool fits_in_cache(std::size_t bytes) {
  const std::size_t limit =
      std::max(kCacheFloor, buffer_counters.all_time_peak.load(std::memory_order_relaxed));
  return buffer_counters.cached.load(std::memory_order_relaxed) + bytes <= limit;
}

void free_to_system(void* buffer) { std::free(buffer); }  // NOLINT: posix_memalign's pair

// Free lists per class, for one thread or for the process.
struct BufferFreeLists {
  std::vector<std::vector<void*>> lists;
  explicit BufferFreeLists(std::size_t classes) : lists(classes) {}

  void* take(std::size_t index) {
    std::vector<void*>& list = lists[index];
    if (list.empty()) return nullptr;
    void* buffer = list.back();
    list.pop_back();
    return buffer;
  }
  bool put(std::size_t index, void* buffer) noexcept {
    try {
      lists[index].push_back(buffer);
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  }
  // Frees every buffer to the system; returns their bytes.
  std::size_t release_all() noexcept {
    std::size_t bytes = 0;
    for (std::size_t index = 0; index < lists.size(); ++index) {
      for (void* buffer : lists[index]) {
        free_to_system(buffer);
        bytes += class_bytes(index);
      }
      lists[index].clear();
      lists[index].shrink_to_fit();
    }
    return bytes;
  }
};

class BufferPool {
 public:
  void* take(std::size_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    return lists_.take(index);
  }
  bool put(std::size_t index, void* buffer) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return lists_.put(index, buffer);
  }
  // Moves a thread's lists in (the thread is leaving); frees what cannot be kept.
  void adopt(BufferFreeLists& from) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t index = 0; index < from.lists.size(); ++index) {
      for (void* buffer : from.lists[index]) {
        if (!lists_.put(index, buffer)) {
          free_to_system(buffer);
          buffer_counters.cached.fetch_sub(class_bytes(index), std::memory_order_relaxed);
        }
      }
      from.lists[index].clear();
    }
  }
  std::size_t release_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return lists_.release_all();
  }

 private:
  std::mutex mutex_;
  BufferFreeLists lists_{kClassCount};
};

// Never destroyed: a thread leaving, or a static Tensor dying, may give buffers back after
// every static destructor has run.
BufferPool& buffer_pool() {
  alignas(BufferPool) static unsigned char storage[sizeof(BufferPool)];
  static BufferPool* const instance = ::new (static_cast<void*>(storage)) BufferPool();
  return *instance;
}

thread_local bool thread_buffers_gone = false;

struct ThreadBuffers {
  BufferFreeLists lists{kThreadClasses};
  std::size_t bytes = 0;
  std::uint64_t epoch = 0;

  ThreadBuffers() : epoch(buffer_counters.release_epoch.load(std::memory_order_relaxed)) {}
  ~ThreadBuffers() {
    buffer_pool().adopt(lists);
    thread_buffers_gone = true;
  }
  ThreadBuffers(const ThreadBuffers&) = delete;
  ThreadBuffers& operator=(const ThreadBuffers&) = delete;

  // Empties the lists when release_cached_memory ran since they last looked.
  void follow_releases() noexcept {
    const std::uint64_t now = buffer_counters.release_epoch.load(std::memory_order_relaxed);
    if (now == epoch) return;
    epoch = now;
    release_all();
  }
  void release_all() noexcept {
    buffer_counters.cached.fetch_sub(lists.release_all(), std::memory_order_relaxed);
    bytes = 0;
  }
};

// The calling thread's lists, or null while its thread_local objects are being destroyed.
ThreadBuffers* thread_buffers() {
  if (thread_buffers_gone) return nullptr;
  thread_local ThreadBuffers lists;
  return &lists;
}

void* allocate_from_system(std::size_t bytes) {
  void* buffer = nullptr;
  if (posix_memalign(&buffer, kBufferAlignment, bytes) != 0) {
    release_cached_memory();  // what the cache holds may be what the request needs
    if (posix_memalign(&buffer, kBufferAlignment, bytes) != 0) throw std::bad_alloc();
  }
  return buffer;
}

}  // namespace

std::size_t buffer_class_bytes(std::size_t bytes) noexcept { return class_bytes(class_of(bytes)); }

void* acquire_buffer(std::size_t bytes) {
  const std::size_t index = class_of(bytes);
  const std::size_t size = class_bytes(index);
  void* buffer = nullptr;
  if (size <= kThreadLargest) {
    if (ThreadBuffers* own = thread_buffers()) {
      own->follow_releases();
      buffer = own->lists.take(index);
      if (buffer != nullptr) own->bytes -= size;
    }
  }
  if (buffer == nullptr) buffer = buffer_pool().take(index);
  if (buffer != nullptr) {
    buffer_counters.cached.fetch_sub(size, std::memory_order_relaxed);
    buffer_counters.cache_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    buffer = allocate_from_system(size);
    buffer_counters.system_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  const std::size_t in_use = buffer_counters.in_use.fetch_add(size, std::memory_order_relaxed) + size;
  raise_to(buffer_counters.peak, in_use);
  raise_to(buffer_counters.all_time_peak, in_use);
  return buffer;
}

void release_buffer(void* buffer, std::size_t bytes) noexcept {
  if (buffer == nullptr) return;
  const std::size_t index = class_of(bytes);
  const std::size_t size = class_bytes(index);
  buffer_counters.in_use.fetch_sub(size, std::memory_order_relaxed);
  if (!fits_in_cache(size)) {
    free_to_system(buffer);
    return;
  }
  buffer_counters.cached.fetch_add(size, std::memory_order_relaxed);
  if (size <= kThreadLargest) {
    if (ThreadBuffers* own = thread_buffers()) {
      own->follow_releases();
      if (own->bytes + size <= kThreadBytes && own->lists.put(index, buffer)) {
        own->bytes += size;
        return;
      }
    }
  }
  if (!buffer_pool().put(index, buffer)) {
    buffer_counters.cached.fetch_sub(size, std::memory_order_relaxed);
    free_to_system(buffer);
  }
}

}  // namespace detail

MemoryStats memory_stats() {
  const detail::BufferCounters& c = detail::buffer_counters;
  MemoryStats stats;
  stats.bytes_in_use = c.in_use.load(std::memory_order_relaxed);
  stats.bytes_cached = c.cached.load(std::memory_order_relaxed);
  stats.peak_bytes_in_use = c.peak.load(std::memory_order_relaxed);
  stats.system_allocations = c.system_allocations.load(std::memory_order_relaxed);
  stats.cache_hits = c.cache_hits.load(std::memory_order_relaxed);
  return stats;
}

void reset_peak_memory() {
  detail::buffer_counters.peak.store(detail::buffer_counters.in_use.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
}

void release_cached_memory() {
  detail::buffer_counters.release_epoch.fetch_add(1, std::memory_order_relaxed);
  if (detail::ThreadBuffers* own = detail::thread_buffers()) {
    own->epoch = detail::buffer_counters.release_epoch.load(std::memory_order_relaxed);
    own->release_all();
  }
  detail::buffer_counters.cached.fetch_sub(detail::buffer_pool().release_all(), std::memory_order_relaxed);
}

}  // namespace tapegrad
