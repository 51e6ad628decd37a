// TF's window arithmetic (tensorflow/core/framework/kernel_shape_util's rules, restated):
// Valid keeps the windows inside the input, Same pads to ceil(in / stride) outputs with the
// odd padding element at the end.
#include "ops/nn/conv_support.hpp"

#include "ops/op_support.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad::detail {

std::array<std::size_t, 2> spatial_pair(const std::vector<int>& values, const char* what,
                                        const Described& described, DataFormat data_format) {
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(described() + ": " + what + " " + ints_to_string(values) + " " + why);
  };
  std::vector<int> hw;
  if (values.size() == 1) {
    hw = {values[0], values[0]};
  } else if (values.size() == 2) {
    hw = values;
  } else if (values.size() == 4 && data_format == DataFormat::NCHW) {
    // TF reads a 4-value list in the data format's axis order.
    if (values[0] != 1 || values[1] != 1) {
      fail("must be 1 in the batch and channel positions (TF's [1, 1, h, w] for NCHW)");
    }
    hw = {values[2], values[3]};
  } else if (values.size() == 4) {
    if (values[0] != 1 || values[3] != 1) {
      fail("must be 1 in the batch and channel positions (TF's [1, h, w, 1])");
    }
    hw = {values[1], values[2]};
  } else {
    fail("must have 1, 2 or 4 values");
  }
  for (int v : hw) {
    if (v < 1) fail("must be >= 1 (got " + std::to_string(v) + ")");
  }
  return {static_cast<std::size_t>(hw[0]), static_cast<std::size_t>(hw[1])};
}

const char* padding_name(Padding padding) { return padding == Padding::Same ? "SAME" : "VALID"; }

ImageLayout::ImageLayout(DataFormat data_format, std::size_t rank, const Described& described)
    : rank_(rank), channels_first_(data_format == DataFormat::NCHW) {
  if (data_format != DataFormat::NHWC && data_format != DataFormat::NCHW) {
    // Reachable only through a cast, which the enum's type does not prevent.
    throw InvalidArgument(described() +
                          ": data_format must be DataFormat::NHWC or "
                          "DataFormat::NCHW (got the value " +
                          std::to_string(static_cast<int>(data_format)) + ")");
  }
}

std::string ImageLayout::name() const {
  if (rank_ == 3) return channels_first_ ? "NCW" : "NWC";
  return channels_first_ ? "NCHW" : "NHWC";
}

Described ImageLayout::describing(Described operands) const {
  if (!channels_first_) return operands;
  return [operands = std::move(operands), layout = name()] {
    return operands() + ", data_format " + layout;
  };
}

// Channels first -> last moves axis 1 to the end: {0, 2, ..., rank - 1, 1}.
std::vector<int> ImageLayout::to_last_perm() const {
  std::vector<int> perm{0};
  for (std::size_t axis = 2; axis < rank_; ++axis) perm.push_back(static_cast<int>(axis));
  perm.push_back(1);
  return perm;
}

// And back: the last axis to position 1, {0, rank - 1, 1, ..., rank - 2}.
std::vector<int> ImageLayout::to_first_perm() const {
  std::vector<int> perm{0, static_cast<int>(rank_) - 1};
  for (std::size_t axis = 1; axis + 1 < rank_; ++axis) perm.push_back(static_cast<int>(axis));
  return perm;
}

namespace {

Shape permuted(const Shape& shape, const std::vector<int>& perm) {
  Shape out;
  for (int axis : perm) out.push_back(shape.at(static_cast<std::size_t>(axis)));
  return out;
}

}  // namespace

Shape ImageLayout::channels_last(const Shape& shape) const {
  return channels_first_ ? permuted(shape, to_last_perm()) : shape;
}

Shape ImageLayout::as_given(const Shape& channels_last_shape) const {
  return channels_first_ ? permuted(channels_last_shape, to_first_perm()) : channels_last_shape;
}

Tensor ImageLayout::to_channels_last(const Tensor& image) const {
  return channels_first_ ? transpose(image, to_last_perm()) : image;
}

