// Building a new tensor in place (the kernels write straight into its storage), and a scalar.
#pragma once

#include <memory>

#include "kernels/impl_blocks.hpp"
#include "runtime/tensor_impl.hpp"

namespace tapegrad::detail {

// A new tensor of `shape` with uninitialised elements; `array` is its storage. Only the
// caller may write it, and only before the Tensor is shared. Flattened: it is instantiated in
// many op files and the linker keeps one copy, so without it whether the array's constructor
// is inlined (about 3 ns of a 50 ns tiny op) depends on which file that copy came from.
template <class T, class S>
[[gnu::flatten]] Tensor new_tensor_array(const S& shape, xt::xarray<T>*& array) {
  using Array = xt::xarray<T>;
  using ArrayShape = typename Array::shape_type;
  std::shared_ptr<TensorImpl> impl;
  if constexpr (std::is_same_v<S, ArrayShape>) {
    impl = make_impl_shared<TensorImpl>(next_tensor_id(), dtype_of<T>::value,
                                        std::in_place_type<Array>, shape);
  } else {
    impl = make_impl_shared<TensorImpl>(next_tensor_id(), dtype_of<T>::value,
                                        std::in_place_type<Array>,
                                        ArrayShape(shape.begin(), shape.end()));
  }
  array = &std::get<Array>(impl->data);
  return TensorAccess::wrap(std::shared_ptr<const TensorImpl>(std::move(impl)));
}

// The same, handing out the element pointer.
template <class T, class S>
Tensor new_tensor(const S& shape, T*& data) {
  xt::xarray<T>* array = nullptr;
  Tensor out = new_tensor_array<T>(shape, array);
  data = array->data();
  return out;
}

// A rank-0 tensor of `value` in `dtype`; InvalidArgument naming `op` when the dtype cannot
// hold the value exactly (0.5 or NaN for an integer dtype, 2 for bool). Defined in
// runtime/tensor.cpp.
Tensor scalar_of(const char* op, double value, DType dtype);

}  // namespace tapegrad::detail
