// Tensor: an immutable, shareable n-dimensional array with a runtime dtype and a unique id.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <type_traits>
#include <utility>

#include <xtensor/xarray.hpp>

#include "tapegrad/dtype.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/storage.hpp"

namespace tapegrad {

class Tensor;

namespace detail {

class TensorImpl;     // the storage (the array, its shape): internal to the library
struct TensorAccess;  // the runtime's way in and out of a handle

// The few fields of a tensor's storage that a handle reads inline, so that dtype(), id() and
// array<T>() cost no call on an op's path. Every TensorImpl begins with one; only the
// runtime builds them.
class TensorHeader {
 public:
  const std::uint64_t id;
  const DType dtype;
  const bool holds_elements;  // false only for a Variable's handle (its array holds nothing)

 protected:
  TensorHeader(std::uint64_t id, DType dtype, bool holds_elements)
      : id(id), dtype(dtype), holds_elements(holds_elements) {}
  TensorHeader(const TensorHeader&) = delete;
  TensorHeader& operator=(const TensorHeader&) = delete;
  ~TensorHeader() = default;
  // The storage_array<T> of `dtype`: the TensorImpl's own, set by its constructor; for a view,
  // null until a read that needs contiguous elements builds its copy (then that copy's).
  mutable std::atomic<const void*> elements_{nullptr};

 private:
  friend class tapegrad::Tensor;
};

[[noreturn]] void throw_undefined_tensor(const char* what);
// The contiguous copy of a view (built once, then cached on the view): its storage_array<T>.
const void* materialize_view(const TensorHeader& header);

// Where a tensor's elements are, without copying them: element (i0, i1, ...) is at
// data[offset + i0 * strides[0] + i1 * strides[1] + ...]; strides in elements, maybe negative
// (reverse) or 0. `data` points at the first element of the buffer, `buffer_size` its length.
struct ElementLayout {
  const void* data;
  std::size_t buffer_size;
  std::size_t offset;
  xt::svector<std::size_t, 4> shape;
  xt::svector<std::ptrdiff_t, 4> strides;
};
ElementLayout element_layout(const TensorHeader& header);
// Tensor::array<T>() of another dtype, or of a Variable's handle.
[[noreturn]] void throw_bad_array_access(const TensorHeader& header, DType requested);

// Exported, non-template: they name only the pinned storage_array<T>, never a consumer's
// xt::xarray<T>, so they link whatever -march or XTENSOR_USE_XSIMD the caller compiled with.
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<float>&& a);
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<double>&& a);
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<std::int32_t>&& a);
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<std::int64_t>&& a);
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<bool>&& a);
// A new tensor holding a copy of `shape`'s row-major elements at `data`. A consumer's
// row-major xt::xarray converts through these, so its program instantiates no xtensor
// assignment for the conversion (0.2 s of the CNN example's 2.6 s of compile CPU).
std::shared_ptr<const TensorHeader> make_tensor_impl(const float* data, const std::size_t* shape,
                                                     std::size_t rank);
std::shared_ptr<const TensorHeader> make_tensor_impl(const double* data, const std::size_t* shape,
                                                     std::size_t rank);
std::shared_ptr<const TensorHeader> make_tensor_impl(const std::int32_t* data,
                                                     const std::size_t* shape, std::size_t rank);
std::shared_ptr<const TensorHeader> make_tensor_impl(const std::int64_t* data,
                                                     const std::size_t* shape, std::size_t rank);
std::shared_ptr<const TensorHeader> make_tensor_impl(const bool* data, const std::size_t* shape,
                                                     std::size_t rank);

// A consumer's xt::xarray of another allocator: its elements copied, in row-major order.
template <class A>
std::shared_ptr<const TensorHeader> make_tensor_impl_from(const A& a) {
  if constexpr (is_row_major_buffer_array_v<A>) {
    return make_tensor_impl(a.data(), a.shape().data(), a.shape().size());
  } else {
    return make_tensor_impl(storage_array<xarray_element_t<A>>(a));
  }
}

