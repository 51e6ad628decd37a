// The tape: op entries and the map from tensor id to the entry that produced it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <memory_resource>
#include <thread>
#include <vector>

#include "runtime/gradient_hooks.hpp"
#include "runtime/id_map.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/tape_arena.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

// A gradient source: its id, dtype and shape (a Variable's source is its handle).
struct TensorMeta {
  std::uint64_t id;
  DType dtype;
  Shape shape;
};

// The dtype and dimensions of recorded tensors, shared by every RecordedTensor of that type
// (most ops of a program repeat a few shapes). Lives in the tape's arena.
struct TensorType {
  DType dtype;
  std::uint32_t rank;
  const std::size_t* dims;  // rank of them, right after this record
};

// An input or output of a recorded op, without its elements: 16 bytes in the tape's arena.
struct RecordedTensor {
  std::uint64_t id;
  const TensorType* type;

  DType dtype() const { return type->dtype; }
  std::size_t rank() const { return type->rank; }
  Shape full_shape() const { return Shape(type->dims, type->dims + type->rank); }
  bool same_shape(const Tensor& t) const;
};

// A run of RecordedTensors in the arena.
class RecordedTensors {
 public:
  RecordedTensors() = default;
  RecordedTensors(const RecordedTensor* data, std::uint32_t size) : data_(data), size_(size) {}
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const RecordedTensor& operator[](std::size_t i) const { return data_[i]; }
  const RecordedTensor& at(std::size_t i) const;
  const RecordedTensor* begin() const { return data_; }
  const RecordedTensor* end() const { return data_ + size_; }

 private:
  const RecordedTensor* data_ = nullptr;
  std::uint32_t size_ = 0;
};

// What few entries have: attributes, a custom backward (custom_gradient, recompute_grad).
struct EntryExtras {
  std::unique_ptr<const Attrs> attrs;                             // null when none
  std::unique_ptr<const SparseGradientFunction> custom_backward;  // overrides the registry
};

// One recorded op: 32 bytes, plus its tensors' descriptions (16 bytes each) and, when it keeps
// anything, one block in the arena holding its extras and one Tensor per kept-side slot.
// Shapes and dtypes are always kept; tensors only where the gradient reads them
// (GradientSpec::keep_*), and they are dropped as soon as a non-persistent tape has used the
// entry. A long chain of small ops is mostly entries, hence the packing.
struct OpEntry {
  enum Flags : std::uint8_t { kHasExtras = 1, kKeepsInputs = 2, kKeepsOutputs = 4 };

  const OpSlot* op = nullptr;
  const RecordedTensor* tensors = nullptr;  // the inputs, then the outputs
  // [EntryExtras if kHasExtras][n_inputs Tensors if kKeepsInputs][n_outputs if kKeepsOutputs];
  // the Tensors are undefined where not kept. Null when the entry owns nothing.
  std::byte* kept = nullptr;
  std::uint16_t n_inputs = 0;
  std::uint16_t n_outputs = 0;
  std::uint8_t flags = 0;

  RecordedTensors inputs() const { return RecordedTensors(tensors, n_inputs); }
  RecordedTensors outputs() const { return RecordedTensors(tensors + n_inputs, n_outputs); }
  const EntryExtras* extras() const {
    return (flags & kHasExtras) != 0 ? reinterpret_cast<const EntryExtras*>(kept) : nullptr;
  }
  const Attrs* attrs() const {
    const EntryExtras* x = extras();
    return x != nullptr ? x->attrs.get() : nullptr;
  }
  const SparseGradientFunction* custom_backward() const {
    const EntryExtras* x = extras();
    return x != nullptr ? x->custom_backward.get() : nullptr;
  }
  // The kept tensors, one per input (output), or null when that side keeps nothing.
  Tensor* saved_inputs() const {
    return (flags & kKeepsInputs) != 0 ? reinterpret_cast<Tensor*>(kept + extras_bytes()) : nullptr;
  }
  Tensor* saved_outputs() const {
    if ((flags & kKeepsOutputs) == 0) return nullptr;
    return reinterpret_cast<Tensor*>(kept + extras_bytes()) +
           ((flags & kKeepsInputs) != 0 ? n_inputs : 0);
  }
  std::size_t extras_bytes() const { return (flags & kHasExtras) != 0 ? sizeof(EntryExtras) : 0; }
  std::size_t kept_bytes() const {
    return extras_bytes() + sizeof(Tensor) * (((flags & kKeepsInputs) != 0 ? n_inputs : 0) +
                                              ((flags & kKeepsOutputs) != 0 ? n_outputs : 0));
  }
  // Destroys what `kept` holds (the arena keeps the bytes until the tape is cleared).
  void release_kept();
};

