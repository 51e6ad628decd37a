// The convolution and pooling ops that appear only inside gradients (their public faces are
// in tapegrad/ops/nn.hpp). Declared here for the op tests (forward rules, second order).
#pragma once

#include <vector>

#include "tapegrad/ops/nn.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// TF's Conv2DBackpropFilter: the gradient of conv2d(x, filters, ...) with respect to filters
// of shape `filter_shape` [k_h, k_w, in_c, out_c] for the output gradient g
// [batch, out_h, out_w, out_c]; im2col(x)^T . g. Bilinear in (x, g).
Tensor conv2d_backprop_filter(const Tensor& x, const Shape& filter_shape, const Tensor& g,
                              std::vector<int> strides, Padding padding,
                              std::vector<int> dilations = {1, 1});

// TF's AvgPoolGrad: the gradient of avg_pool2d on an input of `input_shape` for the output
// gradient g; linear in g.
Tensor avg_pool_grad(const Tensor& g, const Shape& input_shape, std::vector<int> ksize,
                     std::vector<int> strides, Padding padding);

// TF's MaxPoolGrad: the gradient of max_pool2d(x, ...) for the output gradient g (pooled
// shape): g summed into each window's maximum in x. Linear in g; x's shape.
Tensor max_pool_grad(const Tensor& x, const Tensor& g, std::vector<int> ksize,
                     std::vector<int> strides, Padding padding);

// TF's MaxPoolGradGrad: h (x's shape) read at each window's maximum in x; the pooled shape.
// Linear in h; the transpose of max_pool_grad.
Tensor max_pool_grad_grad(const Tensor& x, const Tensor& h, std::vector<int> ksize,
                          std::vector<int> strides, Padding padding);

}  // namespace tapegrad::detail
