// This thread's tapes and pausing, and the recording entry point that walks them.
#include "runtime/tape_stack.hpp"

#include <algorithm>

#include "runtime/anomaly.hpp"
#include "runtime/floating_dtype.hpp"
#include "runtime/forward_accumulator.hpp"
#include "runtime/op_trace.hpp"

namespace tapegrad::detail {

thread_local std::size_t active_tape_count = 0;
thread_local std::size_t active_observer_count = 0;

namespace {

// Every tape created on this thread and not yet destroyed, and which of them record. The
// list is never swapped out: pausing moves a boundary, stop_recording flips a flag, and the
// recording set is recomputed from the flags after every change (a handful of tapes).
struct ThreadTapes {
  std::vector<std::shared_ptr<TapeState>> live;  // creation order
  std::vector<TapeImpl*> active;                 // capacity >= live.size(): refresh never allocates
  std::uint64_t next_serial = 1;
  // Tapes with serial <= this are paused (0: no pause). TF keeps one "stopped" flag per
  // thread; a boundary does the same for the tapes that existed when the pause began and
  // lets tapes created inside it record.
  std::uint64_t paused_through = 0;
  // Set by another thread that destroyed one of this thread's tapes.
  std::shared_ptr<std::atomic<bool>> sweep = std::make_shared<std::atomic<bool>>(false);

  void drop_destroyed() noexcept {
    if (!sweep->exchange(false, std::memory_order_acquire)) return;
    const auto destroyed = [](const std::shared_ptr<TapeState>& t) {
      return t->destroyed.load(std::memory_order_acquire);
    };
    // The tape's records go back on the thread that made them.
    for (const auto& t : live) {
      if (destroyed(t)) t->impl.reset();
    }
    live.erase(std::remove_if(live.begin(), live.end(), destroyed), live.end());
  }

  void refresh() noexcept {
    drop_destroyed();
    active.clear();
    for (const auto& t : live) {
      if (t->impl && !t->consumed && t->serial > paused_through &&
          t->recording.load(std::memory_order_relaxed)) {
        active.push_back(t->impl.get());
      }
    }
    active_tape_count = active.size();
    refresh_observer_count();
  }
};

ThreadTapes& thread_tapes() {
  thread_local ThreadTapes tapes;
  return tapes;
}

}  // namespace

const std::vector<TapeImpl*>& tape_stack() {
  ThreadTapes& tapes = thread_tapes();
  if (tapes.sweep->load(std::memory_order_relaxed)) tapes.refresh();  // a tape died elsewhere
  return tapes.active;
}

std::shared_ptr<TapeState> register_tape(std::shared_ptr<TapeImpl> tape) {
  ThreadTapes& tapes = thread_tapes();
  auto state = std::make_shared<TapeState>(std::move(tape), tapes.next_serial++, tapes.sweep);
  tapes.live.push_back(state);
  if (tapes.active.capacity() < tapes.live.size()) tapes.active.reserve(2 * tapes.live.size());
  tapes.refresh();
  return state;
}

void set_recording(TapeState& state, bool recording) noexcept {
  state.recording.store(recording, std::memory_order_relaxed);
  thread_tapes().refresh();
}

void unregister_tape(TapeState& state) noexcept {
  ThreadTapes& tapes = thread_tapes();
  state.destroyed.store(true, std::memory_order_release);
  state.recording.store(false, std::memory_order_relaxed);
  auto it = std::find_if(tapes.live.begin(), tapes.live.end(),
                         [&](const std::shared_ptr<TapeState>& t) { return t.get() == &state; });
  // Keep the records alive past the erase: a guard or a running walk may still hold `state`.
  std::shared_ptr<TapeImpl> impl = std::move(state.impl);
  if (it != tapes.live.end()) tapes.live.erase(it);
  tapes.refresh();
}

void abandon_tape(TapeState& state) noexcept {
  state.destroyed.store(true, std::memory_order_release);
  state.recording.store(false, std::memory_order_relaxed);
  state.sweep->store(true, std::memory_order_release);
}

void push_tape(TapeImpl* tape) {
  // Not owned: the caller keeps the tape alive until pop_tape.
  register_tape(std::shared_ptr<TapeImpl>(std::shared_ptr<TapeImpl>(), tape));
}

void pop_tape(TapeImpl* tape) noexcept {
  ThreadTapes& tapes = thread_tapes();
  auto it =
      std::find_if(tapes.live.rbegin(), tapes.live.rend(),
                   [&](const std::shared_ptr<TapeState>& t) { return t->impl.get() == tape; });
  if (it != tapes.live.rend()) {
    (*it)->destroyed.store(true, std::memory_order_release);
    tapes.live.erase(std::next(it).base());
  }
  tapes.refresh();
}

PauseAllTapes::PauseAllTapes() {
  ThreadTapes& tapes = thread_tapes();
  previous_boundary_ = tapes.paused_through;
  tapes.paused_through = tapes.next_serial - 1;
  tapes.refresh();
}

PauseAllTapes::~PauseAllTapes() {
  ThreadTapes& tapes = thread_tapes();
  tapes.paused_through = previous_boundary_;
  tapes.refresh();
}

void refresh_observer_count() noexcept {
  active_observer_count = active_tape_count + active_accumulator_count + active_tracer_count +
                          (anomaly_scope_alive ? 1 : 0);
}

void record_on_tapes(const OpDefinition& op, OpInputs inputs, OpOutputs outputs, const Attrs* attrs,
                     const SparseGradientFunction* custom_backward) {
  if (anomaly_checks_active()) check_forward_outputs(op, inputs, outputs);
  if (any_tracer_active()) trace_op(op, inputs, outputs, attrs);  // every op, any dtype
  bool any_floating_output = false;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    any_floating_output = any_floating_output || floating(impl_of(outputs[i]).dtype);
  }
  if (!any_floating_output) return;  // nothing downstream could ever get a gradient
  for (TapeImpl* tape : tape_stack()) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorImpl& input = impl_of(inputs[i]);
      if (floating(input.dtype) && tape->is_watched(input.id)) {
        tape->record(op, inputs, outputs, attrs, custom_backward);
        break;
      }
    }
  }
  if (any_accumulator_active()) accumulate_tangents(op, inputs, outputs, attrs, custom_backward);
}

}  // namespace tapegrad::detail

namespace tapegrad {

bool should_record(const std::vector<Tensor>& inputs) {
  for (detail::TapeImpl* tape : detail::tape_stack()) {
    for (const auto& t : inputs) {
      if (t.defined() && is_floating(t.dtype()) && tape->is_watched(t.id())) return true;
    }
  }
  return false;
}

std::size_t tapes_on_this_thread() {
  detail::thread_tapes().refresh();
  return detail::thread_tapes().live.size();
}

}  // namespace tapegrad
