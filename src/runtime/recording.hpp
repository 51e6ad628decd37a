// The one way an op records itself, called right after its forward computed the result:
//
//   record(kSin, {&x}, out);                                   // inputs by pointer
//   record(kConcat, values, out, [&] { return Attrs().set("axis", axis); });
//
// With no tape and no forward accumulator active on the thread this is one thread-local load:
// the attributes are built only when something may observe the op.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "runtime/op_definition.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad::detail {

// Number of tapes recording on this thread.
extern thread_local std::size_t active_tape_count;
// Tapes recording plus forward accumulators observing plus vectorized_map traces on this
// thread, plus one while a DetectAnomaly scope is alive: the one word an op with nothing observing
// it loads.
extern thread_local std::size_t active_observer_count;
// Recomputes active_observer_count; called by whatever changed one of its parts.
void refresh_observer_count() noexcept;

inline bool any_tape_active() noexcept { return active_tape_count != 0; }
inline bool any_observer() noexcept { return active_observer_count != 0; }

// An op's inputs as the caller has them: `{&x, &y}` or a vector of tensors.
class OpInputs {
 public:
  // The list itself is held (a shallow copy): its array lives until the caller's statement ends.
  OpInputs(std::initializer_list<const Tensor*> pointers)  // NOLINT: braced lists convert
      : list_(pointers), size_(pointers.size()) {}
  OpInputs(const std::vector<const Tensor*>& pointers)  // NOLINT
      : pointers_(pointers.data()), size_(pointers.size()) {}
  OpInputs(const std::vector<Tensor>& values)  // NOLINT
      : values_(values.data()), size_(values.size()) {}
  std::size_t size() const { return size_; }
  const Tensor& operator[](std::size_t i) const {
    if (list_.size() != 0) return *list_.begin()[i];
    return pointers_ != nullptr ? *pointers_[i] : values_[i];
  }

 private:
  std::initializer_list<const Tensor*> list_;
  const Tensor* const* pointers_ = nullptr;
  const Tensor* values_ = nullptr;
  std::size_t size_;
};

// An op's outputs: one tensor or a vector of them.
class OpOutputs {
 public:
  OpOutputs(const Tensor& output) : data_(&output), size_(1) {}  // NOLINT
  OpOutputs(const std::vector<Tensor>& outputs)                  // NOLINT
      : data_(outputs.data()), size_(outputs.size()) {}
  std::size_t size() const { return size_; }
  const Tensor& operator[](std::size_t i) const { return data_[i]; }
  const Tensor* data() const { return data_; }

 private:
  const Tensor* data_;
  std::size_t size_;
};

// Records the op on every active tape that watches one of its floating inputs, then gives its
// outputs tangents on every active forward accumulator on which an input carries one. Only
// when any_observer(). `attrs` and `custom_backward` may be null.
void record_on_tapes(const OpDefinition& op, OpInputs inputs, OpOutputs outputs, const Attrs* attrs,
                     const SparseGradientFunction* custom_backward);

struct NoAttrs {};

// `make_attrs`, when given, is a callable returning the op's Attrs.
template <class MakeAttrs = NoAttrs>
inline void record(const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
                   MakeAttrs&& make_attrs = {}) {
  if (!any_observer()) return;
  if constexpr (std::is_same_v<std::decay_t<MakeAttrs>, NoAttrs>) {
    record_on_tapes(op, inputs, outputs, nullptr, nullptr);
  } else {
    const Attrs attrs = make_attrs();
    record_on_tapes(op, inputs, outputs, &attrs, nullptr);
  }
}

}  // namespace tapegrad::detail
