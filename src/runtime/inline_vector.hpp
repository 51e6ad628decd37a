// A vector that holds its first N elements inline: a traced op's inputs and outputs are one to
// three, and a heap block each was a good part of what tracing an op cost. Not xt::svector
// (what the runtime keeps dimensions in): it copies its elements into a larger block without
// destroying them, so it cannot hold a traced input's Tensor, and for the outputs it made a
// new Function's first call 3 % slower than this.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace tapegrad::detail {

// The part of std::vector's interface the traces use. Elements past N move, all of them, to
// a std::vector; N elements are default-constructed inline (T must be cheap to default-construct).
// The heap part is held by pointer: 8 bytes where an empty std::vector took 24, in each of a
// traced op's two lists (a trace of 55,000 ops held 1.7 MB of empty vectors).
template <class T, std::size_t N>
class InlineVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() = default;
  InlineVector(const InlineVector& other)
      : inline_(other.inline_),
        heap_(other.heap_ != nullptr ? std::make_unique<std::vector<T>>(*other.heap_) : nullptr),
        size_(other.size_) {}
  InlineVector& operator=(const InlineVector& other) {
    if (this != &other) *this = InlineVector(other);
    return *this;
  }
  InlineVector(InlineVector&& other) noexcept
      : inline_(std::move(other.inline_)),
        heap_(std::move(other.heap_)),
        size_(std::exchange(other.size_, 0)) {}
  InlineVector& operator=(InlineVector&& other) noexcept {
    inline_ = std::move(other.inline_);
    heap_ = std::move(other.heap_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  ~InlineVector() = default;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ > N ? heap_->data() : inline_.data(); }
  const T* data() const { return size_ > N ? heap_->data() : inline_.data(); }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(std::size_t n) {
    if (n > N) heap().reserve(n);
  }
  T& emplace_back() { return push_back(T()); }
  T& push_back(T value) {
    if (size_ < N) {
      inline_[size_] = std::move(value);
      return inline_[size_++];
    }
    std::vector<T>& elements = heap();
    if (size_ == N) {
      elements.reserve(2 * N + 1);
      for (T& element : inline_) elements.push_back(std::move(element));
      inline_ = {};
    }
    elements.push_back(std::move(value));
    ++size_;
    return elements.back();
  }

  friend bool operator==(const InlineVector& a, const InlineVector& b) {
    if (a.size_ != b.size_) return false;
    for (std::size_t i = 0; i < a.size_; ++i) {
      if (!(a[i] == b[i])) return false;
    }
    return true;
  }
  friend bool operator!=(const InlineVector& a, const InlineVector& b) { return !(a == b); }

 private:
  std::vector<T>& heap() {
    if (heap_ == nullptr) heap_ = std::make_unique<std::vector<T>>();
    return *heap_;
  }

  std::array<T, N> inline_{};
  std::unique_ptr<std::vector<T>> heap_;
  std::size_t size_ = 0;
};

}  // namespace tapegrad::detail
