#include "kernels/direct_conv.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

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

// The rows x cols window of images [batch, h, w, c] that starts `top` rows and `left` columns
// before them, zeros outside: the input as the kernels read it. The images themselves when
// they already are that window (no padding before, nothing read past them).
template <class T>
const T* padded(const T* images, std::size_t batch, std::size_t h, std::size_t w, std::size_t c,
                std::size_t top, std::size_t left, std::size_t& rows, std::size_t& cols,
                Scratch<T>& storage) {
  if (top == 0 && left == 0 && rows <= h && cols <= w) {
    rows = h;
    cols = w;
    return images;
  }
  storage.assign(batch * rows * cols * c, T(0));
  const std::size_t copied_rows = std::min(h, rows - std::min(rows, top));
  const std::size_t copied_cols = std::min(w, cols - std::min(cols, left));
  for (std::size_t n = 0; n < batch; ++n) {
    for (std::size_t i = 0; i < copied_rows; ++i) {
      std::copy_n(images + ((n * h + i) * w) * c, copied_cols * c,
                  storage.data() + ((n * rows + i + top) * cols + left) * c);
    }
  }
  return storage.data();
}

// rows x columns values `from` (columns apart) into rows of `width` values, zeros after.
template <class T>
const T* widened(const T* from, std::size_t rows, std::size_t columns, std::size_t width,
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

}  // namespace

template <class T>
bool direct_conv2d_forward(const ConvGeometry& g, const T* x, const T* filters, T* out,
                           InstructionSet set) {
  const DirectConvKernels* kernels = kernels_for(set);
  if (kernels == nullptr || !fills_batches(g.out_c, width_of<T>(*kernels))) return false;
  DirectConvShape s;
  s.batch = g.batch;
  s.in_c = g.in_c;
  s.out_h = g.out_h;
  s.out_w = g.out_w;
  s.out_c = g.out_c;
  s.out_c_padded = round_up(g.out_c, width_of<T>(*kernels));
  s.k_h = g.k_h;
  s.k_w = g.k_w;
  s.stride_h = g.stride_h;
  s.stride_w = g.stride_w;
  s.dilation_h = g.dilation_h;
  s.dilation_w = g.dilation_w;
  s.in_h = extent(g.out_h, g.stride_h, g.k_h, g.dilation_h);
  s.in_w = extent(g.out_w, g.stride_w, g.k_w, g.dilation_w);
  Scratch<T> input_storage, filter_storage;
  const T* input = padded(x, g.batch, g.in_h, g.in_w, g.in_c, g.pad_top, g.pad_left, s.in_h, s.in_w,
                          input_storage);
  const T* f = widened(filters, g.patch(), g.out_c, s.out_c_padded, filter_storage);
  forward_of<T> (*kernels)(s, input, f, out);
  return true;
}

// With unit strides the input gradient is a forward convolution of g with the filters
// mirrored and their channel axes swapped, g padded by the window's reach minus the forward's
// padding: dx[i] = sum over k of g[i + pad - k d] f[k] = sum over k' of g'[i + k' d] f[K-1-k'].
template <class T>
bool direct_conv2d_backprop_input(const ConvGeometry& g, const T* grad, const T* filters, T* dx,
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
  s.in_h = extent(g.in_h, 1, g.k_h, g.dilation_h);
  s.in_w = extent(g.in_w, 1, g.k_w, g.dilation_w);
  Scratch<T> input_storage;
  const T* input = padded(grad, g.batch, g.out_h, g.out_w, g.out_c, reach_h - g.pad_top,
                          reach_w - g.pad_left, s.in_h, s.in_w, input_storage);
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
  forward_of<T> (*kernels)(s, input, mirrored.data(), dx);
  return true;
}

template <class T>
bool direct_conv2d_backprop_filter(const ConvGeometry& g, const T* x, const T* grad, T* dfilters,
                                   InstructionSet set) {
  const DirectConvKernels* kernels = kernels_for(set);
  if (kernels == nullptr || !fills_batches(g.out_c, width_of<T>(*kernels))) return false;
  DirectConvShape s;
  s.batch = g.batch;
  s.in_c = g.in_c;
  s.out_h = g.out_h;
  s.out_w = g.out_w;
  s.out_c = g.out_c;
  s.out_c_padded = round_up(g.out_c, width_of<T>(*kernels));
  s.k_h = g.k_h;
  s.k_w = g.k_w;
  s.stride_h = g.stride_h;
  s.stride_w = g.stride_w;
  s.dilation_h = g.dilation_h;
  s.dilation_w = g.dilation_w;
  s.in_h = extent(g.out_h, g.stride_h, g.k_h, g.dilation_h);
  s.in_w = extent(g.out_w, g.stride_w, g.k_w, g.dilation_w);
  Scratch<T> input_storage, grad_storage, filter_storage;
  const T* input = padded(x, g.batch, g.in_h, g.in_w, g.in_c, g.pad_top, g.pad_left, s.in_h, s.in_w,
                          input_storage);
  const T* rows = widened(grad, g.rows(), g.out_c, s.out_c_padded, grad_storage);
  if (s.out_c_padded == g.out_c) {
    filter_gradient_of<T> (*kernels)(s, input, rows, dfilters);
    return true;
  }
  filter_storage.resize(g.patch() * s.out_c_padded);
  filter_gradient_of<T> (*kernels)(s, input, rows, filter_storage.data());
  for (std::size_t r = 0; r < g.patch(); ++r) {
    std::copy_n(filter_storage.data() + r * s.out_c_padded, g.out_c, dfilters + r * g.out_c);
  }
  return true;
}

#define TAPEGRAD_DIRECT_CONV_INSTANTIATE(T)                                                   \
  template bool direct_conv2d_forward<T>(const ConvGeometry&, const T*, const T*, T*,         \
                                         InstructionSet);                                     \
  template bool direct_conv2d_backprop_input<T>(const ConvGeometry&, const T*, const T*, T*,  \
                                                InstructionSet);                              \
  template bool direct_conv2d_backprop_filter<T>(const ConvGeometry&, const T*, const T*, T*, \
                                                 InstructionSet);
TAPEGRAD_DIRECT_CONV_INSTANTIATE(float)
TAPEGRAD_DIRECT_CONV_INSTANTIATE(double)
#undef TAPEGRAD_DIRECT_CONV_INSTANTIATE

}  // namespace tapegrad::detail
