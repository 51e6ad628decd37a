// Checkpoint's view of MPI_COMM_WORLD: the rank, and a broadcast of bytes with the
// communicator's deadline, installed by Communicator::world() (see tapegrad/checkpoint.hpp).
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "comm_state.hpp"
#include "tapegrad/checkpoint.hpp"

namespace tapegrad::distributed::detail {
namespace {

class WorldCheckpointRanks : public tapegrad::detail::CheckpointRanks {
 public:
  explicit WorldCheckpointRanks(std::shared_ptr<CommState> state) : state_(std::move(state)) {}

  int rank() const override { return state_->rank; }

  void broadcast(std::vector<char>& bytes) const override {
    const char* what = "Checkpoint (broadcast from rank 0)";
    CommState& s = *state_;
    s.require_usable(what);
    // The size first, then the bytes in pieces MPI's int counts can hold.
    auto size = std::make_shared<std::uint64_t>(bytes.size());
    std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
    ++s.collectives;
    check_mpi(MPI_Ibcast(size.get(), 1, MPI_UINT64_T, 0, s.comm, &requests[0]), what);
    wait_all(s, requests, what, "checkpoint size", size);
    if (s.rank != 0) bytes.resize(static_cast<std::size_t>(*size));
    if (bytes.empty()) return;
    // The bytes are the caller's: a timeout leaves them to MPI for the process's life.
    auto buffer = std::make_shared<std::vector<char>>(std::move(bytes));
    constexpr std::size_t kPiece = INT_MAX / 2;
    requests.clear();
    ++s.collectives;
    for (std::size_t offset = 0; offset < buffer->size(); offset += kPiece) {
      const std::size_t count = std::min(kPiece, buffer->size() - offset);
      requests.push_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Ibcast(buffer->data() + offset, static_cast<int>(count), MPI_CHAR, 0, s.comm,
                           &requests.back()),
                what);
    }
    wait_all(s, requests, what, "checkpoint of " + std::to_string(buffer->size()) + " bytes",
             buffer);
    bytes = std::move(*buffer);
  }

 private:
  std::shared_ptr<CommState> state_;
};

}  // namespace

void install_checkpoint_ranks() {
  tapegrad::detail::set_checkpoint_ranks(
      std::make_shared<WorldCheckpointRanks>(std::make_shared<CommState>(MPI_COMM_WORLD)));
}

}  // namespace tapegrad::distributed::detail
