// Direct 2-D convolution: the forward product and the filter gradient computed from the
// input's pixels in place, without an im2col matrix, by SIMD kernels for the widest instruction
// set the CPU runs (kernels/simd/direct_conv_loops.hpp; the set is vector_math's, and
// TAPEGRAD_SIMD caps it as there). kernels/conv_layouts.cpp calls these first and falls back to
// im2col + gemm where they do not apply.
//
// Why: with few channels (a 3x3 filter over 16 channels is a 144-long patch) the im2col
// matrix is 9x the input, written and read back once per product, and the gemm packs it once
// more; for a residual block of 16-channel 32x32 images that was half of the convolutions'
// time, which then took twice LibTorch's (bench/resnet_block.cpp). They read strided images
// and write channels-first outputs too, so that a channels-first (PyTorch) program pays no
// transposing copies around its convolutions.
//
// Every output element is one sum in a fixed order (filter row, filter column, input channel
// for the forward; output position for the filter gradient), whatever its place in a tile: a
// result does not depend on the batch it is in or on how the channels are split.
#pragma once

#include <cstddef>

#include "kernels/im2col.hpp"
#include "kernels/vector_math.hpp"

namespace tapegrad::detail {

// The geometry the kernels read: an input of `batch` images of in_c channels, zero-padded so
// that every filter tap of every output position is inside it: output (n, oh, ow) reads, for
// tap (kh, kw) and channel c, the element at n image_stride + (oh stride_h + kh dilation_h)
// row_stride + (ow stride_w + kw dilation_w) column_stride + c channel_stride. Channels last
// has channel_stride 1, channels first column_stride 1.
struct DirectConvShape {
  std::size_t batch = 0, in_c = 0;
  std::size_t image_stride = 0, row_stride = 0, column_stride = 0, channel_stride = 0;
  std::size_t out_h = 0, out_w = 0, out_c = 0;
  // The filters' (and the filter gradient's) output channels, rounded up to a whole number of
  // SIMD batches; the padding lanes are zeros.
  std::size_t out_c_padded = 0;
  std::size_t k_h = 0, k_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
};

// out [batch * out_h * out_w, out_c] = the convolution of x with filters
// [k_h, k_w, in_c, out_c_padded].
template <class T>
using DirectConvForward = void (*)(const DirectConvShape& shape, const T* x, const T* filters,
                                   T* out);
// dfilters [k_h, k_w, in_c, out_c_padded] = sum over output positions p of the taps of x at p
// times g [p, out_c_padded] (g's padding lanes are zeros).
template <class T>
using DirectConvFilterGradient = void (*)(const DirectConvShape& shape, const T* x, const T* g,
                                          T* dfilters);

struct DirectConvKernels {
  DirectConvForward<float> forward_f32;
  DirectConvForward<double> forward_f64;
  DirectConvFilterGradient<float> filter_gradient_f32;
  DirectConvFilterGradient<double> filter_gradient_f64;
  std::size_t f32_width, f64_width;  // lanes of one SIMD batch
};

// The three products of kernels/im2col.hpp, direct, on strided inputs (the output channels
// first when asked), with the kernels of `set` (by default the one vector_math chose); each
// returns false, having written nothing, where it does not apply:
// no SIMD kernels in this build (TAPEGRAD_USE_XSIMD off), fewer output channels than half a
// SIMD batch, and for the input gradient strides other than 1. kernels/conv_layouts.cpp calls
// them after its own cases (empty shapes; pointwise filters on row-major images, one gemm).
// InvalidArgument when `set` is not available.
template <class T>
bool direct_conv2d_forward(const ConvGeometry& geometry, const StridedImages<T>& x,
                           const T* filters, T* out, bool channels_first_out,
                           InstructionSet set = vector_math_instruction_set());
template <class T>
bool direct_conv2d_backprop_input(const ConvGeometry& geometry, const StridedImages<T>& g,
                                  const T* filters, T* dx, bool channels_first_out,
                                  InstructionSet set = vector_math_instruction_set());
template <class T>
bool direct_conv2d_backprop_filter(const ConvGeometry& geometry, const StridedImages<T>& x,
                                   const StridedImages<T>& g, T* dfilters,
                                   InstructionSet set = vector_math_instruction_set());

}  // namespace tapegrad::detail
