// layers::Conv2D: conv2d with an HWIO kernel plus a bias on the channel axis of x's layout.
#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/layers.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::layers {
namespace {

std::string describe(std::size_t in_channels, std::size_t filters, const std::vector<int>& kernel,
                     DataFormat data_format, DType dtype) {
  std::string text = "layers::Conv2D(" + std::to_string(in_channels) + " -> " +
                     std::to_string(filters) + ", kernel [";
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(kernel[i]);
  }
  return text + "], " + (data_format == DataFormat::NCHW ? "NCHW" : "NHWC") + ", " +
         dtype_name(dtype) + ")";
}

// The kernel's shape [kh, kw, in, filters], after every argument is checked (before anything
// is drawn from the generator).
Shape checked_kernel_shape(std::size_t in_channels, std::size_t filters,
                           const std::vector<int>& kernel, DataFormat data_format, DType dtype) {
  const std::string layer = describe(in_channels, filters, kernel, data_format, dtype);
  if (in_channels == 0 || filters == 0) {
    throw InvalidArgument(layer + ": in_channels and filters must be positive");
  }
  if (kernel.size() != 2 || kernel[0] <= 0 || kernel[1] <= 0) {
    throw InvalidArgument(layer + ": the kernel must be two positive sizes {height, width}");
  }
  if (data_format != DataFormat::NHWC && data_format != DataFormat::NCHW) {
    throw InvalidArgument(layer + ": data_format must be NHWC or NCHW");
  }
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw InvalidArgument(layer + ": the dtype must be float32 or float64");
  }
  return {static_cast<std::size_t>(kernel[0]), static_cast<std::size_t>(kernel[1]), in_channels,
          filters};
}

}  // namespace

Conv2D::Conv2D(std::size_t in_channels, std::size_t filters, std::vector<int> kernel,
               Generator& generator, Padding padding, std::vector<int> strides,
               DataFormat data_format, DType dtype)
    : in_channels_(in_channels),
      filters_(filters),
      padding_(padding),
      strides_(std::move(strides)),
      data_format_(data_format),
      dtype_(dtype),
      kernel_(add_variable(
          "kernel",
          glorot_uniform(checked_kernel_shape(in_channels, filters, kernel, data_format, dtype),
                         generator, dtype))),
      bias_(add_variable("bias", zeros({filters}, dtype))) {}

Conv2D::Conv2D(std::size_t in_channels, std::size_t filters, std::initializer_list<int> kernel,
               Generator& generator, Padding padding, std::initializer_list<int> strides,
               DataFormat data_format, DType dtype)
    : Conv2D(in_channels, filters, std::vector<int>(kernel), generator, padding,
             std::vector<int>(strides), data_format, dtype) {}

Conv2D::~Conv2D() = default;
Conv2D::Conv2D(Conv2D&& other) noexcept = default;
Conv2D& Conv2D::operator=(Conv2D&& other) noexcept = default;

Tensor Conv2D::operator()(const Tensor& x) const {
  // The layer's description is built only for an error: a call in a training loop pays nothing.
  const auto layer = [this] {
    const Shape kernel_shape = kernel_.shape();
    return describe(in_channels_, filters_,
                    {static_cast<int>(kernel_shape[0]), static_cast<int>(kernel_shape[1])},
                    data_format_, dtype_);
  };
  if (!x.defined()) throw InvalidArgument(layer() + ": the input is undefined");
  const std::size_t channel_axis = data_format_ == DataFormat::NCHW ? 1 : 3;
  if (x.rank() != 4 || x.shape()[channel_axis] != in_channels_ || x.dtype() != dtype_) {
    const std::string channels = std::to_string(in_channels_);
    const std::string expected = data_format_ == DataFormat::NCHW
                                     ? "[batch, " + channels + ", height, width]"
                                     : "[batch, height, width, " + channels + "]";
    throw InvalidArgument(layer() + ": input of shape " + shape_to_string(x.shape()) +
                          " and dtype " + dtype_name(x.dtype()) + "; the layer takes " + expected +
                          " " + dtype_name(dtype_));
  }
  const Tensor y = conv2d(x, kernel_, strides_, padding_, data_format_);
  if (data_format_ == DataFormat::NCHW) return y + reshape(bias_.value(), Shape{filters_, 1, 1});
  return y + bias_;
}

}  // namespace tapegrad::layers

namespace tapegrad {

template <>
layers::Conv2D& Module::add_module<layers::Conv2D>(const std::string& name, layers::Conv2D module) {
  return adopt_module(name, std::move(module));
}

template <>
layers::Conv2D& Module::add_module<layers::Conv2D>(const char* name, layers::Conv2D module) {
  return adopt_module(std::string(name), std::move(module));
}

}  // namespace tapegrad
