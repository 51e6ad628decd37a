// Adam's and AdamW's shared step (see adam_update.hpp).
#include "optim/adam_update.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/dispatch.hpp"

namespace tapegrad::detail {

void adam_update(const char* optimizer, const AdamRule& rule, Variable& variable,
                 const Tensor& grad, std::vector<Tensor>& slots, std::int64_t step) {
  const double t = static_cast<double>(step);
  const double correction_1 = 1.0 - std::pow(rule.beta_1, t);
  const double correction_2 = 1.0 - std::pow(rule.beta_2, t);
  dispatch_floating(optimizer, variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> w(variable.peek().array<T>());
    xt::xarray<T> m(slots[0].array<T>());
    xt::xarray<T> v(slots[1].array<T>());
    const T* g = grad.array<T>().data();
    const T b1 = static_cast<T>(rule.beta_1), b2 = static_cast<T>(rule.beta_2);
    const T eps = static_cast<T>(rule.epsilon);
    // 1 - beta in the variable's dtype (Keras) or rounded from double (PyTorch): the two
    // differ in float32, where 1 - float(0.999) is not float(0.001).
    const T one_minus_b1 = rule.epsilon_on_v_hat ? static_cast<T>(1.0 - rule.beta_1) : T(1) - b1;
    const T one_minus_b2 = rule.epsilon_on_v_hat ? static_cast<T>(1.0 - rule.beta_2) : T(1) - b2;
    const std::size_t n = w.size();
    for (std::size_t i = 0; i < n; ++i) {
      m.data()[i] = b1 * m.data()[i] + one_minus_b1 * g[i];
      v.data()[i] = b2 * v.data()[i] + one_minus_b2 * g[i] * g[i];
    }
    if (rule.weight_decay != 0.0) {
      const T keep = static_cast<T>(1.0 - rule.learning_rate * rule.weight_decay);
      for (std::size_t i = 0; i < n; ++i) w.data()[i] *= keep;
    }
    if (!rule.epsilon_on_v_hat) {
      const T a = static_cast<T>(rule.learning_rate * std::sqrt(correction_2) / correction_1);
      for (std::size_t i = 0; i < n; ++i) {
        w.data()[i] -= a * m.data()[i] / (std::sqrt(v.data()[i]) + eps);
      }
    } else {
      const T step_size = static_cast<T>(rule.learning_rate / correction_1);
      const T root_correction_2 = static_cast<T>(std::sqrt(correction_2));
      for (std::size_t i = 0; i < n; ++i) {
        w.data()[i] -= step_size * m.data()[i] / (std::sqrt(v.data()[i]) / root_correction_2 + eps);
      }
    }
    slots[0] = Tensor(std::move(m));
    slots[1] = Tensor(std::move(v));
    variable.assign(Tensor(std::move(w)));
  });
}

Tensor densify_rows(const char* optimizer, const Variable& variable,
                    const std::vector<std::int64_t>& unique_indices, const Tensor& summed_rows) {
  return dispatch_floating(optimizer, variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const Shape shape = variable.shape();
    std::size_t width = 1;
    for (std::size_t d = 1; d < shape.size(); ++d) width *= shape[d];
    xt::xarray<T> g = xt::zeros<T>(shape);
    const T* rows = summed_rows.array<T>().data();
    for (std::size_t k = 0; k < unique_indices.size(); ++k) {
      std::copy(rows + k * width, rows + (k + 1) * width,
                g.data() + static_cast<std::size_t>(unique_indices[k]) * width);
    }
    return Tensor(std::move(g));
  });
}

}  // namespace tapegrad::detail
