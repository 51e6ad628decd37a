// Recording a variable's read: tape logic, so it lives in the runtime. The op it records,
// ReadVariableOp, is defined with its batching rule among the ops (ops/variable/
// variable_read.cpp) and found here by name in the registry, so that the runtime does not
// include the ops layer.
#include "runtime/variable_read.hpp"

#include <stdexcept>

#include "runtime/op_registry.hpp"
#include "runtime/tape.hpp"
#include "runtime/tape_stack.hpp"

namespace tapegrad::detail {

namespace {

// Looked up once: every built-in op is registered before main (TAPEGRAD_BUILTIN_OP), and the
// first read under a tape comes later. A user op of that name would mean the built-in one was
// not linked in: a build defect, not something to record silently.
const OpDefinition& find_read_variable_op() {
  const OpDefinition& op = op_named("ReadVariableOp");
  if (op.kind == GradientKind::Registered) {
    throw std::logic_error("tapegrad: the built-in ReadVariableOp is not registered");
  }
  return op;
}

const OpDefinition& read_variable_definition() {
  static const OpDefinition& op = find_read_variable_op();
  return op;
}

}  // namespace

// Recorded on each watching tape itself rather than through detail::record: a tape watches
// the handle, not the value, and records each value once.
void read_variable(const Variable& v, const Tensor& value) {
  const Tensor& handle = v.handle();
  for (TapeImpl* tape : tape_stack()) {
    if (v.trainable() && tape->watch_accessed_variables()) tape->watch_variable(v);
    if (is_floating(value.dtype()) && tape->is_watched(handle.id()) &&
        !tape->is_watched(value.id())) {
      tape->record(read_variable_definition(), {&handle}, value, nullptr, nullptr);
    }
  }
}

}  // namespace tapegrad::detail
