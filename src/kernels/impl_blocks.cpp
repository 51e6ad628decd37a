// Free lists of tensor-handle blocks (kernels/impl_blocks.hpp): per thread, by size in steps
// of 16 bytes up to 1 KiB, each at most kListLength long; a block freed on another thread
// joins that thread's list. Under AddressSanitizer every block goes back to the system, so
// that a use after free is still caught.
#include "kernels/impl_blocks.hpp"

#include <array>
#include <new>

#include "kernels/buffer_cache.hpp"

namespace tapegrad::detail {
namespace {

constexpr std::size_t kStep = 16;
constexpr std::size_t kLargest = 1024;  // larger blocks: straight from operator new
// A replay of an LSTM keeps about ten handles per step alive for its backward (20,000 for
// GradBench's lstm): lists of 4,096 sent the rest to malloc and back on every call.
constexpr std::size_t kListLength = 32768;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif
#else
constexpr bool kPooled = true;
#endif

struct FreeBlock {
  FreeBlock* next;
};

thread_local bool lists_gone = false;

struct BlockLists {
  std::array<FreeBlock*, kLargest / kStep> first{};
  std::array<std::size_t, kLargest / kStep> length{};

  BlockLists() = default;
  BlockLists(const BlockLists&) = delete;
  BlockLists& operator=(const BlockLists&) = delete;
  ~BlockLists() {
    release();
    lists_gone = true;
  }
  void release() noexcept {
    for (std::size_t list = 0; list < first.size(); ++list) {
      FreeBlock* block = first[list];
      while (block != nullptr) {
        FreeBlock* next = block->next;
        ::operator delete(static_cast<void*>(block));
        block = next;
      }
      first[list] = nullptr;
      length[list] = 0;
    }
  }
};

// The calling thread's lists, or null while its thread_local objects are being destroyed.
BlockLists* own_lists() {
  if (lists_gone) return nullptr;
  thread_local BlockLists lists;
  return &lists;
}

std::size_t list_of(std::size_t bytes) { return (bytes + kStep - 1) / kStep - 1; }

}  // namespace

void* take_impl_block(std::size_t bytes) {
  if (!kPooled || bytes == 0 || bytes > kLargest) return ::operator new(bytes);
  // Always the whole step: a block made while this thread's lists are gone may still join
  // another thread's list when it is freed.
  const std::size_t list = list_of(bytes);
  if (BlockLists* lists = own_lists()) {
    if (FreeBlock* block = lists->first[list]) {
      lists->first[list] = block->next;
      --lists->length[list];
      return block;
    }
  }
  return ::operator new((list + 1) * kStep);
}

void give_back_impl_block(void* block, std::size_t bytes) noexcept {
  if (kPooled && bytes != 0 && bytes <= kLargest) {
    if (BlockLists* lists = own_lists()) {
      const std::size_t list = list_of(bytes);
      if (lists->length[list] < kListLength) {
        lists->first[list] = ::new (block) FreeBlock{lists->first[list]};
        ++lists->length[list];
        return;
      }
    }
  }
  ::operator delete(block);
}

std::size_t impl_blocks_cached() noexcept {
  const BlockLists* lists = own_lists();
  if (lists == nullptr) return 0;
  std::size_t bytes = 0;
  for (std::size_t list = 0; list < lists->length.size(); ++list) {
    bytes += lists->length[list] * malloc_footprint((list + 1) * kStep);
  }
  return bytes;
}

void release_impl_blocks() noexcept {
  if (BlockLists* lists = own_lists()) lists->release();
}

}  // namespace tapegrad::detail
