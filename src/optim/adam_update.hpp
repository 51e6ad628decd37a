// The Adam update shared by Adam and AdamW: one step of m, v and the variable, in the
// variable's dtype (plain loops: an update is never differentiated).
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

struct AdamRule {
  double learning_rate;
  double beta_1;
  double beta_2;
  double epsilon;
  /// false: Keras's rule, epsilon added to sqrt(v) after folding the bias corrections into the
  /// learning rate; true: PyTorch's, epsilon added to sqrt(v_hat).
  bool epsilon_on_v_hat;
  /// AdamW's decoupled decay: w *= 1 - learning_rate * weight_decay first (0: none).
  double weight_decay;
};

/// One step at `step` (1-based) of `variable` from the dense gradient `grad` (the variable's
/// shape and dtype, checked by the caller); slots[0] is m, slots[1] is v.
void adam_update(const char* optimizer, const AdamRule& rule, Variable& variable,
                 const Tensor& grad, std::vector<Tensor>& slots, std::int64_t step);

/// The dense gradient of `variable`'s shape holding `summed_rows` at `unique_indices` and
/// zeros elsewhere (TF's non-lazy Adam treats a sparse gradient as this).
Tensor densify_rows(const char* optimizer, const Variable& variable,
                    const std::vector<std::int64_t>& unique_indices, const Tensor& summed_rows);

}  // namespace tapegrad::detail
