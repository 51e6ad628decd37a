// GradientTape: records the ops run while it is alive and differentiates them
// (TF: tf.GradientTape).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

/// What `gradient()` returns for a source that the targets do not depend on
/// (TF: tf.UnconnectedGradients): an undefined Tensor, or zeros of the source's shape.
enum class UnconnectedGradients { None, Zero };

namespace detail {
class TapeImpl;
}

/// Records, from construction to destruction, every op on this thread whose inputs it
/// watches, then walks that record backwards in `gradient()`.
///
/// Tapes nest: each active tape records the ops that touch what it watches, including the
/// ops a gradient computation of an inner tape runs, which is how nested tapes give higher
/// derivatives. A non-persistent tape allows exactly one gradient/jacobian/batch_jacobian
/// call; a second throws TapeError. Not copyable, not movable: it lives in one scope of one
/// thread.
class GradientTape {
 public:
  /// Re-pushes a tape for its own lifetime. Returned by stop_recording() and record().
  class [[nodiscard]] RecordingGuard {
   public:
    RecordingGuard(const RecordingGuard&) = delete;
    RecordingGuard& operator=(const RecordingGuard&) = delete;
    RecordingGuard(RecordingGuard&& other) noexcept;
    RecordingGuard& operator=(RecordingGuard&&) = delete;
    ~RecordingGuard();

   private:
    friend class GradientTape;
    RecordingGuard(GradientTape* tape, bool restore_recording)
        : tape_(tape), restore_recording_(restore_recording) {}
    GradientTape* tape_;
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
  /// and on a used non-persistent tape.
  RecordingGuard record();

  /// Forgets everything recorded so far and keeps recording (TF: reset).
  void reset();
  /// The variables this tape watches, in creation order (TF: watched_variables).
  std::vector<Variable> watched_variables() const;
  bool persistent() const { return persistent_; }
  /// True while ops run on this thread are recorded on this tape.
  bool recording() const { return recording_; }
  /// Bytes the tape currently owns: its entries, their descriptions (arena chunks), its id
  /// map, and, once each, the tensors it keeps alive for its gradients (elements, storage
  /// block, allocator overhead, as glibc sizes them). Not counted: the heap behind an op's
  /// attributes or a custom gradient's captures. Never 0 once something was recorded.
  std::size_t bytes_held() const;

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
  /// As gradient(), but a gradient that is row-sparse (from gather) stays an IndexedSlices.
  std::vector<GradientValue> gradient_values(
      const std::vector<Tensor>& targets, const std::vector<Tensor>& sources,
      const std::vector<Tensor>& output_gradients = {},
      UnconnectedGradients unconnected = UnconnectedGradients::None);

  /// d target[i...] / d source[j...], shape target.shape ++ source.shape (TF: jacobian).
  Tensor jacobian(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::None);
  std::vector<Tensor> jacobian(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::None);
  /// Per-example Jacobians: target [b, y...], source [b, x...] -> [b, y..., x...]
  /// (TF: batch_jacobian). InvalidArgument when a rank is below 2 or the batch sizes differ.
  Tensor batch_jacobian(const Tensor& target, const Tensor& source,
                        UnconnectedGradients unconnected = UnconnectedGradients::None);

 private:
  friend class RecordingGuard;
  void push();
  void pop();
  // Every gradient/jacobian call starts here: the tape must be usable; a non-persistent tape
  // stops recording and is marked used (even if the walk then throws: its entries may already
  // be released); a persistent one that is still recording warns once. The returned tape
  // stays alive for the walk; a BackwardScope drops a used tape when the call ends.
  std::shared_ptr<detail::TapeImpl> begin_backward(const char* what);
  struct BackwardScope {
    GradientTape& tape;
    BackwardScope(const BackwardScope&) = delete;
    BackwardScope& operator=(const BackwardScope&) = delete;
    ~BackwardScope() {
      if (tape.consumed_) tape.tape_.reset();
    }
  };
  detail::TapeImpl& live_tape(const char* what);
  std::vector<GradientValue> run_gradient(const std::vector<Tensor>& targets,
                                          const std::vector<Tensor>& sources,
                                          const std::vector<Tensor>& output_gradients,
                                          UnconnectedGradients unconnected);

  std::shared_ptr<detail::TapeImpl> tape_;  // null once a non-persistent tape is used
  bool consumed_ = false;                   // set when a non-persistent tape's walk starts
  std::vector<Variable> watched_when_used_;  // what watched_variables() says after use (TF)
  bool persistent_;
  bool watch_accessed_variables_;
  bool recording_ = false;
};

/// Number of tapes on this thread's tape stack right now, recording or not. Zero outside
/// every GradientTape scope; a diagnostic for tests and for checking that an error left
/// nothing behind.
std::size_t tapes_on_this_thread();

}  // namespace tapegrad
