// The storage behind a Tensor handle, and the runtime's only way in and out of a handle.
// Internal: the public header (tapegrad/tensor.hpp) only forward-declares TensorImpl, so a
// user can neither build a Tensor around storage of their own nor choose its id.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <variant>

#include "runtime/tensor_ids.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// Never mutated after construction (the lazily built Shape is a cache of the array's own
// shape), so tapes can keep handles to inputs and outputs without copying and without version
// counters. The one exception is unobservable: the backward walk adds to a running gradient
// sum in place while its handle is the only one (runtime/vspace.cpp).
class TensorImpl : public TensorHeader {
 public:
  using Storage = std::variant<storage_array<float>, storage_array<double>,
                               storage_array<std::int32_t>, storage_array<std::int64_t>,
                               storage_array<bool>>;

  // Builds the array in place (moving an xt::xarray costs more than a tiny op).
  template <class Array, class... Args>
  TensorImpl(std::uint64_t id, DType dtype, std::in_place_type_t<Array> type, Args&&... args)
      : TensorHeader(id, dtype, true), data(type, std::forward<Args>(args)...) {
    elements_ = &std::get<Array>(data);
  }
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
  // The dimensions in place, without copying them: valid while the tensor lives.
  struct DimsRef {
    const std::size_t* data;
    std::size_t size;
  };
  DimsRef dims_ref() const {
    if (const Shape* s = shape_.load(std::memory_order_acquire)) return {s->data(), s->size()};
    return std::visit([](const auto& a) { return DimsRef{a.shape().data(), a.shape().size()}; },
                      data);
  }

  // id, dtype, holds_elements: in the TensorHeader (a handle reads them inline).
  Storage data;  // written only while the runtime builds a new tensor, before anyone sees it

 private:
  const Shape& build_shape() const;
  mutable std::atomic<const Shape*> shape_{nullptr};  // owned
};

// The friend of Tensor that opens a handle.
struct TensorAccess {
  static const TensorHeader* pointer(const Tensor& t) { return t.impl_.get(); }
  static Tensor wrap(std::shared_ptr<const TensorImpl> impl) { return Tensor(std::move(impl)); }
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

}  // namespace tapegrad::detail
