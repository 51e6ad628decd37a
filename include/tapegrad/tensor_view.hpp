// Tensor::view<T>(): a tensor's elements read in place, through its own strides.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include <xtensor/xadapt.hpp>
#include <xtensor/xstrided_view.hpp>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

template <class T>
auto Tensor::view() const {
  static_assert(detail::is_tensor_element_v<T>, "tapegrad: unsupported element type");
  const detail::TensorHeader& h = checked();
  if (h.dtype != dtype_of<T>::value || !h.holds_elements) {
    detail::throw_bad_array_access(h, dtype_of<T>::value);
  }
  if (detail::live_trace_count.load(std::memory_order_relaxed) != 0) {
    detail::note_value_read(*this, "view");
  }
  detail::ElementLayout layout = detail::element_layout(h);
  // The whole buffer as one axis; the strided view picks the tensor's elements out of it.
  auto buffer = xt::adapt(static_cast<const T*>(layout.data), layout.buffer_size,
                          xt::no_ownership(), std::array<std::size_t, 1>{layout.buffer_size});
  return xt::strided_view<xt::layout_type::dynamic>(std::move(buffer), std::move(layout.shape),
                                                    std::move(layout.strides), layout.offset,
                                                    xt::layout_type::dynamic);
}

}  // namespace tapegrad