Tensor ImageLayout::from_channels_last(const Tensor& image) const {
  return channels_first_ ? transpose(image, to_first_perm()) : image;
}

namespace {

struct Axis {
  std::size_t out, pad_before;
};

Axis window_axis(const char* axis, std::size_t in, std::size_t k, std::size_t stride,
                 std::size_t dilation, Padding padding, const Described& described) {
  const std::size_t effective = (k - 1) * dilation + 1;
  if (padding == Padding::Same) {
    const std::size_t out = (in + stride - 1) / stride;
    const std::size_t needed = out == 0 ? 0 : (out - 1) * stride + effective;
    const std::size_t pad_total = needed > in ? needed - in : 0;
    return {out, pad_total / 2};
  }
  if (in < effective) {
    throw InvalidArgument(described() + ": with VALID padding the " + axis + " " +
                          std::to_string(in) + " is smaller than the window's " +
                          std::to_string(effective) + " (size " + std::to_string(k) +
                          ", dilation " + std::to_string(dilation) + ")");
  }
  return {(in - effective) / stride + 1, 0};
}

}  // namespace

ConvGeometry window_geometry(const Shape& input_shape, std::size_t k_h, std::size_t k_w,
                             std::size_t out_channels, std::array<std::size_t, 2> strides,
                             std::array<std::size_t, 2> dilations, Padding padding,
                             const Described& described) {
  if (padding != Padding::Valid && padding != Padding::Same) {
    // Reachable only through a cast; any other value would silently act as one of the two.
    throw InvalidArgument(described() +
                          ": padding must be Padding::Valid or Padding::Same (got "
                          "the value " +
                          std::to_string(static_cast<int>(padding)) + ")");
  }
  ConvGeometry g;
  g.batch = input_shape[0];
  g.in_h = input_shape[1];
  g.in_w = input_shape[2];
  g.in_c = input_shape[3];
  g.k_h = k_h;
  g.k_w = k_w;
  g.out_c = out_channels;
  g.stride_h = strides[0];
  g.stride_w = strides[1];
  g.dilation_h = dilations[0];
  g.dilation_w = dilations[1];
  const Axis rows =
      window_axis("height", g.in_h, k_h, g.stride_h, g.dilation_h, padding, described);
  const Axis cols = window_axis("width", g.in_w, k_w, g.stride_w, g.dilation_w, padding, described);
  g.out_h = rows.out;
  g.out_w = cols.out;
  g.pad_top = rows.pad_before;
  g.pad_left = cols.pad_before;
  return g;
}

namespace {

std::vector<std::int64_t> pair_attr(std::array<std::size_t, 2> p) {
  return {static_cast<std::int64_t>(p[0]), static_cast<std::int64_t>(p[1])};
}
std::array<std::size_t, 2> pair_from(const std::vector<std::int64_t>& v) {
  return {static_cast<std::size_t>(v.at(0)), static_cast<std::size_t>(v.at(1))};
}
std::vector<int> pair_list(std::array<std::size_t, 2> p) {
  return {static_cast<int>(p[0]), static_cast<int>(p[1])};
}

}  // namespace

Attrs WindowAttrs::to_attrs() const {
  return Attrs()
      .set("strides", pair_attr(strides))
      .set("dilations", pair_attr(dilations))
      .set("ksize", pair_attr(ksize))
      .set("padding", std::int64_t{padding == Padding::Same ? 1 : 0});
}

WindowAttrs WindowAttrs::from(const Attrs& attrs) {
  WindowAttrs w;
  w.strides = pair_from(attrs.get_ints("strides"));
  w.dilations = pair_from(attrs.get_ints("dilations"));
  w.ksize = pair_from(attrs.get_ints("ksize"));
  w.padding = attrs.get_int("padding") == 1 ? Padding::Same : Padding::Valid;
  return w;
}

std::vector<int> WindowAttrs::strides_list() const { return pair_list(strides); }
std::vector<int> WindowAttrs::dilations_list() const { return pair_list(dilations); }
std::vector<int> WindowAttrs::ksize_list() const { return pair_list(ksize); }

}  // namespace tapegrad::detail

TAPEGRAD_OP_SOURCE(conv_support)
