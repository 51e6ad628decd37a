// A rank that fails must not leave the others waiting forever. Run under mpirun (2+ ranks):
//
//   mpi_failure throw     rank 1 throws out of main in step 2 while the others are in an
//                         allreduce: the terminate handler prints the error with the rank
//                         and calls MPI_Abort, which ends every rank.
//   mpi_failure timeout   rank 1 never joins an allreduce: rank 0's wait times out after
//                         2 s with a CommunicationError naming its rank and the
//                         collective; at exit it aborts every rank.
//
// ctest checks the messages and that the run ends within its TIMEOUT.
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

namespace td = tapegrad::distributed;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  td::Communicator comm = td::Communicator::world();
  const tapegrad::Tensor x = tapegrad::constant(static_cast<double>(comm.rank()));
  if (mode == "throw") {
    comm.set_timeout(std::chrono::seconds(120));  // the abort must end the run, not the timeout
    for (int step = 0; step < 5; ++step) {
      if (comm.rank() == 1 && step == 2) {
        throw std::runtime_error("injected failure in step 2");
      }
      comm.allreduce(x, td::Reduction::Sum);
    }
    std::printf("rank %d: not reached: all steps ran\n", comm.rank());
    return 1;
  }
  if (mode == "timeout") {
    comm.set_timeout(std::chrono::seconds(2));
    if (comm.rank() != 0) {
      std::this_thread::sleep_for(std::chrono::seconds(100));  // ended by rank 0's abort
      return 1;
    }
    try {
      comm.allreduce(x, td::Reduction::Sum);
    } catch (const td::CommunicationError& e) {
      std::printf("caught CommunicationError: %s\n", e.what());
      std::fflush(stdout);
      return 0;  // the exit handler aborts every rank: a collective is still pending
    }
    std::printf("rank 0: not reached: the allreduce completed\n");
    return 1;
  }
  std::fprintf(stderr, "usage: mpi_failure throw|timeout\n");
  return 2;
}
