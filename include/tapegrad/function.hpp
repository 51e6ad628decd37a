// Record once, run many: tapegrad::function traces an eager function on its first call with a
// new signature and replays the trace on later calls. TF: tf.function; JAX: jax.jit; CppAD:
// ADFun. The guide's "Record once, run many" says when to use it and what it cannot see.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

namespace detail {
struct FunctionState;
}

/// How a Function keeps and replays its traces.
struct FunctionOptions {
  /// Signatures (each argument's dtype and shape, and which arguments are one tensor) kept;
  /// the least recently used one is dropped, with a one-time warning, when a new one would
  /// exceed it. At least 1.
  std::size_t max_traces = 16;
  /// Drop the traced ops that no result and no Variable assignment needs, and replay each run
  /// of elementwise ops on float tensors of one shape as one loop (the same scalar functions:
  /// still bit for bit the eager result). With false the replay runs every traced op, one
  /// kernel each.
  bool optimize = true;
};

/// A traced function (see function()). Copies share the traces; calls from several threads at
/// once are safe (each call replays into values of its own; the traces are kept under a lock,
/// and threads that trace one signature at once each trace it, one trace being kept).
class Function {
 public:
  /// fn(args): the eager call while tracing a new signature, a replay of its trace after.
  /// Under tapes and forward accumulators (TF: tf.function under a GradientTape), a traced
  /// signature is one recorded op "Function" whose value is the replay and whose gradient is
  /// a Function too (fn's forward and backward, traced once; one op again under an outer
  /// tape, so higher orders, jacobian and hessian work); the Variables fn reads through
  /// value() are its inputs, as eager. fn runs eagerly, its ops seen one by one, on the first
  /// call of a signature under them, for a trace that assigns Variables or runs an
  /// optimizer's update, and while a vectorized_map trace or DetectAnomaly scope observes the
  /// thread. It runs eagerly on every call for a signature whose trace cannot be replayed (a
  /// one-time warning names why: fn read a tensor's values from C++, drew random numbers,
  /// created a Variable, opened a DetectAnomaly scope, or ran an op with no replay rule: a
  /// user primitive, boolean_mask's positions, dropout).
  /// InvalidArgument ("function: ...") for an undefined argument or a variable handle.
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;
  /// How many times fn was traced (one per new signature, and again after its trace was
  /// dropped).
  std::size_t trace_count() const;

 private:
  friend Function function(std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
                           FunctionOptions options);
  explicit Function(std::shared_ptr<detail::FunctionState> state);
  std::shared_ptr<detail::FunctionState> state_;
};

/// fn as a Function. A trace holds every op fn runs on its arguments or on Variables it
/// reads: the ops of tapes and gradient() calls inside fn, forward accumulators and
/// vectorized_map included. What does not depend on them (a tensor the lambda captures, a
/// constant fn builds) is a constant of the trace. Variables read in fn are read again at each
/// replay and Variables assigned in fn are assigned again, in fn's order (TF). A replay equals
/// the eager call bit for bit (the same kernels in the same order). InvalidArgument when fn is
/// empty or max_traces is 0.
Function function(std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
                  FunctionOptions options = {});

}  // namespace tapegrad
