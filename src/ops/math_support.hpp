// What the math family's files share: the forwards of its elementwise ops (one line each) and
// the gradient rule of a fused activation gradient (TanhGrad; nn's SigmoidGrad has its form).
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/math_kernels.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {

// The forward of a two-input elementwise op over float and integer dtypes, recorded as `op`:
// `function` is its public name (for errors), `kernel` maps one pair of elements. The operands
// must share a dtype and broadcast (NumPy).
template <class Kernel>
Tensor numeric_binary_op(const OpDefinition& op, const char* function, const Tensor& x,
                         const Tensor& y, Kernel kernel) {
  Tensor out = numeric_binary(function, x, y, kernel);
  record(op, {&x, &y}, out);
  return out;
}

// The forward of a one-input floating op whose `expression` (xtensor, vectorised by xsimd)
// computes large inputs at once; `kernel` maps one element of small ones.
template <class Kernel, class Expression>
Tensor vectorised_floating_unary_op(const OpDefinition& op, const char* function,
                                    const Tensor& x, Kernel kernel, Expression expression) {
  return unary_op<DTypeSet::Floating>(op, function, x, kernel, expression);
}

}  // namespace tapegrad::detail
