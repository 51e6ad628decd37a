// What every functional form checks of the function it differentiates (the forms are all in
// src/derivatives/, so this is private to it).
#pragma once

#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// InvalidArgument naming `function` when f returned an undefined Tensor (TF: "Cannot
// differentiate a function that returns None").
inline void require_function_result(const Tensor& y, const char* function) {
  if (!y.defined()) {
    throw InvalidArgument(std::string(function) +
                          ": cannot differentiate a function that returns None (an undefined "
                          "Tensor); does f return its result?");
  }
}

}  // namespace tapegrad::detail
