#include "detail/tape_arena.hpp"

#include <cstdint>
#include <new>

namespace tapegrad::detail {
namespace {

constexpr std::size_t kChunkBytes = 32 * 1024;  // well under glibc's mmap threshold
constexpr std::size_t kCachedChunks = 64;        // 2 MiB per thread at most

std::byte* allocate_bytes(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(std::malloc(bytes));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

// Chunks of kChunkBytes a thread has finished with, ready for its next tape.
struct ChunkCache {
  std::vector<std::byte*> free;
  ~ChunkCache() {
    for (std::byte* p : free) std::free(p);
  }
};

static ChunkCache& chunk_cache() {
  thread_local ChunkCache cache;
  return cache;
}

void* TapeArena::do_allocate(std::size_t bytes, std::size_t alignment) {
  std::size_t pad = reinterpret_cast<std::uintptr_t>(next_) % alignment;
  pad = pad == 0 ? 0 : alignment - pad;
  if (next_ == nullptr || pad + bytes > left_) {
    if (bytes + alignment > kChunkBytes) {
      large_.emplace_back(allocate_bytes(bytes + alignment));
      auto* p = large_.back().get();
      const std::size_t skip = reinterpret_cast<std::uintptr_t>(p) % alignment;
      return p + (skip == 0 ? 0 : alignment - skip);
    }
    auto& cache = chunk_cache().free;
    std::byte* chunk = nullptr;
    if (!cache.empty()) {
      chunk = cache.back();
      cache.pop_back();
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

void TapeArena::release() {
  auto& cache = chunk_cache().free;
  for (auto& chunk : chunks_) {
    if (cache.size() < kCachedChunks) cache.push_back(chunk.release());
  }
  chunks_.clear();
  large_.clear();
  next_ = nullptr;
  left_ = 0;
}

}  // namespace tapegrad::detail
