// Recording a variable's read on the tapes (TF's ReadVariableOp).
#pragma once

#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

// Records that variable `v` was read and gave `value` (TF's ReadVariableOp, whose gradient is
// the identity): every tape on this thread that watches accessed variables starts watching a
// trainable `v`, and every tape that watches `v` records, once per value, that `value` came
// from it. Call only when a tape is active.
void read_variable(const Variable& v, const Tensor& value);

}  // namespace tapegrad::detail
