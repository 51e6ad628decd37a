// Shape arithmetic shared by the op families: broadcasting, strides, axis normalisation,
// size checks, and the one formatter of operands in error messages.
#pragma once

#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// NumPy broadcasting of two shapes; InvalidArgument naming `op`, the shapes and dtypes.
Shape broadcast_shapes(const char* op, const Tensor& x, const Tensor& y);
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Axis in [-rank, rank) -> [0, rank); InvalidArgument naming the op, x's shape and dtype
// (describe) and the axis otherwise.
std::size_t normalize_axis(const char* op, int axis, const Tensor& x);
// Reduction axes of x: empty = all; sorted, unique-checked, each as normalize_axis.
std::vector<std::size_t> normalize_axes(const char* op, const std::vector<int>& axes,
                                        const Tensor& x);

// One named operand of an error message.
struct Operand {
  std::string name;
  const Tensor& tensor;
};

// The one formatter of operands in error messages:
// "op: labels has shape [2, 3] and dtype float64, logits has shape [3] and dtype float32".
// An undefined operand reads "x is undefined".
std::string describe(const char* op, const std::vector<Operand>& operands);
// "op: x has shape [2, 3] and dtype float64, y has shape [4] and dtype float32"
std::string describe(const char* op, const Tensor& x, const Tensor& y);
std::string describe(const char* op, const Tensor& x);

// The largest element count of a tensor: TF's limit (int64), so every count, offset and
// signed dimension fits in std::int64_t.
constexpr std::size_t kMaxElements =
    static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());

// The element count of `shape`, checked: InvalidArgument naming `op` and the shape when the
// product of its non-zero dimensions exceeds kMaxElements (instead of a wrapped count). The
// non-zero product, not only the count, so that every sub-shape of a valid shape is valid.
std::size_t checked_num_elements(const char* op, const Shape& shape);
// The same, and the bytes of that product for a `dtype` tensor must fit in ptrdiff_t (what an
// allocation can ever address): every op that builds a new shape calls this first.
std::size_t check_new_shape(const char* op, const Shape& shape, DType dtype);

// ResourceExhausted naming `op`, the shape, the dtype and the bytes requested.
[[noreturn]] void throw_resource_exhausted(const char* op, const Shape& shape, DType dtype);

// An uninitialised array of `shape` for `op`: the shape is checked and a failed allocation
// is a ResourceExhausted naming the op instead of an untyped std::bad_alloc.
template <class T>
xt::xarray<T> allocate_array(const char* op, const Shape& shape) {
  check_new_shape(op, shape, dtype_of<T>::value);
  try {
    return xt::xarray<T>::from_shape(shape);
  } catch (const std::bad_alloc&) {
    throw_resource_exhausted(op, shape, dtype_of<T>::value);
  }
}

// Runs `make` (a kernel that allocates its output of `shape`): a std::bad_alloc from it
// becomes a ResourceExhausted naming `op`, the shape and the dtype.
template <class Make>
decltype(auto) with_allocation_check(const char* op, const Shape& shape, DType dtype, Make&& make) {
  check_new_shape(op, shape, dtype);
  try {
    return make();
  } catch (const std::bad_alloc&) {
    throw_resource_exhausted(op, shape, dtype);
  }
}

// Row-major strides (in elements) of a shape.
std::vector<std::size_t> row_major_strides(const Shape& shape);
// The element strides of an operand of shape `operand` in the index space of `out`, the shape
// it broadcasts to (NumPy rules, leading 1s implied): 0 along every broadcast axis.
std::vector<std::size_t> broadcast_strides(const Shape& operand, const Shape& out);

// The values of an int32 or int64 tensor (indices, segment ids) as int64, in flat order, read
// only. An int64 tensor's elements are read where they are (a gather of millions of rows would
// otherwise copy its indices on every call); int32 ones are converted. Holds a handle to the
// tensor, so the values stay valid however the caller's handle goes; not copyable, as the
// pointer may point into its own vector.
class IndexValues {
 public:
  IndexValues() = default;  // no values
  explicit IndexValues(const Tensor& indices);
  IndexValues(IndexValues&&) noexcept = default;
  IndexValues& operator=(IndexValues&&) noexcept = default;
  IndexValues(const IndexValues&) = delete;
  IndexValues& operator=(const IndexValues&) = delete;
  ~IndexValues();

  const std::int64_t* begin() const noexcept { return data_; }
  const std::int64_t* end() const noexcept { return data_ + size_; }
  std::size_t size() const noexcept { return size_; }
  std::int64_t operator[](std::size_t k) const noexcept { return data_[k]; }

 private:
  Tensor source_;
  std::vector<std::int64_t> converted_;  // int32 indices only
  const std::int64_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// The caller has checked the dtype (int32 or int64).
inline IndexValues index_values(const Tensor& indices) { return IndexValues(indices); }

// The position of the first value outside [0, limit), or values.size() when there is none: one
// pass without a branch per value (a gather's millions of indices are checked on every call),
// a second only to find the culprit.
std::size_t first_out_of_range(const IndexValues& values, std::size_t limit) noexcept;

}  // namespace tapegrad::detail