// Traces alive in the process (vectorized_map's and Function's, on any thread). While there is one,
// Tensor::array<T>() and item<T>() report the read to note_value_read, which tells the traces
// of the calling thread when the tensor is one of their traced values: a value read from C++
// would otherwise become a constant of the trace, the same for every slice.
extern std::atomic<std::size_t> live_trace_count;
void note_value_read(const Tensor& t, const char* accessor);

// An op's forward reading its own inputs' elements: as Tensor::array<T>(), but not reported to
// traces (the op's outputs are what the trace records). Only kernels use it; gradient, forward
// and batching rules never read values (docs/design.md, "Traces hold no values").
template <class T>
const storage_array<T>& kernel_array(const Tensor& t);

template <class T>
constexpr bool is_tensor_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>;

}  // namespace detail

/// A cheap handle to immutable storage: copies of a handle are the same tensor (same id).
/// Element types: float, double, int32_t, int64_t, bool (TF: an eager tf.Tensor).
class Tensor {
 public:
  /// An undefined tensor: what `gradient()` returns for an unconnected source.
  Tensor() = default;
  // Out of line: a copy or destruction is an atomic count on the shared storage, and inlined
  // into every expression of a user's program it was most of what that program compiled.
  Tensor(const Tensor& other);
  Tensor(Tensor&& other) noexcept = default;
  Tensor& operator=(const Tensor& other);
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor();

  /// From an xt::xarray<T>: takes the array without copying it when it is the storage type
  /// (a default build's xt::xarray<T>: pass an rvalue or std::move).
  template <class T, std::enable_if_t<detail::is_tensor_element_v<T>, int> = 0>
  Tensor(storage_array<T> a)  // NOLINT(google-explicit-constructor): arrays convert like values
      : impl_(detail::make_tensor_impl(std::move(a))) {}

  /// From an xt::xarray<T> of any other allocator or layout (e.g. a consumer built with
  /// -mavx2, whose xt::xarray<T> aligns to 32 bytes): the elements are copied, in row-major
  /// order, into the storage type.
  template <class A, class T = detail::xarray_element_t<A>,
            std::enable_if_t<detail::is_tensor_element_v<T> &&
                                 !std::is_same_v<std::decay_t<A>, storage_array<T>>,
                             int> = 0>
  Tensor(A&& a)  // NOLINT(google-explicit-constructor, bugprone-forwarding-reference-overload)
      : impl_(detail::make_tensor_impl_from(a)) {}

  bool defined() const noexcept { return impl_ != nullptr; }
  explicit operator bool() const noexcept { return defined(); }

  DType dtype() const { return checked().dtype; }
  const Shape& shape() const;
  std::size_t rank() const;
  std::size_t size() const;
  /// Unique for the life of the process; the key the tape records.
  std::uint64_t id() const { return checked().id; }

  /// The elements. Throws InvalidArgument when T is not this tensor's dtype, or when this is a
  /// Variable's handle (which holds no elements). The storage type is a consumer's
  /// xt::xarray<T> in a default build; with other flags
  /// `const xt::xarray<T>& a = t.array<T>();` binds a converted copy, `const auto&` does not.
  /// Inside vectorized_map's fn, reading a value that depends on the slice makes fn run once
  /// per slice (the read's result could steer fn or become a new tensor tracing cannot see).
  template <class T>
  const storage_array<T>& array() const {
    static_assert(detail::is_tensor_element_v<T>, "tapegrad: unsupported element type");
    return *static_cast<const storage_array<T>*>(reported_elements(dtype_of<T>::value));
  }

  /// The single element of a tensor of size 1. InvalidArgument otherwise.
  template <class T>
  T item() const;

