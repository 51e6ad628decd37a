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
//
// Counting: an eager op on a few elements takes and frees a buffer in a few hundred
// nanoseconds, and a locked read-modify-write of a shared counter costs about ten of them
// (five per buffer were 9-13 % of GradBench's lstm). So a thread counts what it holds and the
// hits it served in its own counters (written only by it, no locked instruction), which
// memory_stats() adds up under the registry's lock; its bytes in use reach the shared counter
// in steps of kUnflushedBytes, and the peak compares the shared counter plus the thread's own
// share at each request: exact for one thread, within kUnflushedBytes per other thread.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kernels/buffer_cache.hpp"
#include "kernels/impl_blocks.hpp"
#include "tapegrad/buffer_allocator.hpp"
#include "tapegrad/memory.hpp"

namespace tapegrad {
namespace detail {
namespace {

constexpr std::size_t kLargeAbove = 4096;  // larger requests: 64-byte granules, no classes
constexpr std::size_t kGranule = 64;
// Below this, buffers come from malloc (16-byte aligned); from it on, 64-byte aligned.
constexpr std::size_t kAlignedFrom = 256;
// From this size on, a buffer is a mapping of its own, aligned to a 2 MiB huge page and marked
// for transparent huge pages (Linux), where the system allows them (Debian's default mode,
// "madvise", does for marked mappings only). Why: a fresh buffer's first write faults in every
// page, and on a virtual machine a 4 KiB fault costs about 12 us: 256 MB of them took 780 ms,
// the same in 2 MiB pages 16-60 ms (GradBench's gmm holds 251 MB at once in its first step).
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
constexpr std::size_t kSmallPageBytes = 4096;
// A thread keeps at most this much in its own lists.
constexpr std::size_t kThreadBytes = std::size_t{2} << 20;
// The buffers in use and in the pool may always add up to this much; beyond it, to no more than
// twice the most ever in use at once.
constexpr std::size_t kCacheFloor = std::size_t{256} << 20;
// A thread's bytes in use reach the shared counter once they differ from it by this much.
constexpr std::int64_t kUnflushedBytes = std::int64_t{64} << 10;
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

// The shared counters. in_use lacks each live thread's unflushed share; cache_hits counts the
// hits of threads that have exited and of the threads' exits themselves.
struct BufferCounters {
  std::atomic<std::size_t> in_use{0};
  std::atomic<std::size_t> peak{0};
  std::atomic<std::size_t> all_time_peak{0};
  std::atomic<std::uint64_t> system_allocations{0};
  std::atomic<std::uint64_t> cache_hits{0};
  std::atomic<std::size_t> mapped{0};  // buffer_bytes_mapped()
  // Bumped by release_cached_memory: a thread whose lists are older empties them.
  std::atomic<std::uint64_t> release_epoch{0};
};
BufferCounters buffer_counters;  // constant-initialised and never destroyed: usable during exit

void raise_to(std::atomic<std::size_t>& maximum, std::size_t value) {
  std::size_t seen = maximum.load(std::memory_order_relaxed);
  while (value > seen && !maximum.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// What the buffers in use and the pool may add up to (the threads' own lists hold at most
// kThreadBytes each besides). A loop's distinct large buffers can add up to more than its peak
// in use (GradBench's gmm: 264 MB of them, at most 251 MB at once), and a limit of the peak
// alone sent one 51 MB buffer back to the system every step, to be faulted in again (12,500
// page faults a step); twice the peak keeps such a loop's set whole.
std::size_t cache_limit() {
  return std::max(kCacheFloor, 2 * buffer_counters.all_time_peak.load(std::memory_order_relaxed));
}

// The bytes in use as the shared counter has them (each thread's unflushed share aside, which
// can leave the counter briefly below its true value, even below zero).
std::size_t shared_bytes_in_use() {
  const auto in_use =
      static_cast<std::int64_t>(buffer_counters.in_use.load(std::memory_order_relaxed));
  return in_use > 0 ? static_cast<std::size_t>(in_use) : 0;
}

// Adds to a counter that only the calling thread writes: no locked instruction.
template <typename T, typename D>
void add_own(std::atomic<T>& counter, D delta) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + static_cast<T>(delta),
                std::memory_order_relaxed);
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
constexpr bool kMapsHugeBuffers = true;

std::size_t mapped_length(std::size_t bytes) {
  return (bytes + kSmallPageBytes - 1) / kSmallPageBytes * kSmallPageBytes;
}

// A mapping of `bytes` starting on a huge-page boundary, or null. It maps a huge page more than
// it needs and unmaps the unaligned head and the tail.
void* map_buffer(std::size_t bytes) noexcept {
  const std::size_t length = mapped_length(bytes);
  const std::size_t span = length + kHugePageBytes;
  void* mapping = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(mapping);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (aligned > start) munmap(mapping, aligned - start);
  const std::uintptr_t tail = aligned + length;
  if (start + span > tail) munmap(reinterpret_cast<void*>(tail), start + span - tail);
  auto* buffer = reinterpret_cast<void*>(aligned);
  madvise(buffer, length, MADV_HUGEPAGE);  // refused: the buffer keeps small pages
  buffer_counters.mapped.fetch_add(length, std::memory_order_relaxed);
  return buffer;
}

void unmap_buffer(void* buffer, std::size_t bytes) noexcept {
  munmap(buffer, mapped_length(bytes));
  buffer_counters.mapped.fetch_sub(mapped_length(bytes), std::memory_order_relaxed);
}
#else
constexpr bool kMapsHugeBuffers = false;
void* map_buffer(std::size_t) noexcept { return nullptr; }
void unmap_buffer(void*, std::size_t) noexcept {}
#endif

bool is_mapped(std::size_t bytes) { return kMapsHugeBuffers && bytes >= kHugePageBytes; }

// Bookkeeping blocks from this size on are whole huge pages of a mapping of their own, and a
// freed one is kept for the next request of its length. Why: a Function's first call plans its
// replay with a dozen arrays of one entry per traced value (GradBench lstm: 60,000 values,
// arrays of 240-480 KiB), which malloc maps afresh or takes from a newly grown heap each time:
// 3,400 of the call's 7,700 page faults at about 12 us each here. One huge page costs about as
// much as ten small ones, and a kept block none.
constexpr std::size_t kBookkeepingMappedFrom = std::size_t{256} << 10;
// The kept blocks add up to at most this much (release_cached_memory frees them).
constexpr std::size_t kBookkeepingKeptBytes = std::size_t{32} << 20;

bool is_mapped_bookkeeping(std::size_t bytes) {
  return kMapsHugeBuffers && bytes >= kBookkeepingMappedFrom;
}
std::size_t bookkeeping_length(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// The freed bookkeeping blocks, linked through their own first bytes; behind one mutex, as
// blocks of hundreds of kilobytes are asked for a few times per trace or tape, not per op.
// Never destroyed (a thread's tape may free its map after the static destructors have run).
class KeptBookkeeping {
 public:
  void* take(std::size_t length) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Kept** link = &first_; *link != nullptr; link = &(*link)->next) {
      Kept* block = *link;
      if (block->length != length) continue;
      *link = block->next;
      bytes_ -= length;
      return block;
    }
    return nullptr;
  }
  bool keep(void* block, std::size_t length) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes_ + length > kBookkeepingKeptBytes) return false;
    first_ = ::new (block) Kept{first_, length};
    bytes_ += length;
    return true;
  }
  void release_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    while (first_ != nullptr) {
      Kept* block = first_;
      first_ = block->next;
      const std::size_t length = block->length;
      unmap_buffer(block, length);
    }
    bytes_ = 0;
  }
  std::size_t bytes() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }

 private:
  struct Kept {
    Kept* next;
    std::size_t length;
  };
  std::mutex mutex_;
  Kept* first_ = nullptr;
  std::size_t bytes_ = 0;
};

