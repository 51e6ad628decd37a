// Communicator: allreduce (dense and row-sparse), broadcast, barrier.
#include <map>
#include <string>

#include "buffers.hpp"
#include "comm_state.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad::distributed {

using detail::Buffer;
using detail::check_mpi;
using detail::CommState;
using detail::mpi_count;
using detail::mpi_type;
using detail::wait_all;

namespace {

// A gathered IndexedSlices: every rank's rows, rank 0's first.
IndexedSlices gather_slices(CommState& s, const IndexedSlices& local, Reduction reduction) {
  const char* what = "Communicator::allreduce";
  const Shape& dense = local.dense_shape;
  std::size_t row_elements = 1;
  for (std::size_t d = 1; d < dense.size(); ++d) row_elements *= dense[d];
  const DType dtype = local.values.dtype();
  const auto rows =
      static_cast<std::int64_t>(local.values.shape().empty() ? 0 : local.values.shape()[0]);

  // Everything MPI reads or writes lives here: after a timeout it must outlive this call.
  struct Gathered {
    std::int64_t rows = 0;
    std::vector<std::int64_t> counts;
    std::vector<std::int64_t> indices;
    std::vector<std::int64_t> my_indices;
    std::vector<int> index_counts, index_displs, value_counts, value_displs;
    Buffer values;
    Buffer my_values;
    explicit Gathered(DType d) : values(d), my_values(d) {}
  };
  auto g = std::make_shared<Gathered>(dtype);
  g->counts.resize(static_cast<std::size_t>(s.size));
  g->rows = rows;

  std::vector<MPI_Request> requests(1);
  ++s.collectives;
  check_mpi(MPI_Iallgather(&g->rows, 1, MPI_INT64_T, g->counts.data(), 1, MPI_INT64_T, s.comm,
                           requests.data()),
            what);
  wait_all(s, requests, what, "allgather of the IndexedSlices row counts", g);

  std::vector<int>& index_counts = g->index_counts;
  std::vector<int>& index_displs = g->index_displs;
  std::vector<int>& value_counts = g->value_counts;
  std::vector<int>& value_displs = g->value_displs;
  for (auto* v : {&index_counts, &index_displs, &value_counts, &value_displs})
    v->resize(g->counts.size());
  std::size_t total_rows = 0;
  for (std::size_t r = 0; r < g->counts.size(); ++r) {
    index_displs[r] = mpi_count(what, total_rows);
    value_displs[r] = mpi_count(what, total_rows * row_elements);
    index_counts[r] = mpi_count(what, static_cast<std::size_t>(g->counts[r]));
    value_counts[r] = mpi_count(what, static_cast<std::size_t>(g->counts[r]) * row_elements);
    total_rows += static_cast<std::size_t>(g->counts[r]);
  }
  const Tensor local_indices = cast(local.indices, DType::Int64);
  const auto& li = local_indices.array<std::int64_t>();
  g->my_indices.assign(li.begin(), li.end());
  g->my_values.resize(static_cast<std::size_t>(rows) * row_elements);
  if (rows > 0) g->my_values.write(0, local.values);
  g->indices.resize(total_rows);
  g->values.resize(total_rows * row_elements);

  requests.assign(2, MPI_REQUEST_NULL);
  ++s.collectives;
  check_mpi(MPI_Iallgatherv(g->my_indices.data(), index_counts[static_cast<std::size_t>(s.rank)],
                            MPI_INT64_T, g->indices.data(), index_counts.data(),
                            index_displs.data(), MPI_INT64_T, s.comm, &requests[0]),
            what);
  check_mpi(MPI_Iallgatherv(g->my_values.data(), value_counts[static_cast<std::size_t>(s.rank)],
                            mpi_type(dtype), g->values.data(), value_counts.data(),
                            value_displs.data(), mpi_type(dtype), s.comm, &requests[1]),
            what);
  wait_all(s, requests, what, "allgather of IndexedSlices indices and values", g);

  Shape value_shape = dense;
  value_shape[0] = total_rows;
  IndexedSlices out;
  out.values = g->values.read(0, value_shape, reduction == Reduction::Mean ? s.size : 1);
  xt::xarray<std::int64_t> indices = xt::xarray<std::int64_t>::from_shape({total_rows});
  std::copy(g->indices.begin(), g->indices.end(), indices.begin());
  out.indices = cast(Tensor(std::move(indices)), local.indices.dtype());
  out.dense_shape = dense;
  return out;
}

}  // namespace

Communicator Communicator::world() {
  detail::ensure_world_runtime();
  return Communicator(std::make_shared<CommState>(MPI_COMM_WORLD));
}

Communicator::Communicator(MPI_Comm comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    throw InvalidArgument(
        "Communicator(MPI_Comm): MPI is not initialised; call MPI_Init first or "
        "use Communicator::world()");
  }
  if (comm == MPI_COMM_NULL)
    throw InvalidArgument("Communicator(MPI_Comm): the communicator is MPI_COMM_NULL");
  state_ = std::make_shared<CommState>(comm);
}

int Communicator::rank() const { return state_->rank; }
int Communicator::size() const { return state_->size; }
MPI_Comm Communicator::native() const { return state_->comm; }
std::chrono::milliseconds Communicator::timeout() const { return state_->timeout; }

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) {
    throw InvalidArgument("Communicator::set_timeout: the timeout must be positive, got " +
                          std::to_string(timeout.count()) + " ms");
  }
  state_->timeout = timeout;
}

Tensor Communicator::allreduce(const Tensor& t, Reduction reduction) const {
  if (!t.defined()) throw InvalidArgument("Communicator::allreduce: the tensor is undefined");
  return allreduce(std::vector<GradientValue>{GradientValue(t)}, reduction)[0].dense();
}

