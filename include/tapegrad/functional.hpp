// Functional forms of differentiation: each call runs its own tapes, so they nest (a gradient
// of a gradient, a Hessian inside a tape...). TF: the eager backprop module's
// value_and_gradients_function, gradients_function, make_vjp, implicit_value_and_gradients,
// and tf.hessians (reverse over reverse, as hessian and hessian_vector_product say below).
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tapegrad/check.hpp"  // Fn: (const std::vector<Tensor>&) -> Tensor
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"
#include "tapegrad/variables_functional.hpp"

namespace tapegrad {

namespace detail {
struct VjpState;
}

/// f(args) and d(sum of f)/d(args[i]) for every argument. Each argument is differentiated as
/// a distinct tensor, even when the same tensor is passed twice. Integer, bool and
/// unconnected arguments get an undefined gradient. InvalidArgument when f returns an
/// undefined tensor (TF: "Cannot differentiate a function that returns None").
std::pair<Tensor, std::vector<Tensor>> value_and_gradients(const Fn& f,
                                                           const std::vector<Tensor>& args);
/// The gradients of value_and_gradients alone.
std::vector<Tensor> gradients(const Fn& f, const std::vector<Tensor>& args);

/// The vector-Jacobian product of a function already evaluated (TF: make_vjp). Copies share
/// one persistent tape; the product can be taken any number of times.
class VJP {
 public:
  /// One gradient per argument of f, with an output gradient of ones.
  std::vector<Tensor> operator()() const;
  /// One gradient per argument of f, with output gradient `dy` (f's result's shape and dtype;
  /// InvalidArgument otherwise).
  std::vector<Tensor> operator()(const Tensor& dy) const;

 private:
  friend std::pair<Tensor, VJP> make_vjp(const Fn& f, const std::vector<Tensor>& args);
  explicit VJP(std::shared_ptr<const detail::VjpState> state) : state_(std::move(state)) {}
  std::shared_ptr<const detail::VjpState> state_;
};

/// f(args) and its VJP. The tape f ran on is no longer recording when this returns.
/// InvalidArgument when f returns an undefined tensor.
std::pair<Tensor, VJP> make_vjp(const Fn& f, const std::vector<Tensor>& args);

/// implicit_value_and_gradients (TF) lives in tapegrad/variables_functional.hpp, included here.

/// fn applied to every slice along axis 0 of each elem (all of one leading size B), each of its
/// outputs stacked along a new axis 0 (TF: tf.vectorized_map; JAX: vmap). fn is traced on two
/// slices and the trace replayed once on the whole batch with each op's batching rule, so the
/// results equal a loop of fn over the slices (a trace holds no value of a slice: what ops and
/// gradients derive from values are op outputs, batched). fn runs once per slice instead when
/// it reads a slice-dependent value from C++ (array(), item(), Variable::assign), when an op has
/// no batching rule (a user primitive without register_batching_rule), or when its two traces
/// differ (random draws, state, value-dependent shapes): a one-time warning naming the read, op or
/// difference, or InvalidArgument naming it when fallback_to_loop is false. A zero-size batch
/// traces fn once on placeholders it cannot read: results shaped [0, ...]. InvalidArgument when
/// elems is empty, an elem is undefined or a scalar, or the leading sizes differ. The result is
/// differentiable under an outer tape (ordinary recorded ops).
std::vector<Tensor> vectorized_map(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& elems, bool fallback_to_loop = true);
/// The same for a function of one tensor to one tensor: vectorized_map(fn, x) stacks fn(x[i])
/// over the rows i of x (TF: tf.vectorized_map(fn, x) with a single tensor). Lambdas pick
/// their form by their parameter: `[](const Tensor& row) { ... }` this one,
/// `[](const std::vector<Tensor>& rows) { ... }` the one above (a generic `auto` parameter
/// fits both: name the type). fn may call vectorized_map itself (nesting: the inner map runs
/// over the row's own leading axis). Errors as above; InvalidArgument when fn is empty.
Tensor vectorized_map(const std::function<Tensor(const Tensor&)>& fn, const Tensor& elems,
                      bool fallback_to_loop = true);

/// d f(x)[i...] / d x[j...], shape f(x).shape ++ x.shape; zeros where f does not depend on x
/// (TF: GradientTape.jacobian on a tape watching x).
Tensor jacobian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x);
/// Second derivatives of a scalar f at x, shape x.shape ++ x.shape (TF: tf.hessians), reverse
/// over reverse: the gradient of f is recorded by an outer tape, whose jacobian of it (one
/// batched backward pass over its rows, as GradientTape::jacobian) is the Hessian.
/// InvalidArgument naming hessian and f(x)'s shape when f(x) has more than one element.
Tensor hessian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x);
/// H v for the Hessian H of the sum of f at x, shape x.shape, without forming H: reverse over
/// reverse (the gradient of <grad f(x), v>, one more backward pass through the recorded
/// gradient). Forward over reverse (a ForwardAccumulator around a gradient) gives the same
/// product but measures slower with eager ops (bench/README.md "hessian_vector_product").
/// InvalidArgument when v's shape or dtype differs from x's.
Tensor hessian_vector_product(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                              const Tensor& v);

}  // namespace tapegrad
