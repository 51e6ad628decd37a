// GradientTape: records the ops run while it is alive and differentiates them
// (TF: tf.GradientTape).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "tapegrad/hook_handle.hpp"
#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

/// What `gradient()` returns for a source that the targets do not depend on
/// (TF: tf.UnconnectedGradients): an undefined Tensor, or zeros of the source's shape.
enum class UnconnectedGradients { None, Zero };

namespace detail {
class TapeImpl;
struct TapeState;
}  // namespace detail

/// The options of GradientTape::gradient (TF tf.gradients' keyword arguments).
struct GradientOptions {
  std::vector<Tensor> output_gradients;  ///< one per target, or empty (undefined entries: ones)
  UnconnectedGradients unconnected = UnconnectedGradients::None;
  std::vector<Tensor> stop_gradients;  ///< no gradient flows through these (TF stop_gradients)
};

/// The options of GradientTape::jacobian and batch_jacobian (TF: their experimental_use_pfor
/// and parallel_iterations).
struct JacobianOptions {
  UnconnectedGradients unconnected = UnconnectedGradients::None;
  /// One batched backward pass over the rows' output gradients (vectorized_map of the
  /// gradient, every op's batching rule), instead of one backward pass per row. Equal results;
  /// an op without a batching rule (a user primitive without register_batching_rule) falls
  /// back to the loop with a warning.
  /// batch_jacobian with at most two values per example loops anyway (as cheap: the batched
  /// pass would first trace two rows).
  bool vectorize = true;
  /// Rows per batched pass (bounds the memory of a pass); 0 = all rows at once.
  std::size_t parallel_iterations = 0;
};

/// Records, from construction to destruction, every op on this thread whose inputs it
/// watches, then walks that record backwards in `gradient()`.
///
/// Tapes nest: each active tape records the ops that touch what it watches, including the
/// ops a gradient computation of an inner tape runs, which is how nested tapes give higher
/// derivatives. A non-persistent tape allows exactly one gradient/jacobian/batch_jacobian
/// call; a second throws TapeError. Not copyable, not movable: it lives in one scope of one
/// thread.
///
/// Threads (TF: a tape records on its own thread only): a tape belongs to the thread that
/// created it. It records that thread's ops only; watch, stop_recording, end_recording,
/// record, reset, gradient, gradient_values, jacobian, batch_jacobian, watched_variables and
/// bytes_held called on another thread throw TapeError naming the method. Destroying it on
/// another thread is safe: it stops recording, and its creating thread frees its records at
/// that thread's next tape operation or recorded op.
class GradientTape {
 public:
  /// Restores a tape's recording state when it dies. Returned by stop_recording() and
  /// record(). Safe to outlive its tape (it then does nothing); destroyed on another thread
  /// than the tape's, it does nothing either. Never throws.
  class [[nodiscard]] RecordingGuard {
   public:
    RecordingGuard(const RecordingGuard&) = delete;
    RecordingGuard& operator=(const RecordingGuard&) = delete;
    RecordingGuard(RecordingGuard&& other) noexcept;
    RecordingGuard& operator=(RecordingGuard&&) = delete;
    ~RecordingGuard();

   private:
    friend class GradientTape;
    RecordingGuard(std::shared_ptr<detail::TapeState> state, bool restore_recording)
        : state_(std::move(state)), restore_recording_(restore_recording) {}
    std::shared_ptr<detail::TapeState> state_;  // shared with the tape: no dangling pointer
    bool restore_recording_;
  };

  /// Starts recording on this thread (TF: `with tf.GradientTape(...)`).
  explicit GradientTape(bool persistent = false, bool watch_accessed_variables = true);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;
  GradientTape(GradientTape&&) = delete;
  GradientTape& operator=(GradientTape&&) = delete;

  /// Ensures ops on these are recorded. Integer and bool tensors are never differentiated
  /// (a warning is printed once). TapeError on a used non-persistent tape.
  void watch(const Tensor& tensor);
  void watch(const std::vector<Tensor>& tensors);
  void watch(const Variable& variable);
  void watch(const std::vector<Variable>& variables);

