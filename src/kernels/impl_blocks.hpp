// The memory of tensor handles: a TensorImpl and its shared_ptr control block, one block per
// tensor, from a per-thread free list (kernels/impl_blocks.cpp).
//
// Why: every op makes a tensor and a backward walk frees thousands at once; glibc keeps only
// seven freed chunks of a size per thread at hand, so most of those blocks went through its
// slower bins (malloc and free were 10-15 % of GradBench's eager lstm).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "kernels/block_allocator.hpp"

namespace tapegrad::detail {

void* take_impl_block(std::size_t bytes);
void give_back_impl_block(void* block, std::size_t bytes) noexcept;
// The bytes of the freed blocks the calling thread's lists hold, and handing them back to the
// system (release_cached_memory does, for the calling thread).
std::size_t impl_blocks_cached() noexcept;
void release_impl_blocks() noexcept;

// A stateless allocator over those blocks, for std::allocate_shared.
template <class T>
using ImplBlockAllocator = BlockAllocator<T, take_impl_block, give_back_impl_block>;

// std::make_shared<Impl>(args...) with its block from the free lists.
template <class Impl, class... Args>
std::shared_ptr<Impl> make_impl_shared(Args&&... args) {
  return std::allocate_shared<Impl>(ImplBlockAllocator<Impl>(), std::forward<Args>(args)...);
}

}  // namespace tapegrad::detail
