// The memory a tape's entries describe themselves with (shapes, ids, dtypes).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <memory_resource>
#include <vector>

namespace tapegrad::detail {

// A bump allocator over fixed-size chunks. Nothing is freed before the tape is cleared or
// destroyed, and then the chunks go to a small per-thread cache for the next tape, so a
// training loop that builds a tape per step never returns them to the system (glibc trims
// and re-faults such memory: ~0.3 ms per step in PITFALLS.md).
class TapeArena final : public std::pmr::memory_resource {
 public:
  TapeArena() = default;
  TapeArena(const TapeArena&) = delete;
  TapeArena& operator=(const TapeArena&) = delete;
  ~TapeArena() override { release(); }

  // Gives every chunk back (to the per-thread cache, or to the system past its bound).
  void release();
  // Bytes of the chunks and large blocks this arena holds.
  std::size_t bytes_reserved() const;

 private:
  struct FreeChunk {
    void operator()(std::byte* p) const { std::free(p); }
  };
  using Chunk = std::unique_ptr<std::byte, FreeChunk>;

  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::vector<Chunk> chunks_;  // standard-size chunks, the last one being filled
  std::vector<Chunk> large_;   // single allocations bigger than a chunk
  std::size_t large_bytes_ = 0;
  std::byte* next_ = nullptr;
  std::size_t left_ = 0;
};

}  // namespace tapegrad::detail
