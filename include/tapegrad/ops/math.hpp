// Elementwise arithmetic, unary math, comparisons and `where`.
// Binary ops broadcast like NumPy; both operands must have the same dtype (no implicit
// promotion: InvalidArgument naming the op, the shapes and the dtypes). A C++ scalar operand
// takes the tensor's dtype. Integer dtypes are accepted where TF accepts them and are never
// differentiated.
//
// Scalar operands (TF: a Python number as either operand): every binary op here (add,
// subtract, multiply, divide, pow, maximum, minimum, atan2, floormod, squared_difference and
// the comparisons) also takes a double on either side. The double becomes a rank-0 tensor of
// the tensor operand's dtype (scalar(value, dtype)) and the tensor form runs, so
// maximum(x, 0.0) is recorded and differentiable in x like maximum(x, scalar(0.0, x.dtype())).
// The dtype must hold the value exactly: maximum(int32 x, 2.0) is accepted, maximum(int32 x,
// 0.5) throws InvalidArgument naming the op, the tensor's shape and dtype and the value.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad {

// Arithmetic (TF: tf.add, tf.subtract, tf.multiply, tf.divide, tf.negative, tf.pow,
// tf.maximum, tf.minimum). Gradients are reduced back to each operand's shape. Integer
// arithmetic wraps (two's complement, as TF and NumPy). InvalidArgument naming the op, both
// shapes and dtypes for mismatched dtypes, shapes that do not broadcast, bool operands.
Tensor add(const Tensor& x, const Tensor& y);
Tensor add(const Tensor& x, double y);
Tensor add(double x, const Tensor& y);
Tensor subtract(const Tensor& x, const Tensor& y);
Tensor subtract(const Tensor& x, double y);
Tensor subtract(double x, const Tensor& y);
Tensor multiply(const Tensor& x, const Tensor& y);
Tensor multiply(const Tensor& x, double y);
Tensor multiply(double x, const Tensor& y);
/// Integer division truncates toward zero, as C++ does; INT_MIN / -1 wraps to INT_MIN;
/// division by an integer 0 throws InvalidArgument naming divide and the shapes.
Tensor divide(const Tensor& x, const Tensor& y);
Tensor divide(const Tensor& x, double y);
Tensor divide(double x, const Tensor& y);
Tensor negative(const Tensor& x);
Tensor pow(const Tensor& x, const Tensor& y);
Tensor pow(const Tensor& x, double y);
/// pow(x, double) of an integer x takes only integer exponents (InvalidArgument naming pow
/// otherwise). pow(2.0, y) raises the scalar, taken in y's dtype, to each element of y
/// (differentiable in y: d a^y/dy = a^y log a). Integers to negative integer powers throw
/// InvalidArgument.
Tensor pow(double x, const Tensor& y);
/// NaN in either operand gives NaN (TF, NumPy). Ties send the gradient to x (the first
/// argument), as TF.
Tensor maximum(const Tensor& x, const Tensor& y);
Tensor maximum(const Tensor& x, double y);
Tensor maximum(double x, const Tensor& y);
Tensor minimum(const Tensor& x, const Tensor& y);
Tensor minimum(const Tensor& x, double y);
Tensor minimum(double x, const Tensor& y);

// Unary math (TF: tf.math.*). abs and sign give 0 gradient at 0; sign's gradient is zero.
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
/// 1 / x (floating only).
Tensor reciprocal(const Tensor& x);

/// Trigonometric and hyperbolic functions and their inverses (TF: tf.math.tan, ...), floating
/// dtypes only (InvalidArgument naming the op and the dtype otherwise). Outside an inverse's
/// domain (asin of 2, acosh of 0, atanh of 2) the value is NaN, as in TF; at its edges the
/// gradient is infinite.
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
/// e^x - 1, accurate for small x (TF: tf.math.expm1); 1 / sqrt(x) (TF: tf.math.rsqrt).
Tensor expm1(const Tensor& x);
Tensor rsqrt(const Tensor& x);
/// Rounding (TF: tf.math.floor, ceil, round; round takes halves to even: round(2.5) = 2).
/// Floating dtypes; the gradient is zero (TF), not undefined.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);

