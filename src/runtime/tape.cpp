// The tape itself and this thread's stack of active tapes.
#include <algorithm>
#include <new>
#include <iostream>
#include <mutex>
#include <type_traits>
#include <unordered_set>
#include <variant>

#include "runtime/recording.hpp"
#include "runtime/tape.hpp"
#include "runtime/warn.hpp"

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
  if (n_inputs > UINT16_MAX || n_outputs > UINT16_MAX || ops_.size() >= INT32_MAX) {
    throw InvalidArgument("GradientTape: cannot record '" + op.name() + "' with " +
                          std::to_string(n_inputs) + " inputs and " + std::to_string(n_outputs) +
                          " outputs on a tape of " + std::to_string(ops_.size()) +
                          " ops (limits: 65535 inputs or outputs, 2^31 - 1 ops)");
  }
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

  OpEntry e;
  e.op = &op;
  e.n_inputs = static_cast<std::uint16_t>(n_inputs);
  e.n_outputs = static_cast<std::uint16_t>(n_outputs);
  auto* tensors = static_cast<RecordedTensor*>(
      arena_.allocate((n_inputs + n_outputs) * sizeof(RecordedTensor), alignof(RecordedTensor)));
  for (std::size_t i = 0; i < n_inputs; ++i) describe(inputs[i]->impl(), tensors + i);
  for (std::size_t i = 0; i < n_outputs; ++i) describe(outputs[i].impl(), tensors + n_inputs + i);
  e.tensors = tensors;

  if (!attrs.empty() || custom_backward) e.flags |= OpEntry::kHasExtras;
  for (std::size_t i = 0; i < n_inputs && (e.flags & OpEntry::kKeepsInputs) == 0; ++i) {
    if (keeps_input(i)) e.flags |= OpEntry::kKeepsInputs;
  }
  for (std::size_t i = 0; i < n_outputs && (e.flags & OpEntry::kKeepsOutputs) == 0; ++i) {
    if (keeps_output(i)) e.flags |= OpEntry::kKeepsOutputs;
  }
  if (e.flags != 0) {
    // Trivially relocatable handles built in place: the entry destroys them (release_kept).
    e.kept = static_cast<std::byte*>(arena_.allocate(e.kept_bytes(), alignof(EntryExtras)));
    if ((e.flags & OpEntry::kHasExtras) != 0) {
      auto* extras = new (e.kept) EntryExtras();
      if (!attrs.empty()) extras->attrs = std::make_unique<const Attrs>(attrs);
      if (custom_backward) {
        extras->custom_backward = std::make_unique<const SparseGradientFunction>(custom_backward);
      }
    }
    if (Tensor* saved = e.saved_inputs()) {
      for (std::size_t i = 0; i < n_inputs; ++i) {
        new (saved + i) Tensor(keeps_input(i) ? *inputs[i] : Tensor());
      }
    }
    if (Tensor* saved = e.saved_outputs()) {
      for (std::size_t i = 0; i < n_outputs; ++i) {
        new (saved + i) Tensor(keeps_output(i) ? outputs[i] : Tensor());
      }
    }
  }
  ops_.push_back(e);
  const auto op_id = static_cast<std::int32_t>(ops_.size() - 1);
  for (std::size_t i = 0; i < n_outputs; ++i) tensor_tape_.assign(outputs[i].impl().id, op_id);
}

const TensorType* TapeImpl::intern_type(DType dtype, const xt::svector<std::size_t, 4>& dims) {
  for (const TensorType* t : recent_types_) {
    if (t != nullptr && t->dtype == dtype && t->rank == dims.size() &&
        std::equal(dims.begin(), dims.end(), t->dims)) {
      return t;
    }
  }
  void* block = arena_.allocate(sizeof(TensorType) + dims.size() * sizeof(std::size_t),
                                alignof(TensorType));
  auto* stored_dims = reinterpret_cast<std::size_t*>(static_cast<TensorType*>(block) + 1);
  std::copy(dims.begin(), dims.end(), stored_dims);
  // Trivially destructible: the arena owns the bytes and frees them with the tape.
  const TensorType* t = new (block)
      TensorType{dtype, static_cast<std::uint32_t>(dims.size()), stored_dims};
  recent_types_[next_recent_type_] = t;
  next_recent_type_ = (next_recent_type_ + 1) % kRecentTypes;
  return t;
}

void TapeImpl::describe(const TensorImpl& impl, RecordedTensor* out) {
  new (out) RecordedTensor{impl.id, intern_type(impl.dtype, impl.dims())};
}

