// The elementwise kernels (kernels/elementwise.hpp) writing straight into new tensors. Here,
// in the compute layer, because making a tensor (runtime/new_tensor.hpp) and reading one in
// place (KernelInput, runtime/tensor_impl.hpp) are the runtime's: kernels/ sees buffers and
// shapes only.
#pragma once

#include <cstddef>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "kernels/elementwise.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/tensor_impl.hpp"

namespace tapegrad::detail {

// binary_loop (kernels/elementwise.hpp) written straight into a new Tensor: the fast path of
// the elementwise ops.
template <class R, class A, class B, class S, class ScalarFn>
Tensor binary_tensor(const A& a, const B& b, const S& shape, ScalarFn fn) {
  R* o = nullptr;
  Tensor out = new_tensor<R>(shape, o);
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  binary_loop<R>(a, b, shape, n, o, fn);
  return out;
}

// out[i] = fn(a[i]) as a new Tensor; expr(a) (xtensor, vectorised by xsimd) for large inputs.
template <class A, class ScalarFn>
Tensor unary_tensor(const A& a, ScalarFn fn) {
  using T = element_of<A>;
  T* o = nullptr;
  Tensor out = new_tensor<T>(a.shape(), o);
  const T* in = a.data();
  const std::size_t n = a.size();
  for (std::size_t i = 0; i < n; ++i) o[i] = fn(in[i]);
  return out;
}

template <class T, class ScalarFn, class ExprFn>
Tensor unary_tensor_vectorised(const xt::xarray<T>& a, ScalarFn fn, ExprFn expr) {
  if (a.size() <= kSmallKernel) return unary_tensor(a, fn);
  xt::xarray<T>* array = nullptr;
  Tensor out = new_tensor_array<T>(a.shape(), array);
  xt::noalias(*array) = expr(a);
  return out;
}

// The same for a tensor's elements read in place (an xtensor adaptor over them).
template <class T, class ScalarFn, class ExprFn>
Tensor unary_tensor_vectorised(const KernelInput<T>& a, ScalarFn fn, ExprFn expr) {
  if (a.size() <= kSmallKernel) return unary_tensor(a, fn);
  xt::xarray<T>* array = nullptr;
  Tensor out = new_tensor_array<T>(a.shape(), array);
  const auto input = xt::adapt(a.data(), a.size(), xt::no_ownership(),
                               xt::svector<std::size_t, 4>(a.shape().begin(), a.shape().end()));
  xt::noalias(*array) = expr(input);
  return out;
}

}  // namespace tapegrad::detail