KeptBookkeeping& kept_bookkeeping() {
  alignas(KeptBookkeeping) static unsigned char storage[sizeof(KeptBookkeeping)];
  static KeptBookkeeping* const instance = ::new (static_cast<void*>(storage)) KeptBookkeeping();
  return *instance;
}

void* allocate_from_system(std::size_t bytes);
// `bytes` as the buffer was allocated with (its rounded size).
void free_to_system(void* buffer, std::size_t bytes) noexcept {
  if (is_mapped(bytes)) {
    unmap_buffer(buffer, bytes);
  } else {
    std::free(buffer);  // NOLINT: malloc's and posix_memalign's pair
  }
}

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
  for (void* buffer : list) free_to_system(buffer, bytes);
  const std::size_t freed = list.size() * bytes;
  std::vector<void*>().swap(list);
  return freed;
}

using SmallLists = std::array<std::vector<void*>, kSmallClasses>;

class BufferPool {
 public:
  // A buffer of `bytes`, or null (a large miss may trim the pool: see trim).
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    void* buffer = nullptr;
    if (bytes <= kLargeAbove) {
      buffer = pop(small_[small_class_of(bytes)]);
    } else {
      auto it = large_.find(bytes);
      if (it != large_.end()) buffer = pop(it->second.buffers);
      if (buffer == nullptr) {
        trim();
        return nullptr;
      }
      it->second.used = true;
      large_bytes_ -= bytes;
    }
    if (buffer != nullptr) cached_ -= bytes;
    return buffer;
  }
  // Keeps `buffer` unless the pool is full or a list cannot grow: false, and the caller frees it.
  bool put(std::size_t bytes, void* buffer) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + bytes + shared_bytes_in_use() > cache_limit()) return false;
    if (bytes <= kLargeAbove) {
      if (!push(small_[small_class_of(bytes)], buffer)) return false;
    } else {
      try {
        if (!push(large_[bytes].buffers, buffer)) return false;
      } catch (const std::bad_alloc&) {
        return false;
      }
      large_bytes_ += bytes;
    }
    cached_ += bytes;
    return true;
  }
  void release_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t index = 0; index < kSmallClasses; ++index) {
      free_all(small_[index], small_class_bytes(index));
    }
    for (auto& [bytes, list] : large_) free_all(list.buffers, bytes);
    large_.clear();
    large_bytes_ = 0;
    bytes_after_trim_ = 0;
    cached_ = 0;
  }
  std::size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  // Takes a leaving thread's lists; frees what cannot be kept.
  void adopt(SmallLists& lists) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t index = 0; index < kSmallClasses; ++index) {
      for (void* buffer : lists[index]) {
        if (push(small_[index], buffer)) {
          cached_ += small_class_bytes(index);
        } else {
          free_to_system(buffer, small_class_bytes(index));
        }
      }
      lists[index].clear();
    }
  }

 private:
  // A large request missed. A loop asks for the same sizes every step, so a size not asked for
  // during a whole interval between trims is a one-off (the kept tensors of a one-shot tape,
  // freed in its backward): once the large buffers have grown by kTrimStep, such sizes go back
  // to the system, where malloc can reuse their memory for other sizes instead of the process
  // taking fresh pages. A size first freed since the last trim has not had its interval yet:
  // a loop's first step frees its large temporaries and may miss on another size before the
  // second step asks for them again (GradBench's kmeans: two 80 MB buffers, then a 1.3 MB
  // miss), and freeing them then made the second step fault in 160 MB afresh. The caller
  // holds the lock.
  void trim() noexcept {
    if (large_bytes_ < bytes_after_trim_ + kTrimStep) return;
    std::size_t freed = 0;
    for (auto it = large_.begin(); it != large_.end();) {
      if (it->second.used) {
        it->second.used = false;
        ++it;
      } else {
        freed += free_all(it->second.buffers, it->first);
        it = large_.erase(it);
      }
    }
    large_bytes_ -= freed;
    cached_ -= freed;
    bytes_after_trim_ = large_bytes_;
  }

  struct LargeList {
    std::vector<void*> buffers;
    // Taken, or first freed (the list is new), since the last trim.
    bool used = true;
  };
  std::mutex mutex_;
  SmallLists small_;
  std::unordered_map<std::size_t, LargeList> large_;  // by rounded size
  std::size_t large_bytes_ = 0;
  std::size_t bytes_after_trim_ = 0;
  std::size_t cached_ = 0;  // small and large
};

