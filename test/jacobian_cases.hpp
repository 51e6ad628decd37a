// Functions of one [3, 2] tensor, one or two per op family, shared by the jacobian tests
// (test_jacobian checks them against central differences, test_jacobian_vectorized checks the
// vectorized jacobian against the loop on them).
#pragma once

#include <vector>

#include "numerical_jacobian.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

namespace tapegrad::testing {

struct JacobianCase {
  const char* name;
  UnaryFn f;
};

inline std::vector<JacobianCase> op_family_jacobian_cases() {
  const Tensor a = random_tensor({2, 3}, 101);
  return {
      {"math: tanh, exp, multiply, divide",
       [](const Tensor& x) { return divide(multiply(tanh(x), exp(x)), x * x + 2.0); }},
      {"reduce: reduce_sum over an axis",
       [](const Tensor& x) { return reduce_sum(x * x * x, {1}); }},
      {"reduce: reduce_mean keepdims",
       [](const Tensor& x) { return reduce_mean(exp(x) * x, {0}, true); }},
      {"linalg: matmul with a constant", [a](const Tensor& x) { return tanh(matmul(x, a)); }},
      {"linalg: matmul x^T x", [](const Tensor& x) { return matmul(x, x, true, false); }},
      {"array: reshape, transpose",
       [](const Tensor& x) {
         return transpose(reshape(x * tanh(x), {2, 3})) * x;
       }},
  };
}

}  // namespace tapegrad::testing
