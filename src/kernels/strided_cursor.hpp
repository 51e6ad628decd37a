// The one strided index walk of the kernels: an odometer over a shape, carrying for each of N
// operands the element offset sum(index[d] * strides[d]). Behind transpose, the reductions'
// general case, box copies (slice, concat, split, pad), tile, and the broadcasting loops.
//
//   StridedCursor walk(out_shape, out_shape.size(), permuted_strides);   // one operand
//   for (std::size_t k = 0; k < n; ++k, walk.next()) dst[k] = src[walk.offset(0)];
//
//   StridedCursor rows(box, rank - 1, src_strides, dst_strides);        // all but the last axis
//   for (...; rows.next()) std::copy(src + rows.offset(0), ..., dst + rows.offset(1));
//
// A stride of 0 repeats an operand along that axis (broadcasting, a reduction's output).
#pragma once

#include <array>
#include <cstddef>

#include <xtensor/xstorage.hpp>

namespace tapegrad::detail {

template <std::size_t N>
class StridedCursor {
 public:
  // Walks the first `rank` axes of `extent` in row-major order, starting at index 0 (every
  // offset 0). `strides` are N containers of at least `rank` element strides, one per operand.
  template <class Extent, class... Strides>
  StridedCursor(const Extent& extent, std::size_t rank, const Strides&... strides)
      : extent_(extent.begin(), extent.begin() + static_cast<std::ptrdiff_t>(rank)),
        index_(rank, 0),
        strides_{Axes(strides.begin(), strides.begin() + static_cast<std::ptrdiff_t>(rank))...} {
    static_assert(sizeof...(Strides) == N, "one stride list per operand");
    for (std::size_t k = 0; k < N; ++k) {
      wrap_[k] = Axes(rank);
      for (std::size_t d = 0; d < rank; ++d) wrap_[k][d] = strides_[k][d] * extent_[d];
    }
  }

  // The element offset of operand k at the current index.
  std::size_t offset(std::size_t k) const { return offsets_[k]; }

  // Advances to the next index in row-major order; after the last one every offset is back at 0.
  void next() {
    for (std::size_t d = extent_.size(); d-- > 0;) {
      ++index_[d];
      for (std::size_t k = 0; k < N; ++k) offsets_[k] += strides_[k][d];
      if (index_[d] < extent_[d]) return;
      for (std::size_t k = 0; k < N; ++k) offsets_[k] -= wrap_[k][d];
      index_[d] = 0;
    }
  }

 private:
  // Inline storage up to rank 8: a cursor on a small tensor does not allocate.
  using Axes = xt::svector<std::size_t, 8>;
  Axes extent_;
  Axes index_;
  std::array<Axes, N> strides_;
  std::array<Axes, N> wrap_;  // strides * extent: what a carry takes back
  std::array<std::size_t, N> offsets_{};
};

template <class Extent, class... Strides>
StridedCursor(const Extent&, std::size_t, const Strides&...) -> StridedCursor<sizeof...(Strides)>;

}  // namespace tapegrad::detail