// Never destroyed: a thread leaving, or a static Tensor dying, may give buffers back after
// every static destructor has run.
BufferPool& buffer_pool() {
  alignas(BufferPool) static unsigned char storage[sizeof(BufferPool)];
  static BufferPool* const instance = ::new (static_cast<void*>(storage)) BufferPool();
  return *instance;
}

thread_local bool thread_buffers_gone = false;

struct ThreadBuffers;

// Every live thread's ThreadBuffers, for memory_stats(); never destroyed, as the pool. A list
// linked through the ThreadBuffers themselves: registering allocates nothing.
struct ThreadRegistry {
  std::mutex mutex;
  ThreadBuffers* first = nullptr;
};

ThreadRegistry& thread_registry() {
  alignas(ThreadRegistry) static unsigned char storage[sizeof(ThreadRegistry)];
  static ThreadRegistry* const instance = ::new (static_cast<void*>(storage)) ThreadRegistry();
  return *instance;
}

// A thread's own lists of small buffers and its own counters. The counters are written only by
// their thread (add_own) and read by memory_stats() on any thread under the registry's lock.
struct ThreadBuffers {
  SmallLists lists;
  std::atomic<std::size_t> bytes{0};              // in the lists
  std::atomic<std::int64_t> unflushed_in_use{0};  // not in buffer_counters.in_use yet
  std::atomic<std::uint64_t> hits{0};             // cache hits this thread served
  std::uint64_t epoch = buffer_counters.release_epoch.load(std::memory_order_relaxed);
  ThreadBuffers* previous = nullptr;  // in the registry
  ThreadBuffers* next = nullptr;

