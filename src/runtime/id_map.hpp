// A flat hash map from tensor ids to small values: open addressing with linear probing.
// The tape inserts one key per recorded output and the backward walk looks up every input;
// std::unordered_map's node per key cost more than the ops being recorded.
//
// Filled up to 7/8 before it doubles: the ids a thread hands out are mostly consecutive, and
// Fibonacci hashing spreads consecutive keys evenly (at most three distinct gaps between
// them), so the runs linear probing walks stay short even that full, and a tape's map is
// 44-88 % full instead of 38-75 % (12 bytes a cell: a long tape's biggest bookkeeping item
// after its entries).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/buffer_cache.hpp"

namespace tapegrad::detail {

// Tensor ids start at 1, so 0 marks an empty cell.
template <class Value>
class IdMap {
 public:
  IdMap() = default;

  Value* find(std::uint64_t key) {
    if (size_ == 0) return nullptr;
    for (std::size_t i = bucket(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == 0) return nullptr;
    }
  }
  const Value* find(std::uint64_t key) const { return const_cast<IdMap*>(this)->find(key); }
  bool contains(std::uint64_t key) const { return find(key) != nullptr; }

  // Inserts (key, value) unless the key is present; returns the stored value and whether
  // it was inserted.
  std::pair<Value*, bool> try_emplace(std::uint64_t key, Value value) {
    if ((size_ + 1) * 8 > keys_.size() * 7) grow();
    for (std::size_t i = bucket(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return {&values_[i], false};
      if (keys_[i] == 0) {
        keys_[i] = key;
        values_[i] = std::move(value);
        ++size_;
        return {&values_[i], true};
      }
    }
  }
  // Inserts or overwrites.
  void assign(std::uint64_t key, Value value) {
    auto [slot, inserted] = try_emplace(key, value);
    if (!inserted) *slot = std::move(value);
  }

  std::size_t size() const { return size_; }
  // Heap bytes of the cells.
  std::size_t bytes_reserved() const {
    return keys_.capacity() * sizeof(std::uint64_t) + values_.capacity() * sizeof(Value);
  }
  void clear() {
    keys_.clear();
    values_.clear();
    size_ = 0;
    mask_ = 0;
    shift_ = 64;
  }
  // Empties the map but keeps its cells, for a map filled and emptied many times over
  // (after clear() the next key starts again from 16 cells).
  void reset() {
    std::fill(keys_.begin(), keys_.end(), 0);
    size_ = 0;
  }
  void reserve(std::size_t n) {
    while (n * 8 > keys_.size() * 7) grow();
  }
  // The number of keys the map expects: its first cells are allocated for that many, so that
  // a map that reaches it never regrows (each doubling re-inserts every key). Allocates
  // nothing until the first insertion.
  void expect(std::size_t keys) { expected_keys_ = keys; }

 private:
  std::size_t bucket(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);  // Fibonacci hashing
  }
  void grow() {
    Keys old_keys = std::move(keys_);
    Values old_values = std::move(values_);
    std::size_t capacity = old_keys.size() * 2;
    if (old_keys.empty()) {
      capacity = 16;
      while (expected_keys_ * 8 > capacity * 7) capacity *= 2;
    }
    keys_.assign(capacity, 0);
    values_.assign(capacity, Value());
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != 0) try_emplace(old_keys[i], std::move(old_values[i]));
    }
  }

  // A trace's or a long tape's map reaches megabytes: its cells on huge pages then.
  using Keys = std::vector<std::uint64_t, BookkeepingAllocator<std::uint64_t>>;
  using Values = std::vector<Value, BookkeepingAllocator<Value>>;
  Keys keys_;
  Values values_;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t expected_keys_ = 0;
};

}  // namespace tapegrad::detail