/// Special functions (TF: tf.math.erf, erfc, lgamma, digamma), floating dtypes only
/// (InvalidArgument naming the op and the dtype otherwise). lgamma is ln|Gamma(x)| (+inf at
/// 0, -1, -2, ...); digamma is its derivative (NaN at those poles). Gradients:
/// erf: 2/sqrt(pi) exp(-x^2), erfc: its negative, lgamma: digamma, digamma: polygamma(1, x),
/// each again differentiable (every order nests through polygamma(n, x)).
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor lgamma(const Tensor& x);
Tensor digamma(const Tensor& x);
/// The angle of (x, y), in [-pi, pi], y and x broadcast (TF: tf.math.atan2); atan2(0, 0) = 0.
/// Gradients x / (x^2 + y^2) for y and -y / (x^2 + y^2) for x (NaN at the origin, as TF).
/// Floating, same dtype.
Tensor atan2(const Tensor& y, const Tensor& x);
Tensor atan2(const Tensor& y, double x);
Tensor atan2(double y, const Tensor& x);
/// The remainder of floor division, with y's sign (TF: tf.math.floormod, Python's %):
/// floormod(-7, 3) = 2, floormod(7, -3) = -2. Int and float; an integer 0 in y throws
/// InvalidArgument (TF raises), a float 0 gives NaN. Gradients g and -g floor(x / y).
Tensor floormod(const Tensor& x, const Tensor& y);
Tensor floormod(const Tensor& x, double y);
Tensor floormod(double x, const Tensor& y);
/// x limited to [lo, hi] (TF: tf.clip_by_value). lo and hi broadcast to x's shape (the
/// result has x's shape); same dtype as x (int or float). InvalidArgument naming the op, the
/// shapes and the values when lo > hi anywhere (or either is NaN), or when lo/hi do not
/// broadcast to x's shape. Gradient (TF): x gets g where lo <= x <= hi (the bounds included),
/// lo gets g where x < lo, hi where x > hi. NaN in x stays NaN. The double bounds take x's
/// dtype and must be exactly representable in it.
Tensor clip_by_value(const Tensor& x, const Tensor& lo, const Tensor& hi);
Tensor clip_by_value(const Tensor& x, double lo, double hi);
/// (a - b)^2, broadcasting (TF: tf.math.squared_difference); int (wrapping) and float.
/// Gradients 2 (a - b) g and its negative, summed back to each operand's shape.
Tensor squared_difference(const Tensor& a, const Tensor& b);
Tensor squared_difference(const Tensor& a, double b);
Tensor squared_difference(double a, const Tensor& b);

// Comparisons: Bool results, not differentiable. The double forms compare with a scalar of
// the tensor's dtype (less(int32 x, 0.5) throws, as for every scalar operand).
Tensor equal(const Tensor& x, const Tensor& y);
Tensor equal(const Tensor& x, double y);
Tensor equal(double x, const Tensor& y);
Tensor not_equal(const Tensor& x, const Tensor& y);
Tensor not_equal(const Tensor& x, double y);
Tensor not_equal(double x, const Tensor& y);
Tensor less(const Tensor& x, const Tensor& y);
Tensor less(const Tensor& x, double y);
Tensor less(double x, const Tensor& y);
Tensor less_equal(const Tensor& x, const Tensor& y);
Tensor less_equal(const Tensor& x, double y);
Tensor less_equal(double x, const Tensor& y);
Tensor greater(const Tensor& x, const Tensor& y);
Tensor greater(const Tensor& x, double y);
Tensor greater(double x, const Tensor& y);
Tensor greater_equal(const Tensor& x, const Tensor& y);
Tensor greater_equal(const Tensor& x, double y);
Tensor greater_equal(double x, const Tensor& y);

/// Elementwise cond ? a : b; the three operands broadcast (TF2 tf.where). cond is Bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Operators: Tensor (op) Tensor, Tensor (op) double, double (op) Tensor. A double operand
// takes the tensor's dtype and must be exactly representable in it: int32 * 2.0 is accepted,
// int32 * 0.5 throws InvalidArgument naming the op, the tensor's shape and dtype and the value.
Tensor operator+(const Tensor& x, const Tensor& y);
Tensor operator-(const Tensor& x, const Tensor& y);
Tensor operator*(const Tensor& x, const Tensor& y);
Tensor operator/(const Tensor& x, const Tensor& y);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& x, double y);
Tensor operator-(const Tensor& x, double y);
Tensor operator*(const Tensor& x, double y);
Tensor operator/(const Tensor& x, double y);
Tensor operator+(double x, const Tensor& y);
Tensor operator-(double x, const Tensor& y);
Tensor operator*(double x, const Tensor& y);
Tensor operator/(double x, const Tensor& y);

/// A rank-0 tensor holding `value` in `dtype` (the scalar operand of the operators).
/// InvalidArgument when `dtype` cannot hold `value` exactly (0.5 or NaN for an integer dtype,
/// 2 for bool); the operators say so naming the op and the tensor's shape and dtype.
Tensor scalar(double value, DType dtype);

}  // namespace tapegrad
