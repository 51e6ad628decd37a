// Elementwise arithmetic: add, subtract, multiply, divide, negative, pow, maximum, minimum,
// scalar and the operators. Each op reads top to bottom: its definition, its forward, its
// gradient. One-input math is in math_unary.cpp, comparisons and where in compare.cpp.
#include "tapegrad/ops/math.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "ops/batching_support.hpp"
#include "ops/forward_rule_support.hpp"
#include "ops/math_support.hpp"
#include "ops/op_support.hpp"
#include "ops/structure_support.hpp"
#include "runtime/op_trace.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

using detail::sum_to_input;

// ---- Add, Sub ---------------------------------------------------------------------------

static Grads add_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents add_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads subtract_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents subtract_tangent(const ForwardContext& op, const Tangents& tangents);
static detail::StructuredOutputs add_structured(const detail::StructureContext& op,
                                                const std::vector<detail::StructuredValue>& values,
                                                const std::vector<Tensor>& constants);
static detail::StructuredOutputs subtract_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants);
struct AddElement {
  template <class T>
  static T apply(T a, T b) {
    return detail::wrapping_add(a, b);
  }
};
TAPEGRAD_BUILTIN_OP(add_op) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op("Add", add_gradient, KeepSet::none(), KeepSet::none(),
                                  add_tangent, detail::batch_binary_broadcasting<&tapegrad::add>),
        detail::binary_elementwise<AddElement>),
    add_structured);
struct SubtractElement {
  template <class T>
  static T apply(T a, T b) {
    return detail::wrapping_sub(a, b);
  }
};
TAPEGRAD_BUILTIN_OP(subtract_op) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op("Sub", subtract_gradient, KeepSet::none(), KeepSet::none(),
                                  subtract_tangent,
                                  detail::batch_binary_broadcasting<&tapegrad::subtract>),
        detail::binary_elementwise<SubtractElement>),
    subtract_structured);

Tensor add(const Tensor& x, const Tensor& y) {
  return detail::numeric_binary_op(add_op, "add", x, y,
                                   [](auto a, auto b) { return AddElement::apply(a, b); });
}

Tensor subtract(const Tensor& x, const Tensor& y) {
  return detail::numeric_binary_op(subtract_op, "subtract", x, y,
                                   [](auto a, auto b) { return SubtractElement::apply(a, b); });
}

// Linear: the tangents' sum (difference), broadcast to the output.
static Tangents add_tangent(const ForwardContext& op, const Tangents& tangents) {
  return {detail::output_tangent(op, 0, {tangents[0], tangents[1]})};
}

static Tangents subtract_tangent(const ForwardContext& op, const Tangents& tangents) {
  // Both tangents: one subtract (one pass over the output) rather than a negation and an add.
  if (tangents[0].defined() && tangents[1].defined()) {
    return {detail::output_tangent(op, 0, {subtract(tangents[0], tangents[1])})};
  }
  const Tensor minus_dy =
      detail::if_defined(tangents[1], [](const Tensor& dy) { return negative(dy); });
  return {detail::output_tangent(op, 0, {tangents[0], minus_dy})};
}

// Structure rules: two diagonals of the output's shape give the sum (difference) of the
// diagonals; a constant operand (the same for every row) is not diagonal, so the batch goes dense.
static bool diagonals_of_output_shape(const detail::StructureContext& op,
                                      const std::vector<detail::StructuredValue>& values) {
  const Shape& out = op.output_shapes[0];
  return values[0].is_diagonal() && values[1].is_diagonal() && values[0].diagonal.shape() == out &&
         values[1].diagonal.shape() == out;
}

static detail::StructuredOutputs add_structured(const detail::StructureContext& op,
                                                const std::vector<detail::StructuredValue>& values,
                                                const std::vector<Tensor>&) {
  if (!diagonals_of_output_shape(op, values)) return std::nullopt;
  return detail::diagonal_output(add(values[0].diagonal, values[1].diagonal));
}

