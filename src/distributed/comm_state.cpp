// Waiting with a deadline, the cross-rank signature check and the world's MPI runtime.
#include "comm_state.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

namespace tapegrad::distributed::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds default_timeout() {
  if (const char* env = std::getenv("TAPEGRAD_MPI_TIMEOUT")) {
    char* end = nullptr;
    const double seconds = std::strtod(env, &end);
    if (end != env && seconds > 0) {
      return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
    }
  }
  return std::chrono::seconds(300);
}

std::atomic<bool> any_broken{false};
std::atomic<bool> we_initialised{false};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (any_broken.load()) {
    // A collective is still pending here and on the ranks it waited for: MPI_Finalize would
    // wait for them forever. Abort takes every rank down.
    std::fprintf(stderr,
                 "tapegrad::distributed: a collective timed out earlier; calling MPI_Abort at "
                 "exit so that no rank waits forever\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (we_initialised.load()) MPI_Finalize();
}

std::terminate_handler previous_terminate = nullptr;

[[noreturn]] void abort_every_rank() {
  std::string what = "std::terminate was called without an active exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      what = "uncaught exception of a type not derived from std::exception";
    }
  }
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int rank = -1;
    int size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::fprintf(stderr,
                 "tapegrad::distributed: rank %d of %d terminates (%s); calling MPI_Abort so "
                 "that the other ranks do not wait for it\n",
                 rank, size, what.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (previous_terminate != nullptr) previous_terminate();
  std::abort();
}

std::uint64_t fnv1a(const std::vector<std::int64_t>& codes) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::int64_t c : codes) {
    auto v = static_cast<std::uint64_t>(c);
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

constexpr std::int64_t kUndefined = 0;
constexpr std::int64_t kDense = 1;
constexpr std::int64_t kSparse = 2;

void add_shape(std::vector<std::int64_t>& codes, DType dtype, const Shape& shape) {
  codes.push_back(static_cast<std::int64_t>(dtype));
  codes.push_back(static_cast<std::int64_t>(shape.size()));
  for (std::size_t d : shape) codes.push_back(static_cast<std::int64_t>(d));
}

}  // namespace

