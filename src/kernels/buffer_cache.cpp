// The buffer cache behind buffer_allocator (include/tapegrad/buffer_allocator.hpp) and the
// memory figures (include/tapegrad/memory.hpp).
//
// Why: glibc's malloc hands large freed blocks back to the kernel (munmap, or a trimmed heap
// top), and an eager loop asks for them again every step, paying for fresh pages thousands of
// times a second. Here a freed buffer waits for the next request of its size.
//
// Sizes: a request up to 4 KiB is rounded up to a class (16, 32, 48, 64, then four per
// doubling: at most 25 % more), a larger one to a multiple of 64 bytes, so that the large
// buffers a program keeps (a tape's saved outputs) waste under 2 %. A freed small buffer goes
// to the freeing thread's own lists (no lock); a large one, or a leaving thread's lists, to the
// process pool behind one mutex (its cost is nothing next to an op on 4 KiB). The system
// allocator stays behind the cache: the steady state never reaches it.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "kernels/buffer_cache.hpp"
#include "tapegrad/buffer_allocator.hpp"
#include "tapegrad/memory.hpp"

namespace tapegrad {
namespace detail {
namespace {

constexpr std::size_t kLargeAbove = 4096;  // larger requests: 64-byte granules, no classes
constexpr std::size_t kGranule = 64;
// Below this, buffers come from malloc (16-byte aligned); from it on, 64-byte aligned.
constexpr std::size_t kAlignedFrom = 256;
// A thread keeps at most this much in its own lists.
constexpr std::size_t kThreadBytes = std::size_t{2} << 20;
// The cache may always hold this much; beyond it, no more than the most ever in use at once.
constexpr std::size_t kCacheFloor = std::size_t{256} << 20;
// When the pool's large buffers have grown by this much since it last looked, a request it
// cannot serve frees the sizes nobody asked for since then (see BufferPool::trim).
constexpr std::size_t kTrimStep = std::size_t{64} << 20;

// Classes 0-3: 16, 32, 48, 64 bytes; then (5 + s) << (k - 2) for the k-th power of two and its
// quarter s: 80, 96, 112, 128, 160, ..., 4096.
constexpr std::size_t small_class_of(std::size_t bytes) {
  if (bytes <= 64) return bytes == 0 ? 0 : (bytes - 1) / 16;
  const std::size_t v = bytes - 1;
  const auto k = static_cast<std::size_t>(63 - __builtin_clzll(v));
  return 4 + (k - 6) * 4 + ((v >> (k - 2)) & 3);
}

constexpr std::size_t small_class_bytes(std::size_t index) {
  if (index < 4) return (index + 1) * 16;
  const std::size_t k = (index - 4) / 4 + 6;
  return (5 + (index - 4) % 4) << (k - 2);
}

constexpr std::size_t kSmallClasses = small_class_of(kLargeAbove) + 1;
static_assert(small_class_bytes(kSmallClasses - 1) == kLargeAbove);
static_assert(small_class_bytes(small_class_of(65)) == 80 &&
              small_class_bytes(small_class_of(129)) == 160 &&
              small_class_bytes(small_class_of(8)) == 16);

constexpr std::size_t rounded_bytes(std::size_t bytes) {
  return bytes <= kLargeAbove ? small_class_bytes(small_class_of(bytes))
                              : (bytes + kGranule - 1) / kGranule * kGranule;
}

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

void* allocate_from_system(std::size_t bytes);
void free_to_system(void* buffer) {
  std::free(buffer);
}  // NOLINT: malloc's and posix_memalign's pair

void* pop(std::vector<void*>& list) {
  if (list.empty()) return nullptr;
  void* buffer = list.back();
  list.pop_back();
  return buffer;
}

bool push(std::vector<void*>& list, void* buffer) noexcept {
  try {
    list.push_back(buffer);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

// Frees every buffer of `list` (each of `bytes`) to the system; returns the bytes freed.
std::size_t free_all(std::vector<void*>& list, std::size_t bytes) noexcept {
  for (void* buffer : list) free_to_system(buffer);
  const std::size_t freed = list.size() * bytes;
  std::vector<void*>().swap(list);
  return freed;
}

using SmallLists = std::array<std::vector<void*>, kSmallClasses>;

class BufferPool {
 public:
  // A buffer of `bytes`, or null. A large miss trims the pool under the same lock (see trim),
  // adding the bytes it freed to `trimmed`.
  void* take(std::size_t bytes, std::size_t& trimmed) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes <= kLargeAbove) return pop(small_[small_class_of(bytes)]);
    auto it = large_.find(bytes);
    void* buffer = it == large_.end() ? nullptr : pop(it->second.buffers);
    if (buffer == nullptr) {
      trimmed += trim();
      return nullptr;
    }
    it->second.taken = true;
    large_bytes_ -= bytes;
    return buffer;
  }
  bool put(std::size_t bytes, void* buffer) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes <= kLargeAbove) return push(small_[small_class_of(bytes)], buffer);
    try {
      if (!push(large_[bytes].buffers, buffer)) return false;
    } catch (const std::bad_alloc&) {
      return false;
    }
    large_bytes_ += bytes;
    return true;
  }
  std::size_t release_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t freed = 0;
    for (std::size_t index = 0; index < kSmallClasses; ++index) {
      freed += free_all(small_[index], small_class_bytes(index));
    }
    for (auto& [bytes, list] : large_) freed += free_all(list.buffers, bytes);
    large_.clear();
    large_bytes_ = 0;
    bytes_after_trim_ = 0;
    return freed;
  }

