// The storage behind a Tensor handle, and the runtime's only way in and out of a handle.
// Internal: the public header (tapegrad/tensor.hpp) only forward-declares TensorImpl, so a
// user can neither build a Tensor around storage of their own nor choose its id.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <variant>

#include "runtime/tensor_ids.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// Never mutated after construction (the lazily built Shape is a cache of the array's own
// shape, the contiguous copy of a view a cache of its elements), so tapes can keep handles to
// inputs and outputs without copying and without version counters. The exceptions are
// unobservable, each writing a base tensor whose handle is the only one: the backward walk
// adds to a running gradient sum in place (runtime/vspace.cpp), and optimizers update a
// variable's value and their slots in place (runtime/in_place.hpp).
//
// A tensor is either a base, which owns its array, or a view of a base (TensorViewImpl).
class TensorViewImpl;

class TensorImpl : public TensorHeader {
 public:
  using Storage =
      std::variant<storage_array<float>, storage_array<double>, storage_array<std::int32_t>,
                   storage_array<std::int64_t>, storage_array<bool>>;
  using Strides = xt::svector<std::ptrdiff_t, 4>;

  // Builds the array in place (moving an xt::xarray costs more than a tiny op).
  template <class Array, class... Args>
  TensorImpl(std::uint64_t id, DType dtype, std::in_place_type_t<Array> type, Args&&... args)
      : TensorHeader(id, dtype, true), data(type, std::forward<Args>(args)...) {
    elements_.store(&std::get<Array>(data), std::memory_order_relaxed);
  }
  // For tensors whose shape is not their array's (a Variable's handle holds no elements).
  TensorImpl(std::uint64_t id, DType dtype, Storage data, Shape shape);
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  // Not virtual: every TensorImpl is made by make_shared, whose deleter knows the real type.
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
  // The dimensions in place, without copying them: valid while the tensor lives.
  struct DimsRef {
    const std::size_t* data;
    std::size_t size;
  };
  inline DimsRef dims_ref() const;

  // The storage_array<T> a handle's array<T>() returns: null for a view until its copy exists.
  const void* elements() const noexcept { return elements_.load(std::memory_order_acquire); }

  // ---- Views (TensorViewImpl below) ----
  bool is_view() const noexcept { return is_view_; }
  // The tensor whose array holds the elements: the base of a view, or this tensor.
  inline const TensorImpl& buffer_owner() const noexcept;
  // Where the elements are in buffer_owner()'s array, in elements (a base's: row-major
  // strides, offset 0).
  Strides strides() const;
  inline std::size_t offset() const noexcept;
  // True for a base, and for a view whose elements are its base's [offset, offset + size) in
  // row-major order: kernels read those in place (a reshape, expand_dims, squeeze, or a slice
  // of leading rows).
  inline bool contiguous() const noexcept;
  inline const TensorViewImpl& as_view() const noexcept;

  // id, dtype, holds_elements: in the TensorHeader (a handle reads them inline).
  // A base's elements; a view's is an empty array of its dtype, never read.
  Storage data;  // written only while the runtime builds a new tensor, before anyone sees it

 protected:
  struct ViewTag {};
  TensorImpl(ViewTag, std::uint64_t id, DType dtype, Storage empty);

 private:
  const Shape& build_shape() const;
  mutable std::atomic<const Shape*> shape_{nullptr};  // owned
  const bool is_view_ = false;
};

// A view: a shape, strides and an offset into a base's array (reshape, transpose, slice, ... of
// another tensor). A view holds its base alive, so a base whose handle count is 1 has no views.
// A subclass, so that a base tensor carries none of these fields.
class TensorViewImpl final : public TensorImpl {
 public:
  // A view of `base` (a base, never a view itself): element i0, i1, ... is the base's
  // offset + i0 * strides[0] + i1 * strides[1] + ... (in elements).
  TensorViewImpl(std::uint64_t id, std::shared_ptr<const TensorImpl> base, Shape shape,
                 Strides strides, std::size_t offset);

  const std::shared_ptr<const TensorImpl> base;
  const xt::svector<std::size_t, 4> dims;  // inline up to rank 4
  const Strides view_strides;
  const std::size_t view_offset;
  const bool is_contiguous;

  // The elements as a contiguous base tensor of the same shape, built on first use and kept
  // (thread-safe).
  std::shared_ptr<const TensorImpl> materialized() const;
  // That copy if a read built it already, else null (memory accounting).
  std::shared_ptr<const TensorImpl> materialized_if_built() const {
    return std::atomic_load(&copy_);
  }

 private:
  mutable std::shared_ptr<const TensorImpl> copy_;  // std::atomic_load/store only
};

inline const TensorViewImpl& TensorImpl::as_view() const noexcept {
  return static_cast<const TensorViewImpl&>(*this);
}
inline const TensorImpl& TensorImpl::buffer_owner() const noexcept {
  return is_view_ ? *as_view().base : *this;
}
inline std::size_t TensorImpl::offset() const noexcept {
  return is_view_ ? as_view().view_offset : 0;
}
inline bool TensorImpl::contiguous() const noexcept { return !is_view_ || as_view().is_contiguous; }
inline TensorImpl::DimsRef TensorImpl::dims_ref() const {
  if (const Shape* s = shape_.load(std::memory_order_acquire)) return {s->data(), s->size()};
  if (is_view_) return {as_view().dims.data(), as_view().dims.size()};
  return std::visit(
      [](const auto& a) {
        return DimsRef{a.shape().data(), a.shape().size()};
      },
      data);
}

