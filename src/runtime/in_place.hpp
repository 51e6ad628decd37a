// Writing into a tensor's own buffer, for the cases where no one can tell (an optimizer's
// update of its slots and of a variable's stored value).
//
// Tensors are immutable once anyone else can see them (runtime/tensor_impl.hpp). A base tensor
// whose handle is the only one has no other reader: no user handle, no tape, no view (a view
// holds its base's handle). Only then is its buffer overwritten; otherwise the writer gets a
// private copy first.
#pragma once

#include <functional>

#include "kernels/dispatch.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

// True when `t`'s handle is the only one and it owns its elements (a base, not a view).
inline bool only_handle(const Tensor& t) {
  if (!t.defined() || TensorAccess::use_count(t) != 1) return false;
  // use_count() is a relaxed read. Dropping a copy is an acquire on the count, so the reads
  // of a thread that just dropped its handle happen before the writes that follow.
  { const Tensor acquire = t; }
  const TensorImpl& impl = impl_of(t);
  return impl.holds_elements && !impl.is_view();
}

// The elements of `t`, a base whose handle is the only one (only_handle(t) said so). T must
// be t's dtype.
template <class T>
T* own_elements(const Tensor& t) {
  // The storage is immutable once others can see it; no one else can see this one.
  auto& storage = const_cast<TensorImpl&>(impl_of(t)).data;
  return std::get<storage_array<T>>(storage).data();
}

// The elements of `t` to overwrite: its own buffer when `t` is the only handle, else a
// private copy that replaces `t` first. T must be t's dtype.
template <class T>
T* elements_to_overwrite(Tensor& t) {
  if (!only_handle(t)) t = Tensor(xt::xarray<T>(kernel_array<T>(t)));
  return own_elements<T>(t);
}

// Runs `update` on the variable's stored value, to overwrite with elements_to_overwrite: in
// place when the variable's handle to it is the only one (no tape, view or caller holds a
// read), else on a private copy that becomes the value. Under the variable's lock, so that a
// concurrent read sees the value before or after the update, never during it: `update` must
// not read or assign the variable. While a trace records (a Function or vectorized_map
// trace), the update goes through Variable::assign, which the traces see.
void update_variable(Variable& variable, const std::function<void(Tensor& value)>& update);

}  // namespace tapegrad::detail
