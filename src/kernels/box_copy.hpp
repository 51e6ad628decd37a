// Copying a rectangular box of elements between two row-major buffers: the one kernel behind
// slice, its gradient (padding into zeros), concat and split. Contiguous innermost runs are
// copied with std::copy; no xtensor views (they are slow on this stack).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"

namespace tapegrad::detail {

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
  StridedCursor(box, walked, src_strides, dst_strides)
      .for_each([&](std::size_t from, std::size_t to) {
        // A call of memmove per run costs more than a few elements (a [n, 2] column block).
        if (run < 8) {
          for (std::size_t j = 0; j < run; ++j) dst[to + j] = src[from + j];
        } else {
          std::copy(src + from, src + from + run, dst + to);
        }
      });
}

}  // namespace tapegrad::detail