static detail::StructuredOutputs subtract_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>&) {
  if (!diagonals_of_output_shape(op, values)) return std::nullopt;
  return detail::diagonal_output(subtract(values[0].diagonal, values[1].diagonal));
}

static Grads add_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, g[0]);
  if (op.needs_gradient(1)) r[1] = sum_to_input(op, 1, g[0]);
  return r;
}

static Grads subtract_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, g[0]);
  // Negated after the sum: a broadcast y's gradient is small, g is the output's size.
  if (op.needs_gradient(1)) r[1] = negative(sum_to_input(op, 1, g[0]));
  return r;
}

// ---- Mul --------------------------------------------------------------------------------

static Grads multiply_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents multiply_tangent(const ForwardContext& op, const Tangents& tangents);
static detail::StructuredOutputs multiply_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants);
struct MultiplyElement {
  template <class T>
  static T apply(T a, T b) {
    return detail::wrapping_mul(a, b);
  }
};
TAPEGRAD_BUILTIN_OP(multiply_op) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op("Mul", multiply_gradient, KeepSet::all(), KeepSet::none(),
                                  multiply_tangent,
                                  detail::batch_binary_broadcasting<&tapegrad::multiply>),
        detail::binary_elementwise<MultiplyElement>),
    multiply_structured);

Tensor multiply(const Tensor& x, const Tensor& y) {
  return detail::numeric_binary_op(multiply_op, "multiply", x, y,
                                   [](auto a, auto b) { return MultiplyElement::apply(a, b); });
}

static Tangents multiply_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const Tensor& y = op.inputs[1];
  return {detail::output_tangent(
      op, 0,
      {detail::if_defined(tangents[0], [&](const Tensor& dx) { return multiply(dx, y); }),
       detail::if_defined(tangents[1], [&](const Tensor& dy) { return multiply(x, dy); })})};
}

// Structure rule: two diagonals of the output's shape multiply position by position (row b is
// e_b d0[b] d1[b]); a diagonal times a constant that broadcasts into it (no new axes, no
// larger dimensions) is the diagonal scaled.
static detail::StructuredOutputs multiply_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants) {
  const Shape& out = op.output_shapes[0];
  const Tensor& d0 = values[0].diagonal;
  const Tensor& d1 = values[1].diagonal;
  if (values[0].is_diagonal() && values[1].is_diagonal()) {
    if (d0.shape() != out || d1.shape() != out) return std::nullopt;
    return detail::diagonal_output(multiply(d0, d1));
  }
  const std::size_t v = values[0].is_diagonal() ? 0 : 1;
  if (values[v].diagonal.shape() != out || !detail::fits_into(constants[1 - v], out)) {
    return std::nullopt;
  }
  return detail::diagonal_output(v == 0 ? multiply(d0, constants[1]) : multiply(constants[0], d1));
}

static Grads multiply_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor& y = op.inputs()[1];
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, multiply(g[0], y));
  if (op.needs_gradient(1)) r[1] = sum_to_input(op, 1, multiply(g[0], x));
  return r;
}

// ---- RealDiv ----------------------------------------------------------------------------

static Grads divide_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents divide_tangent(const ForwardContext& op, const Tangents& tangents);
static detail::StructuredOutputs divide_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants);
struct DivideElement {
  template <class T>
  static T apply(T a, T b) {
    return detail::wrapping_div(a, b);
  }
};
TAPEGRAD_BUILTIN_OP(divide_op) = detail::with_structure(
    detail::with_elementwise(
        detail::differentiable_op("RealDiv", divide_gradient, KeepSet::all(), KeepSet::none(),
                                  divide_tangent,
                                  detail::batch_binary_broadcasting<&tapegrad::divide>),
        detail::binary_elementwise<DivideElement>),
    divide_structured);

