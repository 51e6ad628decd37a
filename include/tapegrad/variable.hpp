// Variable: mutable, named, trainable state (TF: tf.Variable).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

namespace detail {
struct VariableImpl;
struct VariableAccess;
}  // namespace detail

/// A shared handle to mutable state: copies of a Variable are the same variable.
/// Reading it (`value()` or the conversion to Tensor) on a thread with active tapes makes every
/// tape whose `watch_accessed_variables` is on watch it, when it is trainable.
/// `assign*` install a new Tensor; a tape keeps the value it read, so an assignment never
/// changes a computation that was already recorded.
class Variable {
 public:
  /// InvalidArgument when `initial` is undefined.
  explicit Variable(Tensor initial, bool trainable = true, std::string name = "");
  // Out of line, as Tensor's: a copy or destruction is an atomic count on the shared state.
  Variable(const Variable& other);
  Variable(Variable&& other) noexcept = default;
  Variable& operator=(const Variable& other);
  Variable& operator=(Variable&& other) noexcept;
  ~Variable();

  /// The current value; a read that the active tapes may watch (see above).
  Tensor value() const;
  operator Tensor() const { return value(); }  // NOLINT(google-explicit-constructor)

  /// Install a new value of the same shape and dtype (InvalidArgument otherwise).
  void assign(const Tensor& value);
  /// value + delta / value - delta, same shape and dtype (InvalidArgument otherwise).
  void assign_add(const Tensor& delta);
  void assign_sub(const Tensor& delta);

  bool trainable() const;
  const std::string& name() const;
  /// Creation order: increases with each new Variable of the process.
  std::uint64_t id() const;
  DType dtype() const;
  Shape shape() const;

  /// The current value without notifying any tape (for optimizers and printing). A Function
  /// still reads it afresh at each replay.
  Tensor peek() const;
  /// The tensor that stands for the variable on a tape: gradients w.r.t. the variable are
  /// gradients w.r.t. this handle. It holds no elements: an op given it (or array() on it)
  /// throws InvalidArgument saying it is a variable handle; pass the Variable or value().
  const Tensor& handle() const;

  bool operator==(const Variable& other) const { return impl_ == other.impl_; }
  bool operator!=(const Variable& other) const { return impl_ != other.impl_; }

 private:
  friend struct detail::VariableAccess;  // the runtime's way to the stored value
  std::shared_ptr<detail::VariableImpl> impl_;
};

}  // namespace tapegrad
