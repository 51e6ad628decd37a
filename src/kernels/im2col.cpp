// im2col / col2im and the gemms around them. The im2col matrix has one row per output position
// and, in each row, the input channels of every filter tap in HWI order: along a filter row
// with unit dilation the taps read one contiguous run of x (NHWC), so both directions move
// whole runs of k_w * in_c values.
//
// The matrix is never built whole: rows go in blocks of about kBlockBytes (a cache-sized
// scratch, reused per thread), each block feeding one gemm. A whole im2col matrix of a large
// batch is tens of MB written and read back through memory once per product (three times per
// training step), which cost more than the gemms themselves; blocked, it stays in L2. A small
// problem (the digits: 4096 rows of 9) is a single block, i.e. one gemm.
#include "kernels/im2col.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include <cblas.h>

#include "kernels/blas_call_guard.hpp"

namespace tapegrad::detail {

namespace {

constexpr std::size_t kBlockBytes = 256 * 1024;

void blas_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* a,
               const float* b, float beta, float* c) {
  const BlasCallGuard one_caller;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), beta, c,
              static_cast<int>(n));
}
void blas_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const double* a,
               const double* b, double beta, double* c) {
  const BlasCallGuard one_caller;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), beta, c,
              static_cast<int>(n));
}

// The taps [first, last) of a window along one axis that land inside the input, and the input
// index `origin + tap * dilation` they read.
struct TapSpan {
  std::size_t first, last;
  std::ptrdiff_t origin;
};

inline TapSpan tap_span(std::size_t o, std::size_t stride, std::size_t dilation, std::size_t pad,
                        std::size_t kernel, std::size_t size) {
  const auto d = static_cast<std::ptrdiff_t>(dilation);
  const std::ptrdiff_t origin =
      static_cast<std::ptrdiff_t>(o * stride) - static_cast<std::ptrdiff_t>(pad);
  const std::ptrdiff_t room = static_cast<std::ptrdiff_t>(size) - origin;
  std::size_t first = origin >= 0 ? 0 : static_cast<std::size_t>((-origin + d - 1) / d);
  std::size_t last = room <= 0 ? 0 : static_cast<std::size_t>((room + d - 1) / d);
  first = std::min(first, kernel);
  last = std::max(first, std::min(last, kernel));
  return {first, last, origin};
}

// The runs of im2col are often short (k_w * in_c: 3 values for a one-channel image), where a
// memcpy or memset call costs more than the copy. Short runs go in fixed blocks of 8 and a
// straight-line tail, which -O2 turns into SIMD moves and never into a library call; long
// ones go to the library, whose wide-vector versions are faster there.
constexpr std::size_t kLibraryRun = 32;
template <class T, class Op>
inline void for_run(std::size_t n, Op op) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) op(i + j);
  }
  if (n - i >= 4) {
    op(i), op(i + 1), op(i + 2), op(i + 3);
    i += 4;
  }
  if (n - i >= 2) {
    op(i), op(i + 1);
    i += 2;
  }
  if (n - i >= 1) op(i);
}

template <class T>
inline void copy_run(T* __restrict target, const T* __restrict source, std::size_t n) {
  if (n >= kLibraryRun) {
    std::copy_n(source, n, target);
    return;
  }
  for_run<T>(n, [=](std::size_t i) { target[i] = source[i]; });
}
template <class T>
inline void add_run(T* __restrict target, const T* __restrict source, std::size_t n) {
  for_run<T>(n, [=](std::size_t i) { target[i] += source[i]; });
}
template <class T>
inline void zero_run(T* target, std::size_t n) {
  if (n >= kLibraryRun) {
    std::fill_n(target, n, T(0));
    return;
  }
  for_run<T>(n, [=](std::size_t i) { target[i] = T(0); });
}

