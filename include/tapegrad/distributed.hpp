// Data-parallel training over MPI: a communicator that reduces gradients and broadcasts
// Variables, and a bucketed allreduce that overlaps communication with the backward pass
// (PyTorch: torch.distributed + DistributedDataParallel's Reducer; Horovod's allreduce).
//
// Optional component: built when MPI is found (CMake option TAPEGRAD_WITH_MPI), target
// tapegrad::distributed, `find_package(tapegrad COMPONENTS distributed)`. See
// docs/distributed.md for running it (mpirun, hostfiles, srun) and what it guarantees.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include <mpi.h>

#include "tapegrad/errors.hpp"
#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/tape.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::distributed {

/// How a collective combines the ranks' values: their sum, or the sum divided by size().
enum class Reduction { Sum, Mean };

/// A collective that did not complete within the communicator's timeout: another rank
/// failed, exited or never called it. The message names this rank, the collective and the
/// wait. MPI cannot cancel a started collective, so the communicator is unusable afterwards
/// (every later call throws this too), and the process calls MPI_Abort at exit instead of
/// MPI_Finalize so that no rank waits forever.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

namespace detail {
struct CommState;
}

/// A handle to an MPI communicator (cheap to copy; copies share the state). Collectives are
/// non-blocking MPI calls waited on with a deadline (timeout()), so a rank whose peers have
/// failed gets a CommunicationError instead of hanging. Every rank must call the same
/// collectives in the same order with tensors of the same shapes and dtypes; a shape or
/// dtype mismatch is detected (the (shape, dtype) lists are compared across ranks first) and
/// throws InvalidArgument on every rank, naming the ranks and their shapes.
/// Float32 and Float64 only. Call from one thread at a time.
class Communicator {
 public:
  /// MPI_COMM_WORLD. Initialises MPI on first use if the program has not (and then
  /// finalises it at exit), and installs a terminate handler that prints the uncaught
  /// exception with this rank and calls MPI_Abort, so that a rank that throws takes the
  /// others down instead of leaving them waiting.
  static Communicator world();
  /// Wraps a communicator the caller owns (and keeps valid, with MPI initialised, while
  /// any copy of this handle is used). Not freed here.
  explicit Communicator(MPI_Comm comm);

  int rank() const;
  int size() const;
  MPI_Comm native() const;

  /// How long a collective may wait for the other ranks before CommunicationError.
  /// Default: $TAPEGRAD_MPI_TIMEOUT seconds when set, else 300 s. Per rank.
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);

  /// Every rank's `t` summed (or averaged) elementwise; same shape and dtype.
  Tensor allreduce(const Tensor& t, Reduction reduction = Reduction::Mean) const;
  /// Reduces a list of gradients in one exchange. Dense tensors are packed into one buffer
  /// per dtype and reduced with one MPI_Iallreduce each. An IndexedSlices stays sparse: the
  /// ranks' rows are gathered (allgather of indices and values, rank 0's rows first), and
  /// Mean divides the values by size(). An undefined entry must be undefined on every rank
  /// and stays undefined.
  std::vector<GradientValue> allreduce(const std::vector<GradientValue>& grads,
                                       Reduction reduction) const;
  /// Sets every rank's Variables to the root's values (shapes and dtypes must agree).
  void broadcast(const std::vector<Variable>& variables, int root = 0) const;
  /// Waits until every rank has called it (with the timeout).
  void barrier() const;

 private:
  friend class BucketedAllreduce;
  explicit Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CommState> state_;
};

/// Options of a BucketedAllreduce.
struct BucketOptions {
  /// Gradients are packed into buckets of about this many bytes (a variable larger than
  /// this gets a bucket of its own). Small buckets start earlier but pay more latency.
  std::size_t bucket_bytes = std::size_t{1} << 20;
  Reduction reduction = Reduction::Mean;
  /// When false, no hook is registered: every bucket is reduced in finish(), after the
  /// backward pass (the baseline the overlap is measured against).
  bool overlap = true;
};

/// What happened during a step, in order (for tests and profiling).
struct BucketEvent {
  /// A hook delivered a variable's gradient; a bucket's allreduce started; finish() began
  /// (after the backward pass: what starts later is not overlapped).
  enum class Kind { GradientReady, BucketStarted, FinishCalled };
  Kind kind;
  std::size_t index;  // the variable's index for GradientReady, the bucket's for BucketStarted
  double seconds;     // since attach()
};

/// Averages (or sums) the dense gradients of a fixed list of Variables across ranks while
/// the backward pass still runs (PyTorch: DDP's Reducer). The variables are packed, last
/// first, into buckets; attach() registers a hook on each variable on the step's tape; when
/// the walk has produced every gradient of a bucket, the hook copies them into the bucket's
/// buffer and starts a non-blocking allreduce, so the last layers' communication overlaps
/// the earlier layers' backward. Buckets start in a fixed order on every rank (a ready
/// bucket waits for the ones before it), as MPI requires. finish() waits and returns the
/// reduced gradients.
///
///   BucketedAllreduce reducer(Communicator::world(), model_variables);
///   GradientTape tape;
///   reducer.attach(tape);
///   Tensor loss = ...;
///   auto grads = reducer.finish(tape.gradient(loss, model_variables));
///
/// Every rank must use the same variables: the constructor is a collective (every rank
/// constructs its reducer at the same point) that compares their shapes and dtypes
/// (InvalidArgument naming the ranks). Row-sparse gradients reach the hooks densified;
/// reduce IndexedSlices with Communicator::allreduce instead.
class BucketedAllreduce {
 public:
  BucketedAllreduce(Communicator comm, std::vector<Variable> variables, BucketOptions options = {});
  ~BucketedAllreduce();
  BucketedAllreduce(const BucketedAllreduce&) = delete;
  BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;

  /// Registers this step's hooks on `tape` (a no-op with overlap off). The hooks go when
  /// finish() returns or the tape is destroyed. TapeError when a step is already attached.
  void attach(GradientTape& tape);
  /// `local_grads`: this rank's gradients, one per variable, in the constructor's order (as
  /// tape.gradient(loss, variables) returns them; an undefined one counts as zeros). Starts
  /// the buckets no hook started, waits for all (with the communicator's timeout) and
  /// returns the reduced gradients in the same order. InvalidArgument when the count,
  /// a shape or a dtype is wrong.
  std::vector<Tensor> finish(const std::vector<Tensor>& local_grads);

  std::size_t num_buckets() const;
  /// The variables (indices into the constructor's list) of bucket b.
  std::vector<std::size_t> bucket_variables(std::size_t b) const;
  /// The last finished step's events: gradients as the hooks saw them, buckets as started.
  const std::vector<BucketEvent>& last_step_events() const;
  /// The last finished step's seconds spent in finish() waiting for the collectives.
  double last_wait_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapegrad::distributed
