// custom_gradient, recompute_grad and grad_pass_through: one recorded op whose backward is a
// closure instead of a registered gradient.
#include "tapegrad/custom_gradient.hpp"

#include <memory>
#include <unordered_set>

#include "runtime/forward_accumulator.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape_stack.hpp"
#include "runtime/tensor_ids.hpp"
#include "runtime/variable_observer.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad::detail {
namespace {

std::string prefix(const std::string& op_type) { return "custom_gradient('" + op_type + "'): "; }

std::string names_of(const std::vector<Variable>& variables) {
  std::string names;
  for (const auto& v : variables) names += (names.empty() ? "'" : ", '") + v.name() + "'";
  return names;
}

// What the recorded op's backward closure owns. Shared by the copies of the closure that each
// recording tape holds; freed when the last tape drops its copy.
struct CustomState {
  std::string op_type;
  CustomGradientFunction gradient;
  std::vector<Variable> variables;
  std::size_t num_inputs;
};

std::vector<GradientValue> run_custom_gradient(const CustomState& state, const TensorList& dys) {
  auto [input_grads, variable_grads] = state.gradient(dys, state.variables);
  if (input_grads.size() != state.num_inputs) {
    throw InvalidArgument(prefix(state.op_type) + "the gradient function returned " +
                          std::to_string(input_grads.size()) + " gradients for the inputs, " +
                          "expected " + std::to_string(state.num_inputs) + " (one per input)");
  }
  if (variable_grads.size() != state.variables.size()) {
    throw InvalidArgument(prefix(state.op_type) + "the gradient function returned " +
                          std::to_string(variable_grads.size()) + " gradients for the " +
                          "variables, expected " + std::to_string(state.variables.size()) +
                          " (one per variable: " + names_of(state.variables) + ")");
  }
  std::vector<GradientValue> result(input_grads.begin(), input_grads.end());
  result.insert(result.end(), variable_grads.begin(), variable_grads.end());
  return result;
}

// The recorded op needs outputs of its own: an output that is one of the inputs, an earlier
// tensor (whatever its id: one made on another thread may have a larger one), a variable's
// stored value or a repeat of another output would otherwise be
// rewired on the tape. Call with the tapes paused.
void make_outputs_fresh(TensorList& outputs, const IdMark& body,
                        const std::vector<Variable>& variables, const std::string& op_type) {
  std::unordered_set<std::uint64_t> taken;
  for (const auto& v : variables) taken.insert(v.peek().id());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    Tensor& y = outputs[i];
    if (!y.defined()) {
      throw InvalidArgument(prefix(op_type) + "output " + std::to_string(i) + " is undefined");
    }
    if (!body.created_here(y.id()) || taken.count(y.id()) != 0) y = identity(y);
    taken.insert(y.id());
  }
}

}  // namespace

TensorList as_list(Tensor t) { return TensorList{std::move(t)}; }
TensorList as_list(TensorList t) { return t; }

TensorList call_with_custom_gradient(const CustomFunction& f, const TensorList& inputs,
                                     const std::string& op_type) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw InvalidArgument(prefix(op_type) + "input " + std::to_string(i) + " is undefined");
    }
  }
  CustomForward forward;
  std::vector<Variable> variables;
  {
    VariableReadObserver observer;
    PauseAllTapes pause;
    const IdMark body;  // tells the tensors f creates on this thread from every other
    PauseAccumulators pause_accumulators;  // they differentiate the op through its gradient
    forward = f(inputs);
    variables = observer.variables();
    make_outputs_fresh(forward.outputs, body, variables, op_type);
  }
  if (!forward.gradient) {
    throw InvalidArgument(prefix(op_type) + "the gradient function is empty");
  }
  if (!variables.empty() && !forward.takes_variables) {
    throw InvalidArgument(prefix(op_type) + "the function reads the variables " +
                          names_of(variables) +
                          ", so its gradient function must take (dys, const "
                          "std::vector<Variable>&) and return one gradient per variable");
  }
  if (!any_observer()) return std::move(forward.outputs);

  // What f's reads would have done on the paused tapes.
  for (TapeImpl* tape : tape_stack()) {
    if (!tape->watch_accessed_variables()) continue;
    for (const auto& v : variables) {
      if (v.trainable()) tape->watch_variable(v);  // reads watch only trainable ones
    }
  }

  auto state = std::make_shared<CustomState>(
      CustomState{op_type, std::move(forward.gradient), variables, inputs.size()});
  SparseGradientFunction backward = [state](const OpContext&, const TensorList& dys) {
    return run_custom_gradient(*state, dys);
  };
  std::vector<const Tensor*> recorded_inputs;
  recorded_inputs.reserve(inputs.size() + variables.size());
  for (const auto& x : inputs) recorded_inputs.push_back(&x);
  for (const auto& v : variables) recorded_inputs.push_back(&v.handle());
  record_on_tapes(op_named(op_type), recorded_inputs, forward.outputs, nullptr, &backward);
  return std::move(forward.outputs);
}

TensorList call_with_recompute(const TensorListFunction& g, const TensorList& inputs) {
  CustomFunction forward = [&g](const TensorList& args) {
    CustomForward result;
    result.outputs = g(args);
    result.takes_variables = true;
    // Only g and its arguments are kept; g runs again, under a tape of its own, when the
    // gradient is asked for. Outer tapes record that rerun, so higher derivatives work.
    result.gradient = [g, args](const TensorList& dys, const std::vector<Variable>& variables) {
      GradientTape tape;
      TensorList sources;
      sources.reserve(args.size() + variables.size());
      for (const auto& a : args) {
        sources.push_back(identity(a));
        if (is_floating(a.dtype())) tape.watch(sources.back());
      }
      tape.watch(variables);
      TensorList outputs = g(TensorList(sources.begin(), sources.end()));
      for (const auto& v : variables) sources.push_back(v.handle());
      TensorList grads = tape.gradient(outputs, sources, dys, UnconnectedGradients::Zero);
      TensorList variable_grads(grads.begin() + static_cast<std::ptrdiff_t>(args.size()),
                                grads.end());
      grads.resize(args.size());
      return std::pair<TensorList, TensorList>(std::move(grads), std::move(variable_grads));
    };
    return result;
  };
  return call_with_custom_gradient(forward, inputs, "RecomputeGrad");
}

TensorList call_with_pass_through(const TensorListFunction& g, const TensorList& inputs) {
  CustomFunction forward = [&g, &inputs](const TensorList& args) {
    CustomForward result;
    result.outputs = g(args);
    if (result.outputs.size() != inputs.size()) {
      throw InvalidArgument("grad_pass_through: the function returned " +
                            std::to_string(result.outputs.size()) + " outputs for " +
                            std::to_string(inputs.size()) +
                            " inputs; an identity gradient needs one output per input");
    }
    result.takes_variables = true;
    // Variables the function touched (TF: an assign) receive no gradient.
    result.gradient = [](const TensorList& dys, const std::vector<Variable>& variables) {
      return std::pair<TensorList, TensorList>(dys, TensorList(variables.size()));
    };
    return result;
  };
  return call_with_custom_gradient(forward, inputs, "GradPassThrough");
}

}  // namespace tapegrad::detail
