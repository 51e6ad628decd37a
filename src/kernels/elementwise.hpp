// Elementwise kernels over buffers: plain loops for small and same-shape cases (xtensor's
// expression machinery costs more than the arithmetic on tiny tensors) and one strided loop for
// NumPy broadcasting. Writing them into new tensors, and the xtensor/xsimd expressions for
// large unary math, is the compute layer's: ops/elementwise_tensors.hpp.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"

namespace tapegrad::detail {

// Below this many elements a scalar loop beats building an xtensor expression.
constexpr std::size_t kSmallKernel = 32;
// Broadcast rows shorter than this are walked two axes at a time.
constexpr std::size_t kShortRow = 8;

// The element type of an input array: an xt::xarray or a KernelInput (runtime/tensor_impl.hpp).
template <class A>
using element_of =
    std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const A&>().data())>>;

template <class R, class A, class ScalarFn>
xt::xarray<R> map_unary(const A& a, ScalarFn fn) {
  xt::xarray<R> out = xt::empty<R>(a.shape());
  const element_of<A>* in = a.data();
  R* o = out.data();
  const std::size_t n = a.size();
  for (std::size_t i = 0; i < n; ++i) o[i] = fn(in[i]);
  return out;
}

// o[i] = fn(a[ia], b[ib]) over the broadcast shape `shape` (n elements).
template <class R, class A, class B, class S, class ScalarFn>
void binary_loop(const A& a, const B& b, const S& shape, std::size_t n, R* o, ScalarFn fn) {
  using T = element_of<A>;
  static_assert(std::is_same_v<T, element_of<B>>, "binary_loop: one element type");
  const T* pa = a.data();
  const T* pb = b.data();
  if (n == 0) return;
  const bool same_a = a.size() == n;
  const bool same_b = b.size() == n;
  if (same_a && same_b) {
    for (std::size_t i = 0; i < n; ++i) o[i] = fn(pa[i], pb[i]);
    return;
  }
  if (same_a && b.size() == 1) {
    const T v = pb[0];
    for (std::size_t i = 0; i < n; ++i) o[i] = fn(pa[i], v);
    return;
  }
  if (a.size() == 1 && same_b) {
    const T v = pa[0];
    for (std::size_t i = 0; i < n; ++i) o[i] = fn(v, pb[i]);
    return;
  }
  // General broadcast: element strides of a and b in the output's index space (0 where a
  // dimension is broadcast), walking the innermost dimension in a tight loop.
  // xarray's own strides are row-major element strides (0 already on size-1 dimensions).
  using Index = xt::svector<std::size_t, 8>;
  const std::size_t rank = shape.size();
  Index sa(rank, 0), sb(rank, 0);
  const std::size_t oa = rank - a.dimension();
  const std::size_t ob = rank - b.dimension();
  for (std::size_t d = 0; d < rank; ++d) {
    if (d >= oa && a.shape()[d - oa] != 1) sa[d] = static_cast<std::size_t>(a.strides()[d - oa]);
    if (d >= ob && b.shape()[d - ob] != 1) sb[d] = static_cast<std::size_t>(b.strides()[d - ob]);
  }
  const std::size_t inner = shape[rank - 1];
  const std::size_t ia_step = sa[rank - 1];
  const std::size_t ib_step = sb[rank - 1];
  R* ro = o;
  if (rank >= 2 && inner < kShortRow) {
    // Short rows ([b, n, 3] times [n, 1], say): the last two axes in one plain double loop, so
    // the walk's per-row step is not paid for every three elements.
    const std::size_t rows = shape[rank - 2];
    const std::size_t ra_step = sa[rank - 2];
    const std::size_t rb_step = sb[rank - 2];
    StridedCursor(shape, rank - 2, sa, sb).for_each([&](std::size_t ia, std::size_t ib) {
      const T* ra = pa + ia;
      const T* rb = pb + ib;
      for (std::size_t r = 0; r < rows; ++r, ra += ra_step, rb += rb_step, ro += inner) {
        for (std::size_t j = 0; j < inner; ++j) ro[j] = fn(ra[j * ia_step], rb[j * ib_step]);
      }
    });
    return;
  }
  StridedCursor(shape, rank - 1, sa, sb).for_each([&](std::size_t ia, std::size_t ib) {
    // Unit and zero strides get their own loops so the compiler can vectorise them (a bias
    // row added to every row of a batch is the common case).
    const T* ra = pa + ia;
    const T* rb = pb + ib;
    if (ia_step == 1 && ib_step == 1) {
      for (std::size_t j = 0; j < inner; ++j) ro[j] = fn(ra[j], rb[j]);
    } else if (ia_step == 1 && ib_step == 0) {
      const T v = rb[0];
      for (std::size_t j = 0; j < inner; ++j) ro[j] = fn(ra[j], v);
    } else if (ia_step == 0 && ib_step == 1) {
      const T v = ra[0];
      for (std::size_t j = 0; j < inner; ++j) ro[j] = fn(v, rb[j]);
    } else {
      for (std::size_t j = 0; j < inner; ++j) ro[j] = fn(ra[j * ia_step], rb[j * ib_step]);
    }
    ro += inner;
  });
}

// out[i] = fn(a[ia], b[ib]) over the broadcast shape `shape`, as an xarray.
template <class R, class A, class B, class S, class ScalarFn>
xt::xarray<R> map_binary(const A& a, const B& b, const S& shape, ScalarFn fn) {
  xt::xarray<R> out = xt::empty<R>(shape);
  binary_loop<R>(a, b, shape, out.size(), out.data(), fn);
  return out;
}

}  // namespace tapegrad::detail
