// Bit-for-bit comparison of tensors, for tests whose two sides run the same kernels on the same
// numbers (NCHW against NHWC) or must round-trip exactly (NumPy files).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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

// The same numbers: same dtype, same shape, the same bits in every element except that any NaN
// equals any NaN. IEEE 754 leaves the sign and payload of a NaN result undefined: x86 returns
// one operand's NaN by its position, and a compiler may swap the operands of a sum, so two
// compilations of one computation (an eager kernel, an in-place accumulation, a fused loop)
// can differ in a NaN's sign and nowhere else. -0.0 and 0.0 still differ.
inline bool same_numbers(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() != b.dtype() || a.shape() != b.shape())
    return false;
  const auto floats_equal = [&](auto zero) {
    using T = decltype(zero);
    const auto& x = a.array<T>();
    const auto& y = b.array<T>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T u = x.data()[i], v = y.data()[i];
      if (std::isnan(u) && std::isnan(v)) continue;
      if (std::memcmp(&u, &v, sizeof(T)) != 0) return false;
    }
    return true;
  };
  if (a.dtype() == DType::Float32) return floats_equal(float{});
  if (a.dtype() == DType::Float64) return floats_equal(double{});
  return element_bytes(a) == element_bytes(b);
}

// The first result whose numbers differ (same_numbers), or "" when every one agrees.
inline std::string first_difference(const std::vector<Tensor>& got,
                                    const std::vector<Tensor>& expected) {
  if (got.size() != expected.size()) {
    return std::to_string(got.size()) + " results, expected " + std::to_string(expected.size());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!same_numbers(got[i], expected[i])) return "result " + std::to_string(i) + " differs";
  }
  return "";
}

}  // namespace tapegrad::testing
