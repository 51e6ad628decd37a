// detail::OptimizerState: an optimizer's private state read out and put back for Checkpoint.
#include "tapegrad/optim.hpp"

#include <cmath>

namespace tapegrad::detail {

OptimizerState OptimizerState::read(const Optimizer& optimizer) {
  OptimizerState state;
  state.iterations = optimizer.iterations_;
  state.learning_rate = optimizer.checkpointed_learning_rate();
  state.slots = optimizer.slots_;
  return state;
}

void OptimizerState::write(Optimizer& optimizer, OptimizerState state) {
  optimizer.iterations_ = state.iterations;
  if (!std::isnan(state.learning_rate)) optimizer.restore_learning_rate(state.learning_rate);
  optimizer.slots_ = std::move(state.slots);
}

}  // namespace tapegrad::detail
