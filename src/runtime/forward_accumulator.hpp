// This thread's forward accumulators (TF: the accumulator set of forwardprop), and the hook
// through which a recorded op gives its outputs tangents.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/recording.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// Number of accumulators observing ops on this thread (alive, not paused). Part of
// active_observer_count (recording.hpp).
extern thread_local std::size_t active_accumulator_count;

inline bool any_accumulator_active() noexcept { return active_accumulator_count != 0; }

// One ForwardAccumulator: the tangent of every tensor it has seen, by tensor id. Shared by the
// ForwardAccumulator and its thread's list, so either may go first (an accumulator destroyed
// on another thread). `tangents` and `paused` are touched on the owner thread only.
struct AccumulatorState {
  AccumulatorState(std::uint64_t creation_serial, std::shared_ptr<std::atomic<bool>> owner_sweep)
      : serial(creation_serial), sweep(std::move(owner_sweep)) {}
  bool on_owner_thread() const { return std::this_thread::get_id() == owner; }
  const Tensor* tangent(std::uint64_t id) const {
    auto it = tangents.find(id);
    return it == tangents.end() ? nullptr : &it->second;
  }

  const std::thread::id owner = std::this_thread::get_id();
  const std::uint64_t serial;  // creation order on the owner thread
  std::unordered_map<std::uint64_t, Tensor> tangents;
  int paused = 0;                            // pauses covering it (its own tangent work, ...)
  std::atomic<bool> destroyed{false};        // its ForwardAccumulator is gone
  std::shared_ptr<std::atomic<bool>> sweep;  // the owner thread's "drop destroyed ones" flag
};

// A new accumulator on this thread, observing.
std::shared_ptr<AccumulatorState> register_accumulator();
// Owner thread: the accumulator's end. Any other thread: marks it gone; the owner thread drops
// it at its next recorded op or accumulator operation. Never throw.
void unregister_accumulator(AccumulatorState& state) noexcept;
void abandon_accumulator(AccumulatorState& state) noexcept;

// The accumulators observing ops on this thread now, oldest first.
std::vector<std::shared_ptr<AccumulatorState>> observing_accumulators();
// Whether one of them holds a tangent for a floating input (no allocation: most ops run under
// an accumulator do not touch its primals).
bool any_input_carries_tangent(OpInputs inputs);

// For its lifetime, pauses `from` and every accumulator created after it on this thread (all
// of them when `from` is null). An accumulator computing tangents pauses itself and the
// accumulators nested in it, so that only the older ones observe its tangent ops (they get
// higher derivatives from them: TF). Accumulators created inside the pause observe as usual.
class PauseAccumulators {
 public:
  explicit PauseAccumulators(const AccumulatorState* from = nullptr);
  ~PauseAccumulators();
  PauseAccumulators(const PauseAccumulators&) = delete;
  PauseAccumulators& operator=(const PauseAccumulators&) = delete;

 private:
  std::vector<std::shared_ptr<AccumulatorState>> paused_;
};

// The recording hook (record_on_tapes): for each observing accumulator, oldest first, on which
// an input of the op carries a tangent, computes the outputs' tangents (the op's forward rule,
// else the transpose of its gradient) and stores them. Only floating outputs get tangents.
void accumulate_tangents(const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
                         const Attrs* attrs, const SparseGradientFunction* custom_backward);

}  // namespace tapegrad::detail
