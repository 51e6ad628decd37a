#include "runtime/tape_arena.hpp"

#include <cstdint>
#include <new>

namespace tapegrad::detail {
namespace {

constexpr std::size_t kChunkBytes = 32 * 1024;  // well under glibc's mmap threshold
constexpr std::size_t kCachedChunks = 64;       // 2 MiB per thread at most

std::byte* allocate_bytes(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(std::malloc(bytes));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

// Set when this thread's cache is gone (thread or process exit): a tape destroyed after that
// (one a global object holds) frees its chunks instead. Trivially destructible, so it can
// still be read then.
thread_local bool chunk_cache_destroyed = false;

// Chunks of kChunkBytes a thread has finished with, ready for its next tape.
struct ChunkCache {
  std::vector<std::byte*> free;
  ~ChunkCache() {
    for (std::byte* p : free) std::free(p);
    chunk_cache_destroyed = true;
  }
};

static ChunkCache* chunk_cache() {
  if (chunk_cache_destroyed) return nullptr;
  thread_local ChunkCache cache;
  return &cache;
}

void* TapeArena::do_allocate(std::size_t bytes, std::size_t alignment) {
  std::size_t pad = reinterpret_cast<std::uintptr_t>(next_) % alignment;
  pad = pad == 0 ? 0 : alignment - pad;
  if (next_ == nullptr || pad + bytes > left_) {
    if (bytes + alignment > kChunkBytes) {
      large_.emplace_back(allocate_bytes(bytes + alignment));
      large_bytes_ += bytes + alignment;
      auto* p = large_.back().get();
      const std::size_t skip = reinterpret_cast<std::uintptr_t>(p) % alignment;
      return p + (skip == 0 ? 0 : alignment - skip);
    }
    ChunkCache* cache = chunk_cache();
    std::byte* chunk = nullptr;
    if (cache != nullptr && !cache->free.empty()) {
      chunk = cache->free.back();
      cache->free.pop_back();
    } else {
      chunk = allocate_bytes(kChunkBytes);
    }
    chunks_.emplace_back(chunk);
    next_ = chunk;
    left_ = kChunkBytes;
    pad = reinterpret_cast<std::uintptr_t>(next_) % alignment;
    pad = pad == 0 ? 0 : alignment - pad;
  }
  std::byte* p = next_ + pad;
  next_ = p + bytes;
  left_ -= pad + bytes;
  return p;
}

std::size_t TapeArena::bytes_reserved() const {
  return chunks_.size() * kChunkBytes + large_bytes_ +
         (chunks_.capacity() + large_.capacity()) * sizeof(Chunk);
}

void TapeArena::release() {
  ChunkCache* cache = chunk_cache();
  for (auto& chunk : chunks_) {
    if (cache != nullptr && cache->free.size() < kCachedChunks)
      cache->free.push_back(chunk.release());
  }
  chunks_.clear();
  large_.clear();
  large_bytes_ = 0;
  next_ = nullptr;
  left_ = 0;
}

}  // namespace tapegrad::detail
