#include "kernels/direct_conv.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/strided_copy.hpp"
#include "kernels/vector_math.hpp"
#include "tapegrad/buffer_allocator.hpp"
#include "tapegrad/errors.hpp"

#if defined(XTENSOR_USE_XSIMD)
#include "kernels/simd/direct_conv_loops.hpp"
#endif

namespace tapegrad::detail {

#if TAPEGRAD_VECTOR_MATH_DISPATCH
// Defined in kernels/simd/ with vector_math's kernels (built only for x86-64 with GCC or
// Clang: CMakeLists.txt).
const DirectConvKernels& avx2_direct_conv_kernels();
const DirectConvKernels& avx512_direct_conv_kernels();
#endif

namespace {

const DirectConvKernels* kernels_for(InstructionSet set) {
  if (!instruction_set_available(set)) {
    throw InvalidArgument(std::string("direct convolution: instruction set ") +
                          instruction_set_name(set) + " is not available on this CPU or build");
  }
#if defined(XTENSOR_USE_XSIMD)
  switch (set) {
#if TAPEGRAD_VECTOR_MATH_DISPATCH
    case InstructionSet::Avx2:
      return &avx2_direct_conv_kernels();
    case InstructionSet::Avx512:
      return &avx512_direct_conv_kernels();
#endif
    default: {
      static constexpr DirectConvKernels baseline = direct_conv_kernels_for<xsimd::default_arch>();
      return &baseline;
    }
  }
#else
  (void)set;  // without xsimd, im2col + gemm only
  return nullptr;
#endif
}

template <class T>
std::size_t width_of(const DirectConvKernels& k) {
  if constexpr (std::is_same_v<T, float>) {
    return k.f32_width;
  } else {
    return k.f64_width;
  }
}
template <class T>
DirectConvForward<T> forward_of(const DirectConvKernels& k) {
  if constexpr (std::is_same_v<T, float>) {
    return k.forward_f32;
  } else {
    return k.forward_f64;
  }
}
template <class T>
DirectConvFilterGradient<T> filter_gradient_of(const DirectConvKernels& k) {
  if constexpr (std::is_same_v<T, float>) {
    return k.filter_gradient_f32;
  } else {
    return k.filter_gradient_f64;
  }
}

// A channel count for which SIMD batches waste less than half their lanes.
bool fills_batches(std::size_t channels, std::size_t width) { return 2 * channels >= width; }

std::size_t round_up(std::size_t n, std::size_t width) { return (n + width - 1) / width * width; }

template <class T>
using Scratch = std::vector<T, buffer_allocator<T>>;

// An input as the kernels read it: its first element and DirectConvShape's strides.
template <class T>
struct PaddedImages {
  const T* data;
  std::size_t image_stride, row_stride, column_stride, channel_stride;
};

// The rows x cols window of images [batch, h, w, c] that starts `top` rows and `left` columns
// before them, zeros outside: the input as the kernels read it. Channels-first images stay
// channels first (each channel's rows copied whole), others become row-major; the images
// themselves when they already are that window (no padding before, nothing read past them).
template <class T>
PaddedImages<T> padded(const StridedImages<T>& images, std::size_t batch, std::size_t h,
                       std::size_t w, std::size_t c, std::size_t top, std::size_t left,
                       std::size_t rows, std::size_t cols, Scratch<T>& storage) {
  const bool inside = top == 0 && left == 0 && rows <= h && cols <= w;
  const std::size_t copied_rows = std::min(h, rows - std::min(rows, top));
  const std::size_t copied_cols = std::min(w, cols - std::min(cols, left));
  if (images.is_channels_first(batch, h, w, c) && !images.is_row_major(batch, h, w, c)) {
    if (inside) return {images.data, c * h * w, w, 1, h * w};
    storage.assign(batch * c * rows * cols, T(0));
    for (std::size_t plane = 0; plane < batch * c; ++plane) {
      for (std::size_t i = 0; i < copied_rows; ++i) {
        std::copy_n(images.data + (plane * h + i) * w, copied_cols,
                    storage.data() + (plane * rows + i + top) * cols + left);
      }
    }
    return {storage.data(), c * rows * cols, cols, 1, rows * cols};
  }
  if (images.is_row_major(batch, h, w, c) && inside) return {images.data, h * w * c, w * c, c, 1};
  storage.assign(batch * rows * cols * c, T(0));
  const std::ptrdiff_t* stride = images.strides;
  for (std::size_t n = 0; n < batch; ++n) {
    for (std::size_t i = 0; i < copied_rows; ++i) {
      const T* from = images.data + static_cast<std::ptrdiff_t>(n) * stride[0] +
                      static_cast<std::ptrdiff_t>(i) * stride[1];
      T* to = storage.data() + ((n * rows + i + top) * cols + left) * c;
      for (std::size_t j = 0; j < copied_cols; ++j) {
        const T* pixel = from + static_cast<std::ptrdiff_t>(j) * stride[2];
        for (std::size_t k = 0; k < c; ++k) {
          to[j * c + k] = pixel[static_cast<std::ptrdiff_t>(k) * stride[3]];
        }
      }
    }
  }
  return {storage.data(), rows * cols * c, cols * c, c, 1};
}

// Images [batch, h, w, c] as rows of `width` values per position (zeros after the c
// channels): g as the filter-gradient kernel reads it. The images themselves when they are
// that already.
template <class T>
const T* widened(const StridedImages<T>& images, std::size_t batch, std::size_t h, std::size_t w,
                 std::size_t c, std::size_t width, Scratch<T>& storage) {
  if (c == width && images.is_row_major(batch, h, w, c)) return images.data;
  const std::size_t plane = h * w;
  storage.assign(batch * plane * width, T(0));
  const std::ptrdiff_t* stride = images.strides;
  for (std::size_t n = 0; n < batch; ++n) {
    T* to = storage.data() + n * plane * width;
    if (images.is_channels_first(batch, h, w, c)) {
      const T* from = images.data + n * c * plane;
      if (c == width) {
        transpose_rows(from, c, plane, to);
        continue;
      }
      for (std::size_t k = 0; k < c; ++k) {
        for (std::size_t p = 0; p < plane; ++p) to[p * width + k] = from[k * plane + p];
      }
      continue;
    }
    for (std::size_t i = 0; i < h; ++i) {
      for (std::size_t j = 0; j < w; ++j) {
        const T* pixel = images.data + static_cast<std::ptrdiff_t>(n) * stride[0] +
                         static_cast<std::ptrdiff_t>(i) * stride[1] +
                         static_cast<std::ptrdiff_t>(j) * stride[2];
        for (std::size_t k = 0; k < c; ++k) {
          to[(i * w + j) * width + k] = pixel[static_cast<std::ptrdiff_t>(k) * stride[3]];
        }
      }
    }
  }
  return storage.data();
}

// The kernels' shape reading `input`.
template <class T>
void read_from(DirectConvShape& s, const PaddedImages<T>& input) {
  s.image_stride = input.image_stride;
  s.row_stride = input.row_stride;
  s.column_stride = input.column_stride;
  s.channel_stride = input.channel_stride;
}

// The kernels' shape of the product of g itself (the forward and the filter gradient), its
// output channels padded to `width` lanes.
DirectConvShape shape_of(const ConvGeometry& g, std::size_t width) {
  DirectConvShape s;
  s.batch = g.batch;
  s.in_c = g.in_c;
  s.out_h = g.out_h;
  s.out_w = g.out_w;
  s.out_c = g.out_c;
  s.out_c_padded = round_up(g.out_c, width);
  s.k_h = g.k_h;
  s.k_w = g.k_w;
  s.stride_h = g.stride_h;
  s.stride_w = g.stride_w;
  s.dilation_h = g.dilation_h;
  s.dilation_w = g.dilation_w;
  return s;
}

// rows x columns values as rows of `width` (zeros after): the filters as the forward kernel
// reads them. The values themselves when columns == width.
template <class T>
const T* padded_rows(const T* from, std::size_t rows, std::size_t columns, std::size_t width,
                     Scratch<T>& storage) {
  if (columns == width) return from;
  storage.assign(rows * width, T(0));
  for (std::size_t r = 0; r < rows; ++r) {
    std::copy_n(from + r * columns, columns, storage.data() + r * width);
  }
  return storage.data();
}

// The span of padded input that output positions [0, out) read along one axis.
std::size_t extent(std::size_t out, std::size_t stride, std::size_t kernel, std::size_t dilation) {
  return (out - 1) * stride + (kernel - 1) * dilation + 1;
}

// The forward kernel over the padded input, the output [batch, out_h, out_w, out_c], or
// [batch, out_c, out_h, out_w] when `channels_first_out`: then image by image through a
// row-major block that stays in cache, transposed into place.
template <class T>
void run_forward(DirectConvForward<T> kernel, DirectConvShape s, const PaddedImages<T>& input,
                 const T* filters, T* out, bool channels_first_out) {
  read_from(s, input);
  if (!channels_first_out) {
    kernel(s, input.data, filters, out);
    return;
  }
  const std::size_t positions = s.out_h * s.out_w;
  const std::size_t batch = s.batch;
  s.batch = 1;
  Scratch<T> block(positions * s.out_c);
  for (std::size_t n = 0; n < batch; ++n) {
    kernel(s, input.data + n * s.image_stride, filters, block.data());
    transpose_rows(block.data(), positions, s.out_c, out + n * positions * s.out_c);
  }
}

}  // namespace

template <class T>
bool direct_conv2d_forward(const ConvGeometry& g, const StridedImages<T>& x, const T* filters,
                           T* out, bool channels_first_out, InstructionSet set) {
  const DirectConvKernels* kernels = kernels_for(set);
  if (kernels == nullptr || !fills_batches(g.out_c, width_of<T>(*kernels))) return false;
  const DirectConvShape s = shape_of(g, width_of<T>(*kernels));
  Scratch<T> input_storage, filter_storage;
  const PaddedImages<T> input =
      padded(x, g.batch, g.in_h, g.in_w, g.in_c, g.pad_top, g.pad_left,
             extent(g.out_h, g.stride_h, g.k_h, g.dilation_h),
             extent(g.out_w, g.stride_w, g.k_w, g.dilation_w), input_storage);
  const T* f = padded_rows(filters, g.patch(), g.out_c, s.out_c_padded, filter_storage);
  run_forward(forward_of<T>(*kernels), s, input, f, out, channels_first_out);
  return true;
}

// With unit strides the input gradient is a forward convolution of g with the filters
// mirrored and their channel axes swapped, g padded by the window's reach minus the forward's
// padding: dx[i] = sum over k of g[i + pad - k d] f[k] = sum over k' of g'[i + k' d] f[K-1-k'].
template <class T>
bool direct_conv2d_backprop_input(const ConvGeometry& g, const StridedImages<T>& grad,
                                  const T* filters, T* dx, bool channels_first_out,
                                  InstructionSet set) {
  const DirectConvKernels* kernels = kernels_for(set);
  if (kernels == nullptr || g.stride_h != 1 || g.stride_w != 1 ||
      !fills_batches(g.in_c, width_of<T>(*kernels))) {
    return false;
  }
  const std::size_t reach_h = (g.k_h - 1) * g.dilation_h, reach_w = (g.k_w - 1) * g.dilation_w;
  if (g.pad_top > reach_h || g.pad_left > reach_w) return false;
  DirectConvShape s;
  s.batch = g.batch;
  s.in_c = g.out_c;
  s.out_h = g.in_h;
  s.out_w = g.in_w;
  s.out_c = g.in_c;
  s.out_c_padded = round_up(g.in_c, width_of<T>(*kernels));
  s.k_h = g.k_h;
  s.k_w = g.k_w;
  s.dilation_h = g.dilation_h;
  s.dilation_w = g.dilation_w;
  Scratch<T> input_storage;
  const PaddedImages<T> input =
      padded(grad, g.batch, g.out_h, g.out_w, g.out_c, reach_h - g.pad_top, reach_w - g.pad_left,
             extent(g.in_h, 1, g.k_h, g.dilation_h), extent(g.in_w, 1, g.k_w, g.dilation_w),
             input_storage);
  Scratch<T> mirrored(g.k_h * g.k_w * g.out_c * s.out_c_padded, T(0));
  for (std::size_t kh = 0; kh < g.k_h; ++kh) {
    for (std::size_t kw = 0; kw < g.k_w; ++kw) {
      const T* from = filters + ((g.k_h - 1 - kh) * g.k_w + (g.k_w - 1 - kw)) * g.in_c * g.out_c;
      T* to = mirrored.data() + (kh * g.k_w + kw) * g.out_c * s.out_c_padded;
      for (std::size_t ci = 0; ci < g.in_c; ++ci) {
        for (std::size_t co = 0; co < g.out_c; ++co) {
          to[co * s.out_c_padded + ci] = from[ci * g.out_c + co];
        }
      }
    }
  }
  run_forward(forward_of<T>(*kernels), s, input, mirrored.data(), dx, channels_first_out);
  return true;
}

template <class T>
bool direct_conv2d_backprop_filter(const ConvGeometry& g, const StridedImages<T>& x,
                                   const StridedImages<T>& grad, T* dfilters, InstructionSet set) {
  const DirectConvKernels* kernels = kernels_for(set);
  if (kernels == nullptr || !fills_batches(g.out_c, width_of<T>(*kernels))) return false;
  DirectConvShape s = shape_of(g, width_of<T>(*kernels));
  Scratch<T> input_storage, grad_storage, filter_storage;
  const PaddedImages<T> input =
      padded(x, g.batch, g.in_h, g.in_w, g.in_c, g.pad_top, g.pad_left,
             extent(g.out_h, g.stride_h, g.k_h, g.dilation_h),
             extent(g.out_w, g.stride_w, g.k_w, g.dilation_w), input_storage);
  read_from(s, input);
  const T* rows = widened(grad, g.batch, g.out_h, g.out_w, g.out_c, s.out_c_padded, grad_storage);
  const DirectConvFilterGradient<T> kernel = filter_gradient_of<T>(*kernels);
  if (s.out_c_padded == g.out_c) {
    kernel(s, input.data, rows, dfilters);
    return true;
  }
  filter_storage.resize(g.patch() * s.out_c_padded);
  kernel(s, input.data, rows, filter_storage.data());
  for (std::size_t r = 0; r < g.patch(); ++r) {
    std::copy_n(filter_storage.data() + r * s.out_c_padded, g.out_c, dfilters + r * g.out_c);
  }
  return true;
}

#define TAPEGRAD_DIRECT_CONV_INSTANTIATE(T)                                                      \
  template bool direct_conv2d_forward<T>(const ConvGeometry&, const StridedImages<T>&, const T*, \
                                         T*, bool, InstructionSet);                              \
  template bool direct_conv2d_backprop_input<T>(const ConvGeometry&, const StridedImages<T>&,    \
                                                const T*, T*, bool, InstructionSet);             \
  template bool direct_conv2d_backprop_filter<T>(const ConvGeometry&, const StridedImages<T>&,   \
                                                 const StridedImages<T>&, T*, InstructionSet);
TAPEGRAD_DIRECT_CONV_INSTANTIATE(float)
TAPEGRAD_DIRECT_CONV_INSTANTIATE(double)
#undef TAPEGRAD_DIRECT_CONV_INSTANTIATE

}  // namespace tapegrad::detail
