// The buffer cache's size classes, for what counts memory (GradientTape::bytes_held), and the
// memory it maps itself.
#pragma once

#include <cstddef>

namespace tapegrad::detail {

// The bytes of the buffer a request of `bytes` gets (its size class: at least 64).
std::size_t buffer_class_bytes(std::size_t bytes) noexcept;

// What glibc's malloc takes for a request of `bytes` (8 bytes of header, rounded up to 16, at
// least 32): close to what malloc_usable_size would say, without asking it. For what counts
// the heap behind other blocks (a tensor's handle, a tape's bookkeeping).
std::size_t malloc_footprint(std::size_t bytes) noexcept;

// The bytes of the buffers the cache mapped from the system itself (2 MiB and larger, on
// Linux), in use or cached: memory that malloc's own figures (mallinfo2) do not see.
std::size_t buffer_bytes_mapped() noexcept;

}  // namespace tapegrad::detail
