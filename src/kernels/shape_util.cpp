#include "kernels/shape_util.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

#include "tapegrad/errors.hpp"

namespace tapegrad::detail {

namespace {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return sizeof(float);
    case DType::Float64:
      return sizeof(double);
    case DType::Int32:
      return sizeof(std::int32_t);
    case DType::Int64:
      return sizeof(std::int64_t);
    case DType::Bool:
      return sizeof(bool);
  }
  return 8;
}

}  // namespace

std::string describe(const char* op, const std::vector<Operand>& operands) {
  std::string out = std::string(op) + ": ";
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i].tensor;
    out += (i ? ", " : "") + operands[i].name;
    if (!t.defined()) {
      out += " is undefined";
    } else {
      out += std::string(" has shape ") + shape_to_string(t.shape()) + " and dtype " +
             dtype_name(t.dtype());
    }
  }
  return out;
}

std::string describe(const char* op, const Tensor& x) { return describe(op, {{"x", x}}); }

std::string describe(const char* op, const Tensor& x, const Tensor& y) {
  return describe(op, {{"x", x}, {"y", y}});
}

namespace {

// The product of the non-zero dimensions of `shape` (1 for a scalar); InvalidArgument naming
// `op` when it exceeds kMaxElements. Checking this product, not only the element count, keeps
// every sub-shape valid too (a reduction of an empty tensor, a slice of it).
std::size_t nonzero_product(const char* op, const Shape& shape) {
  std::size_t product = 1;
  for (auto d : shape) {
    if (d == 0) continue;
    if (d > kMaxElements || product > kMaxElements / d) {
      throw InvalidArgument(std::string(op) + ": shape " + shape_to_string(shape) +
                            " has more than 2^63 - 1 elements (the limit on a tensor's size; "
                            "for an empty shape, the product of its non-zero dimensions)");
    }
    product *= d;
  }
  return product;
}

bool has_zero_dimension(const Shape& shape) {
  return std::find(shape.begin(), shape.end(), std::size_t{0}) != shape.end();
}

}  // namespace

std::size_t checked_num_elements(const char* op, const Shape& shape) {
  const std::size_t product = nonzero_product(op, shape);
  return has_zero_dimension(shape) ? 0 : product;
}

std::size_t check_new_shape(const char* op, const Shape& shape, DType dtype) {
  const std::size_t product = nonzero_product(op, shape);
  const std::size_t element = dtype_size(dtype);
  const auto max_bytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  if (product > max_bytes / element) {
    throw InvalidArgument(std::string(op) + ": a tensor of shape " + shape_to_string(shape) +
                          " and dtype " + dtype_name(dtype) + " would need " +
                          std::to_string(product) + " x " + std::to_string(element) +
                          " bytes (for an empty shape: its non-zero dimensions), more than any "
                          "allocation can address");
  }
  return has_zero_dimension(shape) ? 0 : product;
}

void throw_resource_exhausted(const char* op, const Shape& shape, DType dtype) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;  // checked by check_new_shape before any allocation
  throw ResourceExhausted(std::string(op) + ": out of memory allocating a tensor of shape " +
                          shape_to_string(shape) + " and dtype " + dtype_name(dtype) + " (" +
                          std::to_string(n) + " x " + std::to_string(dtype_size(dtype)) +
                          " bytes)");
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::size_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::size_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw InvalidArgument(std::string(op) + ": shapes " + shape_to_string(a) + " and " +
                            shape_to_string(b) + " cannot be broadcast together");
    }
    out[i] = da == 1 ? db : da;
  }
  checked_num_elements(op, out);
  return out;
}

Shape broadcast_shapes(const char* op, const Tensor& x, const Tensor& y) {
  Shape out;
  try {
    out = broadcast_shapes(op, x.shape(), y.shape());
  } catch (const InvalidArgument&) {
    throw InvalidArgument(describe(op, x, y) + ": the shapes cannot be broadcast together");
  }
  try {
    checked_num_elements(op, out);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(describe(op, x, y) + ": the broadcast shape " + shape_to_string(out) +
                          " has more than 2^63 - 1 elements");
  }
  return out;
}

std::size_t normalize_axis(const char* op, int axis, const Tensor& x) {
  const auto r = static_cast<int>(x.rank());
  if (axis < -r || axis >= r) {
    throw InvalidArgument(describe(op, x) + ": axis " + std::to_string(axis) +
                          " is out of range [" + std::to_string(-r) + ", " + std::to_string(r) +
                          ") for rank " + std::to_string(r));
  }
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::vector<std::size_t> normalize_axes(const char* op, const std::vector<int>& axes,
                                        const Tensor& x) {
  std::vector<std::size_t> out;
  if (axes.empty()) {
    for (std::size_t i = 0; i < x.rank(); ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) out.push_back(normalize_axis(op, a, x));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    std::string list;
    for (std::size_t i = 0; i < axes.size(); ++i) list += (i ? ", " : "") + std::to_string(axes[i]);
    throw InvalidArgument(describe(op, x) + ": an axis is repeated in the axes [" + list + "]");
  }
  return out;
}

std::vector<std::size_t> row_major_strides(const Shape& shape) {
  std::vector<std::size_t> s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::vector<std::size_t> broadcast_strides(const Shape& operand, const Shape& out) {
  const std::vector<std::size_t> own = row_major_strides(operand);
  const std::size_t lead = out.size() - operand.size();
  std::vector<std::size_t> strides(out.size(), 0);
  for (std::size_t d = lead; d < out.size(); ++d) {
    if (operand[d - lead] != 1) strides[d] = own[d - lead];
  }
  return strides;
}

IndexValues::IndexValues(const Tensor& indices) : source_(indices), size_(indices.size()) {
  if (indices.dtype() == DType::Int32) {
    const auto& values = kernel_array<std::int32_t>(indices);
    converted_.assign(values.begin(), values.end());
    data_ = converted_.data();
  } else {
    data_ = kernel_array<std::int64_t>(indices).data();
  }
}

IndexValues::~IndexValues() = default;

std::size_t first_out_of_range(const IndexValues& values, std::size_t limit) noexcept {
  // A negative value, seen as unsigned, is past any limit.
  const auto past = [limit](std::int64_t v) { return static_cast<std::uint64_t>(v) >= limit; };
  bool any = false;
  for (const std::int64_t v : values) any |= past(v);
  if (!any) return values.size();
  return static_cast<std::size_t>(std::find_if(values.begin(), values.end(), past) -
                                  values.begin());
}

}  // namespace tapegrad::detail
