// A stateless std::allocator over a pair of functions that hand out and take back raw blocks:
// the tensor handles' free lists (kernels/impl_blocks.hpp) and the large bookkeeping blocks
// (kernels/buffer_cache.hpp) are both containers' allocators this way.
#pragma once

#include <cstddef>

namespace tapegrad::detail {

template <class T, void* (*Take)(std::size_t), void (*Give)(void*, std::size_t) noexcept>
struct BlockAllocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "the blocks have operator new's alignment");
  using value_type = T;
  template <class U>
  struct rebind {
    using other = BlockAllocator<U, Take, Give>;
  };
  BlockAllocator() noexcept = default;
  template <class U>
  BlockAllocator(const BlockAllocator<U, Take, Give>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) { return static_cast<T*>(Take(n * sizeof(T))); }
  void deallocate(T* block, std::size_t n) noexcept { Give(block, n * sizeof(T)); }
  template <class U>
  bool operator==(const BlockAllocator<U, Take, Give>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const BlockAllocator<U, Take, Give>&) const noexcept {
    return false;
  }
};

}  // namespace tapegrad::detail
