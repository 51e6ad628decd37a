// The recording hot path every op calls after computing its result.
#pragma once

#include <initializer_list>

#include "runtime/op_registry.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad::detail {

// Number of tapes active on this thread. Kept as a plain thread_local so that an op with no
// active tape pays one thread-local load.
extern thread_local std::size_t active_tape_count;

inline bool any_tape_active() noexcept { return active_tape_count != 0; }

// Records the op on every active tape that watches one of its floating inputs. Call only
// when any_tape_active().
void record_on_tapes(const OpSlot& op, const Tensor* const* inputs, std::size_t n_inputs,
                     const Tensor* outputs, std::size_t n_outputs, const Attrs& attrs = Attrs(),
                     const SparseGradientFunction& custom_backward = {});

// The usual case: a few inputs, one output, no attributes. With no active tape this is one
// thread-local load: nothing else is built.
inline void maybe_record(const OpSlot& op, std::initializer_list<const Tensor*> inputs,
                         const Tensor& output) {
  if (any_tape_active()) record_on_tapes(op, inputs.begin(), inputs.size(), &output, 1);
}

// With attributes: build them only after any_tape_active() said a tape may record.
inline void maybe_record(const OpSlot& op, std::initializer_list<const Tensor*> inputs,
                         const Tensor& output, const Attrs& attrs) {
  if (any_tape_active()) record_on_tapes(op, inputs.begin(), inputs.size(), &output, 1, attrs);
}

}  // namespace tapegrad::detail
