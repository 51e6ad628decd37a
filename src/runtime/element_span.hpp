// A read-only view of contiguous elements (C++17 has no std::span): what a Function's replay
// items read, whether a traced op's InlineVector or a fused loop's std::vector holds them.
#pragma once

#include <cstddef>

namespace tapegrad::detail {

template <class T>
class ElementSpan {
 public:
  ElementSpan(const T* data, std::size_t size) : data_(data), size_(size) {}
  template <class Container>
  ElementSpan(const Container& elements)  // NOLINT(google-explicit-constructor)
      : data_(elements.data()), size_(elements.size()) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  const T* data_;
  std::size_t size_;
};

}  // namespace tapegrad::detail
