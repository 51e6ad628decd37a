// Central-difference Jacobians and Hessians, the references the Jacobian tests compare with.
#pragma once

#include <functional>

#include "support.hpp"

namespace tapegrad::testing {

using UnaryFn = std::function<Tensor(const Tensor&)>;

// x with flat element j moved by `step` (float64).
inline Tensor shifted(const Tensor& x, std::size_t j, double step) {
  std::vector<double> v = values(x);
  v[j] += step;
  return from_values(v, x.shape(), x.dtype());
}

// d f(x)[i] / d x[j] as a row-major [f(x).size(), x.size()] list, by central differences.
inline std::vector<double> numerical_jacobian(const UnaryFn& f, const Tensor& x,
                                              double delta = 1e-6) {
  const std::size_t n_in = x.size();
  const std::size_t n_out = f(x).size();
  std::vector<double> jac(n_out * n_in);
  for (std::size_t j = 0; j < n_in; ++j) {
    const auto plus = values(f(shifted(x, j, delta)));
    const auto minus = values(f(shifted(x, j, -delta)));
    for (std::size_t i = 0; i < n_out; ++i) jac[i * n_in + j] = (plus[i] - minus[i]) / (2 * delta);
  }
  return jac;
}

// d^2 (sum of f(x)) / d x[i] d x[j], row-major [x.size(), x.size()], by central second
// differences of f itself (no tape involved).
inline std::vector<double> numerical_hessian(const UnaryFn& f, const Tensor& x,
                                             double delta = 1e-4) {
  const std::size_t n = x.size();
  auto total = [&](const Tensor& at) {
    double s = 0;
    for (double v : values(f(at))) s += v;
    return s;
  };
  std::vector<double> h(n * n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const double pp = total(shifted(shifted(x, i, delta), j, delta));
      const double pm = total(shifted(shifted(x, i, delta), j, -delta));
      const double mp = total(shifted(shifted(x, i, -delta), j, delta));
      const double mm = total(shifted(shifted(x, i, -delta), j, -delta));
      h[i * n + j] = (pp - pm - mp + mm) / (4 * delta * delta);
    }
  }
  return h;
}

inline Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace tapegrad::testing