  /// Pauses recording until the guard is destroyed (TF: stop_recording). TapeError
  /// "Trying to stop recording a tape which is not recording." when it is not recording.
  RecordingGuard stop_recording();
  /// Resumes recording on a tape that is not recording, until the guard is destroyed (TF:
  /// re-entering `with tape:`). TapeError "Tape is still recording..." when it already is,
  /// on a used non-persistent tape, and after end_recording().
  RecordingGuard record();

  /// Ends recording for good (TF: the end of a `with tf.GradientTape(persistent=True) as
  /// tape:` block, after which the program calls tape.gradient or tape.jacobian). Later ops
  /// are not recorded and nothing resumes recording: a stop_recording() guard alive now does
  /// nothing when it dies, record() throws TapeError. gradient, jacobian and batch_jacobian on
  /// a persistent tape then differentiate what was recorded, without recording their own work
  /// and without the "still recording" warning. Safe to call more than once, and on a paused
  /// or used tape; reset() still forgets the records (the tape stays ended). TapeError only
  /// when called on another thread than the tape's.
  void end_recording();

  /// Forgets everything recorded so far and keeps recording, if it was (TF: reset). TapeError when
  /// called from inside this tape's own gradient computation (a gradient function or custom
  /// backward of a walk over this tape), whose records it would free.
  void reset();
  /// The variables this tape watches, in creation order (TF: watched_variables).
  std::vector<Variable> watched_variables() const;
  bool persistent() const { return persistent_; }
  /// The tape's own recording flag: true from construction or record() until stop_recording(),
  /// end_recording() or the gradient call of a non-persistent tape. Inside a custom_gradient or
  /// recompute_grad forward the tape is additionally paused whatever this says. Any thread may ask.
  bool recording() const;
  /// Bytes the tape currently owns: its entries, their descriptions (arena chunks), its id
  /// map, and, once each, the tensors it keeps alive for its gradients (elements, storage
  /// block, allocator overhead, as glibc sizes them). Not counted: the heap behind an op's
  /// attributes or a custom gradient's captures. Never 0 once something was recorded.
  std::size_t bytes_held() const;

  /// Calls `hook` with the summed gradient of `t` once the backward walk of this tape has
  /// collected every gradient reaching t (for a watched tensor or a Variable's handle: once
  /// its last consumer has been differentiated), and uses the tensor it returns as t's
  /// gradient from then on (PyTorch: Tensor.register_hook). Several hooks on one tensor run
  /// in registration order. The hook runs inside the walk: a tape that records the backward
  /// (nested or persistent and recording) records what the hook computes, so the returned
  /// gradient is differentiable. A row-sparse gradient reaches the hook densified.
  /// InvalidArgument when t is undefined, or (at gradient() time) when the hook returns a
  /// tensor whose shape or dtype differs from the gradient's; TapeError on a used
  /// non-persistent tape. The hook lives until the handle is removed or destroyed, or the
  /// tape is destroyed.
  [[nodiscard]] HookHandle register_hook(const Tensor& t,
                                         std::function<Tensor(const Tensor& grad)> hook);
  /// The same for a Variable: the hook is on its handle.
  [[nodiscard]] HookHandle register_hook(const Variable& v,
                                         std::function<Tensor(const Tensor& grad)> hook);

