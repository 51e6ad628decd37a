// unsorted_segment_sum's loop: rows of `data` added into their segments' rows of `out`, each
// segment's rows in the order they come, in one pass. A float32 segment that receives more
// than kInOrderRows rows goes on in float64 (running_accumulator.hpp) and is rounded once: a
// running float32 sum's error grows with its number of terms (2^22 rows of 0.1f into one
// segment ended 5.7 % off). Only those segments get a float64 row, so densifying a float32
// embedding's gradient (most segments touched a few times) needs no float64 copy of the whole
// output.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kernels/int_arith.hpp"
#include "kernels/running_accumulator.hpp"

namespace tapegrad::detail {

// Rows a float32 segment adds in float32 before it goes on in float64.
constexpr std::size_t kInOrderRows = 32;
static_assert(kInOrderRows < 255, "rows per segment are counted in one byte, saturating");

// Adds each row k of data (`length` elements: a std::size_t, or a std::integral_constant for
// a length known at compile time) to row ids[k] of out, checking each id as it goes (the
// first negative or too large one throws out_of_range(k)); `wide`, when it says so, takes the
// row instead.
template <class T, class Ids, class Length, class OutOfRange, class Wide>
void add_rows_by_segment(const T* data, const Ids& ids, Length row_length, std::size_t num_segments,
                         T* out, OutOfRange& out_of_range, Wide wide) {
  const std::size_t length = row_length;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const auto id = static_cast<std::uint64_t>(ids[k]);  // a negative id: past the end
    if (id >= num_segments) throw out_of_range(k);
    const T* from = data + k * length;
    if (wide(id, from)) continue;
    T* row = out + id * length;
    for (std::size_t j = 0; j < length; ++j) row[j] = wrapping_add(row[j], from[j]);
  }
}

// out (num_segments rows of `length`, zeroed here) = the sum of data's rows by segment: row k
// of data goes to segment ids[k]. out_of_range(k) gives the exception thrown for the first k
// whose id is negative or not below num_segments (out is then partly summed).
template <class T, class Ids, class OutOfRange>
void segment_sum_rows(const T* data, const Ids& ids, std::size_t length, std::size_t num_segments,
                      T* out, OutOfRange out_of_range) {
  std::fill(out, out + num_segments * length, T(0));
  const auto add_rows = [&](auto wide) {
    // One element per id (a gather's gradient from a flat tensor) as a compile-time length.
    if (length == 1) {
      add_rows_by_segment(data, ids, std::integral_constant<std::size_t, 1>{}, num_segments, out,
                          out_of_range, wide);
    } else {
      add_rows_by_segment(data, ids, length, num_segments, out, out_of_range, wide);
    }
  };
  const auto in_order = [](std::uint64_t, const T*) { return false; };
  using A = RunningAccumulator<T>;
  if constexpr (std::is_same_v<A, T>) {
    add_rows(in_order);
  } else {
    // Rows so far per segment (one byte each, kInOrderRows + 1 once the segment is busy). A
    // segment's first kInOrderRows rows are added in T; at the next, its partial sum moves to
    // a float64 row, where its remaining rows are added. Busy segments' slots by segment id: a
    // table when it is no larger than 4 ids per row of data (the ids themselves take 8 bytes
    // each), else a hash map (few segments are busy then, and only their rows look it up).
    std::vector<std::uint8_t> count(num_segments, 0);
    const bool table = num_segments <= 4 * ids.size();
    std::vector<std::uint32_t> slot_table;
    std::unordered_map<std::uint64_t, std::size_t> slot_map;
    std::vector<std::uint64_t> busy;
    std::vector<A> wide;
    add_rows([&](std::uint64_t id, const T* from) {
      std::uint8_t& rows_so_far = count[id];
      if (rows_so_far < kInOrderRows) {
        ++rows_so_far;
        return false;
      }
      std::size_t slot = 0;
      if (rows_so_far == kInOrderRows) {
        rows_so_far = kInOrderRows + 1;
        slot = busy.size();
        busy.push_back(id);
        if (table) {
          if (slot_table.empty()) slot_table.resize(num_segments);
          slot_table[id] = static_cast<std::uint32_t>(slot);
        } else {
          slot_map.emplace(id, slot);
        }
        wide.resize(wide.size() + length);
        const T* partial = out + id * length;
        for (std::size_t j = 0; j < length; ++j) wide[slot * length + j] = A(partial[j]);
      } else {
        slot = table ? slot_table[id] : slot_map.find(id)->second;
      }
      A* row = wide.data() + slot * length;
      for (std::size_t j = 0; j < length; ++j) row[j] += A(from[j]);
      return true;
    });
    for (std::size_t slot = 0; slot < busy.size(); ++slot) {
      T* row = out + busy[slot] * length;
      for (std::size_t j = 0; j < length; ++j) row[j] = T(wide[slot * length + j]);
    }
  }
}

}  // namespace tapegrad::detail
