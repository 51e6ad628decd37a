// This thread's forward accumulators, and ForwardAccumulator itself.
#include "runtime/forward_accumulator.hpp"

#include <algorithm>
#include <string>

#include "runtime/warn.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/forward.hpp"

namespace tapegrad::detail {

thread_local std::size_t active_accumulator_count = 0;

namespace {

// Every accumulator created on this thread and not yet dropped, in creation order. Pausing
// counts per accumulator; the observing count is recomputed after every change (a handful).
struct ThreadAccumulators {
  std::vector<std::shared_ptr<AccumulatorState>> live;
  std::uint64_t next_serial = 1;
  // Set by another thread that destroyed one of this thread's accumulators.
  std::shared_ptr<std::atomic<bool>> sweep = std::make_shared<std::atomic<bool>>(false);

  void refresh() noexcept {
    if (sweep->exchange(false, std::memory_order_acquire)) {
      live.erase(std::remove_if(live.begin(), live.end(),
                                [](const std::shared_ptr<AccumulatorState>& a) {
                                  return a->destroyed.load(std::memory_order_acquire);
                                }),
                 live.end());
    }
    std::size_t observing = 0;
    for (const auto& a : live) {
      if (a->paused == 0 && !a->destroyed.load(std::memory_order_relaxed)) ++observing;
    }
    active_accumulator_count = observing;
    refresh_observer_count();
  }
};

ThreadAccumulators& thread_accumulators() {
  thread_local ThreadAccumulators accumulators;
  return accumulators;
}

}  // namespace

std::shared_ptr<AccumulatorState> register_accumulator() {
  ThreadAccumulators& accs = thread_accumulators();
  auto state = std::make_shared<AccumulatorState>(accs.next_serial++, accs.sweep);
  accs.live.push_back(state);
  accs.refresh();
  return state;
}

void unregister_accumulator(AccumulatorState& state) noexcept {
  ThreadAccumulators& accs = thread_accumulators();
  state.destroyed.store(true, std::memory_order_release);
  auto it =
      std::find_if(accs.live.begin(), accs.live.end(),
                   [&](const std::shared_ptr<AccumulatorState>& a) { return a.get() == &state; });
  if (it != accs.live.end()) accs.live.erase(it);
  accs.refresh();
}

void abandon_accumulator(AccumulatorState& state) noexcept {
  state.destroyed.store(true, std::memory_order_release);
  state.sweep->store(true, std::memory_order_release);
}

PauseAccumulators::PauseAccumulators(const AccumulatorState* from) {
  ThreadAccumulators& accs = thread_accumulators();
  for (const auto& a : accs.live) {
    if (from == nullptr || a->serial >= from->serial) paused_.push_back(a);
  }
  for (const auto& a : paused_) ++a->paused;
  accs.refresh();
}

PauseAccumulators::~PauseAccumulators() {
  for (const auto& a : paused_) --a->paused;
  thread_accumulators().refresh();
}

// The observing accumulators, oldest first; drops those another thread destroyed.
std::vector<std::shared_ptr<AccumulatorState>> observing_accumulators() {
  ThreadAccumulators& accs = thread_accumulators();
  if (accs.sweep->load(std::memory_order_relaxed)) accs.refresh();
  std::vector<std::shared_ptr<AccumulatorState>> observing;
  for (const auto& a : accs.live) {
    if (a->paused == 0 && !a->destroyed.load(std::memory_order_relaxed)) observing.push_back(a);
  }
  return observing;
}

bool any_input_carries_tangent(OpInputs inputs) {
  ThreadAccumulators& accs = thread_accumulators();
  if (accs.sweep->load(std::memory_order_relaxed)) accs.refresh();
  for (const auto& a : accs.live) {
    if (a->paused != 0 || a->destroyed.load(std::memory_order_relaxed)) continue;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (is_floating(inputs[i].dtype()) && a->tangent(inputs[i].id()) != nullptr) return true;
    }
  }
  return false;
}

}  // namespace tapegrad::detail

namespace tapegrad {

namespace {

void check_pairs(const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents) {
  if (primals.size() != tangents.size()) {
    throw InvalidArgument("ForwardAccumulator: " + std::to_string(primals.size()) +
                          " primals but " + std::to_string(tangents.size()) +
                          " tangents; give one tangent per primal");
  }
  for (std::size_t i = 0; i < primals.size(); ++i) {
    const std::string which = std::to_string(i);
    if (!primals[i].defined())
      throw InvalidArgument("ForwardAccumulator: primal " + which + " is undefined");
    if (!tangents[i].defined())
      throw InvalidArgument("ForwardAccumulator: tangent " + which + " is undefined");
    const Tensor& p = primals[i];
    const Tensor& t = tangents[i];
    if (p.shape() != t.shape() || p.dtype() != t.dtype()) {
      throw InvalidArgument("ForwardAccumulator: tangent " + which + " has shape " +
                            shape_to_string(t.shape()) + " and dtype " + dtype_name(t.dtype()) +
                            ", but its primal has shape " + shape_to_string(p.shape()) +
                            " and dtype " + dtype_name(p.dtype()) +
                            "; a tangent must match its primal");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (primals[j].id() == p.id()) {
        throw InvalidArgument("ForwardAccumulator: primal " + which + " is primal " +
                              std::to_string(j) + " again; give each primal once");
      }
    }
  }
}

}  // namespace

ForwardAccumulator::ForwardAccumulator(const std::vector<Tensor>& primals,
                                       const std::vector<Tensor>& tangents) {
  check_pairs(primals, tangents);
  state_ = detail::register_accumulator();
  for (std::size_t i = 0; i < primals.size(); ++i) {
    if (!is_floating(primals[i].dtype())) {
      detail::warn_once("forward-integer-primal",
                        "ForwardAccumulator: a watched primal must be float32 or float64; a " +
                            std::string(dtype_name(primals[i].dtype())) +
                            " primal gets no tangent");
      continue;
    }
    state_->tangents.emplace(primals[i].id(), tangents[i]);
  }
}

ForwardAccumulator::ForwardAccumulator(const Tensor& primal, const Tensor& tangent)
    : ForwardAccumulator(std::vector<Tensor>{primal}, std::vector<Tensor>{tangent}) {}

ForwardAccumulator::~ForwardAccumulator() {
  if (state_->on_owner_thread()) {
    detail::unregister_accumulator(*state_);
  } else {
    detail::abandon_accumulator(*state_);
  }
}

Tensor ForwardAccumulator::jvp(const Tensor& t, UnconnectedGradients unconnected) const {
  if (!state_->on_owner_thread()) {
    throw TapeError(
        "ForwardAccumulator::jvp: called on another thread than the one that created the "
        "accumulator; an accumulator belongs to the thread that created it (it observes only "
        "that thread's ops, and is used there)");
  }
  if (!t.defined()) throw InvalidArgument("ForwardAccumulator::jvp: the tensor is undefined");
  if (const Tensor* tangent = state_->tangent(t.id())) return *tangent;
  return unconnected == UnconnectedGradients::Zero ? zeros_like(t) : Tensor();
}

}  // namespace tapegrad
