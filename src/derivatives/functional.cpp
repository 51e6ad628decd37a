// The functional forms: each builds its own tapes around one call of f. In src/derivatives/
// because make_vjp keeps a bare tape past the call (the tape's internals), and the forms share
// their check of f's result (function_result.hpp) with forward.cpp, whose jacobian_forward
// runs on the vectorized trace.
#include "tapegrad/functional.hpp"

#include <string>

#include "derivatives/function_result.hpp"
#include "runtime/imperative_grad.hpp"
#include "runtime/tape_stack.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {

namespace detail {

// What a VJP needs after make_vjp has returned: the tape f was recorded on (persistent, no
// longer on any thread's tape stack), f's result, and the arguments it was differentiated by.
struct VjpState {
  std::shared_ptr<TapeImpl> tape;
  Tensor result;
  std::vector<TensorMeta> sources;
};

}  // namespace detail

namespace {

void require_floating_point(const Tensor& x, const char* function, const char* what) {
  if (!x.defined()) throw InvalidArgument(std::string(function) + ": " + what + " is undefined");
  if (!is_floating(x.dtype())) {
    throw InvalidArgument(std::string(function) + ": " + what +
                          " must be float32 or float64, got " + dtype_name(x.dtype()));
  }
}

// Each floating argument as a tensor of its own (an identity, so outer tapes still connect it
// to the caller's tensor): f(x, x) is differentiated in each argument separately.
std::vector<Tensor> distinct_arguments(const std::vector<Tensor>& args, const char* function) {
  std::vector<Tensor> inputs;
  inputs.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) {
      throw InvalidArgument(std::string(function) + ": argument " + std::to_string(i) +
                            " is undefined");
    }
    inputs.push_back(is_floating(args[i].dtype()) ? identity(args[i]) : args[i]);
  }
  return inputs;
}

// Integer and bool arguments are not watched: their gradients are undefined anyway.
void watch_floating(GradientTape& tape, const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (is_floating(t.dtype())) tape.watch(t);
  }
}

// Pushes a bare tape on this thread's stack for one scope.
class ScopedRecording {
 public:
  explicit ScopedRecording(detail::TapeImpl& tape) : tape_(tape) { detail::push_tape(&tape_); }
  ~ScopedRecording() { detail::pop_tape(&tape_); }
  ScopedRecording(const ScopedRecording&) = delete;
  ScopedRecording& operator=(const ScopedRecording&) = delete;

 private:
  detail::TapeImpl& tape_;
};

// The gradient of f's (summed) result at x, computed while `outer` records, so that `outer`
// can differentiate it once more. Zeros where f does not depend on x.
Tensor recorded_gradient(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                         const char* function, bool scalar_result = false) {
  GradientTape inner;
  inner.watch(x);
  Tensor y = f(x);
  detail::require_function_result(y, function);
  // A Hessian is of a scalar function: the gradient of a non-scalar y would silently be the
  // gradient of its sum (TF's hessians raises too).
  if (scalar_result && y.size() != 1) {
    throw InvalidArgument(std::string(function) + ": f(x) has shape " + shape_to_string(y.shape()) +
                          " and dtype " + dtype_name(y.dtype()) + " (x has shape " +
                          shape_to_string(x.shape()) +
                          "); a Hessian needs a scalar function (reduce f's result first)");
  }
  return inner.gradient(y, x, UnconnectedGradients::Zero);
}

}  // namespace

std::pair<Tensor, std::vector<Tensor>> value_and_gradients(const Fn& f,
                                                           const std::vector<Tensor>& args) {
  const std::vector<Tensor> inputs = distinct_arguments(args, "value_and_gradients");
  GradientTape tape;
  watch_floating(tape, inputs);
  Tensor y = f(inputs);
  detail::require_function_result(y, "value_and_gradients");
  std::vector<Tensor> grads = tape.gradient(y, inputs);
  return {y, grads};
}

std::vector<Tensor> gradients(const Fn& f, const std::vector<Tensor>& args) {
  return value_and_gradients(f, args).second;
}

std::pair<Tensor, VJP> make_vjp(const Fn& f, const std::vector<Tensor>& args) {
  const std::vector<Tensor> inputs = distinct_arguments(args, "make_vjp");
  auto state = std::make_shared<detail::VjpState>();
  state->tape = std::make_shared<detail::TapeImpl>(/*persistent=*/true,
                                                   /*watch_accessed_variables=*/false);
  {
    ScopedRecording recording(*state->tape);
    for (const Tensor& t : inputs) {
      if (is_floating(t.dtype())) state->tape->watch(t);
    }
    Tensor y = f(inputs);
    detail::require_function_result(y, "make_vjp");
    // A result that is one of the arguments must still be a target distinct from it.
    state->result = identity(y);
  }
  for (const Tensor& t : inputs) state->sources.push_back({t.id(), t.dtype(), t.shape()});
  Tensor value = state->result;
  return {value, VJP(std::move(state))};
}

std::vector<Tensor> VJP::operator()() const { return (*this)(Tensor()); }

std::vector<Tensor> VJP::operator()(const Tensor& dy) const {
  const Tensor& y = state_->result;
  if (dy.defined() && (dy.shape() != y.shape() || dy.dtype() != y.dtype())) {
    throw InvalidArgument("VJP: dy has shape " + shape_to_string(dy.shape()) + " and dtype " +
                          dtype_name(dy.dtype()) + ", but f's result has shape " +
                          shape_to_string(y.shape()) + " and dtype " + dtype_name(y.dtype()));
  }
  std::vector<GradientValue> values = detail::imperative_grad(*state_->tape, {y}, state_->sources,
                                                              {dy}, UnconnectedGradients::None);
  std::vector<Tensor> grads;
  grads.reserve(values.size());
  for (const auto& v : values) grads.push_back(v.to_dense());
  return grads;
}

Tensor jacobian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  require_floating_point(x, "jacobian", "x");
  GradientTape tape;
  tape.watch(x);
  Tensor y = f(x);
  detail::require_function_result(y, "jacobian");
  return tape.jacobian(y, x, UnconnectedGradients::Zero);
}

// Both stay reverse over reverse: forward over reverse, even with every op's forward rule,
// measured 1.6x slower for the HVP and 3x for the full Hessian (bench/README.md,
// "hessian_vector_product"): each rule is a few more eager ops.
Tensor hessian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  require_floating_point(x, "hessian", "x");
  GradientTape outer;
  outer.watch(x);
  Tensor g = recorded_gradient(f, x, "hessian", /*scalar_result=*/true);
  return outer.jacobian(g, x, UnconnectedGradients::Zero);
}

Tensor hessian_vector_product(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                              const Tensor& v) {
  require_floating_point(x, "hessian_vector_product", "x");
  require_floating_point(v, "hessian_vector_product", "v");
  if (v.shape() != x.shape() || v.dtype() != x.dtype()) {
    throw InvalidArgument("hessian_vector_product: v has shape " + shape_to_string(v.shape()) +
                          " and dtype " + dtype_name(v.dtype()) + ", but x has shape " +
                          shape_to_string(x.shape()) + " and dtype " + dtype_name(x.dtype()));
  }
  GradientTape outer;
  outer.watch(x);
  Tensor g = recorded_gradient(f, x, "hessian_vector_product");
  // d/dx of <grad f(x), v> is H v: one more backward pass through the recorded gradient.
  Tensor g_dot_v = reduce_sum(multiply(g, v));
  return outer.gradient(g_dot_v, x, UnconnectedGradients::Zero);
}

}  // namespace tapegrad