CommState::CommState(MPI_Comm c) : comm(c), timeout(default_timeout()) {
  check_mpi(MPI_Comm_rank(comm, &rank), "Communicator: MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "Communicator: MPI_Comm_size");
}

std::string CommState::who() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

void CommState::require_usable(const char* what) const {
  if (broken) {
    throw CommunicationError(std::string(what) + ": " + who() +
                             ": the communicator is unusable since an earlier collective timed "
                             "out (" +
                             broken_by + ")");
  }
}

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw CommunicationError(std::string(what) +
                           " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

bool test_all(std::vector<MPI_Request>& requests, const char* what) {
  if (requests.empty()) return true;
  int done = 0;
  check_mpi(
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
      what);
  return done != 0;
}

void wait_all(CommState& state, std::vector<MPI_Request>& requests, const char* what,
              const std::string& description, std::shared_ptr<void> keep_alive) {
  const auto start = Clock::now();
  const auto deadline = start + state.timeout;
  // MPI advances most non-blocking collectives only inside MPI calls, so each poll moves the
  // collective on. Between polls the core is yielded: on a core of its own that returns at
  // once (a busy poll), and when the core is shared, a peer rank or another job gets it;
  // polling without yielding was 2.5x slower per training step on the shared 2-core machine
  // (bench/README.md, "distributed"). After 50 ms, sleep in short steps, so that a long wait
  // (a slow or failed peer) costs no CPU.
  const auto yield_until = start + std::chrono::milliseconds(50);
  for (;;) {
    if (test_all(requests, what)) return;
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (now < yield_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  std::ostringstream message;
  message << what << ": " << state.who() << " timed out after "
          << std::chrono::duration<double>(state.timeout).count() << " s waiting for collective #"
          << state.collectives << " (" << description
          << ") to complete: another rank failed, exited or called a different collective. "
             "MPI cannot cancel it: this communicator is unusable now, and the process calls "
             "MPI_Abort at exit";
  state.broken = true;
  state.broken_by = message.str();
  if (keep_alive) state.abandoned.push_back(std::move(keep_alive));
  note_broken_communicator();
  throw CommunicationError(message.str());
}

void Signature::add_undefined() { codes_.push_back(kUndefined); }

void Signature::add_dense(const Tensor& t) {
  codes_.push_back(kDense);
  add_shape(codes_, t.dtype(), t.shape());
}

void Signature::add_sparse(const IndexedSlices& s) {
  codes_.push_back(kSparse);
  add_shape(codes_, s.values.dtype(), s.dense_shape);
}

void Signature::add_variable(const Variable& v) {
  codes_.push_back(kDense);
  add_shape(codes_, v.dtype(), v.shape());
}

std::uint64_t Signature::hash() const { return fnv1a(codes_); }

std::vector<std::string> Signature::describe(const std::int64_t* codes, std::size_t n) {
  std::vector<std::string> items;
  std::size_t i = 0;
  while (i < n) {
    const std::int64_t kind = codes[i++];
    if (kind == kUndefined) {
      items.emplace_back("undefined");
      continue;
    }
    if (i + 2 > n) break;
    const auto dtype = static_cast<DType>(codes[i++]);
    const auto rank = static_cast<std::size_t>(codes[i++]);
    Shape shape;
    for (std::size_t d = 0; d < rank && i < n; ++d)
      shape.push_back(static_cast<std::size_t>(codes[i++]));
    items.push_back(std::string(kind == kSparse ? "IndexedSlices " : "") + shape_to_string(shape) +
                    " " + dtype_name(dtype));
  }
  return items;
}

void require_same_signature(CommState& state, const Signature& signature, const char* what) {
  ++state.collectives;
  const std::uint64_t h = signature.hash();
  auto extremes =
      std::make_shared<std::array<std::uint64_t, 2>>(std::array<std::uint64_t, 2>{h, ~h});
  std::vector<MPI_Request> requests(1);
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, extremes->data(), 2, MPI_UINT64_T, MPI_MAX, state.comm,
                           requests.data()),
            what);
  wait_all(state, requests, what, "comparing the tensors' shapes and dtypes across ranks",
           extremes);
  if ((*extremes)[0] == h && ~(*extremes)[1] == h) return;  // max == min: every rank agrees

  // They differ: every rank takes this path (all saw max != min) and gathers all lists.
  // Everything MPI reads or writes lives in `g`: after a timeout it must outlive this call.
  struct Gathered {
    int mine = 0;
    std::vector<int> counts;
    std::vector<int> displacements;
    std::vector<std::int64_t> codes;
    std::vector<std::int64_t> all;
  };
  auto g = std::make_shared<Gathered>();
  g->mine = static_cast<int>(signature.codes().size());
  g->codes = signature.codes();
  g->counts.resize(static_cast<std::size_t>(state.size));
  ++state.collectives;
  check_mpi(MPI_Iallgather(&g->mine, 1, MPI_INT, g->counts.data(), 1, MPI_INT, state.comm,
                           requests.data()),
            what);
  wait_all(state, requests, what, "gathering the tensors' shapes and dtypes", g);
  int total = 0;
  for (int c : g->counts) {
    g->displacements.push_back(total);
    total += c;
  }
  g->all.resize(static_cast<std::size_t>(total));
  ++state.collectives;
  check_mpi(MPI_Iallgatherv(g->codes.data(), g->mine, MPI_INT64_T, g->all.data(), g->counts.data(),
                            g->displacements.data(), MPI_INT64_T, state.comm, requests.data()),
            what);
  wait_all(state, requests, what, "gathering the tensors' shapes and dtypes", g);
  const auto& counts = g->counts;
  const auto& displacements = g->displacements;

  std::vector<std::vector<std::string>> per_rank;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    per_rank.push_back(
        Signature::describe(g->all.data() + displacements[r], static_cast<std::size_t>(counts[r])));
  }
  std::ostringstream message;
  message << what << ": the ranks pass different tensors: ";
  const auto differs_from_rank0 = [&](std::size_t r, std::size_t item) {
    return item >= per_rank[r].size() || item >= per_rank[0].size() ||
           per_rank[r][item] != per_rank[0][item];
  };
  const bool same_count = std::all_of(per_rank.begin(), per_rank.end(), [&](const auto& p) {
    return p.size() == per_rank[0].size();
  });
  if (!same_count) {
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      message << (r ? ", " : "") << "rank " << r << " passes " << per_rank[r].size()
              << " tensor(s)";
    }
  } else {
    bool first = true;
    for (std::size_t item = 0; item < per_rank[0].size(); ++item) {
      bool any = false;
      for (std::size_t r = 1; r < per_rank.size(); ++r) any = any || differs_from_rank0(r, item);
      if (!any) continue;
      message << (first ? "" : "; ") << "tensor " << item << ":";
      first = false;
      for (std::size_t r = 0; r < per_rank.size(); ++r) {
        message << (r ? "," : "") << " rank " << r << " has " << per_rank[r][item];
      }
    }
  }
  throw InvalidArgument(message.str());
}

void note_broken_communicator() { any_broken.store(true); }

void ensure_world_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    check_mpi(MPI_Initialized(&initialized), "Communicator::world: MPI_Initialized");
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                "Communicator::world: MPI_Init_thread");
      we_initialised.store(true);
    }
    std::atexit(finalize_at_exit);
    // Errors come back as return codes, which become exceptions, instead of aborting.
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "Communicator::world: MPI_Comm_set_errhandler");
    previous_terminate = std::set_terminate(abort_every_rank);
    install_checkpoint_ranks();
  });
}

}  // namespace tapegrad::distributed::detail
