// Convolution kernels on NHWC inputs and HWIO filters: im2col / col2im and the three products
// of a 2-D convolution (forward, input gradient, filter gradient), each one BLAS gemm on the
// im2col matrix. No autodiff knowledge: src/ops/nn/conv.cpp records and differentiates them.
#pragma once

#include <cstddef>

namespace tapegrad::detail {

// The shapes of one 2-D convolution (or pooling window sweep): x [batch, in_h, in_w, in_c],
// filters [k_h, k_w, in_c, out_c], output [batch, out_h, out_w, out_c]. Output position
// (oh, ow) reads input rows oh * stride_h - pad_top + kh * dilation_h (and the same for
// columns); positions outside the input read zeros.
struct ConvGeometry {
  std::size_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  std::size_t k_h = 0, k_w = 0, out_c = 0;
  std::size_t out_h = 0, out_w = 0;
  std::size_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::size_t pad_top = 0, pad_left = 0;

  // Rows of the im2col matrix (one per output position) and its columns (one per filter tap
  // and input channel, in HWI order, so the HWIO filter is its [patch, out_c] right operand).
  std::size_t rows() const { return batch * out_h * out_w; }
  std::size_t patch() const { return k_h * k_w * in_c; }
  std::size_t input_size() const { return batch * in_h * in_w * in_c; }
  std::size_t output_size() const { return rows() * out_c; }
  std::size_t filter_size() const { return patch() * out_c; }
};

// out [rows, out_c] = im2col(x) [rows, patch] . filters [patch, out_c].
template <class T>
void conv2d_forward(const ConvGeometry& geometry, const T* x, const T* filters, T* out);
// dx = col2im(g [rows, out_c] . filters^T): the gradient of conv2d_forward with respect to x,
// i.e. TF's Conv2DBackpropInput (tf.nn.conv2d_transpose).
template <class T>
void conv2d_backprop_input(const ConvGeometry& geometry, const T* g, const T* filters, T* dx);
// dfilters [patch, out_c] = im2col(x)^T . g: TF's Conv2DBackpropFilter.
template <class T>
void conv2d_backprop_filter(const ConvGeometry& geometry, const T* x, const T* g, T* dfilters);

}  // namespace tapegrad::detail
