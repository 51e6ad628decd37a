// The tape itself and this thread's stack of active tapes.
#include <algorithm>
#include <new>
#include <iostream>
#include <mutex>
#include <unordered_set>

#include "detail/recording.hpp"
#include "detail/tape_impl.hpp"
#include "detail/warn.hpp"

namespace tapegrad::detail {

thread_local std::size_t active_tape_count = 0;

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
  auto it = std::find_if(tapes.live.rbegin(), tapes.live.rend(),
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

void TapeImpl::watch(const Tensor& t) {
  if (!is_floating(t.dtype())) {
    warn_once("watch-dtype", std::string("GradientTape::watch: the dtype of a watched tensor must "
                                         "be floating (float32 or float64), got ") +
                                 dtype_name(t.dtype()) + "; it will get no gradient");
    return;
  }
  tensor_tape_.try_emplace(t.id(), kWatched);
}

void TapeImpl::watch_variable(const Variable& v) {
  auto pos = std::lower_bound(
      watched_variables_.begin(), watched_variables_.end(), v,
      [](const Variable& a, const Variable& b) { return a.id() < b.id(); });
  if (pos == watched_variables_.end() || pos->id() != v.id()) watched_variables_.insert(pos, v);
  if (is_floating(v.dtype())) tensor_tape_.try_emplace(v.handle().id(), kWatched);
}

void TapeImpl::record(const OpSlot& op, const Tensor* const* inputs, std::size_t n_inputs,
                      const Tensor* outputs, std::size_t n_outputs, const Attrs& attrs,
                      const SparseGradientFunction& custom_backward) {
  const GradientSpec* spec = op.spec();
  // A custom backward captures what it needs; an op without a spec yet keeps everything in
  // case its gradient is registered before gradient() runs.
  const bool keep_nothing = static_cast<bool>(custom_backward) ||
                            (spec != nullptr && spec->not_differentiable);
  const auto keeps_input = [&](std::size_t i) {
    return !keep_nothing && (spec == nullptr || spec->keep_inputs.keeps(i));
  };
  const auto keeps_output = [&](std::size_t i) {
    return !keep_nothing && (spec == nullptr || spec->keep_outputs.keeps(i));
  };

  OpEntry& e = ops_.emplace_back();
  e.op = &op;
  if (!attrs.empty()) e.attrs = std::make_unique<const Attrs>(attrs);
  if (custom_backward) {
    e.custom_backward = std::make_unique<const SparseGradientFunction>(custom_backward);
  }
  e.inputs = describe(n_inputs, [&](std::size_t i) -> const TensorImpl& { return inputs[i]->impl(); });
  for (std::size_t i = 0; i < n_inputs; ++i) {
    if (!keeps_input(i)) continue;
    if (e.saved_inputs.empty()) e.saved_inputs.resize(n_inputs);
    e.saved_inputs[i] = *inputs[i];
  }
  e.outputs = describe(n_outputs, [&](std::size_t i) -> const TensorImpl& { return outputs[i].impl(); });
  const auto op_id = static_cast<std::int64_t>(ops_.size() - 1);
  for (std::size_t i = 0; i < n_outputs; ++i) {
    if (keeps_output(i)) {
      if (e.saved_outputs.empty()) e.saved_outputs.resize(n_outputs);
      e.saved_outputs[i] = outputs[i];
    }
    tensor_tape_.assign(outputs[i].impl().id, op_id);
  }
}

template <class Get>
RecordedTensors TapeImpl::describe(std::size_t n, Get get) {
  std::size_t total_dims = 0;
  for (std::size_t i = 0; i < n; ++i) total_dims += get(i).rank();
  void* block = arena_.allocate(n * sizeof(RecordedTensor) + total_dims * sizeof(std::size_t),
                                alignof(RecordedTensor));
  auto* tensors = static_cast<RecordedTensor*>(block);
  auto* dims = reinterpret_cast<std::size_t*>(tensors + n);
  for (std::size_t i = 0; i < n; ++i) {
    const TensorImpl& impl = get(i);
    const auto shape = impl.dims();
    std::copy(shape.begin(), shape.end(), dims);
    // Trivially destructible: the arena owns the bytes and frees them with the tape.
    new (tensors + i) RecordedTensor{impl.id, impl.dtype, static_cast<std::uint32_t>(shape.size()), dims};
    dims += shape.size();
  }
  return RecordedTensors(tensors, static_cast<std::uint32_t>(n));
}

bool RecordedTensor::same_shape(const Tensor& t) const {
  const auto actual = t.impl().dims();
  return actual.size() == rank && std::equal(actual.begin(), actual.end(), dims);
}

const RecordedTensor& RecordedTensors::at(std::size_t i) const {
  if (i >= size_) {
    throw InvalidArgument("OpContext: index " + std::to_string(i) + " is out of range for " +
                          std::to_string(size_) + " tensors");
  }
  return data_[i];
}

void TapeImpl::release(std::int64_t op_id) {
  OpEntry& e = entry(op_id);
  e.saved_inputs.clear();
  e.saved_inputs.shrink_to_fit();
  e.saved_outputs.clear();
  e.saved_outputs.shrink_to_fit();
  e.custom_backward.reset();
}

namespace {
std::size_t element_bytes(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}
}  // namespace

std::size_t TapeImpl::bytes_held() const {
  std::unordered_set<std::uint64_t> counted;
  std::size_t bytes = 0;
  auto count = [&](const Tensor& t) {
    if (t.defined() && counted.insert(t.id()).second) bytes += t.size() * element_bytes(t.dtype());
  };
  for (const auto& e : ops_) {
    for (const auto& t : e.saved_inputs) count(t);
    for (const auto& t : e.saved_outputs) count(t);
  }
  return bytes;
}

void TapeImpl::clear() {
  tensor_tape_.clear();
  ops_.clear();
  arena_.release();
  watched_variables_.clear();
}

void record_on_tapes(const OpSlot& op, const Tensor* const* inputs, std::size_t n_inputs,
                     const Tensor* outputs, std::size_t n_outputs, const Attrs& attrs,
                     const SparseGradientFunction& custom_backward) {
  bool any_floating_output = false;
  for (std::size_t i = 0; i < n_outputs; ++i) {
    any_floating_output = any_floating_output || is_floating(outputs[i].dtype());
  }
  if (!any_floating_output) return;  // nothing downstream could ever get a gradient
  for (TapeImpl* tape : tape_stack()) {
    for (std::size_t i = 0; i < n_inputs; ++i) {
      const auto& impl = inputs[i]->impl();
      if (is_floating(impl.dtype) && tape->is_watched(impl.id)) {
        tape->record(op, inputs, n_inputs, outputs, n_outputs, attrs, custom_backward);
        break;
      }
    }
  }
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

}  // namespace tapegrad

namespace tapegrad {

std::size_t tapes_on_this_thread() {
  detail::thread_tapes().refresh();
  return detail::thread_tapes().live.size();
}

}  // namespace tapegrad
