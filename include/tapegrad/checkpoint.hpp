// Checkpoint: a training run's whole state in one .npz file, saved atomically and restored
// all or nothing (TF: tf.train.Checkpoint; PyTorch: torch.save of state_dicts).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tapegrad/module.hpp"
#include "tapegrad/ops/random.hpp"
#include "tapegrad/optim.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

/// Names the objects whose state makes a run resumable, and saves or restores them together:
///
///   Checkpoint checkpoint;
///   checkpoint.track("model", model).track("optimizer", adam).track("dropout", generator);
///   checkpoint.save("run.npz");      // after an epoch
///   checkpoint.restore("run.npz");   // in a new process, after building the same objects
///
/// The file is a NumPy .npz (numpy.load reads it); its entries are
///   a Variable "w":     "w"
///   a Module "model":   "model/<path>" for each of named_variables() ("model/conv1/kernel")
///   an Optimizer "opt": "opt/iterations" (int64), "opt/learning_rate" (float64; SGD, Adam and
///                       AdamW), and "opt/slots/<variable's entry>/<slot>" for every variable
///                       that has slots ("opt/slots/model/conv1/kernel/m")
///   a Generator "gen":  "gen/seed" and "gen/counter" (int64 holding the uint64's bits)
/// Only references are kept: a tracked object must outlive the Checkpoint's use of it. A
/// Module's variables are listed at each save/restore, so layers added later are included.
/// A variable tracked twice (alone and in a module) is saved under its first name; that name
/// is what an optimizer's slots refer to. An optimizer's hyperparameters other than the
/// learning rate (betas, epsilon, momentum) are the constructor's, not saved.
///
/// With tapegrad::distributed, once the program has called Communicator::world(), save and
/// restore are collectives (every rank calls them at the same point): rank 0 writes the file
/// and every rank learns whether it succeeded (an error throws on every rank); restore reads
/// the file on rank 0 and sends its bytes to every rank, so every rank restores the same
/// values, whatever its own disk holds (docs/distributed.md).
class Checkpoint {
 public:
  Checkpoint() = default;

  /// Each returns *this, for chaining. InvalidArgument naming Checkpoint::track and the name
  /// for an empty name, a name with '/', or a name already tracked.
  Checkpoint& track(const std::string& name, const Variable& variable);
  Checkpoint& track(const std::string& name, const Module& module);
  Checkpoint& track(const std::string& name, Optimizer& optimizer);  // slots, iterations, rate
  Checkpoint& track(const std::string& name, Generator& generator);  // seed and counter

  /// Writes every tracked object's state to `path` as one .npz, atomically (save_npz: a
  /// temporary file in the same folder, flushed to disk, renamed over `path`): a crash at any
  /// moment leaves the old file or the new one, whole.
  /// InvalidArgument naming Checkpoint::save and `path` when nothing is tracked, when an
  /// optimizer holds slots for a variable that is not tracked (its state could not be
  /// restored), or when the file cannot be written (the system's reason).
  void save(const std::string& path) const;

  /// Reads `path` and sets every tracked object to the state it holds, all or nothing: every
  /// entry is checked before anything is assigned. InvalidArgument naming Checkpoint::restore,
  /// `path` and the entry for the first entry missing from the file, of another shape or
  /// dtype than its object's, of an impossible value (a negative iteration count or learning
  /// rate), an optimizer's slot entries for a variable that are not all there, or an entry that
  /// matches nothing tracked; and the errors of load_npz for a file that is missing, truncated
  /// or corrupt. On any error every tracked object is exactly as it was.
  void restore(const std::string& path);

 private:
  struct Tracked;
  void add(Tracked tracked);

  std::vector<std::shared_ptr<const Tracked>> tracked_;
};

namespace detail {

/// How Checkpoint reaches the ranks of a data-parallel program. tapegrad::distributed installs
/// one for MPI_COMM_WORLD when Communicator::world() is first called; without one, save and
/// restore work on this process alone.
class CheckpointRanks {
 public:
  virtual ~CheckpointRanks() = default;
  virtual int rank() const = 0;
  /// Rank 0's `bytes` on every rank (resized on the others).
  virtual void broadcast(std::vector<char>& bytes) const = 0;
};
void set_checkpoint_ranks(std::shared_ptr<const CheckpointRanks> ranks);
std::shared_ptr<const CheckpointRanks> checkpoint_ranks();

}  // namespace detail
}  // namespace tapegrad
