// Copying a rectangular box of elements between two row-major buffers: the one kernel behind
// slice and its gradient (padding into zeros), and of concat and split seen as rows of
// blocks (join_rows, split_rows). Contiguous innermost runs are copied with std::copy, short
// ones element by element; no xtensor views (they are slow on this stack).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"

namespace tapegrad::detail {

// Innermost runs shorter than this are copied element by element.
constexpr std::size_t kShortRun = 16;

// Copies the box of extent `box` that starts at `src_begin` in `src` (shape `src_shape`) to
// the position `dst_begin` in `dst` (shape `dst_shape`). All vectors have the same length,
// the rank; the caller has checked that the box fits in both.
template <class T>
void copy_box(const T* src, const Shape& src_shape, const std::vector<std::size_t>& src_begin,
              T* dst, const Shape& dst_shape, const std::vector<std::size_t>& dst_begin,
              const Shape& box) {
  const std::size_t rank = box.size();
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  if (num_elements(box) == 0) return;
  const auto src_strides = row_major_strides(src_shape);
  const auto dst_strides = row_major_strides(dst_shape);
  // The box's first element in each buffer.
  for (std::size_t d = 0; d < rank; ++d) {
    src += src_begin[d] * src_strides[d];
    dst += dst_begin[d] * dst_strides[d];
  }
  // Trailing axes the box spans fully in both buffers are one contiguous run (a slice of
  // whole rows, a concat along axis 1 of [b, n, 3] arrays): fold them into the innermost axis.
  std::size_t walked = rank - 1;
  std::size_t run = box[rank - 1];
  while (walked > 0 && box[walked] == src_shape[walked] && box[walked] == dst_shape[walked]) {
    --walked;
    run *= box[walked];
  }
  StridedCursor rows(box, walked, src_strides, dst_strides);
  // Short runs (a column of a [p, 15] matrix: split, concat, their gradients) element by
  // element: a library copy call per run costs far more than the few elements it moves.
  if (run == 1) {
    rows.for_each([&](std::size_t from, std::size_t to) { dst[to] = src[from]; });
  } else if (run < kShortRun) {
    rows.for_each([&](std::size_t from, std::size_t to) {
      for (std::size_t k = 0; k < run; ++k) dst[to + k] = src[from + k];
    });
  } else {
    rows.for_each([&](std::size_t from, std::size_t to) {
      std::copy(src + from, src + from + run, dst + to);
    });
  }
}

// Copies n elements, element by element when n is short (see kShortRun).
template <class T>
void copy_run(const T* src, std::size_t n, T* dst) {
  if (n < kShortRun) {
    for (std::size_t k = 0; k < n; ++k) dst[k] = src[k];
  } else {
    std::copy(src, src + n, dst);
  }
}

// Concatenation along an axis seen as `outer` rows (the product of the dimensions before the
// axis): row o of dst is row o of every part side by side, part k's rows being widths[k]
// elements long. Writes dst in order, one pass for all parts (concat, split's gradient).
template <class T>
void join_rows(const std::vector<const T*>& parts, const std::vector<std::size_t>& widths,
               std::size_t outer, T* dst) {
  std::size_t row = 0;
  for (std::size_t w : widths) row += w;
  // Single columns (a [p, 1] column per part): a tight inner loop over the parts. (Part by
  // part, each a strided loop, measured slower.)
  if (std::all_of(widths.begin(), widths.end(), [](std::size_t w) { return w == 1; })) {
    const std::size_t n = parts.size();
    const T* const* from = parts.data();
    for (std::size_t o = 0; o < outer; ++o, dst += row) {
      for (std::size_t k = 0; k < n; ++k) dst[k] = from[k][o];
    }
    return;
  }
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      copy_run(parts[k] + o * widths[k], widths[k], dst);
      dst += widths[k];
    }
  }
}

// The inverse of join_rows: reads src in order, one pass for all parts (split).
template <class T>
void split_rows(const T* src, std::size_t outer, const std::vector<T*>& parts,
                const std::vector<std::size_t>& widths) {
  std::size_t row = 0;
  for (std::size_t w : widths) row += w;
  if (std::all_of(widths.begin(), widths.end(), [](std::size_t w) { return w == 1; })) {
    // Single columns: blocks of rows, part by part within a block, so each part is written
    // as a run. Writing every part on every row (as join_rows reads them) keeps one store
    // stream per part open, and with 15 parts of 31,843 elements (GradBench's ba) those
    // streams conflicted in the cache: 5.6x slower.
    constexpr std::size_t kBlock = 64;
    const std::size_t n = parts.size();
    for (std::size_t first = 0; first < outer; first += kBlock) {
      const std::size_t last = std::min(outer, first + kBlock);
      for (std::size_t k = 0; k < n; ++k) {
        T* to = parts[k];
        const T* from = src + k;
        for (std::size_t o = first; o < last; ++o) to[o] = from[o * row];
      }
    }
    return;
  }
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      copy_run(src, widths[k], parts[k] + o * widths[k]);
      src += widths[k];
    }
  }
}

}  // namespace tapegrad::detail
