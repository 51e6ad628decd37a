// Which variables a piece of code reads (TF: VariableWatcher): custom_gradient uses it to
// find the variables its function closes over.
#pragma once

#include <vector>

#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

// For its lifetime, collects the trainable variables read on this thread (value() or the
// conversion to Tensor), whether or not a tape is active. Observers nest: a read is seen by
// every live observer of the thread. Not copyable; destroy in reverse order of creation.
class VariableReadObserver {
 public:
  VariableReadObserver();
  ~VariableReadObserver();
  VariableReadObserver(const VariableReadObserver&) = delete;
  VariableReadObserver& operator=(const VariableReadObserver&) = delete;

  // Each variable once, in creation order.
  const std::vector<Variable>& variables() const { return read_; }

  void notify(const Variable& v);

 private:
  std::vector<Variable> read_;
};

// Tells the thread's live observers that `v` was read. Variable::value() does it for a
// trainable variable; a Function recorded as one op does it for the untrainable variables its
// trace reads that a tape watches (tape.watch(v)), since fn's ops would record those reads.
void tell_observers(const Variable& v);

}  // namespace tapegrad::detail
