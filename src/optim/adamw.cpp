// AdamW: Adam's step after a decoupled weight decay (torch.optim.AdamW's rule). Its
// hyperparameters; the step itself is src/ops/training/apply_adam.cpp.
#include <cmath>
#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/optim.hpp"

namespace tapegrad {

AdamW::AdamW(double learning_rate, double weight_decay, double beta1, double beta2, double epsilon)
    : learning_rate_(learning_rate),
      weight_decay_(weight_decay),
      beta_1_(beta1),
      beta_2_(beta2),
      epsilon_(epsilon) {
  if (!(learning_rate >= 0.0 && std::isfinite(learning_rate))) {
    throw InvalidArgument("AdamW: learning_rate must be finite and >= 0, got " +
                          std::to_string(learning_rate));
  }
  if (!(weight_decay >= 0.0 && std::isfinite(weight_decay))) {
    throw InvalidArgument("AdamW: weight_decay must be finite and >= 0, got " +
                          std::to_string(weight_decay));
  }
  if (!(beta1 >= 0.0 && beta1 < 1.0) || !(beta2 >= 0.0 && beta2 < 1.0)) {
    throw InvalidArgument("AdamW: beta1 and beta2 must be in [0, 1), got " + std::to_string(beta1) +
                          " and " + std::to_string(beta2));
  }
  if (!(epsilon >= 0.0 && std::isfinite(epsilon))) {
    throw InvalidArgument("AdamW: epsilon must be finite and >= 0, got " + std::to_string(epsilon));
  }
}

AdamW::~AdamW() = default;

void AdamW::set_learning_rate(double learning_rate) {
  if (!(learning_rate >= 0.0 && std::isfinite(learning_rate))) {
    throw InvalidArgument("AdamW: learning_rate must be finite and >= 0, got " +
                          std::to_string(learning_rate));
  }
  learning_rate_ = learning_rate;
}

std::vector<std::string> AdamW::slot_names() const { return {"m", "v"}; }

}  // namespace tapegrad