// The friend of Tensor that opens a handle.
struct TensorAccess {
  static const TensorHeader* pointer(const Tensor& t) { return t.impl_.get(); }
  static Tensor wrap(std::shared_ptr<const TensorImpl> impl) { return Tensor(std::move(impl)); }
  static const std::shared_ptr<const TensorHeader>& shared(const Tensor& t) { return t.impl_; }
  // How many handles share the storage (1: the caller's is the only one).
  static long use_count(const Tensor& t) { return t.impl_.use_count(); }
};

[[noreturn]] void throw_variable_handle(const char* op, const TensorImpl& handle);

// The storage of a defined tensor (InvalidArgument for an undefined one). Every header a
// Tensor points at is a TensorImpl's: only the runtime makes handles.
inline const TensorImpl& impl_of(const Tensor& t) {
  const TensorHeader* p = TensorAccess::pointer(t);
  if (p == nullptr) throw_undefined_tensor("Tensor");
  return static_cast<const TensorImpl&>(*p);
}

// Row-major strides over `shape`, in elements: each the product of the later dimensions.
TensorImpl::Strides row_major_strides_signed(const Shape& shape);

// A tensor's elements as the kernels read them: row-major and contiguous, the tensor's own
// array, a contiguous view's window of its base (in place), or a strided view's copy (built
// once, kept on the view). The interface of the xt::xarray it replaces where kernels need
// only data(), size(), dimension(), shape() and strides(). Valid while t lives.
// InvalidArgument for another dtype or a variable's handle, as Tensor::array<T>().
template <class T>
class KernelInput {
 public:
  // Inlined: it runs for every input of every op, and a call costs as much as its body.
  [[gnu::always_inline]] explicit KernelInput(const Tensor& t) {
    const TensorImpl& impl = impl_of(t);
    if (impl.dtype != dtype_of<T>::value || !impl.holds_elements) {
      throw_bad_array_access(impl, dtype_of<T>::value);
    }
    // A base's own array, or a strided view's copy once built.
    const void* array = impl.elements();
    if (!impl.is_view() || (array != nullptr && !impl.contiguous())) {
      set(*static_cast<const storage_array<T>*>(array));
    } else {
      set_view(impl);
    }
  }
  using Dims = xt::svector<std::size_t, 4>;  // the storage array's own shape type
  static_assert(std::is_same_v<Dims, typename storage_array<T>::shape_type> &&
                    std::is_same_v<TensorImpl::Strides, typename storage_array<T>::strides_type>,
                "KernelInput hands out the storage array's own shape and strides");
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t dimension() const noexcept { return shape_->size(); }
  const Dims& shape() const noexcept { return *shape_; }
  // Row-major element strides; an axis of length 1 may have any.
  const TensorImpl::Strides& strides() const noexcept { return *strides_; }

 private:
  [[gnu::noinline]] void set_view(const TensorImpl& impl) {
    if (!impl.contiguous()) {
      set(*static_cast<const storage_array<T>*>(materialize_view(impl)));
      return;
    }
    const TensorViewImpl& view = impl.as_view();
    data_ = static_cast<const storage_array<T>*>(view.base->elements())->data() + view.view_offset;
    shape_ = &view.dims;
    strides_ = &view.view_strides;
    size_ = impl.size();
  }
  void set(const storage_array<T>& a) {
    data_ = a.data();
    size_ = a.size();
    shape_ = &a.shape();
    strides_ = &a.strides();
  }
  const T* data_ = nullptr;
  std::size_t size_ = 0;
  const Dims* shape_ = nullptr;
  const TensorImpl::Strides* strides_ = nullptr;
};

// The elements of t (dtype T) in row-major order, without copying when t owns them or is a
// contiguous view; a strided view's copy is built once and kept. The kernels' way to read an
// input (InvalidArgument for another dtype or a variable's handle, as Tensor::array<T>()).
template <class T>
const T* kernel_data(const Tensor& t) {
  return KernelInput<T>(t).data();
}

// The base whose array holds t's elements (t's own storage for a base, its base for a view).
std::shared_ptr<const TensorImpl> buffer_owner_of(const Tensor& t);

// A new view of `owner` (a base): `strides` and `offset` index owner's array, in elements.
Tensor make_view(std::shared_ptr<const TensorImpl> owner, Shape shape, TensorImpl::Strides strides,
                 std::size_t offset);

// Where a tensor's elements sit in its buffer owner's array; the view ops (transpose, slice,
// split, reverse) edit it and make_view(geometry) makes the result.
struct ViewGeometry {
  std::shared_ptr<const TensorImpl> owner;
  Shape shape;
  TensorImpl::Strides strides;
  std::size_t offset;
};
// x must hold elements (require_defined).
ViewGeometry view_geometry(const Tensor& x);
inline Tensor make_view(ViewGeometry g) {
  return make_view(std::move(g.owner), std::move(g.shape), std::move(g.strides), g.offset);
}

}  // namespace tapegrad::detail
