// What conv.cpp and pooling.cpp share: reading TF-style strides / dilations / ksize lists,
// the padding attribute, and the window geometry of an NHWC op, with errors that name the op
// and its operands.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/im2col.hpp"
#include "tapegrad/ops/nn.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad::detail {

// The op's operands as an error message prefix ("conv2d: x has shape [...] and dtype ...").
using Described = std::function<std::string()>;

// {h, w} from a list of 1, 2 or 4 (TF's [1, h, w, 1]) values, each >= 1. `what` names the
// list in the error ("strides", "dilations", "ksize").
std::array<std::size_t, 2> spatial_pair(const std::vector<int>& values, const char* what,
                                        const Described& described);

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
  return detail::kernel_array<T>(t).data();
}

}  // namespace tapegrad::detail
