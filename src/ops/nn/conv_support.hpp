// What conv.cpp and pooling.cpp share: reading TF-style strides / dilations / ksize lists,
// the padding attribute, the window geometry of an NHWC op, and the move of a channels-first
// image to channels last and back, with errors that name the op and its operands.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/im2col.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/ops/nn.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad::detail {

// The op's operands as an error message prefix ("conv2d: x has shape [...] and dtype ...").
using Described = std::function<std::string()>;

// {h, w} from a list of 1, 2 or 4 (TF's [1, h, w, 1], or [1, 1, h, w] for NCHW) values, each
// >= 1. `what` names the list in the error ("strides", "dilations", "ksize").
std::array<std::size_t, 2> spatial_pair(const std::vector<int>& values, const char* what,
                                        const Described& described,
                                        DataFormat data_format = DataFormat::NHWC);

// The layout a user gave an op's images in (rank 4: NHWC / NCHW; rank 3, conv1d: NWC / NCW).
// Every kernel here works channels last, so an op checks its operands in the user's layout
// (errors then show the shapes as passed), finds the channels-last shapes with
// channels_last(), and moves the image with to_channels_last / from_channels_last only once
// every check has passed: no stray transpose is recorded before an error.
class ImageLayout {
 public:
  // InvalidArgument (described + why) for a DataFormat that is neither enumerator.
  ImageLayout(DataFormat data_format, std::size_t rank, const Described& described);

  // "NHWC", "NCHW", "NWC" or "NCW".
  std::string name() const;
  // An error prefix: `operands`, and the layout when it is not the default one.
  Described describing(Described operands) const;
  // A shape in this layout reordered channels last, and back (no data moves).
  Shape channels_last(const Shape& shape) const;
  Shape as_given(const Shape& channels_last_shape) const;
  // The image in channels-last order and back, as recorded Transposes (so the tape, forward
  // mode and vectorized_map see ordinary ops); the tensor itself when already channels last.
  Tensor to_channels_last(const Tensor& image) const;
  Tensor from_channels_last(const Tensor& image) const;

 private:
  std::vector<int> to_last_perm() const;
  std::vector<int> to_first_perm() const;

  std::size_t rank_;
  bool channels_first_;
};

const char* padding_name(Padding padding);

// The geometry of sliding a k_h x k_w window (with strides and dilations) over an NHWC input
// of `input_shape` under TF's padding rules; out_c is set to `out_channels`. InvalidArgument
// (described + why) when Valid padding leaves no room for the dilated window.
ConvGeometry window_geometry(const Shape& input_shape, std::size_t k_h, std::size_t k_w,
                             std::size_t out_channels, std::array<std::size_t, 2> strides,
                             std::array<std::size_t, 2> dilations, Padding padding,
                             const Described& described);

// The attributes a recorded conv or pooling op carries, and back.
struct WindowAttrs {
  std::array<std::size_t, 2> strides{1, 1};
  std::array<std::size_t, 2> dilations{1, 1};
  std::array<std::size_t, 2> ksize{1, 1};  // pooling only
  Padding padding = Padding::Valid;

  Attrs to_attrs() const;
  static WindowAttrs from(const Attrs& attrs);
  // Back as the public functions take them ({h, w}).
  std::vector<int> strides_list() const;
  std::vector<int> dilations_list() const;
  std::vector<int> ksize_list() const;
};

// A new floating tensor of `shape` in `dtype`, filled by kernel(T* out): the output of a
// window kernel. `op` names the op in the dtype and allocation errors.
template <class Kernel>
Tensor compute_floating(const char* op, DType dtype, const Shape& shape, Kernel kernel) {
  return dispatch_floating(op, dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> out = allocate_array<T>(op, shape);
    kernel(out.data());
    return Tensor(std::move(out));
  });
}

// t's data as T (the second argument only selects T: pass the kernel's output pointer).
template <class T>
const T* data_of(const Tensor& t, T*) {
  return detail::kernel_data<T>(t);
}

// An image batch t [batch, h, w, c] as the convolution kernels read it: where its elements lie,
// through their strides, when t is a strided view not copied yet (a channels-first tensor
// transposed to channels last); else its row-major elements. T as in data_of.
template <class T>
StridedImages<T> images_of(const Tensor& t, T*) {
  const TensorImpl& impl = impl_of(t);
  if (impl.is_view() && !impl.contiguous() && impl.elements() == nullptr && impl.holds_elements &&
      impl.dtype == dtype_of<T>::value) {
    const ElementLayout layout = element_layout(*TensorAccess::pointer(t));
    StridedImages<T> images;
    images.data = static_cast<const T*>(layout.data) + layout.offset;
    for (int axis = 0; axis < 4; ++axis) images.strides[axis] = layout.strides[axis];
    return images;
  }
  const Shape& shape = t.shape();
  return StridedImages<T>::row_major(kernel_data<T>(t), shape[1], shape[2], shape[3]);
}

// Whether a kernel given `images` (channels-last shape `shape`) should store its image output
// channels first: when they are stored so themselves, their output follows (PyTorch's memory
// format rule), so that the caller's transpose back to channels first is free.
template <class T>
bool stored_channels_first(const StridedImages<T>& images, const Shape& shape) {
  return images.is_channels_first(shape[0], shape[1], shape[2], shape[3]) &&
         !images.is_row_major(shape[0], shape[1], shape[2], shape[3]);
}

// A new image tensor of T and of channels-last `shape` [n, h, w, c], filled by
// kernel(T* out, bool channels_first): stored [n, c, h, w] when `channels_first` (the result
// is then a view of that storage, its transpose to channels first contiguous). `op` names the
// op in allocation errors.
template <class T, class Kernel>
Tensor compute_images(const char* op, const Shape& shape, bool channels_first, Kernel kernel) {
  if (!channels_first) {
    xt::xarray<T> out = allocate_array<T>(op, shape);
    kernel(out.data(), false);
    return Tensor(std::move(out));
  }
  xt::xarray<T> out = allocate_array<T>(op, {shape[0], shape[3], shape[1], shape[2]});
  kernel(out.data(), true);
  const Tensor stored(std::move(out));
  const auto plane = static_cast<std::ptrdiff_t>(shape[1] * shape[2]);
  const TensorImpl::Strides strides{plane * static_cast<std::ptrdiff_t>(shape[3]),
                                    static_cast<std::ptrdiff_t>(shape[2]), 1, plane};
  return make_view(buffer_owner_of(stored), shape, strides, 0);
}

}  // namespace tapegrad::detail
