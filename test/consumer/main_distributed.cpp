// Built against an installed tapegrad with its distributed component (when MPI was found):
// proves `find_package(tapegrad COMPONENTS distributed)` gives a working tapegrad::distributed.
// Run alone it is one rank; exits non-zero on a wrong sum.
#include <iostream>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

int main() {
  namespace td = tapegrad::distributed;
  const td::Communicator comm = td::Communicator::world();
  const double sum = comm.allreduce(tapegrad::constant(1.0), td::Reduction::Sum).item<double>();
  const bool ok = sum == comm.size();
  std::cout << "consumer_distributed: rank " << comm.rank() << " of " << comm.size()
            << ", allreduce of ones = " << sum << (ok ? " (ok)" : " (WRONG)") << '\n';
  return ok ? 0 : 1;
}
