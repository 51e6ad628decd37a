// What an elementwise op tells a Function so that a run of such ops can be computed in one
// loop (runtime/fused_elementwise.cpp): its scalar function over blocks of float32 and float64
// elements. The op's eager kernel calls the same scalar function, so a fused replay computes
// every element as the eager call does, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tapegrad::detail {

// out[i] = f(inputs[0][i], ..., inputs[arity - 1][i]) for i < n; out may not alias an input.
template <class T>
using BlockKernel = void (*)(const T* const* inputs, T* out, std::size_t n);

struct ElementwiseRule {
  std::uint8_t arity;  // 1 or 2
  // The most elements a fused loop may compute with `f32`/`f64`: an op whose eager kernel
  // switches to xsimd above kSmallKernel elements (exp, log, tanh) computes larger tensors with
  // other roundings, so they stay the op's own.
  std::size_t max_elements;
  BlockKernel<float> f32;
  BlockKernel<double> f64;

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

}  // namespace tapegrad::detail