// Integer division by zero has no value (TF raises): rejected before the kernel runs.
static void require_nonzero_integer_divisor(const char* op, const Tensor& x, const Tensor& y) {
  auto any_zero = [](const auto& a) {
    for (auto v : a) {
      if (v == 0) return true;
    }
    return false;
  };
  bool zero = false;
  if (y.dtype() == DType::Int32) zero = any_zero(detail::kernel_array<std::int32_t>(y));
  if (y.dtype() == DType::Int64) zero = any_zero(detail::kernel_array<std::int64_t>(y));
  if (zero && !detail::computing_on_placeholders()) {
    throw InvalidArgument(detail::describe(op, x, y) + ": integer division by zero");
  }
}

Tensor divide(const Tensor& x, const Tensor& y) {
  detail::require_same_dtype("divide", x, y);
  require_nonzero_integer_divisor("divide", x, y);
  return detail::numeric_binary_op(divide_op, "divide", x, y,
                                   [](auto a, auto b) { return DivideElement::apply(a, b); });
}

// d(x / y) = dx / y - x dy / y^2.
static Tangents divide_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const Tensor& y = op.inputs[1];
  const Tensor from_x =
      detail::if_defined(tangents[0], [&](const Tensor& dx) { return divide(dx, y); });
  const Tensor from_y = detail::if_defined(tangents[1], [&](const Tensor& dy) {
    return negative(divide(multiply(x, dy), multiply(y, y)));
  });
  return {detail::output_tangent(op, 0, {from_x, from_y})};
}

// Structure rule: a diagonal divided by a constant that broadcasts into it is the diagonal
// divided; a diagonal divisor is not linear.
static detail::StructuredOutputs divide_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants) {
  const Shape& out = op.output_shapes[0];
  if (!values[0].is_diagonal() || values[1].is_diagonal() || values[0].diagonal.shape() != out ||
      !detail::fits_into(constants[1], out)) {
    return std::nullopt;
  }
  return detail::diagonal_output(divide(values[0].diagonal, constants[1]));
}

static Grads divide_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor& y = op.inputs()[1];
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, divide(g[0], y));
  if (op.needs_gradient(1)) {
    r[1] = sum_to_input(op, 1, negative(divide(multiply(g[0], x), multiply(y, y))));
  }
  return r;
}

// ---- Neg --------------------------------------------------------------------------------

static Grads negative_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents negative_tangent(const ForwardContext& op, const Tangents& tangents);
static detail::StructuredOutputs negative_structured(
    const detail::StructureContext& op, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>& constants);
struct NegativeElement {
  template <class T>
  static T apply(T v) {
    return detail::wrapping_neg(v);
  }
};
TAPEGRAD_BUILTIN_OP(negative_op) = detail::with_structure(
    detail::with_elementwise(detail::differentiable_op("Neg", negative_gradient, KeepSet::none(),
                                                       KeepSet::none(), negative_tangent,
                                                       detail::batch_unary<&tapegrad::negative>),
                             detail::unary_elementwise<NegativeElement>),
    negative_structured);

Tensor negative(const Tensor& x) {
  return detail::numeric_unary_op(negative_op, "negative", x,
                                  [](auto v) { return NegativeElement::apply(v); });
}

static Tangents negative_tangent(const ForwardContext& op, const Tangents& tangents) {
  return detail::unary_tangent(op, tangents, [](const Tensor& dx) { return negative(dx); });
}

static Grads negative_gradient(const OpContext&, const std::vector<Tensor>& g) {
  return {negative(g[0])};
}

// Structure rule: linear, the diagonal negated.
static detail::StructuredOutputs negative_structured(
    const detail::StructureContext&, const std::vector<detail::StructuredValue>& values,
    const std::vector<Tensor>&) {
  return detail::diagonal_output(negative(values[0].diagonal));
}

// ---- Pow --------------------------------------------------------------------------------

