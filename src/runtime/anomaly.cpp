// DetectAnomaly: the scope's thread-local settings and the checks, forward and backward.
#include "runtime/anomaly.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>

#include "kernels/dispatch.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/tape_stack.hpp"
#include "tapegrad/diagnostics.hpp"

namespace tapegrad::detail {

thread_local bool anomaly_scope_alive = false;

struct AnomalyScopeState {
  AnomalyScopeState(bool nan_, bool inf_, std::shared_ptr<std::atomic<bool>> sweep_)
      : nan(nan_), inf(inf_), sweep(std::move(sweep_)) {}
  const bool nan;
  const bool inf;
  std::atomic<bool> destroyed{false};
  // The creating thread's flag: set when this scope is destroyed on another thread.
  const std::shared_ptr<std::atomic<bool>> sweep;
};

namespace {

struct AnomalySettings {
  bool nan = true;
  bool inf = true;
};

// The scopes created on this thread and not yet destroyed, in creation order. A count alone
// would not do: scopes may end in any order (unique_ptrs reset out of order), and the settings
// that apply are those of the newest scope still alive, so each scope must be found and
// removed by identity.
struct ThreadScopes {
  std::vector<std::shared_ptr<AnomalyScopeState>> live;
  std::shared_ptr<std::atomic<bool>> sweep = std::make_shared<std::atomic<bool>>(false);
  AnomalySettings current;

  void refresh() noexcept {
    if (sweep->exchange(false, std::memory_order_acquire)) {
      live.erase(std::remove_if(live.begin(), live.end(),
                                [](const std::shared_ptr<AnomalyScopeState>& s) {
                                  return s->destroyed.load(std::memory_order_acquire);
                                }),
                 live.end());
    }
    current =
        live.empty() ? AnomalySettings{} : AnomalySettings{live.back()->nan, live.back()->inf};
    anomaly_scope_alive = !live.empty();
    refresh_observer_count();
  }
};

ThreadScopes& thread_scopes() {
  thread_local ThreadScopes scopes;
  return scopes;
}

const AnomalySettings& settings() { return thread_scopes().current; }

thread_local int walks_running = 0;

enum class Finding { None, NaN, Infinity };

// The first value the scope looks for in t (floating tensors only).
Finding find_anomaly(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return Finding::None;
  const AnomalySettings& s = settings();
  return dispatch_floating("DetectAnomaly", t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (const T v : detail::kernel_array<T>(t)) {
      if (s.nan && std::isnan(v)) return Finding::NaN;
      if (s.inf && std::isinf(v)) return Finding::Infinity;
    }
    return Finding::None;
  });
}

const char* finding_name(Finding f) { return f == Finding::NaN ? "NaN" : "an infinity"; }

std::string tensor_text(const Tensor& t) {
  if (!t.defined()) return "none";
  return shape_to_string(t.shape()) + " " + dtype_name(t.dtype());
}

template <class List>
std::string list_text(const List& tensors, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? ", " : "") + tensor_text(tensors[i]);
  return "[" + out + "]";
}

// "op 7 on the tape, after 'Mul' (op 6), 'Add' (op 5), 'Tanh' (op 4)".
std::string position_text(const TapeImpl& tape, std::int64_t index) {
  std::string out = "op " + std::to_string(index) + " on the tape";
  std::string before;
  for (std::int64_t i = index - 1; i >= 0 && i >= index - 3; --i) {
    before += std::string(before.empty() ? "" : ", ") + "'" + tape.entry(i).op->name + "' (op " +
              std::to_string(i) + ")";
  }
  return out + (before.empty() ? ", its first op" : ", after " + before);
}

}  // namespace

bool anomaly_scopes_remain() noexcept {
  ThreadScopes& scopes = thread_scopes();
  if (scopes.sweep->load(std::memory_order_relaxed)) scopes.refresh();  // one died elsewhere
  return anomaly_scope_alive;
}

