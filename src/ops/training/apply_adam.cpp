// Adam's and AdamW's step (TF's training op ResourceApplyAdam): one step of m, v and the
// variable, in the variable's dtype, in their own buffers when no one else holds them (plain
// loops: an update is never differentiated). Among the ops, not in src/optim/, because the
// in-place update is the runtime's (runtime/in_place.hpp); the optimizers' hyperparameters
// and slots stay in src/optim/.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "kernels/dispatch.hpp"
#include "ops/training/training_support.hpp"
#include "runtime/in_place.hpp"
#include "runtime/op_definition.hpp"
#include "tapegrad/optim.hpp"

namespace tapegrad {

namespace {

struct AdamRule {
  double learning_rate;
  double beta_1;
  double beta_2;
  double epsilon;
  // false: Keras's rule, epsilon added to sqrt(v) after folding the bias corrections into the
  // learning rate; true: PyTorch's, epsilon added to sqrt(v_hat).
  bool epsilon_on_v_hat;
  // AdamW's decoupled decay: w *= 1 - learning_rate * weight_decay first (0: none).
  double weight_decay;
};

template <class T>
struct AdamConstants {
  T b1, b2, one_minus_b1, one_minus_b2, eps, keep, a, step_size, root_correction_2;
};

template <class T>
T square_root(T x) {
  return std::sqrt(x);
}
template <class T, class Arch>
xsimd::batch<T, Arch> square_root(const xsimd::batch<T, Arch>& x) {
  return xsimd::sqrt(x);
}

// One element (a scalar T) or one batch of them (xsimd::batch<T>): m, v and w updated with
// the same operations in the same order, so the vectorised body and the scalar tail agree.
template <bool kDecay, bool kEpsilonOnVHat, class Value, class T>
void adam_element(Value& w, Value& m, Value& v, const Value& g, const AdamConstants<T>& c) {
  m = Value(c.b1) * m + Value(c.one_minus_b1) * g;
  v = Value(c.b2) * v + Value(c.one_minus_b2) * g * g;
  if (kDecay) w = w * Value(c.keep);
  if (kEpsilonOnVHat) {
    w = w - Value(c.step_size) * m / (square_root(v) / Value(c.root_correction_2) + Value(c.eps));
  } else {
    w = w - Value(c.a) * m / (square_root(v) + Value(c.eps));
  }
}

// One pass over the n elements: batches of xsimd's width (sqrt and the division vectorised),
// then the tail one by one.
template <class T, bool kDecay, bool kEpsilonOnVHat>
void adam_pass(T* w, T* m, T* v, const T* g, std::size_t n, const AdamConstants<T>& c) {
  using Batch = xsimd::batch<T>;
  constexpr std::size_t width = Batch::size;
  std::size_t i = 0;
  for (; i + width <= n; i += width) {
    Batch wb = Batch::load_unaligned(w + i), mb = Batch::load_unaligned(m + i);
    Batch vb = Batch::load_unaligned(v + i);
    const Batch gb = Batch::load_unaligned(g + i);
    adam_element<kDecay, kEpsilonOnVHat>(wb, mb, vb, gb, c);
    wb.store_unaligned(w + i);
    mb.store_unaligned(m + i);
    vb.store_unaligned(v + i);
  }
  for (; i < n; ++i) adam_element<kDecay, kEpsilonOnVHat>(w[i], m[i], v[i], g[i], c);
}

// One step at `step` (1-based) of `variable` from the dense gradient `grad` (the variable's
// shape and dtype, checked by the caller); slots[0] is m, slots[1] is v.
void adam_update(const char* optimizer, const AdamRule& rule, Variable& variable,
                 const Tensor& grad, std::vector<Tensor>& slots, std::int64_t step) {
  const double t = static_cast<double>(step);
  const double correction_1 = 1.0 - std::pow(rule.beta_1, t);
  const double correction_2 = 1.0 - std::pow(rule.beta_2, t);
  detail::dispatch_floating(optimizer, variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // m and v in the optimizer's own buffers, unless someone holds them (a checkpoint being
    // written): then on copies that replace them.
    T* m = detail::elements_to_overwrite<T>(slots[0]);
    T* v = detail::elements_to_overwrite<T>(slots[1]);
    const T* g = detail::kernel_data<T>(grad);
    const T b1 = static_cast<T>(rule.beta_1), b2 = static_cast<T>(rule.beta_2);
    const T eps = static_cast<T>(rule.epsilon);
    // 1 - beta in the variable's dtype (Keras) or rounded from double (PyTorch): the two
    // differ in float32, where 1 - float(0.999) is not float(0.001).
    const T one_minus_b1 = rule.epsilon_on_v_hat ? static_cast<T>(1.0 - rule.beta_1) : T(1) - b1;
    const T one_minus_b2 = rule.epsilon_on_v_hat ? static_cast<T>(1.0 - rule.beta_2) : T(1) - b2;
    const T keep = static_cast<T>(1.0 - rule.learning_rate * rule.weight_decay);
    const T a = static_cast<T>(rule.learning_rate * std::sqrt(correction_2) / correction_1);
    const T step_size = static_cast<T>(rule.learning_rate / correction_1);
    const T root_correction_2 = static_cast<T>(std::sqrt(correction_2));
    const AdamConstants<T> c{b1,   b2, one_minus_b1, one_minus_b2,     eps,
                             keep, a,  step_size,    root_correction_2};
    detail::update_variable(variable, [&](Tensor& value) {
      T* w = detail::elements_to_overwrite<T>(value);
      const std::size_t n = value.size();
      const bool decay = rule.weight_decay != 0.0;
      if (rule.epsilon_on_v_hat) {
        decay ? adam_pass<T, true, true>(w, m, v, g, n, c)
              : adam_pass<T, false, true>(w, m, v, g, n, c);
      } else {
        decay ? adam_pass<T, true, false>(w, m, v, g, n, c)
              : adam_pass<T, false, false>(w, m, v, g, n, c);
      }
    });
  });
}

// The dense gradient of `variable`'s shape holding `summed_rows` at `unique_indices` and
// zeros elsewhere (TF's non-lazy Adam treats a sparse gradient as this).
Tensor densify_rows(const char* optimizer, const Variable& variable,
                    const std::vector<std::int64_t>& unique_indices, const Tensor& summed_rows) {
  return detail::dispatch_floating(optimizer, variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const Shape shape = variable.shape();
    const std::size_t width = detail::elements_per_row(shape);
    xt::xarray<T> g = xt::zeros<T>(shape);
    const T* rows = summed_rows.array<T>().data();
    for (std::size_t k = 0; k < unique_indices.size(); ++k) {
      std::copy(rows + k * width, rows + (k + 1) * width,
                g.data() + static_cast<std::size_t>(unique_indices[k]) * width);
    }
    return Tensor(std::move(g));
  });
}

}  // namespace

void Adam::update_dense(Variable& variable, const Tensor& grad, Slots& slots, std::int64_t step) {
  const AdamRule rule{learning_rate_, beta_1_, beta_2_, epsilon_, pytorch_epsilon_, 0.0};
  adam_update(name(), rule, variable, grad, slots, step);
}

void Adam::update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                         const Tensor& summed_rows, Slots& slots, std::int64_t step) {
  // TF's Adam decays m and v on every row, then adds the (deduplicated) rows: the same as the
  // dense update with zeros in the rows not named.
  update_dense(variable, densify_rows(name(), variable, unique_indices, summed_rows), slots, step);
}

void AdamW::update_dense(Variable& variable, const Tensor& grad, Slots& slots, std::int64_t step) {
  const AdamRule rule{learning_rate_,
                      beta_1_,
                      beta_2_,
                      epsilon_,
                      /*epsilon_on_v_hat=*/true,
                      weight_decay_};
  adam_update(name(), rule, variable, grad, slots, step);
}

void AdamW::update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                          const Tensor& summed_rows, Slots& slots, std::int64_t step) {
  update_dense(variable, densify_rows(name(), variable, unique_indices, summed_rows), slots, step);
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(apply_adam)
