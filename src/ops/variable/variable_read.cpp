// ReadVariableOp: a variable's value read while a tape may record it. No kernel (the value is
// the variable's own tensor); the op only tells the tapes where the value came from.
#include "ops/batching_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/op_support.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape_stack.hpp"

namespace tapegrad {

// ---- ReadVariableOp ---------------------------------------------------------------------

TAPEGRAD_BUILTIN_OP(read_variable_op) =
    detail::identity_gradient_op("ReadVariableOp", detail::batch_unary<&tapegrad::identity>);

// Recorded on each watching tape itself rather than through detail::record: a tape watches
// the handle, not the value, and records each value once.
void detail::read_variable(const Variable& v, const Tensor& value) {
  const Tensor& handle = v.handle();
  for (TapeImpl* tape : tape_stack()) {
    if (v.trainable() && tape->watch_accessed_variables()) tape->watch_variable(v);
    if (is_floating(value.dtype()) && tape->is_watched(handle.id()) &&
        !tape->is_watched(value.id())) {
      tape->record(read_variable_op, {&handle}, value, nullptr, nullptr);
    }
  }
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(variable_read)
