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
  // A 1x1 filter with unit strides and no padding: x is its own im2col matrix.
  bool pointwise() const {
    return k_h == 1 && k_w == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 &&
           pad_left == 0 && out_h == in_h && out_w == in_w;
  }
};

// An image batch [batch, h, w, c] read through element strides (batch, h, w, c order): a
// channels-first tensor seen as channels last is read where it lies, without a copy.
template <class T>
struct StridedImages {
  const T* data = nullptr;
  std::ptrdiff_t strides[4] = {0, 0, 0, 0};

  static StridedImages row_major(const T* data, std::size_t h, std::size_t w, std::size_t c) {
    StridedImages r;
    r.data = data;
    r.strides[3] = 1;
    r.strides[2] = static_cast<std::ptrdiff_t>(c);
    r.strides[1] = static_cast<std::ptrdiff_t>(w * c);
    r.strides[0] = static_cast<std::ptrdiff_t>(h * w * c);
    return r;
  }
  // Laid out as [batch, h, w, c] (row_major) or as [batch, c, h, w].
  bool is_row_major(std::size_t batch, std::size_t h, std::size_t w, std::size_t c) const {
    return same_strides(row_major(data, h, w, c), batch, h, w, c);
  }
  bool is_channels_first(std::size_t batch, std::size_t h, std::size_t w, std::size_t c) const {
    StridedImages r;
    r.strides[1] = static_cast<std::ptrdiff_t>(w);
    r.strides[2] = 1;
    r.strides[3] = static_cast<std::ptrdiff_t>(h * w);
    r.strides[0] = static_cast<std::ptrdiff_t>(c * h * w);
    return same_strides(r, batch, h, w, c);
  }

 private:
  // Equal strides on every axis longer than 1 (a unit axis may have any stride).
  bool same_strides(const StridedImages& other, std::size_t batch, std::size_t h, std::size_t w,
                    std::size_t c) const {
    const std::size_t sizes[4] = {batch, h, w, c};
    for (int i = 0; i < 4; ++i) {
      if (sizes[i] > 1 && strides[i] != other.strides[i]) return false;
    }
    return true;
  }
};

// The three products below on strided inputs; `channels_first_out` writes the output
// [batch, c, h, w] instead of [batch, h, w, c]. The direct kernels (kernels/direct_conv.hpp)
// where they apply, else im2col + gemm on row-major copies. kernels/conv_layouts.cpp.
template <class T>
void conv2d_forward(const ConvGeometry& geometry, const StridedImages<T>& x, const T* filters,
                    T* out, bool channels_first_out);
template <class T>
void conv2d_backprop_input(const ConvGeometry& geometry, const StridedImages<T>& g,
                           const T* filters, T* dx, bool channels_first_out);
template <class T>
void conv2d_backprop_filter(const ConvGeometry& geometry, const StridedImages<T>& x,
                            const StridedImages<T>& g, T* dfilters);

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
