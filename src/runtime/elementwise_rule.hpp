// What an elementwise op tells a Function so that a run of such ops can be computed in one
// loop (runtime/fused_elementwise.cpp): its scalar function over blocks of float32 and float64
// elements. The op's eager kernel calls the same scalar function, so a fused replay computes
// every element as the eager call does, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/vector_math.hpp"

namespace tapegrad::detail {

// out[i] = f(inputs[0][i], ..., inputs[arity - 1][i]) for i < n; out may not alias an input.
template <class T>
using BlockKernel = void (*)(const T* const* inputs, T* out, std::size_t n);

struct ElementwiseRule {
  std::uint8_t arity;  // 1 or 2
  // The most elements a fused loop may compute with `f32`/`f64`: an op whose eager kernel
  // switches to SIMD kernels above kVectorMathAbove elements (exp, log, tanh, sigmoid) computes
  // larger tensors with other roundings, so those take `above_max`'s kernels, the eager ones (an
  // element's result depends on its value only, so a block gives the eager call's bits);
  // without `above_max` they stay the op's own.
  std::size_t max_elements;
  BlockKernel<float> f32;
  BlockKernel<double> f64;
  const ElementwiseRule* above_max = nullptr;

  // The rule for a run of `elements` elements, nullptr when none may compute it.
  const ElementwiseRule* for_elements(std::size_t elements) const {
    return elements <= max_elements ? this : above_max;
  }

  template <class T>
  BlockKernel<T> kernel() const {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return f64;
    }
  }
};

template <class Element, class T>
void unary_block(const T* const* inputs, T* out, std::size_t n) {
  const T* a = inputs[0];
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(Element::apply(a[i]));
}

template <class Element, class T>
void binary_block(const T* const* inputs, T* out, std::size_t n) {
  const T* a = inputs[0];
  const T* b = inputs[1];
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(Element::apply(a[i], b[i]));
}

// The rules of an op whose scalar function is `Element::apply` (a struct with a static
// template member, which its eager kernel calls too).
template <class Element, std::size_t MaxElements = std::numeric_limits<std::size_t>::max()>
inline constexpr ElementwiseRule unary_elementwise{1, MaxElements, &unary_block<Element, float>,
                                                   &unary_block<Element, double>};
template <class Element, std::size_t MaxElements = std::numeric_limits<std::size_t>::max()>
inline constexpr ElementwiseRule binary_elementwise{2, MaxElements, &binary_block<Element, float>,
                                                    &binary_block<Element, double>};

template <VectorFunction function, class T>
void vector_math_block(const T* const* inputs, T* out, std::size_t n) {
  vector_math(function, inputs[0], out, n);
}

template <VectorFunction function>
inline constexpr ElementwiseRule vector_math_elementwise_large{
    1, std::numeric_limits<std::size_t>::max(), &vector_math_block<function, float>,
    &vector_math_block<function, double>};

template <VectorFunction function>
struct VectorFunctionElement {
  template <class T>
  static T apply(T v) {
    return scalar_function<function>(v);
  }
};

// The rules of exp, log, tanh and sigmoid: scalar_function (the C library) up to
// kVectorMathAbove elements, kernels/vector_math.hpp above, as their eager kernels.
template <VectorFunction function>
inline constexpr ElementwiseRule vector_math_elementwise{
    1, kVectorMathAbove, &unary_block<VectorFunctionElement<function>, float>,
    &unary_block<VectorFunctionElement<function>, double>,
    &vector_math_elementwise_large<function>};

}  // namespace tapegrad::detail
