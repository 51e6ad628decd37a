// What the distributed component's files share: a communicator's state, waiting on
// non-blocking collectives with a deadline, and the cross-rank (shape, dtype) check.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "tapegrad/distributed.hpp"

namespace tapegrad::distributed::detail {

struct CommState {
  explicit CommState(MPI_Comm comm);

  MPI_Comm comm;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout;
  bool broken = false;            // a collective timed out: nothing more can be trusted
  std::string broken_by;          // the message of that timeout
  std::uint64_t collectives = 0;  // started so far, to name one in messages
  // Buffers of collectives that timed out: MPI may still write into them, so they live as
  // long as the process.
  std::vector<std::shared_ptr<void>> abandoned;

  // "rank 0 of 2"
  std::string who() const;
  // Throws the CommunicationError of an earlier timeout, if any.
  void require_usable(const char* what) const;
};

// Throws CommunicationError naming `what` and MPI's message when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* what);

// Waits for `requests` until the state's timeout. On timeout the state is marked broken,
// `keep_alive` is kept for the rest of the process and CommunicationError names this rank,
// `what`, `description` and the timeout.
void wait_all(CommState& state, std::vector<MPI_Request>& requests, const char* what,
              const std::string& description, std::shared_ptr<void> keep_alive);

// Drives MPI's progress on requests already started (MPI progresses most non-blocking
// collectives only inside MPI calls). Returns true when all have completed.
bool test_all(std::vector<MPI_Request>& requests, const char* what);

// A list of tensors' kinds, shapes and dtypes, encoded as integers to compare across ranks.
class Signature {
 public:
  void add_undefined();
  void add_dense(const Tensor& t);
  void add_sparse(const IndexedSlices& s);
  void add_variable(const Variable& v);
  const std::vector<std::int64_t>& codes() const { return codes_; }
  std::uint64_t hash() const;
  // Each item as text: "[2, 3] float64", "IndexedSlices [10, 4] float32", "undefined".
  static std::vector<std::string> describe(const std::int64_t* codes, std::size_t n);

 private:
  std::vector<std::int64_t> codes_;
};

// Compares the signature across ranks (one small allreduce of its hash); when they differ,
// gathers them and throws InvalidArgument on every rank naming the ranks and the items that
// differ. `what` names the collective.
void require_same_signature(CommState& state, const Signature& signature, const char* what);

// Starts the process-wide MPI runtime for Communicator::world() (once).
void ensure_world_runtime();

// Makes Checkpoint::save and restore collectives over MPI_COMM_WORLD (checkpoint_ranks.cpp).
void install_checkpoint_ranks();
// Marks that a collective timed out: at exit the process aborts instead of finalising.
void note_broken_communicator();

}  // namespace tapegrad::distributed::detail