  /// d(sum of target)/d(source). Targets are summed; the output gradient defaults to ones.
  /// An unconnected, integer or bool source gives an undefined Tensor (None) or zeros (Zero).
  /// TapeError on a second call on a non-persistent tape.
  Tensor gradient(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::None);
  Tensor gradient(const Tensor& target, const Variable& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::None);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::None);
  /// `output_gradients`: one per target, same shape (undefined entries mean ones).
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const std::vector<Tensor>& sources,
                               const std::vector<Tensor>& output_gradients = {},
                               UnconnectedGradients unconnected = UnconnectedGradients::None);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::None);
  /// With every option in one place (TF tf.gradients): `options.stop_gradients` are treated as
  /// constants for this call, so the result is a partial derivative: the gradient reaching a
  /// listed tensor is not passed on to what it was computed from (a listed source still
  /// receives its own). InvalidArgument for an undefined stop tensor, and as the other
  /// overloads for the rest.
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const std::vector<Tensor>& sources, const GradientOptions& options);
  /// As gradient(), but a gradient that is row-sparse (from gather) stays an IndexedSlices.
  std::vector<GradientValue> gradient_values(
      const std::vector<Tensor>& targets, const std::vector<Tensor>& sources,
      const std::vector<Tensor>& output_gradients = {},
      UnconnectedGradients unconnected = UnconnectedGradients::None);

  /// Why gradient(target, source) is or is not defined, in a few readable lines: the source
  /// never watched, an integer or bool dtype, a path cut by a not-differentiable op (named) or
  /// by an op with no registered gradient, a target the tape never recorded (computed before
  /// the watch, while paused, or from unwatched values), a value that left the tape (a Tensor
  /// rebuilt from array(): a leaf no recorded op produced); or, when a gradient flows, the
  /// ops on one path from the target back to the source. Reads the tape, records nothing.
  /// InvalidArgument for an undefined tensor; TapeError on another thread or a used
  /// non-persistent tape.
  std::string explain(const Tensor& target, const Tensor& source) const;

  /// d target[i...] / d source[j...], shape target.shape ++ source.shape (TF: jacobian).
  Tensor jacobian(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::None);
  std::vector<Tensor> jacobian(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::None);
  /// Per-example Jacobians: target [b, y...], source [b, x...] -> [b, y..., x...]
  /// (TF: batch_jacobian). InvalidArgument when a rank is below 2 or the batch sizes differ.
  Tensor batch_jacobian(const Tensor& target, const Tensor& source,
                        UnconnectedGradients unconnected = UnconnectedGradients::None);
  /// The same with every option (the overloads above use JacobianOptions{} with their
  /// `unconnected`: vectorized).
  Tensor jacobian(const Tensor& target, const Tensor& source, const JacobianOptions& options);
  std::vector<Tensor> jacobian(const Tensor& target, const std::vector<Tensor>& sources,
                               const JacobianOptions& options);
  Tensor batch_jacobian(const Tensor& target, const Tensor& source, const JacobianOptions& options);

 private:
  friend class RecordingGuard;
  // TapeError unless called on the thread that created the tape.
  void check_thread(const char* what) const;
  // Every gradient/jacobian call starts here: the tape must be usable; a non-persistent tape
  // stops recording and is marked used (even if the walk then throws: its entries may already
  // be released); a persistent one that is still recording warns once. The returned tape
  // stays alive for the walk; a BackwardScope marks the walk as running (reset() checks it)
  // and drops a used tape when the call ends.
  std::shared_ptr<detail::TapeImpl> begin_backward(const char* what);
  struct BackwardScope {
    explicit BackwardScope(GradientTape& tape);
    ~BackwardScope();
    BackwardScope(const BackwardScope&) = delete;
    BackwardScope& operator=(const BackwardScope&) = delete;
    std::shared_ptr<detail::TapeState> state;
  };
  detail::TapeImpl& live_tape(const char* what);
  std::vector<GradientValue> run_gradient(const std::vector<Tensor>& targets,
                                          const std::vector<Tensor>& sources,
                                          const std::vector<Tensor>& output_gradients,
                                          UnconnectedGradients unconnected,
                                          const std::vector<Tensor>& stop_gradients = {});

  std::shared_ptr<detail::TapeState> state_;  // also held by the thread's list and the guards
  std::vector<Variable> watched_when_used_;   // what watched_variables() says after use (TF)
  bool persistent_;
  bool watch_accessed_variables_;
};

/// Number of tapes this thread holds right now: those created on it and not yet destroyed,
/// recording or not (one destroyed on another thread is dropped first). Zero outside every
/// GradientTape scope; a diagnostic for tests and for checking that an error left nothing
/// behind.
std::size_t tapes_on_this_thread();

}  // namespace tapegrad
