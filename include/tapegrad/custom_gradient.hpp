// Functions whose gradient the caller defines (TF: tf.custom_gradient), gradient checkpointing
// (TF: tf.recompute_grad) and identity-gradient wrappers (TF: tf.grad_pass_through).
//
// Each wrapper runs the wrapped function with every tape of the thread paused, then records
// ONE op on the active tapes: the function's inner ops are never kept, and the backward pass
// calls the gradient function the caller supplied (or recomputes the forward). Gradient
// functions run while the outer tapes record, so one written with tapegrad ops can itself be
// differentiated (nested tapes give higher derivatives).
//
// The pause covers the tapes that exist when the wrapped function starts: a tape it creates
// records as usual, and stop_recording/record/gradient/destruction of an outer tape inside it
// only change that tape's own state. An error a gradient function throws reaches the caller
// of gradient() as the same tapegrad type, prefixed "gradient of <op_type>: "; exceptions
// that are not tapegrad::Errors pass through unchanged.
#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

namespace detail {

using TensorList = std::vector<Tensor>;
using TensorListFunction = std::function<TensorList(const TensorList&)>;
/// (output gradients, variables read by the forward) -> (input gradients, variable gradients).
using CustomGradientFunction = std::function<std::pair<TensorList, TensorList>(
    const TensorList&, const std::vector<Variable>&)>;

/// What a custom forward returns, in the one form the runtime works with.
struct CustomForward {
  TensorList outputs;
  CustomGradientFunction gradient;
  bool takes_variables = false;  ///< the user's gradient function accepts the variables
};
using CustomFunction = std::function<CustomForward(const TensorList&)>;

/// The non-template engine behind custom_gradient (see there for the errors).
TensorList call_with_custom_gradient(const CustomFunction& f, const TensorList& inputs,
                                     const std::string& op_type);
/// The engines behind recompute_grad and grad_pass_through.
TensorList call_with_recompute(const TensorListFunction& g, const TensorList& inputs);
TensorList call_with_pass_through(const TensorListFunction& g, const TensorList& inputs);

// Out of line: inline, their std::vector constructions were instantiated in every program
// that includes tapegrad.hpp, custom gradients or not.
TensorList as_list(Tensor t);
TensorList as_list(TensorList t);

// Adapts the user's gradient function G to CustomGradientFunction. `Dy` is what G takes for
// the output gradients: Tensor (one output) or TensorList.
template <class Dy, class G>
CustomForward make_custom_forward(TensorList outputs, G grad) {
  CustomForward forward;
  forward.outputs = std::move(outputs);
  if constexpr (std::is_invocable_v<const G&, const Dy&, const std::vector<Variable>&>) {
    forward.takes_variables = true;
    forward.gradient = [grad = std::move(grad)](const TensorList& dys,
                                                const std::vector<Variable>& variables) {
      auto result = [&] {
        if constexpr (std::is_same_v<Dy, Tensor>)
          return grad(dys.at(0), variables);
        else
          return grad(dys, variables);
      }();
      return std::pair<TensorList, TensorList>(as_list(std::move(result.first)),
                                               as_list(std::move(result.second)));
    };
  } else {
    static_assert(std::is_invocable_v<const G&, const Dy&>,
                  "custom_gradient: the gradient function must take the output gradient(s), "
                  "optionally followed by const std::vector<Variable>&");
    forward.gradient = [grad = std::move(grad)](const TensorList& dys,
                                                const std::vector<Variable>&) {
      if constexpr (std::is_same_v<Dy, Tensor>) {
        return std::pair<TensorList, TensorList>(as_list(grad(dys.at(0))), {});
      } else {
        return std::pair<TensorList, TensorList>(as_list(grad(dys)), {});
      }
    };
  }
  return forward;
}

}  // namespace detail