static Grads pow_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents pow_tangent(const ForwardContext& op, const Tangents& tangents);
TAPEGRAD_BUILTIN_OP(pow_op) =
    detail::differentiable_op("Pow", pow_gradient, KeepSet::all(), KeepSet::all(), pow_tangent,
                              detail::batch_binary_broadcasting<&tapegrad::pow>);

// Integer power by squaring; unsigned arithmetic so that overflow wraps (as TF's kernel)
// instead of being undefined behaviour. The caller rejects negative exponents.
template <class T>
static T integer_pow(T base, T exponent) {
  using U = std::make_unsigned_t<T>;
  U result = 1;
  U b = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e != 0; e >>= 1) {
    if (e & 1U) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(result);
}

// float32: a whole exponent of magnitude <= 128 by squaring in float64 instead of a call to
// std::pow (a Vandermonde matrix is millions of them). The float64 products carry at most
// ~0.7|y| float64 ulps of error (86 at |y| = 128), far below half a float32 ulp, so the result
// rounds as std::pow's does to within 1 float32 ulp. float64 keeps std::pow (correctly rounded
// in practice) except for y = 0, 1, 2, which x * x already gives correctly rounded: squaring
// in float64 itself would cost up to 86 ulps, and the compensated (double-double) squaring
// that avoids it measured slower than std::pow. The bit test indexes instead of branching
// (exponents vary along a row: a branch would be mispredicted).
template <class T>
static T floating_power(T base, T exponent) {
  if constexpr (std::is_same_v<T, float>) {
    const float magnitude = exponent < 0 ? -exponent : exponent;
    const auto whole = static_cast<unsigned>(magnitude <= 128.0f ? magnitude : 0.0f);
    if (static_cast<float>(whole) != magnitude) return std::pow(base, exponent);
    double result = 1, square = base;
    for (unsigned e = whole; e != 0; e >>= 1) {
      const double factor[2] = {1.0, square};
      result *= factor[e & 1U];
      square *= square;
    }
    return static_cast<float>(exponent < 0 ? 1.0 / result : result);
  } else {
    if (exponent == T(2)) return base * base;
    if (exponent == T(1)) return base;
    if (exponent == T(0)) return T(1);
    return std::pow(base, exponent);
  }
}

template <class T>
static T power(T base, T exponent) {
  if constexpr (std::is_integral_v<T>) {
    return integer_pow(base, exponent);
  } else {
    return floating_power(base, exponent);
  }
}

static bool has_negative_exponent(const Tensor& y) {
  switch (y.dtype()) {
    case DType::Int32:
      for (auto v : detail::kernel_array<std::int32_t>(y))
        if (v < 0) return true;
      return false;
    case DType::Int64:
      for (auto v : detail::kernel_array<std::int64_t>(y))
        if (v < 0) return true;
      return false;
    default:
      return false;
  }
}

Tensor pow(const Tensor& x, const Tensor& y) {
  detail::require_same_dtype("pow", x, y);
  if (has_negative_exponent(y)) {
    throw InvalidArgument(detail::describe("pow", x, y) +
                          ": integers to negative integer powers are not allowed");
  }
  return detail::numeric_binary_op(pow_op, "pow", x, y, [](auto a, auto b) { return power(a, b); });
}

Tensor pow(const Tensor& x, double y) {
  detail::require_defined("pow", x);
  if (!is_floating(x.dtype()) && std::trunc(y) != y) {
    throw InvalidArgument(detail::describe("pow", x) + ": the exponent " + std::to_string(y) +
                          " is not an integer, so it cannot take x's integer dtype");
  }
  return pow(x, detail::scalar_operand("pow", x, y));
}

