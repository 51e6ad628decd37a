// The tape: op entries and the map from tensor id to the entry that produced it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <memory_resource>
#include <vector>

#include "detail/gradient_hooks.hpp"
#include "detail/id_map.hpp"
#include "detail/op_registry.hpp"
#include "detail/tape_arena.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

// A gradient source: its id, dtype and shape (a Variable's source is its handle).
struct TensorMeta {
  std::uint64_t id;
  DType dtype;
  Shape shape;
};

// An input or output of a recorded op, without its elements. Its dimensions live in the
// tape's arena: 24 bytes plus 8 per dimension.
struct RecordedTensor {
  std::uint64_t id;
  DType dtype;
  std::uint32_t rank;
  const std::size_t* dims;

  Shape full_shape() const { return Shape(dims, dims + rank); }
  bool same_shape(const Tensor& t) const;
};

// A run of RecordedTensors in the arena.
class RecordedTensors {
 public:
  RecordedTensors() = default;
  RecordedTensors(RecordedTensor* data, std::uint32_t size) : data_(data), size_(size) {}
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const RecordedTensor& operator[](std::size_t i) const { return data_[i]; }
  const RecordedTensor& at(std::size_t i) const;
  const RecordedTensor* begin() const { return data_; }
  const RecordedTensor* end() const { return data_ + size_; }

 private:
  RecordedTensor* data_ = nullptr;
  std::uint32_t size_ = 0;
};

// One recorded op. Shapes and dtypes are always kept; tensors only where the gradient reads
// them (GradientSpec::keep_*), and they are dropped as soon as a non-persistent tape has
// used the entry. Kept small: a long chain of small ops is mostly entries.
struct OpEntry {
  const OpSlot* op = nullptr;
  RecordedTensors inputs;
  RecordedTensors outputs;
  // Empty when nothing is kept; otherwise one per input (output), undefined where not kept.
  std::vector<Tensor> saved_inputs;
  std::vector<Tensor> saved_outputs;
  std::unique_ptr<const Attrs> attrs;  // null when the op has none
  std::unique_ptr<const SparseGradientFunction> custom_backward;  // overrides the registry
};

constexpr std::int64_t kWatched = -1;

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
  const std::int64_t* producer(std::uint64_t id) const { return tensor_tape_.find(id); }
  OpEntry& entry(std::int64_t op_id) { return ops_[static_cast<std::size_t>(op_id)]; }
  std::size_t num_entries() const { return ops_.size(); }
  void release(std::int64_t op_id);
  // After a non-persistent tape's walk is planned nothing looks tensors up again: its id map
  // is freed before the walk allocates, so the backward pass starts below the forward's peak.
  void forget_producers() { tensor_tape_ = IdMap<std::int64_t>(); }
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

 private:
  // Describes n tensors (id, dtype, dimensions) in the arena; get(i) gives the i-th TensorImpl.
  template <class Get>
  RecordedTensors describe(std::size_t n, Get get);

  bool persistent_;
  bool watch_accessed_variables_;
  IdMap<std::int64_t> tensor_tape_;
  // Declared before ops_, so destroyed after the entries that point into it.
  TapeArena arena_;
  std::deque<OpEntry> ops_;  // op id = index; a deque keeps references stable while it grows
  std::vector<Variable> watched_variables_;
  std::shared_ptr<GradientHooks> hooks_;
};

// This thread's active tapes, outermost first.
std::vector<TapeImpl*>& tape_stack();
void push_tape(TapeImpl* tape);
void pop_tape(TapeImpl* tape);

// Stops every tape of this thread from recording for its lifetime (custom_gradient runs its
// forward this way). Tapes pushed and popped meanwhile (balanced, RAII) are unaffected; the
// paused ones go back underneath them, in their order, when the guard ends.
class PauseAllTapes {
 public:
  PauseAllTapes();
  ~PauseAllTapes();
  PauseAllTapes(const PauseAllTapes&) = delete;
  PauseAllTapes& operator=(const PauseAllTapes&) = delete;

 private:
  std::vector<TapeImpl*> paused_;
};

}  // namespace tapegrad::detail
