// The buffer cache's size classes, for what counts memory (GradientTape::bytes_held).
#pragma once

#include <cstddef>

namespace tapegrad::detail {

// The bytes of the buffer a request of `bytes` gets (its size class: at least 64).
std::size_t buffer_class_bytes(std::size_t bytes) noexcept;

}  // namespace tapegrad::detail
