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
#include "runtime/recording.hpp"
#include "runtime/tape_arena.hpp"
#include "runtime/tensor_impl.hpp"
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

// One recorded op: 24 bytes, plus one block in the tape's arena holding its tensors'
// descriptions (16 bytes each) and, when it keeps anything, its extras and one Tensor per
// kept-side slot right after them. Shapes and dtypes are always kept; tensors only where the
// gradient reads them (OpDefinition::keep_*), and they are dropped as soon as a non-persistent
// tape has used the entry. A long chain of small ops is mostly entries, hence the packing.
struct OpEntry {
  enum Flags : std::uint8_t { kHasExtras = 1, kKeepsInputs = 2, kKeepsOutputs = 4 };

  const OpDefinition* op = nullptr;
  // The inputs, then the outputs; then, while flags != 0,
  // [EntryExtras if kHasExtras][n_inputs Tensors if kKeepsInputs][n_outputs if kKeepsOutputs];
  // the Tensors are undefined where not kept.
  RecordedTensor* tensors = nullptr;
  std::uint16_t n_inputs = 0;
  std::uint16_t n_outputs = 0;
  std::uint8_t flags = 0;

  RecordedTensors inputs() const { return RecordedTensors(tensors, n_inputs); }
  RecordedTensors outputs() const { return RecordedTensors(tensors + n_inputs, n_outputs); }
  const EntryExtras* extras() const {
    return (flags & kHasExtras) != 0 ? reinterpret_cast<const EntryExtras*>(kept()) : nullptr;
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
    return (flags & kKeepsInputs) != 0 ? reinterpret_cast<Tensor*>(kept() + extras_bytes())
                                       : nullptr;
  }
  Tensor* saved_outputs() const {
    if ((flags & kKeepsOutputs) == 0) return nullptr;
    return reinterpret_cast<Tensor*>(kept() + extras_bytes()) +
           ((flags & kKeepsInputs) != 0 ? n_inputs : 0);
  }
  // Where what the entry owns starts: right after the descriptions.
  std::byte* kept() const { return reinterpret_cast<std::byte*>(tensors + n_inputs + n_outputs); }
  // True until release_kept(): the entry still owns kept tensors or extras.
  bool holds_kept() const { return flags != 0; }
  std::size_t extras_bytes() const { return (flags & kHasExtras) != 0 ? sizeof(EntryExtras) : 0; }
  std::size_t kept_bytes() const {
    return extras_bytes() + sizeof(Tensor) * (((flags & kKeepsInputs) != 0 ? n_inputs : 0) +
                                              ((flags & kKeepsOutputs) != 0 ? n_outputs : 0));
  }
  // Destroys what the entry owns (the arena keeps the bytes until the tape is cleared).
  void release_kept();
};
static_assert(alignof(EntryExtras) <= alignof(RecordedTensor) &&
                  alignof(Tensor) <= alignof(RecordedTensor),
              "the kept block follows the descriptions without padding");

constexpr std::int32_t kWatched = -1;

class TapeImpl {
 public:
  TapeImpl(bool persistent, bool watch_accessed_variables);

  bool persistent() const { return persistent_; }
  bool watch_accessed_variables() const { return watch_accessed_variables_; }

  // Floating tensors only: ops on integer or bool tensors are never recorded.
  bool is_watched(std::uint64_t id) const { return tensor_tape_.contains(id); }
  void watch(const Tensor& t);
  void watch_variable(const Variable& v);
  const std::vector<Variable>& watched_variables() const { return watched_variables_; }

  // Appends an entry for an op; its outputs become watched.
  void record(const OpDefinition& op, OpInputs inputs, OpOutputs outputs, const Attrs* attrs,
              const SparseGradientFunction* custom_backward);

  // The producing entry of a tensor id, kWatched for a watched tensor, or nullptr.
  const std::int32_t* producer(std::uint64_t id) const { return tensor_tape_.find(id); }
  OpEntry& entry(std::int64_t op_id) { return ops_[static_cast<std::size_t>(op_id)]; }
  const OpEntry& entry(std::int64_t op_id) const { return ops_[static_cast<std::size_t>(op_id)]; }
  std::size_t num_entries() const { return ops_.size(); }
  void release(std::int64_t op_id);
  // After a non-persistent tape's walk is planned nothing looks tensors up again: its id map
  // is freed before the walk allocates, so the backward pass starts below the forward's peak.
  void forget_producers();
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
  // Leaves the id map's size as the next tape's expectation at this depth (tape.cpp).
  void remember_size() const;
  // Describes a tensor (id, dtype, dimensions) in the arena.
  void describe(const TensorImpl& impl, RecordedTensor* out);
  const TensorType* intern_type(DType dtype, const std::size_t* dims, std::size_t rank);

  bool persistent_;
  bool watch_accessed_variables_;
  // The tapes recording on the thread when this one was made: its depth among nested tapes.
  std::size_t depth_;
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

}  // namespace tapegrad::detail