// For every im2col row r in [first_row, last_row) and every filter row kh: visit(r - first_row,
// kh, whether that filter row reads inside x, the offset of the input row's first pixel, the
// span of filter columns inside x). Walks (image, oh, ow) incrementally: no division per row.
template <class Visit>
void for_each_filter_row(const ConvGeometry& g, std::size_t first_row, std::size_t last_row,
                         Visit visit) {
  const std::size_t per_image = g.out_h * g.out_w;
  std::size_t n = first_row / per_image;
  std::size_t oh = (first_row % per_image) / g.out_w;
  std::size_t ow = first_row % g.out_w;
  TapSpan rows = tap_span(oh, g.stride_h, g.dilation_h, g.pad_top, g.k_h, g.in_h);
  for (std::size_t r = first_row; r < last_row; ++r) {
    const TapSpan cols = tap_span(ow, g.stride_w, g.dilation_w, g.pad_left, g.k_w, g.in_w);
    for (std::size_t kh = 0; kh < g.k_h; ++kh) {
      const bool inside = kh >= rows.first && kh < rows.last;
      const std::size_t ih = inside
                                 ? static_cast<std::size_t>(
                                       rows.origin + static_cast<std::ptrdiff_t>(kh * g.dilation_h))
                                 : 0;
      visit(r - first_row, kh, inside, (n * g.in_h + ih) * g.in_w, cols);
    }
    if (++ow == g.out_w) {
      ow = 0;
      if (++oh == g.out_h) {
        oh = 0;
        ++n;
      }
      rows = tap_span(oh, g.stride_h, g.dilation_h, g.pad_top, g.k_h, g.in_h);
    }
  }
}

// Rows [first_row, last_row) of the im2col matrix of x into col (row-major, patch columns).
template <class T>
void im2col_rows(const ConvGeometry& g, const T* x, std::size_t first_row, std::size_t last_row,
                 T* col) {
  const std::size_t c = g.in_c;
  const std::size_t run = g.k_w * c;
  for_each_filter_row(
      g, first_row, last_row,
      [&](std::size_t row, std::size_t kh, bool inside, std::size_t pixel, const TapSpan& cols) {
        T* out = col + row * g.patch() + kh * run;
        if (!inside) {
          zero_run(out, run);
          return;
        }
        zero_run(out, cols.first * c);
        if (g.dilation_w == 1) {
          const T* from = x + (pixel + static_cast<std::size_t>(cols.origin) + cols.first) * c;
          copy_run(out + cols.first * c, from, (cols.last - cols.first) * c);
        } else {
          for (std::size_t kw = cols.first; kw < cols.last; ++kw) {
            const auto iw = static_cast<std::size_t>(
                cols.origin + static_cast<std::ptrdiff_t>(kw * g.dilation_w));
            copy_run(out + kw * c, x + (pixel + iw) * c, c);
          }
        }
        zero_run(out + cols.last * c, (g.k_w - cols.last) * c);
      });
}

// The transpose of im2col_rows: every entry of col added to the element of dx it came from.
template <class T>
void col2im_rows(const ConvGeometry& g, const T* col, std::size_t first_row, std::size_t last_row,
                 T* dx) {
  const std::size_t c = g.in_c;
  const std::size_t run = g.k_w * c;
  for_each_filter_row(
      g, first_row, last_row,
      [&](std::size_t row, std::size_t kh, bool inside, std::size_t pixel, const TapSpan& cols) {
        if (!inside) return;
        const T* in = col + row * g.patch() + kh * run;
        if (g.dilation_w == 1) {
          T* to = dx + (pixel + static_cast<std::size_t>(cols.origin) + cols.first) * c;
          add_run(to, in + cols.first * c, (cols.last - cols.first) * c);
        } else {
          for (std::size_t kw = cols.first; kw < cols.last; ++kw) {
            const auto iw = static_cast<std::size_t>(
                cols.origin + static_cast<std::ptrdiff_t>(kw * g.dilation_w));
            add_run(dx + (pixel + iw) * c, in + kw * c, c);
          }
        }
      });
}

