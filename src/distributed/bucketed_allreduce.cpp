// BucketedAllreduce: gradients reduced in buckets started from the backward walk's hooks.
#include <chrono>
#include <string>

#include "buffers.hpp"
#include "comm_state.hpp"

namespace tapegrad::distributed {

using detail::Buffer;
using detail::check_mpi;
using detail::mpi_count;
using detail::mpi_type;

namespace {

struct Bucket {
  std::vector<std::size_t> variables;
  std::vector<std::size_t> offsets;  // of each variable in the buffer, in elements
  std::shared_ptr<Buffer> buffer;    // shared: survives a timeout (MPI may write later)
  std::size_t arrived = 0;
  MPI_Request request = MPI_REQUEST_NULL;
};

}  // namespace

struct BucketedAllreduce::Impl {
  Communicator comm;
  std::shared_ptr<detail::CommState> state;
  std::vector<Variable> variables;
  BucketOptions options;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;       // per variable
  std::vector<std::size_t> slot_in_bucket;  // per variable
  std::vector<bool> arrived;                // per variable, this step
  std::size_t next_to_start = 0;
  std::vector<HookHandle> hooks;
  bool attached = false;
  std::chrono::steady_clock::time_point attached_at;
  std::vector<BucketEvent> events;
  std::vector<BucketEvent> last_events;
  double last_wait_seconds = 0.0;

  Impl(Communicator c, std::shared_ptr<detail::CommState> s, std::vector<Variable> v,
       BucketOptions o)
      : comm(std::move(c)), state(std::move(s)), variables(std::move(v)), options(o) {}

  void log(BucketEvent::Kind kind, std::size_t index) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - attached_at).count();
    events.push_back(BucketEvent{kind, index, seconds});
  }

  void check_gradient(std::size_t i, const Tensor& g) const {
    const Variable& v = variables[i];
    if (g.dtype() != v.dtype() || g.shape() != v.shape()) {
      throw InvalidArgument("BucketedAllreduce::finish: the gradient of variable '" + v.name() +
                            "' has shape " + shape_to_string(g.shape()) + " and dtype " +
                            dtype_name(g.dtype()) + ", but the variable has shape " +
                            shape_to_string(v.shape()) + " and dtype " + dtype_name(v.dtype()));
    }
  }

  void deposit(std::size_t i, const Tensor& g) {
    if (arrived[i]) {
      throw InvalidArgument("BucketedAllreduce: the gradient of variable '" + variables[i].name() +
                            "' arrived twice in one step (a second gradient() on a persistent "
                            "tape?); call finish() once per gradient() call");
    }
    check_gradient(i, g);
    Bucket& b = buckets[bucket_of[i]];
    b.buffer->write(b.offsets[slot_in_bucket[i]], g);
    arrived[i] = true;
    ++b.arrived;
  }

  // Buckets start strictly in index order, so every rank issues the same sequence of MPI
  // collectives whatever order its walk produced the gradients in.
  void start_ready_buckets() {
    while (next_to_start < buckets.size() &&
           buckets[next_to_start].arrived == buckets[next_to_start].variables.size()) {
      Bucket& b = buckets[next_to_start];
      ++state->collectives;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, b.buffer->data(),
                               mpi_count("BucketedAllreduce", b.buffer->elements()),
                               mpi_type(b.buffer->dtype()), MPI_SUM, state->comm, &b.request),
                "BucketedAllreduce: MPI_Iallreduce");
      log(BucketEvent::Kind::BucketStarted, next_to_start);
      ++next_to_start;
    }
  }

  // Lets MPI advance the collectives in flight while the walk goes on.
  void progress() {
    for (std::size_t k = 0; k < next_to_start; ++k) {
      if (buckets[k].request == MPI_REQUEST_NULL) continue;
      int done = 0;
      check_mpi(MPI_Test(&buckets[k].request, &done, MPI_STATUS_IGNORE),
                "BucketedAllreduce: MPI_Test");
    }
  }

  void on_gradient(std::size_t i, const Tensor& g) {
    deposit(i, g);
    log(BucketEvent::Kind::GradientReady, i);
    start_ready_buckets();
    progress();
  }

  void end_step() {
    hooks.clear();
    attached = false;
    std::fill(arrived.begin(), arrived.end(), false);
    for (auto& b : buckets) b.arrived = 0;
    next_to_start = 0;
    last_events = std::move(events);
    events.clear();
  }
};

BucketedAllreduce::BucketedAllreduce(Communicator comm, std::vector<Variable> variables,
                                     BucketOptions options) {
  const char* what = "BucketedAllreduce";
  auto state = comm.state_;
  state->require_usable(what);
  if (options.bucket_bytes == 0)
    throw InvalidArgument("BucketedAllreduce: bucket_bytes must be positive");
  detail::Signature signature;
  for (const auto& v : variables) {
    detail::require_floating(what, v.dtype());
    signature.add_variable(v);
  }
  detail::require_same_signature(*state, signature, what);
  impl_ = std::make_unique<Impl>(std::move(comm), std::move(state), std::move(variables), options);

  // Last variable first: a model's last layer gets its gradients first in the backward pass.
  Impl& m = *impl_;
  const std::size_t n = m.variables.size();
  m.bucket_of.assign(n, 0);
  m.slot_in_bucket.assign(n, 0);
  m.arrived.assign(n, false);
  std::size_t bytes = 0;
  std::size_t elements = 0;
  for (std::size_t k = n; k-- > 0;) {
    const Variable& v = m.variables[k];
    const std::size_t size = num_elements(v.shape());
    const std::size_t v_bytes = size * detail::element_size(v.dtype());
    const bool fits = !m.buckets.empty() && m.buckets.back().buffer->dtype() == v.dtype() &&
                      bytes + v_bytes <= options.bucket_bytes;
    if (!fits) {
      if (!m.buckets.empty()) m.buckets.back().buffer->resize(elements);
      m.buckets.emplace_back();
      m.buckets.back().buffer = std::make_shared<Buffer>(v.dtype());
      bytes = 0;
      elements = 0;
    }
    Bucket& b = m.buckets.back();
    m.bucket_of[k] = m.buckets.size() - 1;
    m.slot_in_bucket[k] = b.variables.size();
    b.variables.push_back(k);
    b.offsets.push_back(elements);
    bytes += v_bytes;
    elements += size;
  }
  if (!m.buckets.empty()) m.buckets.back().buffer->resize(elements);
}

