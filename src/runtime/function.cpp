// tapegrad::function: one trace per signature, replayed op by op through each op's replay rule.
//
// Tracing runs fn eagerly under a TraceScope (the op trace vectorized_map uses) on fresh views
// of the arguments, so that a tensor fn captures is never mistaken for the argument it equals.
// A replay binds the new arguments to the trace's first values, reads the Variables fn read,
// runs each kept op's replay rule (the op's public function: with nothing observing the
// thread it records nothing), or one loop for a run of elementwise ops
// (runtime/fused_elementwise.cpp), and repeats fn's Variable assignments in their order. The
// plan and the replay are in runtime/function_plan.cpp and runtime/function_replay.cpp; this
// file keeps the traces per signature, traces fn, and stands for it under tapes.
#include "tapegrad/function.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/anomaly.hpp"
#include "runtime/function_trace.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape.hpp"
#include "runtime/tape_stack.hpp"
#include "runtime/tensor_impl.hpp"
#include "runtime/variable_observer.hpp"
#include "runtime/warn.hpp"
#include "tapegrad/custom_gradient.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace detail {

// What a trace is kept for: each argument's dtype and shape, and which arguments are one
// tensor (fn may tell them apart: the same tensor twice is another signature).
struct FunctionSignature {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::vector<std::size_t> first_of_same_tensor;

  bool operator==(const FunctionSignature& other) const {
    return dtypes == other.dtypes && shapes == other.shapes &&
           first_of_same_tensor == other.first_of_same_tensor;
  }
};

namespace {

FunctionSignature signature_of(const std::vector<Tensor>& args) {
  FunctionSignature s;
  s.dtypes.reserve(args.size());
  s.shapes.reserve(args.size());
  s.first_of_same_tensor.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    s.dtypes.push_back(args[i].dtype());
    s.shapes.push_back(args[i].shape());
    std::size_t first = i;
    for (std::size_t k = 0; k < i; ++k) {
      if (args[k].id() == args[i].id()) {
        first = k;
        break;
      }
    }
    s.first_of_same_tensor.push_back(first);
  }
  return s;
}

std::string signature_to_string(const FunctionSignature& s) {
  std::string text = "(";
  for (std::size_t i = 0; i < s.dtypes.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::string(dtype_name(s.dtypes[i])) + " " + shape_to_string(s.shapes[i]);
  }
  return text + ")";
}

void check_arguments(const std::vector<Tensor>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) {
      throw InvalidArgument("function: argument " + std::to_string(i) + " is undefined");
    }
    if (!impl_of(args[i]).holds_elements) {
      throw InvalidArgument("function: argument " + std::to_string(i) +
                            " is a variable handle (shape " + shape_to_string(args[i].shape()) +
                            ", dtype " + dtype_name(args[i].dtype()) +
                            "), which holds no elements; pass the Variable's value");
    }
  }
}

// Names a Function in its one-time warnings (an address could be a dead Function's).
std::atomic<std::uint64_t> next_function_id{1};

}  // namespace

struct FunctionState {
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn;
  const std::uint64_t id = next_function_id.fetch_add(1, std::memory_order_relaxed);
  FunctionOptions options;
  std::mutex mutex;  // guards the members below
  // Most recently used first.
  std::list<std::pair<FunctionSignature, std::shared_ptr<const FunctionTrace>>> traces;
  std::size_t trace_count = 0;

