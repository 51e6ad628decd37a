// Diagnostics: finding where a NaN or an infinity first appears (TF:
// tf.debugging.enable_check_numerics; PyTorch: torch.autograd.detect_anomaly). explain() and
// register_hook are GradientTape methods (tape.hpp); verify_gradients is in check.hpp.
#pragma once

#include <memory>

namespace tapegrad {

namespace detail {
struct AnomalyScopeState;
}

/// While alive, on this thread only: every op's floating outputs are checked as the op runs
/// (forward), and every gradient a gradient rule returns during a backward walk (backward);
/// the first NaN (when `nan`) or infinity (when `inf`) throws AnomalyError naming the op,
/// forward or backward, its inputs' and outputs' shapes and dtypes, which output or input
/// gradient holds the value, and the op's position on the innermost recording tape with the
/// ops just before it. A scope belongs to the thread that creates it: checks run on that
/// thread exactly while at least one scope it created is alive, whatever order the scopes are
/// destroyed in; the settings are those of the most recently created scope still alive. A
/// scope may be destroyed on another thread (a unique_ptr handed over): it then stops counting
/// for its creating thread, from that thread's next op, and the destroying thread is
/// unaffected. With no scope alive the check costs nothing (the ops' fast path tests one
/// thread-local word, as it does for tapes).
class DetectAnomaly {
 public:
  explicit DetectAnomaly(bool nan = true, bool inf = true);
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  std::shared_ptr<detail::AnomalyScopeState> state_;
};

}  // namespace tapegrad
