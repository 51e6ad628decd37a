// The array type a Tensor stores, pinned so that the library's ABI does not follow the
// consumer's -march or whether the consumer defines XTENSOR_USE_XSIMD.
//
// xt::xarray<T>'s default allocator depends on the consumer's flags (xsimd's aligned allocator
// at the alignment of the widest SIMD target the compiler was told about, or std::allocator
// without XTENSOR_USE_XSIMD), so a signature naming xt::xarray<T> would name a different type
// in every such consumer. Tensor names storage_array<T> instead: its allocator is tapegrad's
// buffer_allocator<T> (the buffer cache, include/tapegrad/buffer_allocator.hpp) whatever the
// flags, and any consumer xt::xarray converts to it.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include <xtensor/xarray.hpp>

#include "tapegrad/buffer_allocator.hpp"
#include "tapegrad/config.hpp"

namespace tapegrad {

/// The allocator of every Tensor's elements: the buffer cache (buffer_allocator.hpp).
template <class T>
using storage_allocator = buffer_allocator<T>;

/// The array a Tensor holds: row-major, dynamic rank, storage_allocator<T>. It is an
/// xt::xarray; a consumer's xt::xarray<T> converts to and from it (one copy), unless the
/// consumer makes buffer_allocator its default allocator too (README, "Any -march").
template <class T>
using storage_array =
    xt::xarray_container<xt::uvector<T, storage_allocator<T>>, xt::layout_type::row_major,
                         xt::svector<std::size_t, 4, std::allocator<std::size_t>, true>,
                         xt::xtensor_expression_tag>;

namespace detail {

// The element type of an xt::xarray of any layout and allocator; no `type` for anything else.
template <class A>
struct xarray_element {};
template <class EC, xt::layout_type L, class SC>
struct xarray_element<xt::xarray_container<EC, L, SC, xt::xtensor_expression_tag>> {
  using type = typename EC::value_type;
};
template <class A>
using xarray_element_t =
    typename xarray_element<std::remove_cv_t<std::remove_reference_t<A>>>::type;

// True for a row-major xt::xarray whose elements are one contiguous buffer (an xt::uvector of
// any allocator) and whose shape holds std::size_t: its data() and shape().data() describe it.
template <class A>
struct is_row_major_buffer_array : std::false_type {};
template <class T, class Allocator, class SC>
struct is_row_major_buffer_array<xt::xarray_container<
    xt::uvector<T, Allocator>, xt::layout_type::row_major, SC, xt::xtensor_expression_tag>>
    : std::is_same<typename SC::value_type, std::size_t> {};
template <class A>
inline constexpr bool is_row_major_buffer_array_v =
    is_row_major_buffer_array<std::remove_cv_t<std::remove_reference_t<A>>>::value;

}  // namespace detail
}  // namespace tapegrad
