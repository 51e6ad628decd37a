// An optimizer's state as a Checkpoint sees it: the step count, the learning rate and each
// variable's slots, read out and put back whole.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tapegrad/optim.hpp"

namespace tapegrad::detail {

struct OptimizerState {
  std::int64_t iterations = 0;
  double learning_rate = 0.0;  // NaN: the optimizer has none to save
  // Variable::id() -> the slots in slot_names() order.
  std::unordered_map<std::uint64_t, std::vector<Tensor>> slots;

  static const char* name_of(const Optimizer& optimizer) { return optimizer.name(); }
  static OptimizerState read(const Optimizer& optimizer);
  // Replaces the optimizer's state (slots of variables absent from `state` are dropped). The
  // caller has checked every value: nothing here throws but an allocation.
  static void write(Optimizer& optimizer, OptimizerState state);
};

}  // namespace tapegrad::detail