/// Wraps f so that its gradient is the one f defines (TF: tf.custom_gradient). Forms:
///   f: (const Tensor& x) -> std::pair<Tensor, G>, G: (const Tensor& dy) -> Tensor
///   f: (const std::vector<Tensor>& xs) -> std::pair<std::vector<Tensor>, G>,
///      G: (const std::vector<Tensor>& dys) -> std::vector<Tensor>   (one gradient per input)
/// When f reads Variables (detected automatically), G must instead take
/// (dys, const std::vector<Variable>& variables) and return
/// std::pair<inputs' gradients, std::vector<Tensor> one per variable, in creation order>.
/// Returns a callable of f's argument type giving f's outputs. f runs with all tapes paused;
/// one op named `op_type` is recorded, and G (with what it captured) is released as soon as
/// a non-persistent tape has used it.
/// Errors (InvalidArgument naming `op_type`): f reads variables but G does not take them (TF:
/// TypeError); at gradient() time, G returns the wrong number of input or variable gradients.
template <class F>
auto custom_gradient(F f, std::string op_type = "CustomGradient") {
  if constexpr (std::is_invocable_v<const F&, const Tensor&>) {
    return [f = std::move(f), op_type = std::move(op_type)](const Tensor& x) -> Tensor {
      detail::CustomFunction forward = [&f](const detail::TensorList& in) {
        auto result = f(in[0]);
        return detail::make_custom_forward<Tensor>(detail::as_list(std::move(result.first)),
                                                   std::move(result.second));
      };
      return detail::call_with_custom_gradient(forward, {x}, op_type)[0];
    };
  } else {
    static_assert(std::is_invocable_v<const F&, const std::vector<Tensor>&>,
                  "custom_gradient: f must take const Tensor& or const std::vector<Tensor>&");
    return [f = std::move(f),
            op_type = std::move(op_type)](const std::vector<Tensor>& xs) -> std::vector<Tensor> {
      detail::CustomFunction forward = [&f](const detail::TensorList& in) {
        auto result = f(in);
        return detail::make_custom_forward<detail::TensorList>(std::move(result.first),
                                                               std::move(result.second));
      };
      return detail::call_with_custom_gradient(forward, xs, op_type);
    };
  }
}

/// Gradient checkpointing (TF: tf.recompute_grad). g: (const Tensor&) -> Tensor or
/// (const std::vector<Tensor>&) -> std::vector<Tensor>; returns a callable of the same
/// signature with g's values and gradients (also w.r.t. variables g reads), whose forward
/// intermediates are not kept on any tape: the backward pass runs g again under its own tape.
/// Only g's inputs (and g itself) stay alive until the gradient is taken.
template <class G>
auto recompute_grad(G g) {
  if constexpr (std::is_invocable_v<const G&, const Tensor&>) {
    detail::TensorListFunction body = [g = std::move(g)](const detail::TensorList& in) {
      return detail::as_list(g(in.at(0)));
    };
    return [body](const Tensor& x) -> Tensor { return detail::call_with_recompute(body, {x})[0]; };
  } else {
    static_assert(std::is_invocable_v<const G&, const std::vector<Tensor>&>,
                  "recompute_grad: g must take const Tensor& or const std::vector<Tensor>&");
    detail::TensorListFunction body = [g = std::move(g)](const detail::TensorList& in) {
      return detail::as_list(g(in));
    };
    return [body](const std::vector<Tensor>& xs) -> std::vector<Tensor> {
      return detail::call_with_recompute(body, xs);
    };
  }
}

/// g's forward values with an identity gradient (TF: tf.grad_pass_through): the gradient of
/// output i flows unchanged to input i; variables g reads get none. g: (const Tensor&) ->
/// Tensor, or (const std::vector<Tensor>&) -> std::vector<Tensor> with as many outputs as
/// inputs (InvalidArgument otherwise), each of its input's shape (checked at gradient()).
template <class G>
auto grad_pass_through(G g) {
  if constexpr (std::is_invocable_v<const G&, const Tensor&>) {
    detail::TensorListFunction body = [g = std::move(g)](const detail::TensorList& in) {
      return detail::as_list(g(in.at(0)));
    };
    return
        [body](const Tensor& x) -> Tensor { return detail::call_with_pass_through(body, {x})[0]; };
  } else {
    static_assert(std::is_invocable_v<const G&, const std::vector<Tensor>&>,
                  "grad_pass_through: g must take const Tensor& or const std::vector<Tensor>&");
    detail::TensorListFunction body = [g = std::move(g)](const detail::TensorList& in) {
      return detail::as_list(g(in));
    };
    return [body](const std::vector<Tensor>& xs) -> std::vector<Tensor> {
      return detail::call_with_pass_through(body, xs);
    };
  }
}

}  // namespace tapegrad