  // Takes a leaving thread's lists; frees what cannot be kept.
  void adopt(SmallLists& lists) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t index = 0; index < kSmallClasses; ++index) {
      for (void* buffer : lists[index]) {
        if (!push(small_[index], buffer)) {
          free_to_system(buffer);
          buffer_counters.cached.fetch_sub(small_class_bytes(index), std::memory_order_relaxed);
        }
      }
      lists[index].clear();
    }
  }

 private:
  // A large request missed. A loop asks for the same sizes every step, so a size not asked for
  // since the last trim is a one-off (the kept tensors of a one-shot tape, freed in its
  // backward): once the large buffers have grown by kTrimStep, such sizes go back to the
  // system, where malloc can reuse their memory for other sizes instead of the process taking
  // fresh pages. Returns the bytes freed. The caller holds the lock.
  std::size_t trim() noexcept {
    if (large_bytes_ < bytes_after_trim_ + kTrimStep) return 0;
    std::size_t freed = 0;
    for (auto it = large_.begin(); it != large_.end();) {
      if (it->second.taken) {
        it->second.taken = false;
        ++it;
      } else {
        freed += free_all(it->second.buffers, it->first);
        it = large_.erase(it);
      }
    }
    large_bytes_ -= freed;
    bytes_after_trim_ = large_bytes_;
    return freed;
  }

  struct LargeList {
    std::vector<void*> buffers;
    bool taken = false;  // since the last trim
  };
  std::mutex mutex_;
  SmallLists small_;
  std::unordered_map<std::size_t, LargeList> large_;  // by rounded size
  std::size_t large_bytes_ = 0;
  std::size_t bytes_after_trim_ = 0;
};

// Never destroyed: a thread leaving, or a static Tensor dying, may give buffers back after
// every static destructor has run.
BufferPool& buffer_pool() {
  alignas(BufferPool) static unsigned char storage[sizeof(BufferPool)];
  static BufferPool* const instance = ::new (static_cast<void*>(storage)) BufferPool();
  return *instance;
}

thread_local bool thread_buffers_gone = false;

// A thread's own lists of small buffers.
struct ThreadBuffers {
  SmallLists lists;
  std::size_t bytes = 0;
  std::uint64_t epoch = buffer_counters.release_epoch.load(std::memory_order_relaxed);

  ThreadBuffers() = default;
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
    std::size_t freed = 0;
    for (std::size_t index = 0; index < kSmallClasses; ++index) {
      freed += free_all(lists[index], small_class_bytes(index));
    }
    buffer_counters.cached.fetch_sub(freed, std::memory_order_relaxed);
    bytes = 0;
  }
};

// The calling thread's lists, or null while its thread_local objects are being destroyed.
ThreadBuffers* thread_buffers() {
  if (thread_buffers_gone) return nullptr;
  thread_local ThreadBuffers buffers;
  return &buffers;
}

void* allocate_from_system(std::size_t bytes) {
  const auto attempt = [bytes]() -> void* {
    if (bytes < kAlignedFrom) return std::malloc(bytes);  // NOLINT: the cache's own source
    void* buffer = nullptr;
    return posix_memalign(&buffer, kBufferAlignment, bytes) == 0 ? buffer : nullptr;
  };
  void* buffer = attempt();
  if (buffer == nullptr) {
    release_cached_memory();  // what the cache holds may be what the request needs
    buffer = attempt();
    if (buffer == nullptr) throw std::bad_alloc();
  }
  return buffer;
}

}  // namespace

std::size_t buffer_class_bytes(std::size_t bytes) noexcept { return rounded_bytes(bytes); }

void* acquire_buffer(std::size_t bytes) {
  const std::size_t size = rounded_bytes(bytes);
  void* buffer = nullptr;
  if (size <= kLargeAbove) {
    if (ThreadBuffers* own = thread_buffers()) {
      own->follow_releases();
      buffer = pop(own->lists[small_class_of(size)]);
      if (buffer != nullptr) own->bytes -= size;
    }
  }
  std::size_t trimmed = 0;
  if (buffer == nullptr) buffer = buffer_pool().take(size, trimmed);
  if (trimmed != 0) buffer_counters.cached.fetch_sub(trimmed, std::memory_order_relaxed);
  if (buffer != nullptr) {
    buffer_counters.cached.fetch_sub(size, std::memory_order_relaxed);
    buffer_counters.cache_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    buffer = allocate_from_system(size);
    buffer_counters.system_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  const std::size_t in_use =
      buffer_counters.in_use.fetch_add(size, std::memory_order_relaxed) + size;
  raise_to(buffer_counters.peak, in_use);
  raise_to(buffer_counters.all_time_peak, in_use);
  return buffer;
}

void release_buffer(void* buffer, std::size_t bytes) noexcept {
  if (buffer == nullptr) return;
  const std::size_t size = rounded_bytes(bytes);
  buffer_counters.in_use.fetch_sub(size, std::memory_order_relaxed);
  if (!fits_in_cache(size)) {
    free_to_system(buffer);
    return;
  }
  buffer_counters.cached.fetch_add(size, std::memory_order_relaxed);
  if (size <= kLargeAbove) {
    if (ThreadBuffers* own = thread_buffers()) {
      own->follow_releases();
      if (own->bytes + size <= kThreadBytes && push(own->lists[small_class_of(size)], buffer)) {
        own->bytes += size;
        return;
      }
    }
  }
  if (!buffer_pool().put(size, buffer)) {
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
  detail::buffer_counters.cached.fetch_sub(detail::buffer_pool().release_all(),
                                           std::memory_order_relaxed);
}

}  // namespace tapegrad
