// 2-D pooling kernels on NHWC inputs, as contiguous loops over the channel runs of x. The
// window geometry is a ConvGeometry with out_c == in_c and unit dilations; positions of a
// window that fall in the padding are skipped (TF's SAME pooling), never read as zeros.
#pragma once

#include <cstdint>

#include "kernels/im2col.hpp"

namespace tapegrad::detail {

// out[n, oh, ow, c] = the largest x over the window; argmax (when not null) gets the flat
// index into x of that element, the first one in window order (rows, then columns) on ties,
// as TF's CPU kernel. A window holding a NaN gives NaN, and its argmax is the first NaN.
template <class T>
void max_pool_forward(const ConvGeometry& geometry, const T* x, T* out, std::int64_t* argmax);

// out = the mean of x over the window's positions inside the input (TF's AvgPool: padding is
// not counted).
template <class T>
void avg_pool_forward(const ConvGeometry& geometry, const T* x, T* out);
// The transpose of avg_pool_forward: dx = each g spread evenly over its window (AvgPoolGrad).
template <class T>
void avg_pool_backward(const ConvGeometry& geometry, const T* g, T* dx);

}  // namespace tapegrad::detail
