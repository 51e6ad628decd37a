// Helpers shared by the test files.
#pragma once

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

// Defined in a build with AddressSanitizer (GCC says so with __SANITIZE_ADDRESS__, clang with
// __has_feature): the heaviest tests scale their sizes down there and say so.
#if defined(__SANITIZE_ADDRESS__)
#define TAPEGRAD_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TAPEGRAD_TEST_UNDER_ASAN 1
#endif
#endif

namespace tapegrad::testing {

// Row-major values of any tensor, as doubles.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  switch (t.dtype()) {
    case DType::Float32:
      for (float v : t.array<float>()) out.push_back(v);
      break;
    case DType::Float64:
      for (double v : t.array<double>()) out.push_back(v);
      break;
    case DType::Int32:
      for (auto v : t.array<std::int32_t>()) out.push_back(static_cast<double>(v));
      break;
    case DType::Int64:
      for (auto v : t.array<std::int64_t>()) out.push_back(static_cast<double>(v));
      break;
    case DType::Bool:
      for (bool v : t.array<bool>()) out.push_back(v ? 1.0 : 0.0);
      break;
  }
  return out;
}

// Shape and every value, each within `tolerance` (absolute + relative).
inline void require_close(const Tensor& actual, const Shape& shape,
                          const std::vector<double>& expected, double tolerance = 1e-12) {
  REQUIRE(actual.defined());
  REQUIRE(actual.shape() == shape);
  const auto got = values(actual);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(tolerance).epsilon(tolerance));
  }
}

// Uniform float64 tensor of `shape` in [lo, hi), reproducible from `seed`.
inline Tensor random_tensor(const Shape& shape, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(num_elements(shape));
  for (auto& x : v) x = dist(gen);
  return from_values(v, shape, DType::Float64);
}

// The tape's Jacobian of f w.r.t. args[arg] matches central differences.
inline void require_gradient_matches(const Fn& f, const std::vector<Tensor>& args,
                                     std::size_t arg = 0, double tolerance = 1e-6) {
  const GradientCheck check = check_gradient(f, args, arg);
  INFO("argument " << arg << ": theoretical " << check.theoretical << "\nnumerical "
                   << check.numerical);
  REQUIRE(check.max_error < tolerance);
}

// Second order: the gradient of (sum of the gradient of f weighted by fixed random weights)
// matches central differences of that same gradient.
inline void require_second_order_matches(const Fn& f, const std::vector<Tensor>& args,
                                         std::size_t arg = 0, double tolerance = 1e-5) {
  Fn gradient_of_f = [f, arg](const std::vector<Tensor>& a) {
    std::vector<Tensor> inputs = a;
    GradientTape tape;
    tape.watch(inputs[arg]);
    Tensor y = f(inputs);
    return tape.gradient(y, inputs[arg], UnconnectedGradients::Zero);
  };
  require_gradient_matches(gradient_of_f, args, arg, tolerance);
}

// Runs `body`, requires it to throw E, and returns the message for further checks.
template <class E, class Body>
std::string message_of(Body body) {
  try {
    body();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return "";
}

}  // namespace tapegrad::testing
