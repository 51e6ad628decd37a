// Adam's and AdamW's shared step (see adam_update.hpp).
#include "optim/adam_update.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/dispatch.hpp"
#include "runtime/in_place.hpp"

namespace tapegrad::detail {

void adam_update(const char* optimizer, const AdamRule& rule, Variable& variable,
                 const Tensor& grad, std::vector<Tensor>& slots, std::int64_t step) {
  const double t = static_cast<double>(step);
  const double correction_1 = 1.0 - std::pow(rule.beta_1, t);
  const double correction_2 = 1.0 - std::pow(rule.beta_2, t);
  dispatch_floating(optimizer, variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // m and v in the optimizer's own buffers, unless someone holds them (a checkpoint being
    // written): then on copies that replace them.
    T* m = elements_to_overwrite<T>(slots[0]);
    T* v = elements_to_overwrite<T>(slots[1]);
    const T* g = kernel_data<T>(grad);
    const T b1 = static_cast<T>(rule.beta_1), b2 = static_cast<T>(rule.beta_2);
    const T eps = static_cast<T>(rule.epsilon);
    // 1 - beta in the variable's dtype (Keras) or rounded from double (PyTorch): the two
    // differ in float32, where 1 - float(0.999) is not float(0.001).
    const T one_minus_b1 = rule.epsilon_on_v_hat ? static_cast<T>(1.0 - rule.beta_1) : T(1) - b1;
    const T one_minus_b2 = rule.epsilon_on_v_hat ? static_cast<T>(1.0 - rule.beta_2) : T(1) - b2;
    const T keep = static_cast<T>(1.0 - rule.learning_rate * rule.weight_decay);
    const bool decay = rule.weight_decay != 0.0;
    const T a = static_cast<T>(rule.learning_rate * std::sqrt(correction_2) / correction_1);
    const T step_size = static_cast<T>(rule.learning_rate / correction_1);
    const T root_correction_2 = static_cast<T>(std::sqrt(correction_2));
    update_variable(variable, [&](Tensor& value) {
      T* w = elements_to_overwrite<T>(value);
      const std::size_t n = value.size();
      // One pass; each element's operations in the order of the separate passes they
      // replace, so the numbers are the same.
      for (std::size_t i = 0; i < n; ++i) {
        m[i] = b1 * m[i] + one_minus_b1 * g[i];
        v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
        if (decay) w[i] *= keep;
        if (!rule.epsilon_on_v_hat) {
          w[i] -= a * m[i] / (std::sqrt(v[i]) + eps);
        } else {
          w[i] -= step_size * m[i] / (std::sqrt(v[i]) / root_correction_2 + eps);
        }
      }
    });
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
