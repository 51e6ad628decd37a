// Gathering a strided view's elements into a contiguous row-major buffer: the copy a view
// makes when a reader needs contiguous elements (Tensor::array<T>() of a transpose, say).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tapegrad/dtype.hpp"

namespace tapegrad::detail {

// out[row-major index i0, i1, ...] = from[offset + i0 * strides[0] + i1 * strides[1] + ...]
// over `shape` (`rank` axes; strides in elements, any sign). A permutation of a dense block
// (a transpose) is copied tile by tile, so neither side is read one element per cache line.
template <class T>
void copy_strided(const T* from, std::size_t offset, const std::size_t* shape,
                  const std::ptrdiff_t* strides, std::size_t rank, T* out);

// to [cols, rows] = from [rows, cols] transposed, tile by tile (copy_strided).
template <class T>
void transpose_rows(const T* from, std::size_t rows, std::size_t cols, T* to) {
  const std::size_t shape[2] = {cols, rows};
  const std::ptrdiff_t strides[2] = {1, static_cast<std::ptrdiff_t>(cols)};
  copy_strided(from, 0, shape, strides, 2, to);
}

extern template void copy_strided<float>(const float*, std::size_t, const std::size_t*,
                                         const std::ptrdiff_t*, std::size_t, float*);
extern template void copy_strided<double>(const double*, std::size_t, const std::size_t*,
                                          const std::ptrdiff_t*, std::size_t, double*);
extern template void copy_strided<std::int32_t>(const std::int32_t*, std::size_t,
                                                const std::size_t*, const std::ptrdiff_t*,
                                                std::size_t, std::int32_t*);
extern template void copy_strided<std::int64_t>(const std::int64_t*, std::size_t,
                                                const std::size_t*, const std::ptrdiff_t*,
                                                std::size_t, std::int64_t*);
extern template void copy_strided<bool>(const bool*, std::size_t, const std::size_t*,
                                        const std::ptrdiff_t*, std::size_t, bool*);

}  // namespace tapegrad::detail
