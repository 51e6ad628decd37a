// The buffer cache's size classes, for what counts memory (GradientTape::bytes_held), the
// memory it maps itself, and blocks of the same kind for the library's large bookkeeping.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/block_allocator.hpp"

namespace tapegrad::detail {

// The bytes of the buffer a request of `bytes` gets (its size class: at least 64).
std::size_t buffer_class_bytes(std::size_t bytes) noexcept;

// What glibc's malloc takes for a request of `bytes` (8 bytes of header, rounded up to 16, at
// least 32): close to what malloc_usable_size would say, without asking it. For what counts
// the heap behind other blocks (a tensor's handle, a tape's bookkeeping).
std::size_t malloc_footprint(std::size_t bytes) noexcept;

// The bytes of the buffers the cache mapped from the system itself (2 MiB and larger, on
// Linux), in use or cached, and of the bookkeeping blocks below: memory that malloc's own
// figures (mallinfo2) do not see.
std::size_t buffer_bytes_mapped() noexcept;

// A block for the library's own large bookkeeping (a trace's ops, a hash map's cells, a plan's
// arrays of one entry per traced value): of 256 KiB and more, whole 2 MiB huge pages of a
// mapping of its own on a huge-page boundary, as the cache's large buffers (one page fault per
// 2 MiB instead of 512); smaller ones from operator new. A freed mapped block is kept for the
// next request of its length, up to 32 MiB in all (release_cached_memory frees them); not a
// buffer: not in memory_stats(). std::bad_alloc when the system refuses. Give it back with the
// same `bytes`.
void* acquire_bookkeeping_block(std::size_t bytes);
void release_bookkeeping_block(void* block, std::size_t bytes) noexcept;
// The bytes of the freed bookkeeping blocks kept for reuse (in buffer_bytes_mapped()).
std::size_t bookkeeping_bytes_kept() noexcept;

// A std::allocator for containers that may grow to hundreds of kilobytes: their blocks from
// acquire_bookkeeping_block.
template <class T>
using BookkeepingAllocator =
    BlockAllocator<T, acquire_bookkeeping_block, release_bookkeeping_block>;
template <class T>
using BookkeepingVector = std::vector<T, BookkeepingAllocator<T>>;

}  // namespace tapegrad::detail
