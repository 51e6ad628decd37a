// A vector that grows by segments instead of regrowing into one buffer. A Function's
// trace appends tens of thousands of ops: a std::vector of them regrew into fresh memory at
// each doubling, moving every op and touching twice the pages the ops need (GradBench's lstm,
// 55,000 ops of 184 bytes then: 15 % of its first call).
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

#include "kernels/buffer_cache.hpp"

namespace tapegrad::detail {

// Elements are indexed as in a std::vector. Segment s holds 2^s times the first segment's
// elements (2^BaseLog2), each reserved whole when it is begun: no element ever moves, a short
// trace takes little, and a long one's later segments pass 2 MiB and come from huge pages
// (BookkeepingAllocator): GradBench lstm's 55,000 traced ops faulted in 2,075 pages of 4 KiB.
template <class T, std::size_t BaseLog2 = 9>
class SegmentedVector {
 public:
  static constexpr std::size_t kFirstSegment = std::size_t{1} << BaseLog2;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) {
    const Place place = locate(i);
    return segments_[place.segment][place.offset];
  }
  const T& operator[](std::size_t i) const {
    const Place place = locate(i);
    return segments_[place.segment][place.offset];
  }

  void push_back(T value) { emplace_back() = std::move(value); }
  // A default-constructed element at the end, to be filled in place.
  T& emplace_back() {
    const Place place = locate(size_);
    if (place.segment == segments_.size()) {
      segments_.emplace_back();
      segments_.back().reserve(kFirstSegment << place.segment);
    }
    T& added = segments_[place.segment].emplace_back();
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
  struct Place {
    std::size_t segment;
    std::size_t offset;
  };
  // Segments 0 to s - 1 hold (2^s - 1) first segments' worth of elements.
  static Place locate(std::size_t i) {
    const std::size_t first_segments = (i >> BaseLog2) + 1;
    const auto segment = static_cast<std::size_t>(63 - __builtin_clzll(first_segments));
    return {segment, i - (((std::size_t{1} << segment) - 1) << BaseLog2)};
  }

  std::vector<std::vector<T, BookkeepingAllocator<T>>> segments_;
  std::size_t size_ = 0;
};

}  // namespace tapegrad::detail
