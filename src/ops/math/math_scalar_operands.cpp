// The double operand forms of the binary elementwise ops (`op(x, 0.0)`, `op(2.0, x)`): the
// double becomes a rank-0 tensor of the tensor's dtype, which must hold it exactly, and the
// tensor form runs (recorded, differentiable in the tensor). The operators' forms are in
// math.cpp; pow(x, double) keeps its own integer-exponent check there.
#include <string>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad {

namespace detail {

Tensor scalar_operand(const char* op, const Tensor& x, double value) {
  require_defined(op, x);
  const bool exact = dispatch_any(
      x.dtype(), [&](auto zero) { return exactly_representable<decltype(zero)>(value); });
  if (!exact) {
    throw InvalidArgument(describe(op, x) + ": the scalar " + std::to_string(value) +
                          " is not exactly representable in x's dtype " + dtype_name(x.dtype()) +
                          " (no implicit promotion; cast x to a floating dtype first)");
  }
  return scalar(value, x.dtype());
}

}  // namespace detail

using detail::scalar_operand;

#define TAPEGRAD_SCALAR_OPERAND_FORMS(op)                                           \
  Tensor op(const Tensor& x, double y) { return op(x, scalar_operand(#op, x, y)); } \
  Tensor op(double x, const Tensor& y) { return op(scalar_operand(#op, y, x), y); }

TAPEGRAD_SCALAR_OPERAND_FORMS(add)
TAPEGRAD_SCALAR_OPERAND_FORMS(subtract)
TAPEGRAD_SCALAR_OPERAND_FORMS(multiply)
TAPEGRAD_SCALAR_OPERAND_FORMS(divide)
TAPEGRAD_SCALAR_OPERAND_FORMS(maximum)
TAPEGRAD_SCALAR_OPERAND_FORMS(minimum)
TAPEGRAD_SCALAR_OPERAND_FORMS(atan2)
TAPEGRAD_SCALAR_OPERAND_FORMS(floormod)
TAPEGRAD_SCALAR_OPERAND_FORMS(squared_difference)
TAPEGRAD_SCALAR_OPERAND_FORMS(equal)
TAPEGRAD_SCALAR_OPERAND_FORMS(not_equal)
TAPEGRAD_SCALAR_OPERAND_FORMS(less)
TAPEGRAD_SCALAR_OPERAND_FORMS(less_equal)
TAPEGRAD_SCALAR_OPERAND_FORMS(greater)
TAPEGRAD_SCALAR_OPERAND_FORMS(greater_equal)

#undef TAPEGRAD_SCALAR_OPERAND_FORMS

// pow(x, double) is in math.cpp (an integer x takes integer exponents only).
Tensor pow(double x, const Tensor& y) { return pow(scalar_operand("pow", y, x), y); }

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(math_scalar_operands)
