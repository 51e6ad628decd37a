// The allocator of every Tensor's elements: buffers from tapegrad's size-class cache, so that a
// loop building the same shapes each step obtains nothing from the system after its first
// steps, whatever the malloc settings (docs/guide.md, "Memory"). It includes no xtensor
// header: a program may force-include it to make its own xt::xarray<T> the storage type
// (README, "Any -march"), as the library itself is built.
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>

#include "tapegrad/config.hpp"

namespace tapegrad {
namespace detail {

// Buffers of 256 bytes or more start on this boundary (a cache line); smaller ones on 16.
inline constexpr std::size_t kBufferAlignment = 64;
static_assert(kBufferAlignment % TAPEGRAD_STORAGE_ALIGNMENT == 0,
              "buffers must meet the storage type's documented alignment");

// A buffer of at least `bytes` bytes, aligned as above: from the calling thread's
// cache, the process pool, or the system. std::bad_alloc when the system has none.
void* acquire_buffer(std::size_t bytes);
// Gives back a buffer acquire_buffer(bytes) returned, with the same `bytes`. Any thread.
void release_buffer(void* buffer, std::size_t bytes) noexcept;

}  // namespace detail

/// A stateless standard allocator over the buffer cache (all instances are equal, so arrays
/// move and swap their buffers freely, across threads too).
template <class T>
class buffer_allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_move_assignment = std::true_type;
  using is_always_equal = std::true_type;
  template <class U>
  struct rebind {
    using other = buffer_allocator<U>;
  };

  buffer_allocator() noexcept = default;
  template <class U>
  buffer_allocator(const buffer_allocator<U>&) noexcept {}  // NOLINT: rebinding converts

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::acquire_buffer(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::release_buffer(p, n * sizeof(T)); }
};

template <class T, class U>
bool operator==(const buffer_allocator<T>&, const buffer_allocator<U>&) noexcept {
  return true;
}
template <class T, class U>
bool operator!=(const buffer_allocator<T>&, const buffer_allocator<U>&) noexcept {
  return false;
}

}  // namespace tapegrad
