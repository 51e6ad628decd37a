// The tape: recording an op as a compact entry, releasing it, and accounting for its bytes.
#include <algorithm>
#include <iostream>
#include <mutex>
#include <new>
#include <type_traits>
#include <unordered_set>
#include <variant>

#include "kernels/buffer_cache.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape_stack.hpp"
#include "runtime/warn.hpp"

namespace tapegrad::detail {

namespace {

// Per depth of nesting (the tapes recording on the thread when a tape is made), the number of
// ids the last tape of that depth mapped: a program records the same ops step after step, so
// its next tape's id map starts at that size instead of doubling its way there from 16 cells
// (each doubling re-inserts every id). Capped, so that one huge tape costs the next tape of
// its depth at most 32,768 cells (384 KiB). A hint only: a tape destroyed on another thread
// leaves its size there.
constexpr std::size_t kRememberedDepths = 8;
constexpr std::size_t kMostExpectedKeys = std::size_t{1} << 14;
std::size_t* expected_tape_keys(std::size_t depth) {
  thread_local std::size_t keys[kRememberedDepths] = {};
  return depth < kRememberedDepths ? &keys[depth] : nullptr;
}

}  // namespace

TapeImpl::TapeImpl(bool persistent, bool watch_accessed_variables)
    : persistent_(persistent),
      watch_accessed_variables_(watch_accessed_variables),
      depth_(tape_stack().size()) {
  if (const std::size_t* keys = expected_tape_keys(depth_)) tensor_tape_.expect(*keys);
}

void TapeImpl::remember_size() const {
  std::size_t* keys = expected_tape_keys(depth_);
  if (keys != nullptr && tensor_tape_.size() != 0) {
    *keys = std::min(tensor_tape_.size(), kMostExpectedKeys);
  }
}

void TapeImpl::forget_producers() {
  remember_size();
  tensor_tape_ = IdMap<std::int32_t>();
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
  auto pos = std::lower_bound(watched_variables_.begin(), watched_variables_.end(), v,
                              [](const Variable& a, const Variable& b) { return a.id() < b.id(); });
  if (pos == watched_variables_.end() || pos->id() != v.id()) watched_variables_.insert(pos, v);
  if (is_floating(v.dtype())) tensor_tape_.try_emplace(v.handle().id(), kWatched);
}

namespace {

// Which tensors an entry keeps, given the op's definition as registered now. A custom
// backward captures what it needs; a user op without a gradient yet keeps everything, in case
// one is registered before gradient() runs.
void resolve_keeps(const OpDefinition& op, bool has_custom_backward, KeepSet& inputs,
                   KeepSet& outputs) {
  inputs = op.keep_inputs;
  outputs = op.keep_outputs;
  if (has_custom_backward || op.kind == GradientKind::NotDifferentiable) {
    inputs = outputs = KeepSet::none();
  } else if (op.kind == GradientKind::Registered) {
    if (const UserGradient* g = registered_gradient(op)) {
      inputs = g->keep_inputs;
      outputs = g->keep_outputs;
    }
  }
}

}  // namespace

void TapeImpl::record(const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
                      const Attrs* attrs, const SparseGradientFunction* custom_backward) {
  const std::size_t n_inputs = inputs.size();
  const std::size_t n_outputs = outputs.size();
  if (n_inputs > UINT16_MAX || n_outputs > UINT16_MAX || ops_.size() >= INT32_MAX) {
    throw InvalidArgument(std::string("GradientTape: cannot record '") + op.name + "' with " +
                          std::to_string(n_inputs) + " inputs and " + std::to_string(n_outputs) +
                          " outputs on a tape of " + std::to_string(ops_.size()) +
                          " ops (limits: 65535 inputs or outputs, 2^31 - 1 ops)");
  }
  const bool has_custom_backward = custom_backward != nullptr && *custom_backward;
  const bool has_attrs = attrs != nullptr && !attrs->empty();
  KeepSet keep_inputs = KeepSet::none();
  KeepSet keep_outputs = KeepSet::none();
  resolve_keeps(op, has_custom_backward, keep_inputs, keep_outputs);
  const auto keeps_input = [&](std::size_t i) { return keep_inputs.keeps(i); };
  const auto keeps_output = [&](std::size_t i) { return keep_outputs.keeps(i); };

  OpEntry e;
  e.op = &op;
  e.n_inputs = static_cast<std::uint16_t>(n_inputs);
  e.n_outputs = static_cast<std::uint16_t>(n_outputs);
  if (has_attrs || has_custom_backward) e.flags |= OpEntry::kHasExtras;
  for (std::size_t i = 0; i < n_inputs && (e.flags & OpEntry::kKeepsInputs) == 0; ++i) {
    if (keeps_input(i)) e.flags |= OpEntry::kKeepsInputs;
  }
  for (std::size_t i = 0; i < n_outputs && (e.flags & OpEntry::kKeepsOutputs) == 0; ++i) {
    if (keeps_output(i)) e.flags |= OpEntry::kKeepsOutputs;
  }
  // One arena block: the descriptions, then what the entry keeps.
  const std::size_t description_bytes = (n_inputs + n_outputs) * sizeof(RecordedTensor);
  e.tensors = static_cast<RecordedTensor*>(
      arena_.allocate(description_bytes + e.kept_bytes(), alignof(RecordedTensor)));
  for (std::size_t i = 0; i < n_inputs; ++i) describe(impl_of(inputs[i]), e.tensors + i);
  for (std::size_t i = 0; i < n_outputs; ++i) {
    describe(impl_of(outputs[i]), e.tensors + n_inputs + i);
  }

  if (e.flags != 0) {
    // Trivially relocatable handles built in place: the entry destroys them (release_kept).
    if ((e.flags & OpEntry::kHasExtras) != 0) {
      auto* extras = new (e.kept()) EntryExtras();
      if (has_attrs) extras->attrs = std::make_unique<const Attrs>(*attrs);
      if (has_custom_backward) {
        extras->custom_backward = std::make_unique<const SparseGradientFunction>(*custom_backward);
      }
    }
    if (Tensor* saved = e.saved_inputs()) {
      for (std::size_t i = 0; i < n_inputs; ++i) {
        new (saved + i) Tensor(keeps_input(i) ? inputs[i] : Tensor());
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
  for (std::size_t i = 0; i < n_outputs; ++i) tensor_tape_.assign(impl_of(outputs[i]).id, op_id);
}

namespace {

// A loop, not std::equal: for size_t ranges std::equal calls memcmp, which cost more than the
// rest of describing a tensor of rank 0 or 1.
bool same_dims(const std::size_t* a, const std::size_t* b, std::size_t rank) {
  for (std::size_t i = 0; i < rank; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

const TensorType* TapeImpl::intern_type(DType dtype, const std::size_t* dims, std::size_t rank) {
  for (const TensorType* t : recent_types_) {
    if (t != nullptr && t->dtype == dtype && t->rank == rank && same_dims(dims, t->dims, rank)) {
      return t;
    }
  }
  void* block =
      arena_.allocate(sizeof(TensorType) + rank * sizeof(std::size_t), alignof(TensorType));
  auto* stored_dims = reinterpret_cast<std::size_t*>(static_cast<TensorType*>(block) + 1);
  std::copy(dims, dims + rank, stored_dims);
  // Trivially destructible: the arena owns the bytes and frees them with the tape.
  const TensorType* t =
      new (block) TensorType{dtype, static_cast<std::uint32_t>(rank), stored_dims};
  recent_types_[next_recent_type_] = t;
  next_recent_type_ = (next_recent_type_ + 1) % kRecentTypes;
  return t;
}

void TapeImpl::describe(const TensorImpl& impl, RecordedTensor* out) {
  const TensorImpl::DimsRef dims = impl.dims_ref();
  new (out) RecordedTensor{impl.id, intern_type(impl.dtype, dims.data, dims.size)};
}

bool RecordedTensor::same_shape(const Tensor& t) const {
  const TensorImpl::DimsRef actual = impl_of(t).dims_ref();
  return actual.size == type->rank && same_dims(actual.data, type->dims, actual.size);
}

const RecordedTensor& RecordedTensors::at(std::size_t i) const {
  if (i >= size_) {
    throw InvalidArgument("OpContext: index " + std::to_string(i) + " is out of range for " +
                          std::to_string(size_) + " tensors");
  }
  return data_[i];
}

void OpEntry::release_kept() {
  if (flags == 0) return;
  if (Tensor* saved = saved_inputs()) {
    for (std::size_t i = 0; i < n_inputs; ++i) saved[i].~Tensor();
  }
  if (Tensor* saved = saved_outputs()) {
    for (std::size_t i = 0; i < n_outputs; ++i) saved[i].~Tensor();
  }
  if ((flags & kHasExtras) != 0) reinterpret_cast<EntryExtras*>(kept())->~EntryExtras();
  flags = 0;
}

void TapeImpl::release(std::int64_t op_id) { entry(op_id).release_kept(); }

TapeImpl::~TapeImpl() {
  for (auto& e : ops_) e.release_kept();
  remember_size();
}

namespace {

// The heap bytes behind one tensor handle that the tape keeps: its storage block (the
// TensorImpl with the shared_ptr's control block, kernels/impl_blocks.hpp), a large rank's
// dimensions, and the elements' buffer unless another kept handle's counted it already (views
// share their base's; a view's contiguous copy, once built, is a buffer of its own).
std::size_t tensor_footprint(const Tensor& t, std::unordered_set<const TensorImpl*>& buffers) {
  const TensorImpl& impl = impl_of(t);
  std::size_t bytes =
      malloc_footprint((impl.is_view() ? sizeof(TensorViewImpl) : sizeof(TensorImpl)) + 16);
  // The array of a base, once however many kept views read it.
  auto count_buffer = [&](const TensorImpl& owner) {
    if (!buffers.insert(&owner).second) return;
    std::visit(
        [&](const auto& a) {
          using T = typename std::decay_t<decltype(a)>::value_type;
          // A whole size class of the buffer cache.
          if (a.size() > 0) bytes += buffer_class_bytes(a.size() * sizeof(T));
          if (a.dimension() > 4) bytes += 3 * malloc_footprint(a.dimension() * sizeof(std::size_t));
        },
        owner.data);
  };
  count_buffer(impl.buffer_owner());
  if (impl.is_view()) {
    // Its dimensions and strides are inline up to rank 4.
    if (impl.rank() > 4) {
      bytes += malloc_footprint(impl.rank() * sizeof(std::size_t)) +
               malloc_footprint(impl.rank() * sizeof(std::ptrdiff_t));
    }
    if (const auto copy = impl.as_view().materialized_if_built()) {
      bytes += malloc_footprint(sizeof(TensorImpl) + 16);
      count_buffer(*copy);
    }
  }
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
  std::unordered_set<const TensorImpl*> buffers;
  auto count = [&](const Tensor& t) {
    if (t.defined() && counted.insert(&impl_of(t)).second) bytes += tensor_footprint(t, buffers);
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

}  // namespace tapegrad::detail
