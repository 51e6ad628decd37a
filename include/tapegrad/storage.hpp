// The array type a Tensor stores, pinned so that the library's ABI does not follow the
// consumer's -march or whether the consumer defines XTENSOR_USE_XSIMD.
//
// xt::xarray<T>'s default allocator is xsimd::aligned_allocator<T, A> with A the alignment of
// the widest SIMD target the compiler was told about (16 bytes by default on x86-64, 32 with
// -mavx2, 64 with -mavx512f), or std::allocator<T> without XTENSOR_USE_XSIMD. A signature
// naming xt::xarray<T> would therefore name a different type in every such consumer. Tensor
// names storage_array<T> instead, whose allocator and layout are fixed when the library is
// configured (tapegrad/config.hpp), and converts any consumer xt::xarray to it.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include <xtensor/xarray.hpp>

#include "tapegrad/config.hpp"
#if TAPEGRAD_STORAGE_XSIMD
#include <xsimd/memory/xsimd_aligned_allocator.hpp>
#endif

namespace tapegrad {

#if TAPEGRAD_STORAGE_XSIMD
/// The allocator of every Tensor's elements: xsimd's, at a fixed alignment (16 bytes, the
/// default of a plain x86-64 or ARM build, so such a consumer's xt::xarray<T> is this type).
template <class T>
using storage_allocator = xsimd::aligned_allocator<T, TAPEGRAD_STORAGE_ALIGNMENT>;
#else
template <class T>
using storage_allocator = std::allocator<T>;
#endif

/// The array a Tensor holds: row-major, dynamic rank, storage_allocator<T>. It is an
/// xt::xarray, and the same type as a consumer's xt::xarray<T> in a default build; with other
/// flags it converts to and from the consumer's xt::xarray<T> (one copy).
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
using xarray_element_t = typename xarray_element<std::remove_cv_t<std::remove_reference_t<A>>>::type;

}  // namespace detail
}  // namespace tapegrad