constexpr std::int32_t kWatched = -1;

class TapeImpl {
 public:
  TapeImpl(bool persistent, bool watch_accessed_variables)
      : persistent_(persistent), watch_accessed_variables_(watch_accessed_variables) {}

  bool persistent() const { return persistent_; }
  bool watch_accessed_variables() const { return watch_accessed_variables_; }

  // Floating tensors only: ops on integer or bool tensors are never recorded.
  bool is_watched(std::uint64_t id) const { return tensor_tape_.contains(id); }
  void watch(const Tensor& t);
  void watch_variable(const Variable& v);
  const std::vector<Variable>& watched_variables() const { return watched_variables_; }

  // Appends an entry for an op; its outputs become watched.
  void record(const OpSlot& op, const Tensor* const* inputs, std::size_t n_inputs,
              const Tensor* outputs, std::size_t n_outputs, const Attrs& attrs,
              const SparseGradientFunction& custom_backward);

  // The producing entry of a tensor id, kWatched for a watched tensor, or nullptr.
  const std::int32_t* producer(std::uint64_t id) const { return tensor_tape_.find(id); }
  OpEntry& entry(std::int64_t op_id) { return ops_[static_cast<std::size_t>(op_id)]; }
  std::size_t num_entries() const { return ops_.size(); }
  void release(std::int64_t op_id);
  // After a non-persistent tape's walk is planned nothing looks tensors up again: its id map
  // is freed before the walk allocates, so the backward pass starts below the forward's peak.
  void forget_producers() { tensor_tape_ = IdMap<std::int32_t>(); }
  // Everything the tape owns, in bytes: see the definition for what is counted.
  std::size_t bytes_held() const;
  void clear();

  // The hooks registered with GradientTape::register_hook, created on the first one (a tape
  // without hooks allocates nothing for them). Shared with the HookHandles only weakly: a
  // handle never keeps the tape alive.
  const std::shared_ptr<GradientHooks>& shared_hooks() {
    if (!hooks_) hooks_ = std::make_shared<GradientHooks>();
    return hooks_;
  }
  const GradientHooks& hooks() const { return *hooks_; }  // only when has_hooks()
  bool has_hooks() const noexcept { return hooks_ && !hooks_->empty(); }
  TapeImpl(const TapeImpl&) = delete;
  TapeImpl& operator=(const TapeImpl&) = delete;
  ~TapeImpl();

 private:
  // Describes n tensors (id, dtype, dimensions) in the arena; get(i) gives the i-th TensorImpl.
  void describe(const TensorImpl& impl, RecordedTensor* out);
  const TensorType* intern_type(DType dtype, const xt::svector<std::size_t, 4>& dims);

  bool persistent_;
  bool watch_accessed_variables_;
  IdMap<std::int32_t> tensor_tape_;  // op ids fit 31 bits: 12 bytes a cell, not 16
  // Declared before ops_, so destroyed after the entries that point into it.
  TapeArena arena_;
  std::deque<OpEntry> ops_;  // op id = index; a deque keeps references stable while it grows
  // The types most recently described, so that a repeated shape is stored once.
  static constexpr std::size_t kRecentTypes = 4;
  const TensorType* recent_types_[kRecentTypes] = {};
  std::size_t next_recent_type_ = 0;
  std::vector<Variable> watched_variables_;
  std::shared_ptr<GradientHooks> hooks_;
};

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
  const std::uint64_t serial;             // creation order on the owner thread
  std::atomic<bool> recording{true};      // the tape's own flag (stop_recording / record)
  bool consumed = false;                  // a non-persistent tape's one walk has started
  int backward_depth = 0;                 // this tape's gradient()/jacobian() calls running
  std::atomic<bool> destroyed{false};     // its GradientTape is gone (on whichever thread)
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
