#include "kernels/strided_copy.hpp"

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include <xtensor/xstorage.hpp>

#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"

namespace tapegrad::detail {
namespace {

#if defined(__SSE2__)
// The square block of 16 bytes' width at src (rows `src_stride` apart), transposed into dst
// (rows `dst_stride` apart) in SSE registers: 4 x 4 floats or 2 x 2 doubles.
inline void transpose_block(const float* src, std::size_t src_stride, float* dst,
                            std::size_t dst_stride) {
  __m128 r0 = _mm_loadu_ps(src);
  __m128 r1 = _mm_loadu_ps(src + src_stride);
  __m128 r2 = _mm_loadu_ps(src + 2 * src_stride);
  __m128 r3 = _mm_loadu_ps(src + 3 * src_stride);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + dst_stride, r1);
  _mm_storeu_ps(dst + 2 * dst_stride, r2);
  _mm_storeu_ps(dst + 3 * dst_stride, r3);
}
inline void transpose_block(const double* src, std::size_t src_stride, double* dst,
                            std::size_t dst_stride) {
  const __m128d r0 = _mm_loadu_pd(src);
  const __m128d r1 = _mm_loadu_pd(src + src_stride);
  _mm_storeu_pd(dst, _mm_unpacklo_pd(r0, r1));
  _mm_storeu_pd(dst + dst_stride, _mm_unpackhi_pd(r0, r1));
}
#endif

// The tile rows [i0, i1) x columns [j0, j1) of src [rows, cols] into dst [cols, rows] through
// transpose_block, as many whole block columns as fit; returns the first column left to copy
// (j0 where no blocks apply: other dtypes, no SSE2).
template <class T>
std::size_t transpose_tile_in_blocks(const T* src, std::size_t rows, std::size_t cols,
                                     std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1,
                                     T* dst) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    constexpr std::size_t kBlock = 16 / sizeof(T);
    const std::size_t blocked_rows = i0 + (i1 - i0) / kBlock * kBlock;
    std::size_t j = j0;
    for (; j + kBlock <= j1; j += kBlock) {
      for (std::size_t i = i0; i < blocked_rows; i += kBlock) {
        transpose_block(src + i * cols + j, cols, dst + j * rows + i, rows);
      }
      for (std::size_t column = j; column < j + kBlock; ++column) {
        for (std::size_t i = blocked_rows; i < i1; ++i)
          dst[column * rows + i] = src[i * cols + column];
      }
    }
    return j;
  }
#endif
  (void)src, (void)rows, (void)cols, (void)i0, (void)i1, (void)j1, (void)dst;  // no blocks
  return j0;
}

// dst [cols, rows] = the transpose of src [rows, cols], in square tiles: a row-by-row walk
// reads one input element per cache line when both sides are long (a tall Jacobian's
// [26, 3N] -> [3N, 26]). Float and double tiles go through SSE registers in 16-byte blocks
// (2.2x faster on a channels-first batch of 16 x 1024 images), unless dst's rows are a
// multiple of 4 KiB apart: their blocks' stores then alias in the cache and the element-wise
// walk, which writes each row's run whole, was 1.8x faster (1024 x 16 float images).
template <class T>
void transpose_matrix(const T* src, std::size_t rows, std::size_t cols, T* dst) {
  constexpr std::size_t kTile = 16;
  const bool in_blocks = (rows * sizeof(T)) % 4096 != 0;
  for (std::size_t i0 = 0; i0 < rows; i0 += kTile) {
    const std::size_t i1 = std::min(rows, i0 + kTile);
    for (std::size_t j0 = 0; j0 < cols; j0 += kTile) {
      const std::size_t j1 = std::min(cols, j0 + kTile);
      std::size_t j =
          in_blocks ? transpose_tile_in_blocks(src, rows, cols, i0, i1, j0, j1, dst) : j0;
      for (; j < j1; ++j) {
        for (std::size_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * cols + j];
      }
    }
  }
}

// The same permutation on fewer axes: input axes that stay next to each other, in order, in
// the output are one axis ([b, n, 3] by (1, 2, 0) is the matrix transpose of [b, 3n]).
void merge_adjacent_axes(Shape& x_shape, std::vector<int>& perm) {
  std::vector<std::size_t> first_of_group;  // output position -> the group's first input axis
  std::vector<std::size_t> group_size;      // its element count
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const auto axis = static_cast<std::size_t>(perm[i]);
    if (i > 0 && perm[i] == perm[i - 1] + 1) {
      group_size.back() *= x_shape[axis];
    } else {
      first_of_group.push_back(axis);
      group_size.push_back(x_shape[axis]);
    }
  }
  // The groups' order in the input gives their new axis numbers.
  std::vector<std::size_t> order(first_of_group.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return first_of_group[a] < first_of_group[b]; });
  Shape merged_shape(order.size());
  std::vector<int> merged_perm(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    merged_shape[k] = group_size[order[k]];
    merged_perm[order[k]] = static_cast<int>(k);
  }
  x_shape = std::move(merged_shape);
  perm = std::move(merged_perm);
}