AnomalyBackwardScope::AnomalyBackwardScope() noexcept { ++walks_running; }
AnomalyBackwardScope::~AnomalyBackwardScope() { --walks_running; }

void check_forward_outputs(const OpDefinition& op, OpInputs inputs, OpOutputs outputs) {
  if (walks_running > 0 || computing_on_placeholders()) return;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const Finding f = find_anomaly(outputs[j]);
    if (f == Finding::None) continue;
    std::vector<Tensor> in;
    for (std::size_t i = 0; i < inputs.size(); ++i) in.push_back(inputs[i]);
    bool inputs_clean = true;
    for (const Tensor& t : in) inputs_clean = inputs_clean && find_anomaly(t) == Finding::None;
    const std::vector<TapeImpl*>& tapes = tape_stack();
    const std::string where =
        tapes.empty() ? "no tape records it"
                      : "it would be " +
                            position_text(*tapes.back(),
                                          static_cast<std::int64_t>(tapes.back()->num_entries()));
    throw AnomalyError("DetectAnomaly: the forward of '" + std::string(op.name) + "' produced " +
                       finding_name(f) + " in output " + std::to_string(j) + " (outputs " +
                       list_text(outputs, outputs.size()) + ", inputs " + list_text(in, in.size()) +
                       (inputs_clean ? ", every input finite" : ", an input already holds one") +
                       "); " + where);
  }
}

void check_backward_gradients(const TapeImpl& tape, std::int64_t op_index,
                              const std::vector<GradientValue>& input_gradients,
                              const std::vector<Tensor>& output_gradients) {
  if (computing_on_placeholders()) return;
  for (std::size_t i = 0; i < input_gradients.size(); ++i) {
    if (!input_gradients[i].defined()) continue;
    const Tensor dense = input_gradients[i].is_sparse() ? input_gradients[i].sparse().values
                                                        : input_gradients[i].dense();
    const Finding f = find_anomaly(dense);
    if (f == Finding::None) continue;
    bool upstream_clean = true;
    for (const Tensor& g : output_gradients)
      upstream_clean = upstream_clean && find_anomaly(g) == Finding::None;
    const OpEntry& e = tape.entry(op_index);
    std::string inputs;
    for (const auto& r : e.inputs()) {
      inputs += std::string(inputs.empty() ? "" : ", ") + shape_to_string(r.full_shape()) + " " +
                dtype_name(r.dtype());
    }
    throw AnomalyError("DetectAnomaly: the backward of '" + std::string(e.op->name) +
                       "' produced " + finding_name(f) + " in the gradient for input " +
                       std::to_string(i) + " (inputs [" + inputs + "], output gradients " +
                       list_text(output_gradients, output_gradients.size()) +
                       (upstream_clean ? ", every output gradient finite"
                                       : ", an output gradient already holds one") +
                       "); " + position_text(tape, op_index));
  }
}

}  // namespace tapegrad::detail

namespace tapegrad {

DetectAnomaly::DetectAnomaly(bool nan, bool inf) {
  if (detail::live_trace_count.load(std::memory_order_relaxed) != 0) {
    detail::note_eager_only("a DetectAnomaly scope in fn (a replay would skip its checks)");
  }
  detail::ThreadScopes& scopes = detail::thread_scopes();
  state_ = std::make_shared<detail::AnomalyScopeState>(nan, inf, scopes.sweep);
  scopes.live.push_back(state_);
  scopes.refresh();
}

DetectAnomaly::~DetectAnomaly() {
  state_->destroyed.store(true, std::memory_order_release);
  // On its own thread the scope leaves the list now; anywhere else it flags the creating
  // thread (alive or not: the flag is shared), which drops it before its next check.
  detail::ThreadScopes& here = detail::thread_scopes();
  if (state_->sweep == here.sweep) {
    auto& live = here.live;
    live.erase(std::remove(live.begin(), live.end(), state_), live.end());
    here.refresh();
  } else {
    state_->sweep->store(true, std::memory_order_release);
  }
}

}  // namespace tapegrad
