// The elementwise kernels (kernels/elementwise.hpp) writing straight into new tensors. Here,
// in the compute layer, because making a tensor (runtime/new_tensor.hpp) and reading one in
// place (KernelInput, runtime/tensor_impl.hpp) are the runtime's: kernels/ sees buffers and
// shapes only.
#pragma once

#include <cstddef>

#include "kernels/elementwise.hpp"
#include "kernels/vector_math.hpp"
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

// exp, log, tanh or sigmoid of a as a new Tensor: fn (the C library's function) up to
// kVectorMathAbove elements, vector_math (kernels/vector_math.hpp: xsimd, with the widest
// instructions the CPU has) above; a Function's fused loops choose as this does
// (runtime/elementwise_rule.hpp).
template <class T, class ScalarFn>
Tensor unary_tensor_vector_math(const KernelInput<T>& a, ScalarFn fn, VectorFunction function) {
  if (a.size() <= kVectorMathAbove) return unary_tensor(a, fn);
  T* o = nullptr;
  Tensor out = new_tensor<T>(a.shape(), o);
  vector_math(function, a.data(), o, a.size());
  return out;
}

}  // namespace tapegrad::detail
