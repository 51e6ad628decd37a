// Building a new tensor in place: the kernels write straight into its storage.
#pragma once

#include <memory>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// A new tensor of `shape` with uninitialised elements; `data` points at them. Only the
// caller may write them, and only before the Tensor is shared.
template <class T, class S>
Tensor new_tensor(const S& shape, T*& data) {
  using Array = xt::xarray<T>;
  using ArrayShape = typename Array::shape_type;
  std::shared_ptr<TensorImpl> impl;
  if constexpr (std::is_same_v<S, ArrayShape>) {
    impl = std::make_shared<TensorImpl>(next_tensor_id(), dtype_of<T>::value,
                                        std::in_place_type<Array>, shape);
  } else {
    impl = std::make_shared<TensorImpl>(next_tensor_id(), dtype_of<T>::value,
                                        std::in_place_type<Array>,
                                        ArrayShape(shape.begin(), shape.end()));
  }
  data = std::get<Array>(impl->data).data();
  return Tensor(std::shared_ptr<const TensorImpl>(std::move(impl)));
}

}  // namespace tapegrad::detail
