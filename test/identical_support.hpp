// Bit-for-bit comparison of tensors, for tests whose two sides run the same kernels on the same
// numbers (NCHW against NHWC) or must round-trip exactly (NumPy files).
#pragma once

#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

#include <tapegrad/tapegrad.hpp>

namespace tapegrad::testing {

// The row-major element bytes of a tensor (bool: one byte 0 or 1 each).
inline std::string element_bytes(const Tensor& t) {
  auto bytes = [&](auto zero) {
    using T = decltype(zero);
    const auto& a = t.array<T>();
    return std::string(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(T));
  };
  switch (t.dtype()) {
    case DType::Float32:
      return bytes(float{});
    case DType::Float64:
      return bytes(double{});
    case DType::Int32:
      return bytes(std::int32_t{});
    case DType::Int64:
      return bytes(std::int64_t{});
    case DType::Bool:
      return bytes(bool{});
  }
  return {};
}

// Same dtype, same shape, same bits in every element (NaN payloads and -0.0 included).
inline void require_identical(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  REQUIRE(actual.dtype() == expected.dtype());
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(element_bytes(actual) == element_bytes(expected));
}

}  // namespace tapegrad::testing
