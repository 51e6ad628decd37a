// ReadVariableOp: a variable's value read while a tape may record it. No kernel (the value is
// the variable's own tensor); the op only tells the tapes where the value came from. The tapes
// record it in runtime/variable_read.cpp, which finds this definition by its name.
#include "ops/batching_support.hpp"
#include "ops/op_support.hpp"

namespace tapegrad {

// ---- ReadVariableOp ---------------------------------------------------------------------

TAPEGRAD_BUILTIN_OP(read_variable_op) =
    detail::identity_gradient_op("ReadVariableOp", detail::batch_unary<&tapegrad::identity>);

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(variable_read)
