// The optimizers' state: their hyperparameters and their slots. Applying a step (in-place
// updates of the variables and slots, a Function's host step, the sparse rows' sums) needs
// the runtime, so it is among the ops: src/ops/training/.
#include "tapegrad/optim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

// ---- Optimizer --------------------------------------------------------------------------

Optimizer::~Optimizer() = default;

Optimizer::Slots& Optimizer::slots_for(const Variable& variable) {
  auto it = slots_.find(variable.id());
  if (it != slots_.end()) return it->second;
  Slots slots;
  for (std::size_t i = 0; i < slot_names().size(); ++i) {
    slots.push_back(zeros(variable.shape(), variable.dtype()));
  }
  return slots_.emplace(variable.id(), std::move(slots)).first->second;
}

double Optimizer::checkpointed_learning_rate() const {
  return std::numeric_limits<double>::quiet_NaN();
}

void Optimizer::restore_learning_rate(double) {}

Tensor Optimizer::slot(const Variable& variable, const std::string& slot_name) const {
  const auto names = slot_names();
  const auto pos = std::find(names.begin(), names.end(), slot_name);
  auto it = slots_.find(variable.id());
  if (pos == names.end() || it == slots_.end()) {
    throw InvalidArgument(std::string(name()) + "::slot: no slot '" + slot_name +
                          "' for variable '" + variable.name() + "'");
  }
  return it->second[static_cast<std::size_t>(pos - names.begin())];
}

// ---- SGD --------------------------------------------------------------------------------

SGD::SGD(double learning_rate, double momentum, bool nesterov)
    : learning_rate_(learning_rate), momentum_(momentum), nesterov_(nesterov) {
  if (!(learning_rate >= 0.0 && std::isfinite(learning_rate))) {
    throw InvalidArgument("SGD: learning_rate must be finite and >= 0, got " +
                          std::to_string(learning_rate));
  }
  if (!(momentum >= 0.0 && momentum <= 1.0)) {
    throw InvalidArgument("SGD: momentum must be in [0, 1], got " + std::to_string(momentum));
  }
}

SGD::~SGD() = default;

void SGD::set_learning_rate(double learning_rate) {
  if (!(learning_rate >= 0.0 && std::isfinite(learning_rate))) {
    throw InvalidArgument("SGD: learning_rate must be finite and >= 0, got " +
                          std::to_string(learning_rate));
  }
  learning_rate_ = learning_rate;
}

std::vector<std::string> SGD::slot_names() const {
  return momentum_ > 0.0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
}

// ---- Adam -------------------------------------------------------------------------------

Adam::Adam(double learning_rate, double beta_1, double beta_2, double epsilon)
    : learning_rate_(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon) {
  if (!(learning_rate >= 0.0 && std::isfinite(learning_rate))) {
    throw InvalidArgument("Adam: learning_rate must be finite and >= 0, got " +
                          std::to_string(learning_rate));
  }
  if (!(beta_1 >= 0.0 && beta_1 < 1.0) || !(beta_2 >= 0.0 && beta_2 < 1.0)) {
    throw InvalidArgument("Adam: beta_1 and beta_2 must be in [0, 1), got " +
                          std::to_string(beta_1) + " and " + std::to_string(beta_2));
  }
  if (!(epsilon >= 0.0 && std::isfinite(epsilon))) {
    throw InvalidArgument("Adam: epsilon must be finite and >= 0, got " + std::to_string(epsilon));
  }
}

Adam::Adam(const AdamOptions& options)
    : Adam(options.learning_rate, options.beta1, options.beta2, options.epsilon) {
  pytorch_epsilon_ = options.pytorch_epsilon;
}

Adam::~Adam() = default;

void Adam::set_learning_rate(double learning_rate) {
  if (!(learning_rate >= 0.0 && std::isfinite(learning_rate))) {
    throw InvalidArgument("Adam: learning_rate must be finite and >= 0, got " +
                          std::to_string(learning_rate));
  }
  learning_rate_ = learning_rate;
}

std::vector<std::string> Adam::slot_names() const { return {"m", "v"}; }

}  // namespace tapegrad