  ThreadBuffers() {
    ThreadRegistry& registry = thread_registry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    next = registry.first;
    if (next != nullptr) next->previous = this;
    registry.first = this;
  }
  ~ThreadBuffers() {
    ThreadRegistry& registry = thread_registry();
    std::lock_guard<std::mutex> lock(registry.mutex);  // then the pool's: as memory_stats()
    buffer_pool().adopt(lists);
    bytes.store(0, std::memory_order_relaxed);
    buffer_counters.in_use.fetch_add(
        static_cast<std::size_t>(unflushed_in_use.load(std::memory_order_relaxed)),
        std::memory_order_relaxed);
    buffer_counters.cache_hits.fetch_add(hits.load(std::memory_order_relaxed),
                                         std::memory_order_relaxed);
    (previous != nullptr ? previous->next : registry.first) = next;
    if (next != nullptr) next->previous = previous;
    thread_buffers_gone = true;
  }
  ThreadBuffers(const ThreadBuffers&) = delete;
  ThreadBuffers& operator=(const ThreadBuffers&) = delete;

  // Counts `delta` bytes taken (+) or freed (-) by this thread; returns the bytes in use as
  // this thread sees them (the shared counter and its own share).
  std::int64_t count_in_use(std::int64_t delta) {
    const std::int64_t unflushed = unflushed_in_use.load(std::memory_order_relaxed) + delta;
    if (unflushed > kUnflushedBytes || unflushed < -kUnflushedBytes) {
      // Under the registry's lock, so that memory_stats() never counts these bytes twice.
      std::lock_guard<std::mutex> lock(thread_registry().mutex);
      const std::size_t shared = buffer_counters.in_use.fetch_add(
          static_cast<std::size_t>(unflushed), std::memory_order_relaxed);
      unflushed_in_use.store(0, std::memory_order_relaxed);
      return static_cast<std::int64_t>(shared) + unflushed;
    }
    unflushed_in_use.store(unflushed, std::memory_order_relaxed);
    return static_cast<std::int64_t>(buffer_counters.in_use.load(std::memory_order_relaxed)) +
           unflushed;
  }

  // Empties the lists when release_cached_memory ran since they last looked.
  void follow_releases() noexcept {
    const std::uint64_t now = buffer_counters.release_epoch.load(std::memory_order_relaxed);
    if (now == epoch) return;
    epoch = now;
    release_all();
  }
  void release_all() noexcept {
    for (std::size_t index = 0; index < kSmallClasses; ++index) {
      free_all(lists[index], small_class_bytes(index));
    }
    bytes.store(0, std::memory_order_relaxed);
  }
};

// The calling thread's lists, or null while its thread_local objects are being destroyed.
ThreadBuffers* thread_buffers() {
  if (thread_buffers_gone) return nullptr;
  thread_local ThreadBuffers buffers;
  return &buffers;
}

// Counts `delta` bytes taken or freed on the calling thread and, for a take, raises the peaks.
void count_in_use(ThreadBuffers* own, std::int64_t delta) {
  std::int64_t seen = 0;
  if (own != nullptr) {
    seen = own->count_in_use(delta);
  } else {
    seen = static_cast<std::int64_t>(buffer_counters.in_use.fetch_add(
               static_cast<std::size_t>(delta), std::memory_order_relaxed)) +
           delta;
  }
  if (delta > 0 && seen > 0) {
    raise_to(buffer_counters.peak, static_cast<std::size_t>(seen));
    raise_to(buffer_counters.all_time_peak, static_cast<std::size_t>(seen));
  }
}

// Every thread's share added: memory_stats()'s figures. The caller holds the registry's lock.
struct CountedTotals {
  std::size_t in_use = 0;
  std::size_t cached = 0;
  std::uint64_t hits = 0;
};

CountedTotals counted_totals(ThreadRegistry& registry) {
  CountedTotals totals;
  totals.in_use = buffer_counters.in_use.load(std::memory_order_relaxed);
  totals.cached = buffer_pool().cached();
  totals.hits = buffer_counters.cache_hits.load(std::memory_order_relaxed);
  for (ThreadBuffers* t = registry.first; t != nullptr; t = t->next) {
    totals.in_use += static_cast<std::size_t>(t->unflushed_in_use.load(std::memory_order_relaxed));
    totals.cached += t->bytes.load(std::memory_order_relaxed);
    totals.hits += t->hits.load(std::memory_order_relaxed);
  }
  return totals;
}