  /// The elements as a read-only xtensor expression over the tensor's own buffer, its strides
  /// kept: never copies, also for a transposed, sliced or reversed view (array<T>() would build
  /// a contiguous copy of those). The expression points into the buffer: keep a handle to the
  /// tensor while it is in use. InvalidArgument as array<T>(). Defined in
  /// <tapegrad/tensor_view.hpp> (included by <tapegrad/tapegrad.hpp>).
  template <class T>
  auto view() const;

 private:
  friend struct detail::TensorAccess;
  template <class T>
  friend const storage_array<T>& detail::kernel_array(const Tensor& t);

  template <class T>
  const storage_array<T>& unreported_array() const {
    static_assert(detail::is_tensor_element_v<T>, "tapegrad: unsupported element type");
    return *static_cast<const storage_array<T>*>(elements_of(dtype_of<T>::value));
  }

  // The storage_array of dtype `requested`, type-erased: the dtype and handle checks, and a
  // view's contiguous copy made on first use.
  const void* elements_of(DType requested) const {
    const detail::TensorHeader& h = checked();
    if (h.dtype != requested || !h.holds_elements) detail::throw_bad_array_access(h, requested);
    const void* elements = h.elements_.load(std::memory_order_acquire);
    return elements != nullptr ? elements : detail::materialize_view(h);
  }

  // elements_of and the report to live traces: array<T>()'s work. Out of line: inlined, it was
  // compiled and optimised at every read in a user's program; a read costs one call (per read,
  // not per element).
  const void* reported_elements(DType requested) const;

  // Wraps existing storage (the runtime's: users construct from arrays).
  explicit Tensor(std::shared_ptr<const detail::TensorHeader> impl) : impl_(std::move(impl)) {}
  const detail::TensorHeader& checked() const {
    if (!impl_) detail::throw_undefined_tensor("Tensor");
    return *impl_;
  }

  // Points at the header of a TensorImpl (the shared_ptr owns the whole TensorImpl).
  std::shared_ptr<const detail::TensorHeader> impl_;
};

namespace detail {
template <class T>
const storage_array<T>& kernel_array(const Tensor& t) {
  return t.unreported_array<T>();
}
}  // namespace detail

/// True when a and b read one buffer: one is a view of the other (reshape, transpose, slice,
/// ...: docs/guide.md "Memory"), both are views of a third, or they are the same tensor.
/// False when either is undefined.
bool shares_storage(const Tensor& a, const Tensor& b);

/// "Tensor(shape=[2], dtype=float64, [1., 2.])", or "Tensor(undefined)".
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Scalars (rank 0): Float64 and Float32.
Tensor constant(double value);
Tensor constant(float value);
/// A 1-D Float64 tensor.
Tensor constant(std::initializer_list<double> values);
/// A 2-D Float64 tensor; every row must have the same length (InvalidArgument otherwise).
Tensor constant(std::initializer_list<std::initializer_list<double>> rows);
/// A tensor of `shape` and `dtype` from row-major values, converted to the dtype
/// (InvalidArgument when the count does not fill the shape, or a value is not exactly
/// representable in the dtype: 1.5 or NaN for an integer dtype, 2 for bool).
Tensor from_values(const std::vector<double>& values, const Shape& shape,
                   DType dtype = DType::Float64);

/// Tensors filled with 0, 1 or a value, of any dtype (TF: tf.zeros, tf.ones, tf.fill).
/// InvalidArgument when the value is not exactly representable in the dtype or the shape has
/// more than 2^63 - 1 elements; ResourceExhausted when it cannot be allocated.
Tensor zeros(const Shape& shape, DType dtype = DType::Float64);
Tensor ones(const Shape& shape, DType dtype = DType::Float64);
Tensor fill(const Shape& shape, double value, DType dtype = DType::Float64);
/// Same shape and dtype as t.
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

extern template float Tensor::item<float>() const;
extern template double Tensor::item<double>() const;
extern template std::int32_t Tensor::item<std::int32_t>() const;
extern template std::int64_t Tensor::item<std::int64_t>() const;
extern template bool Tensor::item<bool>() const;

}  // namespace tapegrad