std::vector<GradientValue> Communicator::allreduce(const std::vector<GradientValue>& grads,
                                                   Reduction reduction) const {
  const char* what = "Communicator::allreduce";
  CommState& s = *state_;
  s.require_usable(what);
  detail::Signature signature;
  for (const auto& g : grads) {
    if (!g.defined()) {
      signature.add_undefined();
    } else if (g.is_sparse()) {
      detail::require_floating(what, g.sparse().values.dtype());
      signature.add_sparse(g.sparse());
    } else {
      detail::require_floating(what, g.dense().dtype());
      signature.add_dense(g.dense());
    }
  }
  detail::require_same_signature(s, signature, what);

  // Dense tensors: one fused buffer and one allreduce per dtype.
  std::map<DType, std::vector<std::size_t>> dense_by_dtype;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined() && !grads[i].is_sparse())
      dense_by_dtype[grads[i].dense().dtype()].push_back(i);
  }
  std::vector<GradientValue> out(grads.size());
  if (!dense_by_dtype.empty()) {
    auto buffers = std::make_shared<std::vector<Buffer>>();
    std::vector<std::vector<std::size_t>> offsets;
    std::size_t elements_total = 0;
    for (const auto& [dtype, items] : dense_by_dtype) {
      Buffer& b = buffers->emplace_back(dtype);
      std::size_t n = 0;
      for (std::size_t i : items) n += grads[i].dense().size();
      b.resize(n);
      offsets.emplace_back();
      std::size_t offset = 0;
      for (std::size_t i : items) {
        offsets.back().push_back(offset);
        b.write(offset, grads[i].dense());
        offset += grads[i].dense().size();
      }
      elements_total += n;
    }
    std::vector<MPI_Request> requests(buffers->size(), MPI_REQUEST_NULL);
    ++s.collectives;
    for (std::size_t k = 0; k < buffers->size(); ++k) {
      Buffer& b = (*buffers)[k];
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, b.data(), mpi_count(what, b.elements()),
                               mpi_type(b.dtype()), MPI_SUM, s.comm, &requests[k]),
                what);
    }
    wait_all(s, requests, what,
             "allreduce of " + std::to_string(elements_total) + " elements in " +
                 std::to_string(buffers->size()) + " buffer(s)",
             buffers);
    const int divisor = reduction == Reduction::Mean ? s.size : 1;
    std::size_t k = 0;
    for (const auto& entry : dense_by_dtype) {
      const auto& items = entry.second;
      for (std::size_t j = 0; j < items.size(); ++j) {
        out[items[j]] = (*buffers)[k].read(offsets[k][j], grads[items[j]].dense().shape(), divisor);
      }
      ++k;
    }
  }
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined() && grads[i].is_sparse())
      out[i] = gather_slices(s, grads[i].sparse(), reduction);
  }
  return out;
}

void Communicator::broadcast(const std::vector<Variable>& variables, int root) const {
  const char* what = "Communicator::broadcast";
  CommState& s = *state_;
  s.require_usable(what);
  if (root < 0 || root >= s.size) {
    throw InvalidArgument(std::string(what) + ": root " + std::to_string(root) +
                          " is not a rank of this communicator (size " + std::to_string(s.size) +
                          ")");
  }
  detail::Signature signature;
  for (const auto& v : variables) {
    detail::require_floating(what, v.dtype());
    signature.add_variable(v);
  }
  detail::require_same_signature(s, signature, what);

  std::map<DType, std::vector<std::size_t>> by_dtype;
  for (std::size_t i = 0; i < variables.size(); ++i) by_dtype[variables[i].dtype()].push_back(i);
  auto buffers = std::make_shared<std::vector<Buffer>>();
  std::vector<std::vector<std::size_t>> offsets;
  for (const auto& [dtype, items] : by_dtype) {
    Buffer& b = buffers->emplace_back(dtype);
    std::size_t n = 0;
    for (std::size_t i : items) n += num_elements(variables[i].shape());
    b.resize(n);
    offsets.emplace_back();
    std::size_t offset = 0;
    for (std::size_t i : items) {
      offsets.back().push_back(offset);
      if (s.rank == root) b.write(offset, variables[i].peek());
      offset += num_elements(variables[i].shape());
    }
  }
  std::vector<MPI_Request> requests(buffers->size(), MPI_REQUEST_NULL);
  ++s.collectives;
  for (std::size_t k = 0; k < buffers->size(); ++k) {
    Buffer& b = (*buffers)[k];
    check_mpi(MPI_Ibcast(b.data(), mpi_count(what, b.elements()), mpi_type(b.dtype()), root, s.comm,
                         &requests[k]),
              what);
  }
  wait_all(s, requests, what,
           "broadcast of " + std::to_string(variables.size()) + " variable(s) from rank " +
               std::to_string(root),
           buffers);
  if (s.rank == root) return;
  std::size_t k = 0;
  for (const auto& entry : by_dtype) {
    const auto& items = entry.second;
    for (std::size_t j = 0; j < items.size(); ++j) {
      Variable v = variables[items[j]];
      v.assign((*buffers)[k].read(offsets[k][j], v.shape(), 1));
    }
    ++k;
  }
}

void Communicator::barrier() const {
  const char* what = "Communicator::barrier";
  CommState& s = *state_;
  s.require_usable(what);
  std::vector<MPI_Request> requests(1);
  ++s.collectives;
  check_mpi(MPI_Ibarrier(s.comm, requests.data()), what);
  wait_all(s, requests, what, "barrier", nullptr);
}

}  // namespace tapegrad::distributed