void* allocate_from_system(std::size_t bytes) {
  const auto attempt = [bytes]() -> void* {
    if (bytes < kAlignedFrom) return std::malloc(bytes);  // NOLINT: the cache's own source
    if (is_mapped(bytes)) return map_buffer(bytes);
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

void* acquire_bookkeeping_block(std::size_t bytes) {
  if (!is_mapped_bookkeeping(bytes)) return ::operator new(bytes);
  const std::size_t length = bookkeeping_length(bytes);
  void* block = kept_bookkeeping().take(length);
  if (block == nullptr) block = map_buffer(length);
  if (block == nullptr) {
    release_cached_memory();  // as allocate_from_system: what the caches hold may be what it needs
    block = map_buffer(length);
    if (block == nullptr) throw std::bad_alloc();
  }
  return block;
}

void release_bookkeeping_block(void* block, std::size_t bytes) noexcept {
  if (!is_mapped_bookkeeping(bytes)) {
    ::operator delete(block);
    return;
  }
  const std::size_t length = bookkeeping_length(bytes);
  if (!kept_bookkeeping().keep(block, length)) unmap_buffer(block, length);
}

std::size_t bookkeeping_bytes_kept() noexcept { return kept_bookkeeping().bytes(); }

std::size_t buffer_bytes_mapped() noexcept {
  return buffer_counters.mapped.load(std::memory_order_relaxed);
}

std::size_t malloc_footprint(std::size_t bytes) noexcept {
  if (bytes == 0) return 0;
  return std::max<std::size_t>(32, (bytes + 8 + 15) / 16 * 16);
}

void* acquire_buffer(std::size_t bytes) {
  const std::size_t size = rounded_bytes(bytes);
  ThreadBuffers* own = thread_buffers();
  void* buffer = nullptr;
  if (own != nullptr) {
    own->follow_releases();
    if (size <= kLargeAbove) {
      buffer = pop(own->lists[small_class_of(size)]);
      if (buffer != nullptr) add_own(own->bytes, -static_cast<std::int64_t>(size));
    }
  }
  if (buffer == nullptr) buffer = buffer_pool().take(size);
  if (buffer == nullptr) {
    buffer = allocate_from_system(size);
    buffer_counters.system_allocations.fetch_add(1, std::memory_order_relaxed);
  } else if (own != nullptr) {
    add_own(own->hits, 1);
  } else {
    buffer_counters.cache_hits.fetch_add(1, std::memory_order_relaxed);
  }
  count_in_use(own, static_cast<std::int64_t>(size));
  return buffer;
}

void release_buffer(void* buffer, std::size_t bytes) noexcept {
  if (buffer == nullptr) return;
  const std::size_t size = rounded_bytes(bytes);
  ThreadBuffers* own = thread_buffers();
  count_in_use(own, -static_cast<std::int64_t>(size));
  if (own != nullptr) {
    own->follow_releases();
    const std::size_t held = own->bytes.load(std::memory_order_relaxed);
    if (size <= kLargeAbove && held + size <= kThreadBytes &&
        push(own->lists[small_class_of(size)], buffer)) {
      own->bytes.store(held + size, std::memory_order_relaxed);
      return;
    }
  }
  if (!buffer_pool().put(size, buffer)) free_to_system(buffer, size);
}

}  // namespace detail

MemoryStats memory_stats() {
  detail::ThreadRegistry& registry = detail::thread_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  const detail::CountedTotals totals = detail::counted_totals(registry);
  const detail::BufferCounters& c = detail::buffer_counters;
  MemoryStats stats;
  stats.bytes_in_use = totals.in_use;
  stats.bytes_cached = totals.cached;
  stats.peak_bytes_in_use = std::max(c.peak.load(std::memory_order_relaxed), totals.in_use);
  stats.system_allocations = c.system_allocations.load(std::memory_order_relaxed);
  stats.cache_hits = totals.hits;
  return stats;
}

void reset_peak_memory() {
  detail::ThreadRegistry& registry = detail::thread_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  detail::buffer_counters.peak.store(detail::counted_totals(registry).in_use,
                                     std::memory_order_relaxed);
}

void release_cached_memory() {
  detail::release_impl_blocks();
  detail::buffer_counters.release_epoch.fetch_add(1, std::memory_order_relaxed);
  if (detail::ThreadBuffers* own = detail::thread_buffers()) {
    own->epoch = detail::buffer_counters.release_epoch.load(std::memory_order_relaxed);
    own->release_all();
  }
  detail::buffer_pool().release_all();
  detail::kept_bookkeeping().release_all();
}

}  // namespace tapegrad
