// This thread's tapes: which exist, which record right now, and pausing. Every tape belongs
// to the thread that created it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/tape.hpp"

namespace tapegrad::detail {

// How one tape stands on the thread that created it. Shared by the GradientTape, its
// RecordingGuards, its running backward calls and the creating thread's tape list, so that
// any of them may outlive the others (a guard outliving its tape, a tape destroyed on another
// thread) without touching freed memory. Everything but `destroyed` and `recording` is read
// and written on the owner thread only.
struct TapeState {
  TapeState(std::shared_ptr<TapeImpl> tape, std::uint64_t creation_serial,
            std::shared_ptr<std::atomic<bool>> owner_sweep)
      : impl(std::move(tape)), serial(creation_serial), sweep(std::move(owner_sweep)) {}
  bool on_owner_thread() const { return std::this_thread::get_id() == owner; }

  std::shared_ptr<TapeImpl> impl;  // null once a non-persistent tape is used, or destroyed
  const std::thread::id owner = std::this_thread::get_id();
  const std::uint64_t serial;                // creation order on the owner thread
  std::atomic<bool> recording{true};         // the tape's own flag (stop_recording / record)
  bool consumed = false;                     // a non-persistent tape's one walk has started
  bool ended = false;                        // end_recording(): no guard or record() resumes it
  int backward_depth = 0;                    // this tape's gradient()/jacobian() calls running
  std::atomic<bool> destroyed{false};        // its GradientTape is gone (on whichever thread)
  std::shared_ptr<std::atomic<bool>> sweep;  // the owner thread's "drop destroyed tapes" flag
};

// This thread's tapes that record right now (recording, not paused, not used up), in
// creation order. What record_on_tapes and variable reads walk.
const std::vector<TapeImpl*>& tape_stack();

// A new tape on this thread, recording.
std::shared_ptr<TapeState> register_tape(std::shared_ptr<TapeImpl> tape);
// Owner thread only: the tape's own recording flag, or its end. Never throw.
void set_recording(TapeState& state, bool recording) noexcept;
void unregister_tape(TapeState& state) noexcept;
// Any other thread: the tape is gone; its owner thread drops it at its next tape operation
// or recorded op (a destructor cannot report misuse, and must not touch another thread's list).
void abandon_tape(TapeState& state) noexcept;

// A bare TapeImpl recording on this thread for one scope (the functional forms).
void push_tape(TapeImpl* tape);
void pop_tape(TapeImpl* tape) noexcept;

// Pauses, for its lifetime, every tape that exists on this thread when it starts
// (custom_gradient runs its forward this way; TF: the thread's "stopped" flag). The tapes
// keep their own recording flags and their place in the thread's list: a stop_recording(),
// record(), gradient() or destruction of a paused tape inside the pause is an ordinary flag
// change. Tapes created inside the pause record as usual. Pauses nest.
class PauseAllTapes {
 public:
  PauseAllTapes();
  ~PauseAllTapes();
  PauseAllTapes(const PauseAllTapes&) = delete;
  PauseAllTapes& operator=(const PauseAllTapes&) = delete;

 private:
  std::uint64_t previous_boundary_;
};

}  // namespace tapegrad::detail
