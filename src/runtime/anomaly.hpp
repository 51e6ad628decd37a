// The checks of DetectAnomaly: called by record() (forward) and by the walk (backward) only
// while a scope is alive on the thread.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/op_definition.hpp"
#include "runtime/recording.hpp"

namespace tapegrad::detail {

class TapeImpl;
struct OpEntry;

// True while a DetectAnomaly scope created on this thread is alive, as far as this thread
// knows: a plain thread_local, read on the recording path of every op and every step of the
// walk. A scope destroyed on another thread only flags its creating thread, which drops it in
// anomaly_scopes_remain().
extern thread_local bool anomaly_scope_alive;
// Drops the scopes another thread destroyed (when flagged); true when some scope is left.
bool anomaly_scopes_remain() noexcept;
inline bool anomaly_checks_active() noexcept {
  return anomaly_scope_alive && anomaly_scopes_remain();
}

// One DetectAnomaly scope, shared by the scope object and its creating thread's list, so that
// either may go first (a scope destroyed on another thread, or after its thread ended).
struct AnomalyScopeState;

// While a backward walk runs, the ops its gradient rules call are not checked one by one: the
// walk checks what each rule returns, so the error names the op being differentiated.
class AnomalyBackwardScope {
 public:
  AnomalyBackwardScope() noexcept;
  ~AnomalyBackwardScope();
  AnomalyBackwardScope(const AnomalyBackwardScope&) = delete;
  AnomalyBackwardScope& operator=(const AnomalyBackwardScope&) = delete;
};

// AnomalyError when an output holds a value the innermost scope looks for (not inside a walk).
void check_forward_outputs(const OpDefinition& op, OpInputs inputs, OpOutputs outputs);
// AnomalyError when a gradient the rule of entry `op_index` returned holds one.
void check_backward_gradients(const TapeImpl& tape, std::int64_t op_index,
                              const std::vector<GradientValue>& input_gradients,
                              const std::vector<Tensor>& output_gradients);

}  // namespace tapegrad::detail