  std::shared_ptr<const FunctionTrace> find(const FunctionSignature& signature) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = traces.begin(); it != traces.end(); ++it) {
      if (it->first == signature) {
        traces.splice(traces.begin(), traces, it);
        return traces.front().second;
      }
    }
    return nullptr;
  }

  void keep(const FunctionSignature& signature, std::shared_ptr<const FunctionTrace> compiled) {
    std::lock_guard<std::mutex> lock(mutex);
    ++trace_count;
    // Another thread may have traced the same signature meanwhile: one trace is kept.
    for (const auto& entry : traces) {
      if (entry.first == signature) return;
    }
    traces.emplace_front(signature, std::move(compiled));
    if (traces.size() > options.max_traces) {
      traces.pop_back();
      warn_once("function-retracing-" + std::to_string(id),
                "function: more than " + std::to_string(options.max_traces) +
                    " signatures (max_traces); the least recently used trace was dropped and "
                    "fn is traced again for it. Retracing is slow: pass arguments of fixed "
                    "shapes and dtypes, or raise FunctionOptions::max_traces");
    }
  }

  // Under tapes: the gradient of fn as a Function of (args, output gradients) -> (the
  // gradients of args, then of `variables`), one per argument count and list of variables fn
  // read. Its replay is fn's forward and backward ops; under an outer tape it is one recorded
  // op in turn (higher orders).
  std::vector<std::pair<std::vector<std::uint64_t>, Function>> gradient_functions;

  Function gradient_function(const std::vector<Variable>& variables, std::size_t argument_count) {
    // Keyed by the argument count too: it says where the output gradients start.
    std::vector<std::uint64_t> ids{argument_count};
    ids.reserve(variables.size() + 1);
    for (const Variable& v : variables) ids.push_back(v.handle().id());
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& entry : gradient_functions) {
      if (entry.first == ids) return entry.second;
    }
    auto body = [fn = fn, variables, argument_count](const std::vector<Tensor>& in) {
      GradientTape tape;
      std::vector<Tensor> sources;
      sources.reserve(argument_count + variables.size());
      for (std::size_t i = 0; i < argument_count; ++i) {
        sources.push_back(identity(in[i]));  // one source per argument, even a repeated one
        if (is_floating(in[i].dtype())) tape.watch(sources.back());
      }
      tape.watch(variables);
      const std::vector<Tensor> outputs = fn(sources);
      for (const Variable& v : variables) sources.push_back(v.handle());
      const std::vector<Tensor> output_gradients(
          in.begin() + static_cast<std::ptrdiff_t>(argument_count), in.end());
      return tape.gradient(outputs, sources, output_gradients, UnconnectedGradients::Zero);
    };
    gradient_functions.emplace_back(std::move(ids), tapegrad::function(body, options));
    return gradient_functions.back().second;
  }

  std::vector<Tensor> trace_and_run(const FunctionSignature& signature,
                                    const std::vector<Tensor>& args, bool observed = false) {
    auto compiled = std::make_shared<FunctionTrace>();
    OpTrace& trace = compiled->trace;
    trace.for_function = true;
    std::vector<Tensor> traced_args;
    traced_args.reserve(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      // Arguments that are one tensor stay one traced value (their signature says so).
      // Under tapes or accumulators, an identity they record connects the traced copy to
      // the argument (fn runs eagerly for them while the trace watches).
      traced_args.push_back(signature.first_of_same_tensor[i] != i
                                ? traced_args[signature.first_of_same_tensor[i]]
                            : observed ? identity(args[i])
                                       : make_view(view_geometry(args[i])));
      trace.add_value(traced_args[i]);
    }
    std::vector<Tensor> results;
    {
      TraceScope scope(trace);
      results = fn(traced_args);
    }
    compiled->results.reserve(results.size());
    for (const Tensor& r : results) {
      TracedInput in;
      if (r.defined()) in.value = trace.value_of(r);
      if (in.value == TracedInput::kConstant) in.constant = r;
      compiled->results.push_back(std::move(in));
    }
    compiled->eager_reason = why_not_replayable(trace);
    if (compiled->eager_reason.empty()) {
      plan_replay(*compiled, traced_args.size(), options.optimize);
    } else {
      warn_once("function-eager-" + std::to_string(id) + signature_to_string(signature),
                "function: the trace for arguments " + signature_to_string(signature) +
                    " cannot be replayed: " + compiled->eager_reason +
                    ". fn runs eagerly on every call with these arguments");
      // An eager signature needs no ops, values or constants: keep only the reason.
      compiled->trace = OpTrace();
      compiled->results.clear();
    }
    trace.value_of_id = IdMap<std::uint32_t>();  // only needed while tracing
    keep(signature, std::move(compiled));
    return results;
  }
};

