// Internal side of the gradient registry: one stable slot per op type.
#pragma once

#include <atomic>
#include <string>

#include "tapegrad/registry.hpp"

namespace tapegrad::detail {

// How to differentiate one op type. Immutable once published.
struct GradientSpec {
  GradientFunction dense;         // set for register_gradient
  SparseGradientFunction sparse;  // set for register_sparse_gradient and built-ins
  Keep keep_inputs = Keep::all();
  Keep keep_outputs = Keep::all();
  bool not_differentiable = false;
  // The gradient is the output's gradient, unchanged: a row-sparse one is passed on as is.
  bool identity_gradient = false;
};

// A registry slot: created on first mention of an op type (recording or registering), never
// moved or freed, so ops cache a reference to it and the hot path never hashes a string.
class OpSlot {
 public:
  explicit OpSlot(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  // nullptr until a gradient or not_differentiable is registered.
  const GradientSpec* spec() const { return spec_.load(std::memory_order_acquire); }

 private:
  friend class Registry;
  std::string name_;
  std::atomic<const GradientSpec*> spec_{nullptr};
};

// The slot for `op_type`, created if new. Thread-safe.
OpSlot& op_slot(const std::string& op_type);

// Built-in ops define their gradient once, from a function-local static:
//   static const OpSlot& op = define_op("Mul", mul_grad, Keep::all(), Keep::none());
const OpSlot& define_op(const std::string& op_type, SparseGradientFunction fn,
                        Keep keep_inputs = Keep::all(), Keep keep_outputs = Keep::all());
const OpSlot& define_not_differentiable_op(const std::string& op_type);
// One input, one output, gradient = output gradient (Identity, ReadVariableOp).
const OpSlot& define_identity_op(const std::string& op_type);

}  // namespace tapegrad::detail