// x (dense, row-major, x_shape) with its axes permuted into dst (n elements): walks the output
// row by row, the input offset following x's
// strides in permuted order. Swapping the last two axes (a matrix or a batch of matrices,
// as matmul's gradients do) goes tile by tile instead, also
// after axes that stay adjacent are merged (merge_adjacent_axes).
template <class T>
void permute_axes(const T* in, Shape x_shape, std::vector<int> perm, std::size_t n, T* dst) {
  merge_adjacent_axes(x_shape, perm);
  const std::size_t rank = perm.size();
  Shape walk_shape(rank);  // the output's shape in the merged axes
  for (std::size_t i = 0; i < rank; ++i) walk_shape[i] = x_shape[static_cast<std::size_t>(perm[i])];
  bool swaps_last_two = rank >= 2 && perm[rank - 1] == static_cast<int>(rank - 2) &&
                        perm[rank - 2] == static_cast<int>(rank - 1);
  for (std::size_t d = 0; swaps_last_two && d + 2 < rank; ++d) {
    swaps_last_two = perm[d] == static_cast<int>(d);
  }
  if (swaps_last_two) {
    const std::size_t rows = x_shape[rank - 2], cols = x_shape[rank - 1];
    for (std::size_t m = 0; m < n / (rows * cols); ++m) {
      transpose_matrix(in + m * rows * cols, rows, cols, dst + m * rows * cols);
    }
    return;
  }
  const auto x_strides = row_major_strides(x_shape);
  std::vector<std::size_t> step(rank);
  for (std::size_t d = 0; d < rank; ++d) step[d] = x_strides[static_cast<std::size_t>(perm[d])];
  const std::size_t run = walk_shape[rank - 1];
  const std::size_t run_step = step[rank - 1];
  StridedCursor(walk_shape, rank - 1, row_major_strides(walk_shape), step)
      .for_each([&](std::size_t to, std::size_t from_offset) {
        const T* from = in + from_offset;
        if (run_step == 1) {
          std::copy(from, from + run, dst + to);
        } else {
          for (std::size_t j = 0; j < run; ++j) dst[to + j] = from[j * run_step];
        }
      });
}

// Any strides, any sign: the output row by row, the source offset carried in signed steps.
template <class T>
void gather(const T* origin, const std::size_t* shape, const std::ptrdiff_t* strides,
            std::size_t rank, T* out) {
  const std::size_t inner = shape[rank - 1];
  const std::ptrdiff_t step = strides[rank - 1];
  xt::svector<std::size_t, 8> index(rank - 1, 0);
  std::ptrdiff_t row = 0;  // the current row's first element, from origin
  while (true) {
    const T* in = origin + row;
    if (step == 1) {
      std::copy(in, in + inner, out);
    } else {
      for (std::size_t j = 0; j < inner; ++j) out[j] = in[static_cast<std::ptrdiff_t>(j) * step];
    }
    out += inner;
    std::size_t d = rank - 1;
    for (; d-- > 0;) {
      row += strides[d];
      if (++index[d] < shape[d]) break;
      row -= strides[d] * static_cast<std::ptrdiff_t>(shape[d]);
      index[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

}  // namespace

template <class T>
void copy_strided(const T* from, std::size_t offset, const std::size_t* shape,
                  const std::ptrdiff_t* strides, std::size_t rank, T* out) {
  std::size_t n = 1;
  for (std::size_t d = 0; d < rank; ++d) n *= shape[d];
  if (n == 0) return;
  const T* origin = from + offset;
  // Axes of length 1 move nothing.
  Shape dims;
  std::vector<std::ptrdiff_t> steps;
  for (std::size_t d = 0; d < rank; ++d) {
    if (shape[d] != 1) {
      dims.push_back(shape[d]);
      steps.push_back(strides[d]);
    }
  }
  if (dims.empty()) {
    *out = *origin;
    return;
  }
  // A permutation of a dense block: the axes sorted by decreasing stride are row-major.
  std::vector<int> by_stride(dims.size());
  std::iota(by_stride.begin(), by_stride.end(), 0);
  std::sort(by_stride.begin(), by_stride.end(), [&](int a, int b) {
    return steps[static_cast<std::size_t>(a)] > steps[static_cast<std::size_t>(b)];
  });
  bool dense = true;
  std::ptrdiff_t expected = 1;
  for (std::size_t k = by_stride.size(); dense && k-- > 0;) {
    const auto axis = static_cast<std::size_t>(by_stride[k]);
    dense = steps[axis] == expected;
    expected *= static_cast<std::ptrdiff_t>(dims[axis]);
  }
  if (dense) {
    // x: the block in buffer order; output axis i is x's axis position_of[i].
    Shape x_shape(dims.size());
    std::vector<int> perm(dims.size());
    for (std::size_t k = 0; k < by_stride.size(); ++k) {
      const auto axis = static_cast<std::size_t>(by_stride[k]);
      x_shape[k] = dims[axis];
      perm[axis] = static_cast<int>(k);
    }
    permute_axes(origin, std::move(x_shape), std::move(perm), n, out);
    return;
  }
  gather(origin, dims.data(), steps.data(), dims.size(), out);
}

template void copy_strided<float>(const float*, std::size_t, const std::size_t*,
                                  const std::ptrdiff_t*, std::size_t, float*);
template void copy_strided<double>(const double*, std::size_t, const std::size_t*,
                                   const std::ptrdiff_t*, std::size_t, double*);
template void copy_strided<std::int32_t>(const std::int32_t*, std::size_t, const std::size_t*,
                                         const std::ptrdiff_t*, std::size_t, std::int32_t*);
template void copy_strided<std::int64_t>(const std::int64_t*, std::size_t, const std::size_t*,
                                         const std::ptrdiff_t*, std::size_t, std::int64_t*);
template void copy_strided<bool>(const bool*, std::size_t, const std::size_t*,
                                 const std::ptrdiff_t*, std::size_t, bool*);

}  // namespace tapegrad::detail
