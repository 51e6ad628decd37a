// The one strided index walk of the kernels: an odometer over a shape, carrying for each of N
// operands the element offset sum(index[d] * strides[d]). Behind transpose, the reductions'
// general case, box copies (slice, concat, split, pad), tile, and the broadcasting loops.
//
//   // the rows of a box (every axis but the last), in a source and a destination:
//   StridedCursor rows(box, rank - 1, src_strides, dst_strides);
//   rows.for_each([&](std::size_t from, std::size_t to) { std::copy(...); });
//
//   // or stepping by hand:
//   for (std::size_t k = 0; k < n; ++k, walk.next()) dst[k] = src[walk.offset(0)];
//
// A stride of 0 repeats an operand along that axis (broadcasting, a reduction's output).
// for_each is the fast way: its innermost axis is a plain loop on local offsets.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>

#include <xtensor/xstorage.hpp>

namespace tapegrad::detail {

template <std::size_t N>
class StridedCursor {
 public:
  // Walks the first `rank` axes of `extent` in row-major order, starting at index 0 (every
  // offset 0). `strides` are N containers of at least `rank` element strides, one per operand.
  template <class Extent, class... Strides>
  StridedCursor(const Extent& extent, std::size_t rank, const Strides&... strides)
      : axes_(rank, Axis{}) {
    static_assert(sizeof...(Strides) == N, "one stride list per operand");
    for (std::size_t d = 0; d < rank; ++d) {
      axes_[d].extent = extent[d];
      axes_[d].stride = {static_cast<std::size_t>(strides[d])...};
      empty_ = empty_ || extent[d] == 0;
    }
  }

  // The element offset of operand k at the current index.
  std::size_t offset(std::size_t k) const { return offsets_[k]; }

  // Advances to the next index in row-major order; after the last one every offset is back at 0.
  void next() { carry(axes_.size()); }

  // Calls visit(offset of operand 0, ..., of operand N-1) at every index, in row-major order
  // (once for rank 0, never when an extent is 0). Call it on a cursor at its start; it ends
  // there again.
  template <class Visit>
  void for_each(Visit&& visit) {
    const std::size_t rank = axes_.size();
    if (empty_) return;
    if (rank == 0) {
      std::apply(visit, offsets_);
      return;
    }
    const Axis inner = axes_[rank - 1];
    do {
      std::array<std::size_t, N> at = offsets_;
      for (std::size_t i = 0; i < inner.extent; ++i) {
        std::apply(visit, at);
        for (std::size_t k = 0; k < N; ++k) at[k] += inner.stride[k];
      }
    } while (carry(rank - 1));
  }

 private:
  struct Axis {
    std::size_t extent = 0;
    std::size_t index = 0;
    std::array<std::size_t, N> stride{};
  };

  // Adds one at axis rank - 1, carrying into the axes before it; false when the index wrapped
  // back to the start.
  bool carry(std::size_t rank) {
    for (std::size_t d = rank; d-- > 0;) {
      Axis& axis = axes_[d];
      for (std::size_t k = 0; k < N; ++k) offsets_[k] += axis.stride[k];
      if (++axis.index < axis.extent) return true;
      for (std::size_t k = 0; k < N; ++k) offsets_[k] -= axis.stride[k] * axis.extent;
      axis.index = 0;
    }
    return false;
  }

  // Inline storage up to rank 8: a cursor on a small tensor does not allocate.
  xt::svector<Axis, 8> axes_;
  std::array<std::size_t, N> offsets_{};
  bool empty_ = false;
};

template <class Extent, class... Strides>
StridedCursor(const Extent&, std::size_t, const Strides&...) -> StridedCursor<sizeof...(Strides)>;

}  // namespace tapegrad::detail