// dz/dx = y x^(y-1), but 0 where x and y are both 0: x^0 is 1 for every x, while the formula
// gives 0 * inf = NaN there (TF's gradient does; PyTorch's and JAX's give 0). Elsewhere the
// formula stands, so its derivative in y at y = 0 (1 / x) stays. The masked entries compute
// 0 * 1^-1, so no NaN reaches a higher derivative through the branch not taken.
static Tensor pow_slope(const Tensor& x, const Tensor& y) {
  const DType dtype = x.dtype();
  const Tensor y_is_zero = equal(y, 0.0);
  const Tensor zero_to_zero = where(y_is_zero, equal(x, 0.0), y_is_zero);
  const Tensor safe_x = where(zero_to_zero, scalar(1.0, dtype), x);
  return where(zero_to_zero, scalar(0.0, dtype),
               multiply(y, pow(safe_x, subtract(y, scalar(1.0, dtype)))));
}

// dz = dx y x^(y-1) + dy z log(x), log(x) masked to 0 where x <= 0 as in the gradient.
static Tangents pow_tangent(const ForwardContext& op, const Tangents& tangents) {
  const Tensor& x = op.inputs[0];
  const Tensor& y = op.inputs[1];
  const DType dtype = x.dtype();
  const Tensor from_x = detail::if_defined(
      tangents[0], [&](const Tensor& dx) { return multiply(dx, pow_slope(x, y)); });
  const Tensor from_y = detail::if_defined(tangents[1], [&](const Tensor& dy) {
    const Tensor positive = greater(x, scalar(0.0, dtype));
    const Tensor log_x =
        where(positive, log(where(positive, x, scalar(1.0, dtype))), scalar(0.0, dtype));
    return multiply(dy, multiply(op.outputs[0], log_x));
  });
  return {detail::output_tangent(op, 0, {from_x, from_y})};
}

// dx = g * y * x^(y-1) (0 at 0^0, pow_slope); dy = g * log(x) * x^y where x > 0, else 0 (TF:
// the mask keeps a NaN from log of a non-positive base out of the gradient and out of its own
// derivatives).
static Grads pow_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  const Tensor& x = op.inputs()[0];
  const Tensor& y = op.inputs()[1];
  const DType dtype = x.dtype();
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, multiply(g[0], pow_slope(x, y)));
  if (op.needs_gradient(1)) {
    const Tensor& z = op.outputs()[0];
    const Tensor positive = greater(x, scalar(0.0, dtype));
    const Tensor safe_x = where(positive, x, scalar(1.0, dtype));
    const Tensor log_x = where(positive, log(safe_x), scalar(0.0, dtype));
    r[1] = sum_to_input(op, 1, multiply(g[0], multiply(z, log_x)));
  }
  return r;
}

// ---- Maximum, Minimum -------------------------------------------------------------------

static Grads maximum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents maximum_tangent(const ForwardContext& op, const Tangents& tangents);
static Grads minimum_gradient(const OpContext& op, const std::vector<Tensor>& g);
static Tangents minimum_tangent(const ForwardContext& op, const Tangents& tangents);
// NaN in either operand gives NaN (NumPy's and TF's maximum/minimum), whichever order.
template <class T>
static T nan_or(T a, T b, T otherwise) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return otherwise;
}

struct MaximumElement {
  template <class T>
  static T apply(T a, T b) {
    return nan_or(a, b, a >= b ? a : b);
  }
};
TAPEGRAD_BUILTIN_OP(maximum_op) = detail::with_elementwise(
    detail::differentiable_op("Maximum", maximum_gradient, KeepSet::all(), KeepSet::none(),
                              maximum_tangent,
                              detail::batch_binary_broadcasting<&tapegrad::maximum>),
    detail::binary_elementwise<MaximumElement>);
struct MinimumElement {
  template <class T>
  static T apply(T a, T b) {
    return nan_or(a, b, a <= b ? a : b);
  }
};
TAPEGRAD_BUILTIN_OP(minimum_op) = detail::with_elementwise(
    detail::differentiable_op("Minimum", minimum_gradient, KeepSet::all(), KeepSet::none(),
                              minimum_tangent,
                              detail::batch_binary_broadcasting<&tapegrad::minimum>),
    detail::binary_elementwise<MinimumElement>);

