// SGD's step (TF's training ops ResourceApplyGradientDescent and ResourceApplyMomentum, dense
// and on rows): the variable and its momentum slot in their own buffers when no one else holds
// them (plain loops in the variable's dtype: an update is never differentiated). Among the
// ops, not in src/optim/, because the in-place update is the runtime's (runtime/in_place.hpp).
#include <cstdint>
#include <vector>

#include "kernels/dispatch.hpp"
#include "ops/training/training_support.hpp"
#include "runtime/in_place.hpp"
#include "runtime/op_definition.hpp"
#include "tapegrad/optim.hpp"

namespace tapegrad {

namespace {

// One SGD step on `n` elements: w[at[i]] from g[i] (and velocity[at[i]]).
template <class T>
void sgd_step(T* w, T* velocity, const T* g, const std::size_t* at, std::size_t n, T lr, T momentum,
              bool nesterov) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = at != nullptr ? at[i] : i;
    if (velocity == nullptr) {
      w[k] -= lr * g[i];
      continue;
    }
    velocity[k] = momentum * velocity[k] - lr * g[i];
    w[k] += nesterov ? momentum * velocity[k] - lr * g[i] : velocity[k];
  }
}

}  // namespace

void SGD::update_dense(Variable& variable, const Tensor& grad, Slots& slots, std::int64_t) {
  detail::dispatch_floating(name(), variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* velocity = slots.empty() ? nullptr : detail::elements_to_overwrite<T>(slots[0]);
    const T* g = detail::kernel_data<T>(grad);
    detail::update_variable(variable, [&](Tensor& value) {
      sgd_step<T>(detail::elements_to_overwrite<T>(value), velocity, g, nullptr, value.size(),
                  static_cast<T>(learning_rate_), static_cast<T>(momentum_), nesterov_);
    });
  });
}

void SGD::update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                        const Tensor& summed_rows, Slots& slots, std::int64_t) {
  detail::dispatch_floating(name(), variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::size_t width = detail::elements_per_row(variable.shape());
    std::vector<std::size_t> at;
    at.reserve(unique_indices.size() * width);
    for (std::int64_t row : unique_indices) {
      for (std::size_t j = 0; j < width; ++j)
        at.push_back(static_cast<std::size_t>(row) * width + j);
    }
    T* velocity = slots.empty() ? nullptr : detail::elements_to_overwrite<T>(slots[0]);
    const T* rows = detail::kernel_data<T>(summed_rows);
    detail::update_variable(variable, [&](Tensor& value) {
      sgd_step<T>(detail::elements_to_overwrite<T>(value), velocity, rows, at.data(), at.size(),
                  static_cast<T>(learning_rate_), static_cast<T>(momentum_), nesterov_);
    });
  });
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(apply_sgd)
