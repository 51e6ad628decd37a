// Tensor: an immutable, shareable n-dimensional array with a runtime dtype and a unique id.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <atomic>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

#include <xtensor/xarray.hpp>

#include "tapegrad/dtype.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/storage.hpp"

namespace tapegrad {

namespace detail {

// The storage behind a Tensor handle. Never mutated after construction (the lazily built
// Shape is a cache of the array's own shape), so tapes can keep handles to inputs and outputs
// without copying and without version counters.
class TensorImpl {
 public:
  using Storage = std::variant<storage_array<float>, storage_array<double>,
                               storage_array<std::int32_t>, storage_array<std::int64_t>,
                               storage_array<bool>>;

  // Builds the array in place (moving an xt::xarray costs more than a tiny op).
  template <class Array, class... Args>
  TensorImpl(std::uint64_t id, DType dtype, std::in_place_type_t<Array> type, Args&&... args)
      : id(id), dtype(dtype), data(type, std::forward<Args>(args)...) {}
  // For tensors whose shape is not their array's (a Variable's handle holds no elements).
  TensorImpl(std::uint64_t id, DType dtype, Storage data, Shape shape);
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  ~TensorImpl();

  // Built on first use: ops work on the array's inline shape, so the common path never
  // allocates a std::vector for it. Thread-safe.
  const Shape& shape() const {
    const Shape* s = shape_.load(std::memory_order_acquire);
    return s != nullptr ? *s : build_shape();
  }
  std::size_t rank() const;
  std::size_t size() const;
  // The dimensions without building the Shape: inline up to rank 4.
  xt::svector<std::size_t, 4> dims() const;

  const std::uint64_t id;
  const DType dtype;
  // False only for a Variable's handle: its shape is the variable's, its array holds nothing.
  const bool holds_elements = true;
  Storage data;  // written only while the runtime builds a new tensor, before anyone sees it

 private:
  const Shape& build_shape() const;
  mutable std::atomic<const Shape*> shape_{nullptr};  // owned
};

// Exported, non-template: they name only the pinned storage_array<T>, never a consumer's
// xt::xarray<T>, so they link whatever -march or XTENSOR_USE_XSIMD the caller compiled with.
std::shared_ptr<const TensorImpl> make_tensor_impl(storage_array<float>&& a);
std::shared_ptr<const TensorImpl> make_tensor_impl(storage_array<double>&& a);
std::shared_ptr<const TensorImpl> make_tensor_impl(storage_array<std::int32_t>&& a);
std::shared_ptr<const TensorImpl> make_tensor_impl(storage_array<std::int64_t>&& a);
std::shared_ptr<const TensorImpl> make_tensor_impl(storage_array<bool>&& a);
std::uint64_t next_tensor_id();

[[noreturn]] void throw_undefined_tensor(const char* what);
[[noreturn]] void throw_dtype_mismatch(DType actual, DType requested);
[[noreturn]] void throw_variable_handle(const char* op, const TensorImpl& handle);

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
      : impl_(detail::make_tensor_impl(storage_array<T>(a))) {}

  bool defined() const noexcept { return impl_ != nullptr; }
  explicit operator bool() const noexcept { return defined(); }

  DType dtype() const { return checked().dtype; }
  const Shape& shape() const { return checked().shape(); }
  std::size_t rank() const { return checked().rank(); }
  std::size_t size() const { return checked().size(); }
  /// Unique for the life of the process; the key the tape records.
  std::uint64_t id() const { return checked().id; }

  /// The elements. Throws InvalidArgument when T is not this tensor's dtype, or when this is a
  /// Variable's handle (which holds no elements). The storage type is a consumer's
  /// xt::xarray<T> in a default build; with other flags
  /// `const xt::xarray<T>& a = t.array<T>();` binds a converted copy, `const auto&` does not.
  template <class T>
  const storage_array<T>& array() const {
    static_assert(detail::is_tensor_element_v<T>, "tapegrad: unsupported element type");
    const detail::TensorImpl& impl = checked();
    const auto* a = std::get_if<storage_array<T>>(&impl.data);
    if (a == nullptr) detail::throw_dtype_mismatch(impl.dtype, dtype_of<T>::value);
    if (!impl.holds_elements) detail::throw_variable_handle("Tensor::array", impl);
    return *a;
  }

  /// The single element of a tensor of size 1. InvalidArgument otherwise.
  template <class T>
  T item() const;

  /// The storage (for kernels and the runtime).
  const detail::TensorImpl& impl() const { return checked(); }
  /// Wraps existing storage (for the runtime; users construct from arrays).
  explicit Tensor(std::shared_ptr<const detail::TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  const detail::TensorImpl& checked() const {
    if (!impl_) detail::throw_undefined_tensor("Tensor");
    return *impl_;
  }
  std::shared_ptr<const detail::TensorImpl> impl_;
};

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
