// What tensor buffers hold, and the cache behind them (docs/guide.md, "Memory"). Every
// Tensor's elements, and every xt::xarray the library builds, come from a cache of size
// classes: a buffer freed by a step is reused by the next, so a training loop's steady state
// obtains nothing from the system (PyTorch's caching allocator does this on the GPU).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tapegrad {

/// Process-wide figures, in bytes of whole buffers (a request up to 4 KiB is rounded up to its
/// size class, at most 25 % more and at least 16 bytes; a larger one to a multiple of 64).
/// Each thread counts its own buffers, and memory_stats() adds every thread's up: the figures
/// are exact. The peak is exact for one thread's buffers; while several threads allocate at
/// once, it may miss up to 64 KiB per other thread (their counts reach the shared one in
/// steps of 64 KiB, so that no allocation pays for a locked instruction).
struct MemoryStats {
  std::size_t bytes_in_use = 0;          // buffers alive now, on every thread
  std::size_t bytes_cached = 0;          // held for reuse, not in use
  std::size_t peak_bytes_in_use = 0;     // since the start or the last reset_peak_memory()
  std::uint64_t system_allocations = 0;  // buffers obtained from the system
  std::uint64_t cache_hits = 0;          // buffers served from the cache
};

/// The figures now (torch.cuda.memory_stats; tf.config.experimental.get_memory_info).
MemoryStats memory_stats();

/// Starts peak_bytes_in_use again from bytes_in_use (torch.cuda.reset_peak_memory_stats).
void reset_peak_memory();

/// Hands every cached buffer back to the system (torch.cuda.empty_cache): the process pool's
/// and the calling thread's at once; another thread's own small cache (at most 2 MiB) at its
/// next allocation or free, or when it exits. Buffers in use are untouched. The calling
/// thread's freed tensor handles (kept for its next tensors, at most 32,768 of each size; not
/// counted in MemoryStats, which counts element buffers) go back too.
void release_cached_memory();

}  // namespace tapegrad
