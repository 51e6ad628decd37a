// A vector that grows by fixed segments instead of regrowing into one buffer. A Function's
// trace appends tens of thousands of ops: a std::vector of them regrew into fresh memory at
// each doubling, moving every op and touching twice the pages the ops need (GradBench's lstm,
// 55,000 ops of 184 bytes then: 15 % of its first call).
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace tapegrad::detail {

// Elements are indexed as in a std::vector. The first segment grows as a std::vector does (a
// short trace takes little), the later ones are reserved whole: an element past the first
// segment never moves.
template <class T, std::size_t SegmentLog2 = 9>
class SegmentedVector {
 public:
  static constexpr std::size_t kSegment = std::size_t{1} << SegmentLog2;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return segments_[i >> SegmentLog2][i & (kSegment - 1)]; }
  const T& operator[](std::size_t i) const {
    return segments_[i >> SegmentLog2][i & (kSegment - 1)];
  }

  void push_back(T value) { emplace_back() = std::move(value); }
  // A default-constructed element at the end, to be filled in place.
  T& emplace_back() {
    const std::size_t segment = size_ >> SegmentLog2;
    if (segment == segments_.size()) {
      segments_.emplace_back();
      if (segment != 0) segments_.back().reserve(kSegment);
    }
    T& added = segments_[segment].emplace_back();
    ++size_;
    return added;
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator(const SegmentedVector* owner, std::size_t index)
        : owner_(owner), index_(index) {}
    reference operator*() const { return (*owner_)[index_]; }
    pointer operator->() const { return &(*owner_)[index_]; }
    const_iterator& operator++() {
      ++index_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const const_iterator& other) const { return index_ == other.index_; }
    bool operator!=(const const_iterator& other) const { return index_ != other.index_; }

   private:
    const SegmentedVector* owner_;
    std::size_t index_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  std::vector<std::vector<T>> segments_;
  std::size_t size_ = 0;
};

}  // namespace tapegrad::detail