BucketedAllreduce::~BucketedAllreduce() {
  if (!impl_) return;
  // A step abandoned midway leaves collectives in flight: their buffers must outlive them.
  for (auto& b : impl_->buckets) {
    if (b.request != MPI_REQUEST_NULL) impl_->state->abandoned.push_back(b.buffer);
  }
}

void BucketedAllreduce::attach(GradientTape& tape) {
  Impl& m = *impl_;
  if (m.attached) {
    throw TapeError("BucketedAllreduce::attach: a step is already attached; call finish() first");
  }
  m.state->require_usable("BucketedAllreduce::attach");
  m.attached = true;
  m.attached_at = std::chrono::steady_clock::now();
  if (!m.options.overlap || m.state->size == 1) return;  // one rank: nothing to overlap
  for (std::size_t i = 0; i < m.variables.size(); ++i) {
    Impl* self = &m;  // the hooks go before the reducer does (end_step, or the destructor)
    m.hooks.push_back(tape.register_hook(m.variables[i], [self, i](const Tensor& g) {
      self->on_gradient(i, g);
      return g;
    }));
  }
}

std::vector<Tensor> BucketedAllreduce::finish(const std::vector<Tensor>& local_grads) {
  Impl& m = *impl_;
  const char* what = "BucketedAllreduce::finish";
  m.state->require_usable(what);
  if (local_grads.size() != m.variables.size()) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(local_grads.size()) +
                          " gradients for " + std::to_string(m.variables.size()) + " variables");
  }
  m.hooks.clear();  // no hook may fire while the buffers are read
  m.log(BucketEvent::Kind::FinishCalled, 0);
  if (m.state->size == 1) {
    // One rank: the sum and the mean are the gradients themselves; no copies.
    std::vector<Tensor> out(m.variables.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const Variable& v = m.variables[i];
      out[i] = local_grads[i].defined() ? local_grads[i] : zeros(v.shape(), v.dtype());
      m.check_gradient(i, out[i]);
    }
    m.last_wait_seconds = 0.0;
    m.end_step();
    return out;
  }
  try {
    for (std::size_t i = 0; i < m.variables.size(); ++i) {
      if (m.arrived[i]) continue;
      const Variable& v = m.variables[i];
      m.deposit(i, local_grads[i].defined() ? local_grads[i] : zeros(v.shape(), v.dtype()));
    }
    m.start_ready_buckets();
  } catch (...) {
    // Nothing was started for the rest: the step can be retried from attach().
    if (m.next_to_start == 0) m.end_step();
    throw;
  }

  std::vector<MPI_Request> requests;
  std::size_t elements = 0;
  for (std::size_t k = 0; k < m.buckets.size(); ++k) {
    requests.push_back(m.buckets[k].request);
    elements += m.buckets[k].buffer->elements();
  }
  const auto start = std::chrono::steady_clock::now();
  auto keep_alive = std::make_shared<std::vector<std::shared_ptr<Buffer>>>();
  for (auto& b : m.buckets) keep_alive->push_back(b.buffer);
  detail::wait_all(*m.state, requests, what,
                   "bucketed allreduce of " + std::to_string(elements) + " elements in " +
                       std::to_string(m.buckets.size()) + " bucket(s)",
                   keep_alive);
  m.last_wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& b : m.buckets) b.request = MPI_REQUEST_NULL;

  const int divisor = m.options.reduction == Reduction::Mean ? m.state->size : 1;
  std::vector<Tensor> out(m.variables.size());
  for (std::size_t i = 0; i < m.variables.size(); ++i) {
    const Bucket& b = m.buckets[m.bucket_of[i]];
    out[i] = b.buffer->read(b.offsets[m.slot_in_bucket[i]], m.variables[i].shape(), divisor);
  }
  m.end_step();
  return out;
}

std::size_t BucketedAllreduce::num_buckets() const { return impl_->buckets.size(); }

std::vector<std::size_t> BucketedAllreduce::bucket_variables(std::size_t b) const {
  if (b >= impl_->buckets.size()) {
    throw InvalidArgument("BucketedAllreduce::bucket_variables: bucket " + std::to_string(b) +
                          " of " + std::to_string(impl_->buckets.size()));
  }
  return impl_->buckets[b].variables;
}

const std::vector<BucketEvent>& BucketedAllreduce::last_step_events() const {
  return impl_->last_events;
}

double BucketedAllreduce::last_wait_seconds() const { return impl_->last_wait_seconds; }

}  // namespace tapegrad::distributed
