// kernels/im2col.hpp's products on strided images, with channels-first outputs: what the
// convolution ops call. The direct kernels read strided images and write either layout
// themselves; where they do not apply, im2col + gemm runs on row-major copies and its output
// is transposed into place. A pointwise filter on row-major images stays one gemm.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/direct_conv.hpp"
#include "kernels/im2col.hpp"
#include "kernels/strided_copy.hpp"
#include "tapegrad/buffer_allocator.hpp"

namespace tapegrad::detail {

namespace {

template <class T>
using LayoutScratch = std::vector<T, buffer_allocator<T>>;

// images [batch, h, w, c] row-major: their own data, or a copy in `storage` (copy_strided:
// tile by tile for a channels-first batch).
template <class T>
const T* row_major_images(const StridedImages<T>& images, std::size_t batch, std::size_t h,
                          std::size_t w, std::size_t c, LayoutScratch<T>& storage) {
  if (images.is_row_major(batch, h, w, c)) return images.data;
  storage.resize(batch * h * w * c);
  const std::size_t shape[4] = {batch, h, w, c};
  copy_strided(images.data, 0, shape, images.strides, 4, storage.data());
  return storage.data();
}

// Runs `product(T* target)`, which writes [batch, positions, c] row-major, into `out`, or
// through a copy transposed into `out` as [batch, c, positions] when `channels_first`.
template <class T, class Product>
void into_layout(std::size_t batch, std::size_t positions, std::size_t c, T* out,
                 bool channels_first, Product product) {
  if (!channels_first) {
    product(out);
    return;
  }
  LayoutScratch<T> rows(batch * positions * c);
  product(rows.data());
  for (std::size_t n = 0; n < batch; ++n) {
    transpose_rows(rows.data() + n * positions * c, positions, c, out + n * positions * c);
  }
}

}  // namespace

template <class T>
void conv2d_forward(const ConvGeometry& g, const StridedImages<T>& x, const T* filters, T* out,
                    bool channels_first_out) {
  const bool trivial =
      g.output_size() == 0 || g.patch() == 0 ||
      (g.pointwise() && !channels_first_out && x.is_row_major(g.batch, g.in_h, g.in_w, g.in_c));
  if (!trivial && direct_conv2d_forward(g, x, filters, out, channels_first_out)) return;
  LayoutScratch<T> copy;
  const T* rows = row_major_images(x, g.batch, g.in_h, g.in_w, g.in_c, copy);
  into_layout(g.batch, g.out_h * g.out_w, g.out_c, out, channels_first_out,
              [&](T* target) { conv2d_forward(g, rows, filters, target); });
}

template <class T>
void conv2d_backprop_input(const ConvGeometry& g, const StridedImages<T>& grad, const T* filters,
                           T* dx, bool channels_first_out) {
  const bool trivial = g.input_size() == 0 || g.rows() == 0 || g.out_c == 0 || g.patch() == 0 ||
                       (g.pointwise() && !channels_first_out &&
                        grad.is_row_major(g.batch, g.out_h, g.out_w, g.out_c));
  if (!trivial && direct_conv2d_backprop_input(g, grad, filters, dx, channels_first_out)) return;
  LayoutScratch<T> copy;
  const T* rows = row_major_images(grad, g.batch, g.out_h, g.out_w, g.out_c, copy);
  into_layout(g.batch, g.in_h * g.in_w, g.in_c, dx, channels_first_out,
              [&](T* target) { conv2d_backprop_input(g, rows, filters, target); });
}

template <class T>
void conv2d_backprop_filter(const ConvGeometry& g, const StridedImages<T>& x,
                            const StridedImages<T>& grad, T* dfilters) {
  const bool trivial = g.filter_size() == 0 || g.rows() == 0 ||
                       (g.pointwise() && x.is_row_major(g.batch, g.in_h, g.in_w, g.in_c) &&
                        grad.is_row_major(g.batch, g.out_h, g.out_w, g.out_c));
  if (!trivial && direct_conv2d_backprop_filter(g, x, grad, dfilters)) return;
  LayoutScratch<T> x_copy, grad_copy;
  conv2d_backprop_filter(g, row_major_images(x, g.batch, g.in_h, g.in_w, g.in_c, x_copy),
                         row_major_images(grad, g.batch, g.out_h, g.out_w, g.out_c, grad_copy),
                         dfilters);
}

#define TAPEGRAD_CONV_LAYOUTS_INSTANTIATE(T)                                                     \
  template void conv2d_forward<T>(const ConvGeometry&, const StridedImages<T>&, const T*, T*,    \
                                  bool);                                                         \
  template void conv2d_backprop_input<T>(const ConvGeometry&, const StridedImages<T>&, const T*, \
                                         T*, bool);                                              \
  template void conv2d_backprop_filter<T>(const ConvGeometry&, const StridedImages<T>&,          \
                                          const StridedImages<T>&, T*);
TAPEGRAD_CONV_LAYOUTS_INSTANTIATE(float)
TAPEGRAD_CONV_LAYOUTS_INSTANTIATE(double)
#undef TAPEGRAD_CONV_LAYOUTS_INSTANTIATE

}  // namespace tapegrad::detail
