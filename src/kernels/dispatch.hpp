// Runtime dtype -> C++ element type dispatch for kernels.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kernels/shape_util.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

[[noreturn]] inline void throw_unsupported_dtype(const char* op, DType dtype, const char* allowed) {
  throw InvalidArgument(std::string(op) + ": dtype " + dtype_name(dtype) +
                        " is not supported (expected " + allowed + ")");
}

// f is called with a value of the element type: f(float{}), f(double{}), ...
template <class F>
decltype(auto) dispatch_floating(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    default:
      throw_unsupported_dtype(op, dtype, "float32 or float64");
  }
}

template <class F>
decltype(auto) dispatch_numeric(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int32:
      return f(std::int32_t{});
    case DType::Int64:
      return f(std::int64_t{});
    default:
      throw_unsupported_dtype(op, dtype, "float32, float64, int32 or int64");
  }
}

// The same, dispatching on x's dtype: a rejection names op, x's shape and x's dtype.
[[noreturn]] inline void throw_unsupported_dtype(const char* op, const Tensor& x,
                                                 const char* allowed) {
  throw InvalidArgument(describe(op, x) + ": dtype " + dtype_name(x.dtype()) +
                        " is not supported (expected " + allowed + ")");
}

template <class F>
decltype(auto) dispatch_floating(const char* op, const Tensor& x, F&& f) {
  if (!is_floating(x.dtype())) throw_unsupported_dtype(op, x, "float32 or float64");
  return dispatch_floating(op, x.dtype(), std::forward<F>(f));
}

template <class F>
decltype(auto) dispatch_numeric(const char* op, const Tensor& x, F&& f) {
  if (x.dtype() == DType::Bool) throw_unsupported_dtype(op, x, "float32, float64, int32 or int64");
  return dispatch_numeric(op, x.dtype(), std::forward<F>(f));
}

// The dtype sets an elementwise kernel accepts, so that one kernel serves both.
enum class DTypeSet { Floating, Numeric };

// dispatch_floating or dispatch_numeric on x's dtype, chosen at compile time.
template <DTypeSet accepted, class F>
decltype(auto) dispatch_in(const char* op, const Tensor& x, F&& f) {
  if constexpr (accepted == DTypeSet::Floating) {
    return dispatch_floating(op, x, std::forward<F>(f));
  } else {
    return dispatch_numeric(op, x, std::forward<F>(f));
  }
}

template <class F>
decltype(auto) dispatch_any(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int32:
      return f(std::int32_t{});
    case DType::Int64:
      return f(std::int64_t{});
    case DType::Bool:
      return f(bool{});
  }
  throw_unsupported_dtype("dispatch", dtype, "a known dtype");
}

}  // namespace tapegrad::detail
