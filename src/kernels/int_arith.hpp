// Integer arithmetic with defined overflow: two's-complement wrapping as TF's and NumPy's
// kernels give, computed in the unsigned type so that no step is undefined behaviour.
// For floating T every helper is the plain operation.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>

namespace tapegrad::detail {

template <class T>
constexpr bool is_wrapping_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// op applied in the unsigned type and converted back: two's-complement wrapping.
template <class T, class Op>
T wrapping(T a, T b, Op op) {
  if constexpr (is_wrapping_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(op(static_cast<U>(a), static_cast<U>(b))));
  } else {
    return op(a, b);
  }
}

template <class T>
T wrapping_add(T a, T b) {
  return wrapping(a, b, std::plus<>());
}
template <class T>
T wrapping_sub(T a, T b) {
  return wrapping(a, b, std::minus<>());
}
template <class T>
T wrapping_mul(T a, T b) {
  return wrapping(a, b, std::multiplies<>());
}

// -INT_MIN wraps to INT_MIN.
template <class T>
T wrapping_neg(T a) {
  if constexpr (is_wrapping_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a)));
  } else {
    return -a;
  }
}

// abs(INT_MIN) wraps to INT_MIN (NumPy, TF).
template <class T>
T wrapping_abs(T a) {
  if constexpr (is_wrapping_int_v<T>) {
    return a < T(0) ? wrapping_neg(a) : a;
  } else {
    return std::fabs(a);
  }
}

// Truncating division; INT_MIN / -1 wraps to INT_MIN. The caller rejects b == 0 except on
// placeholders (op_trace.hpp), whose results are never seen: 0 then, not a trap.
template <class T>
T wrapping_div(T a, T b) {
  if constexpr (is_wrapping_int_v<T>) {
    if (b == T(-1)) return wrapping_neg(a);
    if (b == T(0)) return T(0);
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

// A float converted to an integer type: NaN -> 0, values beyond the range saturate to the
// type's min or max (instead of the undefined behaviour of static_cast), others truncate
// toward zero. Integer and bool sources convert as static_cast (wrapping modulo 2^bits).
template <class To, class From>
To saturating_cast(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (is_wrapping_int_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return To(0);
    // 2^(bits-1) is exactly representable in every floating type; max() may not be.
    const From limit = std::ldexp(From(1), std::numeric_limits<To>::digits);
    if (v >= limit) return std::numeric_limits<To>::max();
    if (v < -limit) return std::numeric_limits<To>::min();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// True when `value` converts to T and back unchanged (2.0 to int32 yes, 0.5 or 1e10 no; for
// bool only 0 and 1; NaN and infinities only to floating types).
template <class T>
bool exactly_representable(double value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value == 0.0 || value == 1.0;
  } else if constexpr (is_wrapping_int_v<T>) {
    if (!std::isfinite(value) || std::trunc(value) != value) return false;
    const double limit = std::ldexp(1.0, std::numeric_limits<T>::digits);
    return value >= -limit && value < limit;
  } else {
    return true;  // a float scalar may round; TF accepts a python float for float32
  }
}

}  // namespace tapegrad::detail