Tensor maximum(const Tensor& x, const Tensor& y) {
  return detail::numeric_binary_op(maximum_op, "maximum", x, y,
                                   [](auto a, auto b) { return MaximumElement::apply(a, b); });
}

Tensor minimum(const Tensor& x, const Tensor& y) {
  return detail::numeric_binary_op(minimum_op, "minimum", x, y,
                                   [](auto a, auto b) { return MinimumElement::apply(a, b); });
}

// The gradient goes to x where x_wins (ties included, as TF), to y elsewhere.
static Grads select_between(const OpContext& op, const std::vector<Tensor>& g,
                            const Tensor& x_wins) {
  const Tensor zero = scalar(0.0, g[0].dtype());
  Grads r(2);
  if (op.needs_gradient(0)) r[0] = sum_to_input(op, 0, where(x_wins, g[0], zero));
  if (op.needs_gradient(1)) r[1] = sum_to_input(op, 1, where(x_wins, zero, g[0]));
  return r;
}

// The tangent of whichever operand wins (x on ties, as the gradient).
static Tangents select_tangent(const ForwardContext& op, const Tangents& tangents,
                               const Tensor& x_wins) {
  const Tensor zero = scalar(0.0, op.outputs[0].dtype());
  const Tensor from_x =
      detail::if_defined(tangents[0], [&](const Tensor& dx) { return where(x_wins, dx, zero); });
  const Tensor from_y =
      detail::if_defined(tangents[1], [&](const Tensor& dy) { return where(x_wins, zero, dy); });
  return {detail::output_tangent(op, 0, {from_x, from_y})};
}

static Tangents maximum_tangent(const ForwardContext& op, const Tangents& tangents) {
  return select_tangent(op, tangents, greater_equal(op.inputs[0], op.inputs[1]));
}

static Tangents minimum_tangent(const ForwardContext& op, const Tangents& tangents) {
  return select_tangent(op, tangents, less_equal(op.inputs[0], op.inputs[1]));
}

static Grads maximum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return select_between(op, g, greater_equal(op.inputs()[0], op.inputs()[1]));
}

static Grads minimum_gradient(const OpContext& op, const std::vector<Tensor>& g) {
  return select_between(op, g, less_equal(op.inputs()[0], op.inputs()[1]));
}

// ---- scalar and the operators -----------------------------------------------------------

Tensor scalar(double value, DType dtype) { return detail::scalar_of("scalar", value, dtype); }

Tensor operator+(const Tensor& x, const Tensor& y) { return add(x, y); }
Tensor operator-(const Tensor& x, const Tensor& y) { return subtract(x, y); }
Tensor operator*(const Tensor& x, const Tensor& y) { return multiply(x, y); }
Tensor operator/(const Tensor& x, const Tensor& y) { return divide(x, y); }
Tensor operator-(const Tensor& x) { return negative(x); }
// A double operand becomes a rank-0 tensor of the other operand's dtype.
using detail::scalar_operand;

Tensor operator+(const Tensor& x, double y) { return add(x, scalar_operand("add", x, y)); }
Tensor operator-(const Tensor& x, double y) {
  return subtract(x, scalar_operand("subtract", x, y));
}
Tensor operator*(const Tensor& x, double y) {
  return multiply(x, scalar_operand("multiply", x, y));
}
Tensor operator/(const Tensor& x, double y) { return divide(x, scalar_operand("divide", x, y)); }
Tensor operator+(double x, const Tensor& y) { return add(scalar_operand("add", y, x), y); }
Tensor operator-(double x, const Tensor& y) {
  return subtract(scalar_operand("subtract", y, x), y);
}
Tensor operator*(double x, const Tensor& y) {
  return multiply(scalar_operand("multiply", y, x), y);
}
Tensor operator/(double x, const Tensor& y) { return divide(scalar_operand("divide", y, x), y); }

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(math)