bool RecordedTensor::same_shape(const Tensor& t) const {
  const auto actual = t.impl().dims();
  return actual.size() == type->rank && std::equal(actual.begin(), actual.end(), type->dims);
}

const RecordedTensor& RecordedTensors::at(std::size_t i) const {
  if (i >= size_) {
    throw InvalidArgument("OpContext: index " + std::to_string(i) + " is out of range for " +
                          std::to_string(size_) + " tensors");
  }
  return data_[i];
}

void OpEntry::release_kept() {
  if (kept == nullptr) return;
  if (Tensor* saved = saved_inputs()) {
    for (std::size_t i = 0; i < n_inputs; ++i) saved[i].~Tensor();
  }
  if (Tensor* saved = saved_outputs()) {
    for (std::size_t i = 0; i < n_outputs; ++i) saved[i].~Tensor();
  }
  if ((flags & kHasExtras) != 0) reinterpret_cast<EntryExtras*>(kept)->~EntryExtras();
  kept = nullptr;
  flags = 0;
}

void TapeImpl::release(std::int64_t op_id) { entry(op_id).release_kept(); }

TapeImpl::~TapeImpl() {
  for (auto& e : ops_) e.release_kept();
}

namespace {

// What the allocator hands out for a request of n bytes (glibc: 8 bytes of header, rounded up
// to 16, at least 32): close to what malloc_usable_size would say, without asking it.
std::size_t malloc_footprint(std::size_t n) {
  if (n == 0) return 0;
  return std::max<std::size_t>(32, (n + 8 + 15) / 16 * 16);
}

// The heap bytes behind one tensor handle that the tape keeps: its storage block (the
// TensorImpl with the shared_ptr's control block, built by make_shared), the elements, and the
// array's and the cached Shape's dynamic dimensions.
std::size_t tensor_footprint(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  std::size_t bytes = malloc_footprint(sizeof(TensorImpl) + 16);
  std::visit(
      [&](const auto& a) {
        using T = typename std::decay_t<decltype(a)>::value_type;
        // posix_memalign: an alignment above malloc's own 16 costs up to that much more.
        constexpr std::size_t kExtra = XTENSOR_DEFAULT_ALIGNMENT > 16 ? XTENSOR_DEFAULT_ALIGNMENT : 0;
        bytes += malloc_footprint(a.size() * sizeof(T) + (a.size() > 0 ? kExtra : 0));
        if (a.dimension() > 4) bytes += 3 * malloc_footprint(a.dimension() * sizeof(std::size_t));
      },
      impl.data);
  return bytes;
}

}  // namespace

// Counted: the entries (the deque's blocks), the arena's chunks (tensor descriptions, extras,
// kept handles), the id map's cells, the watched-variable list, and once each the tensors the
// entries keep: their storage block, elements and dynamic dimensions, as the allocator sizes
// them. Not counted: what a kept tensor's Attrs or closure allocates on the heap.
std::size_t TapeImpl::bytes_held() const {
  std::size_t bytes = sizeof(TapeImpl);
  constexpr std::size_t kDequeBlock = 512;  // libstdc++'s node size
  bytes += (ops_.size() * sizeof(OpEntry) + kDequeBlock - 1) / kDequeBlock * kDequeBlock;
  bytes += arena_.bytes_reserved();
  bytes += tensor_tape_.bytes_reserved();
  bytes += watched_variables_.capacity() * sizeof(Variable);
  std::unordered_set<const TensorImpl*> counted;
  auto count = [&](const Tensor& t) {
    if (t.defined() && counted.insert(&t.impl()).second) bytes += tensor_footprint(t);
  };
  for (const auto& e : ops_) {
    if (const Tensor* saved = e.saved_inputs()) {
      for (std::size_t i = 0; i < e.n_inputs; ++i) count(saved[i]);
    }
    if (const Tensor* saved = e.saved_outputs()) {
      for (std::size_t i = 0; i < e.n_outputs; ++i) count(saved[i]);
    }
    if (e.attrs() != nullptr) bytes += malloc_footprint(sizeof(Attrs));
    if (e.custom_backward() != nullptr) bytes += malloc_footprint(sizeof(SparseGradientFunction));
  }
  return bytes;
}

void TapeImpl::clear() {
  tensor_tape_.clear();
  for (auto& e : ops_) e.release_kept();
  ops_.clear();
  arena_.release();
  for (auto& t : recent_types_) t = nullptr;
  next_recent_type_ = 0;
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