namespace {

// fn as one op on the tapes (and accumulators) of the thread, as tf.function under a
// GradientTape: the replay computes the outputs with the tapes paused, and the op's gradient
// is the Function of fn's gradient (FunctionState::gradient_function), called on the recorded
// arguments and the output gradients.
std::vector<Tensor> call_as_one_op(const std::shared_ptr<FunctionState>& state,
                                   const std::shared_ptr<const FunctionTrace>& compiled,
                                   const std::vector<Tensor>& args) {
  // The untrainable Variables fn reads through value() that a tape of the thread watches:
  // inputs of the op too (fn's own reads would record them, as eagerly; value() tells the
  // observer only of trainable ones).
  std::vector<Variable> watched_untrainable;
  for (const TraceStep& step : compiled->trace.steps) {
    if (step.kind != TraceStep::Kind::Read || !step.through_value || step.variable->trainable()) {
      continue;
    }
    const std::uint64_t handle = step.variable->handle().id();
    const auto& tapes = tape_stack();
    if (std::any_of(tapes.begin(), tapes.end(),
                    [&](const TapeImpl* tape) { return tape->is_watched(handle); })) {
      watched_untrainable.push_back(*step.variable);
    }
  }
  CustomFunction forward = [&](const TensorList& in) {
    CustomForward result;
    result.outputs = replay(*compiled, in);
    for (const Variable& v : watched_untrainable) tell_observers(v);
    result.takes_variables = true;
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const Tensor& y : result.outputs) {
      shapes.push_back(y.shape());
      dtypes.push_back(y.dtype());
    }
    result.gradient = [state, in, shapes, dtypes](const TensorList& output_gradients,
                                                  const std::vector<Variable>& variables) {
      std::vector<Tensor> gradient_args = in;
      for (std::size_t k = 0; k < output_gradients.size(); ++k) {
        gradient_args.push_back(output_gradients[k].defined() ? output_gradients[k]
                                                              : zeros(shapes[k], dtypes[k]));
      }
      std::vector<Tensor> gradients = state->gradient_function(variables, in.size())(gradient_args);
      TensorList variable_gradients(gradients.begin() + static_cast<std::ptrdiff_t>(in.size()),
                                    gradients.end());
      gradients.resize(in.size());
      return std::pair<TensorList, TensorList>(std::move(gradients), std::move(variable_gradients));
    };
    return result;
  };
  return call_with_custom_gradient(forward, args, "Function");
}

// Called while something observes the thread. vectorized_map's traces and DetectAnomaly must
// see each op: fn runs eagerly. Tapes and accumulators get one op when the signature's trace
// allows it, else fn's own ops (the first call of a signature traces while they record).
std::vector<Tensor> observed_call(const std::shared_ptr<FunctionState>& state,
                                  const FunctionSignature& signature,
                                  const std::vector<Tensor>& args) {
  if (any_tracer_active() || anomaly_checks_active()) return state->fn(args);
  const auto compiled = state->find(signature);
  if (!compiled) return state->trace_and_run(signature, args, true);
  if (!compiled->one_op_under_tapes) return state->fn(args);
  return call_as_one_op(state, compiled, args);
}

}  // namespace
}  // namespace detail

Function::Function(std::shared_ptr<detail::FunctionState> state) : state_(std::move(state)) {}

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& args) const {
  detail::check_arguments(args);
  const detail::FunctionSignature signature = detail::signature_of(args);
  if (detail::any_observer()) return detail::observed_call(state_, signature, args);
  if (auto compiled = state_->find(signature)) {
    if (!compiled->eager_reason.empty()) return state_->fn(args);
    return detail::replay(*compiled, args);
  }
  return state_->trace_and_run(signature, args);
}

std::size_t Function::trace_count() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->trace_count;
}

Function function(std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
                  FunctionOptions options) {
  if (!fn) throw InvalidArgument("function: fn is empty");
  if (options.max_traces == 0) {
    throw InvalidArgument(
        "function: FunctionOptions::max_traces is 0; at least one trace must "
        "be kept");
  }
  auto state = std::make_shared<detail::FunctionState>();
  state->fn = std::move(fn);
  state->options = options;
  return Function(std::move(state));
}

}  // namespace tapegrad