// This thread's scratch for one block of im2col rows (reused: a block is cache-sized).
template <class T>
T* scratch(std::size_t size) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// Rows per block: about kBlockBytes of im2col matrix, at least one row.
template <class T>
std::size_t block_rows(const ConvGeometry& g) {
  return std::max<std::size_t>(1, kBlockBytes / (g.patch() * sizeof(T)));
}

// Calls body(first, last, col) for consecutive blocks [first, last) of the g.rows() im2col
// rows, col being one thread-local scratch block of (last - first) x g.patch() values.
template <class T, class Body>
void for_each_row_block(const ConvGeometry& g, Body body) {
  const std::size_t block = block_rows<T>(g);
  T* col = scratch<T>(std::min(block, g.rows()) * g.patch());
  for (std::size_t first = 0; first < g.rows(); first += block) {
    body(first, std::min(g.rows(), first + block), col);
  }
}

}  // namespace

template <class T>
void conv2d_forward(const ConvGeometry& g, const T* x, const T* filters, T* out) {
  if (g.output_size() == 0) return;
  if (g.patch() == 0) {
    std::fill_n(out, g.output_size(), T(0));
    return;
  }
  if (g.pointwise()) {
    blas_gemm(false, false, g.rows(), g.out_c, g.patch(), x, filters, T(0), out);
    return;
  }
  for_each_row_block<T>(g, [&](std::size_t first, std::size_t last, T* col) {
    im2col_rows(g, x, first, last, col);
    blas_gemm(false, false, last - first, g.out_c, g.patch(), col, filters, T(0),
              out + first * g.out_c);
  });
}

template <class T>
void conv2d_backprop_input(const ConvGeometry& g, const T* grad, const T* filters, T* dx) {
  if (g.input_size() == 0) return;
  if (g.rows() == 0 || g.out_c == 0 || g.patch() == 0) {
    std::fill_n(dx, g.input_size(), T(0));
    return;
  }
  if (g.pointwise()) {
    blas_gemm(false, true, g.rows(), g.patch(), g.out_c, grad, filters, T(0), dx);
    return;
  }
  std::fill_n(dx, g.input_size(), T(0));
  for_each_row_block<T>(g, [&](std::size_t first, std::size_t last, T* col) {
    blas_gemm(false, true, last - first, g.patch(), g.out_c, grad + first * g.out_c, filters, T(0),
              col);
    col2im_rows(g, col, first, last, dx);
  });
}

template <class T>
void conv2d_backprop_filter(const ConvGeometry& g, const T* x, const T* grad, T* dfilters) {
  if (g.filter_size() == 0) return;
  if (g.rows() == 0) {
    std::fill_n(dfilters, g.filter_size(), T(0));
    return;
  }
  if (g.pointwise()) {
    blas_gemm(true, false, g.patch(), g.out_c, g.rows(), x, grad, T(0), dfilters);
    return;
  }
  for_each_row_block<T>(g, [&](std::size_t first, std::size_t last, T* col) {
    im2col_rows(g, x, first, last, col);
    // The blocks' products add up: beta 0 for the first, 1 after.
    blas_gemm(true, false, g.patch(), g.out_c, last - first, col, grad + first * g.out_c,
              first == 0 ? T(0) : T(1), dfilters);
  });
}

#define TAPEGRAD_CONV_INSTANTIATE(T)                                                   \
  template void conv2d_forward<T>(const ConvGeometry&, const T*, const T*, T*);        \
  template void conv2d_backprop_input<T>(const ConvGeometry&, const T*, const T*, T*); \
  template void conv2d_backprop_filter<T>(const ConvGeometry&, const T*, const T*, T*);
TAPEGRAD_CONV_INSTANTIATE(float)
TAPEGRAD_CONV_INSTANTIATE(double)
#undef TAPEGRAD_CONV_INSTANTIATE

}  // namespace tapegrad::detail
