#include "runtime/gradient_call.hpp"

#include <optional>
#include <string>

#include "runtime/error_context.hpp"
#include "runtime/floating_dtype.hpp"
#include "runtime/op_context_factory.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/tensor_impl.hpp"

namespace tapegrad::detail {

namespace {

// The recorded shape against the gradient's array, without building either as a Shape (this
// runs once per gradient of every step).
bool same_dims(const RecordedTensor& recorded, const Tensor& t) {
  const TensorImpl& impl = impl_of(t);
  if (!impl.holds_elements) return recorded.same_shape(t);
  const TensorImpl::DimsRef dims = impl.dims_ref();
  if (dims.size != recorded.rank()) return false;
  for (std::size_t k = 0; k < dims.size; ++k) {
    if (dims.data[k] != recorded.type->dims[k]) return false;
  }
  return true;
}

void check_input_gradient(const OpEntry& e, std::size_t i, const GradientValue& g) {
  const RecordedTensor& input = e.inputs()[i];
  if (g.is_sparse()) {
    if (g.sparse().dense_shape != input.full_shape()) {
      throw InvalidArgument("imperative_grad: the sparse gradient of '" + std::string(e.op->name) +
                            "' for input " + std::to_string(i) + " has dense shape " +
                            shape_to_string(g.sparse().dense_shape) + ", but the input has shape " +
                            shape_to_string(input.full_shape()));
    }
    return;
  }
  const Tensor& d = g.dense();
  if (d.dtype() != input.dtype() || !same_dims(input, d)) {
    throw InvalidArgument("imperative_grad: the gradient of '" + std::string(e.op->name) +
                          "' for input " + std::to_string(i) + " has shape " +
                          shape_to_string(d.shape()) + " and dtype " + dtype_name(d.dtype()) +
                          ", but the input has shape " + shape_to_string(input.full_shape()) +
                          " and dtype " + dtype_name(input.dtype()));
  }
}

void gather_saved(Tensor* saved, std::size_t n, bool take, std::vector<Tensor>& out) {
  out.resize(n);
  if (saved == nullptr) return;
  for (std::size_t i = 0; i < n; ++i) out[i] = take ? std::move(saved[i]) : saved[i];
}

std::vector<GradientValue> call_rule(const OpEntry& e, const Differentiation& how,
                                     const CallBuffers& b) {
  const OpContext ctx = OpContextFactory::make(e, b.needs, b.saved_inputs, b.saved_outputs);
  if (how.user == nullptr && how.custom == nullptr) return e.op->gradient(ctx, b.output_gradients);
  // A user's code: a value it reads inside vectorized_map's fn is blamed on it.
  std::optional<ValueReaderScope> reader;
  if (any_tracer_active()) {
    reader.emplace("the gradient function of '" + std::string(e.op->name) + "'");
  }
  if (how.custom != nullptr) return (*how.custom)(ctx, b.output_gradients);
  if (how.user->sparse) return how.user->sparse(ctx, b.output_gradients);
  std::vector<Tensor> dense = how.user->dense(ctx, b.output_gradients);
  return std::vector<GradientValue>(std::make_move_iterator(dense.begin()),
                                    std::make_move_iterator(dense.end()));
}

}  // namespace

Differentiation differentiation_of(const OpEntry& e) {
  if (const SparseGradientFunction* custom = e.custom_backward()) {
    return {GradientKind::Rule, custom, nullptr};
  }
  if (e.op->kind != GradientKind::Registered) return {e.op->kind, nullptr, nullptr};
  const UserGradient* user = registered_gradient(*e.op);
  if (user == nullptr) {
    throw LookupError("No gradient defined for operation '" + std::string(e.op->name) +
                      "' (op type: " + std::string(e.op->name) +
                      "): register one with register_gradient, or mark it with "
                      "not_differentiable");
  }
  return {user->not_differentiable ? GradientKind::NotDifferentiable : GradientKind::Rule, nullptr,
          user};
}

void call_and_check(OpEntry& e, const Differentiation& how, const BackwardPlan::Slot* input_slots,
                    bool take_saved, const VSpace& vspace, CallBuffers& b) {
  const RecordedTensors outputs = e.outputs();
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (!b.output_gradients[j].defined() && floating(outputs[j].dtype())) {
      b.output_gradients[j] = vspace.zeros(outputs[j].full_shape(), outputs[j].dtype());
    }
  }
  const std::size_t n_inputs = e.n_inputs;
  b.needs.assign(n_inputs, false);
  for (std::size_t i = 0; i < n_inputs; ++i) b.needs[i] = input_slots[i] != BackwardPlan::kNoSlot;
  gather_saved(e.saved_inputs(), n_inputs, take_saved, b.saved_inputs);
  gather_saved(e.saved_outputs(), e.n_outputs, take_saved, b.saved_outputs);
  try {
    b.input_gradients = call_rule(e, how, b);
  } catch (...) {
    // An error deep inside names an inner op ("matrix_inverse: ..."): say which op's gradient
    // was being computed first.
    rethrow_with_context("gradient of " + std::string(e.op->name) + ": ");
  }
  if (b.input_gradients.size() != n_inputs) {
    throw InvalidArgument("imperative_grad: the gradient function of '" + std::string(e.op->name) +
                          "' returned " + std::to_string(b.input_gradients.size()) +
                          " gradients, expected " + std::to_string(n_inputs) + " (one per input)");
  }
  for (std::size_t i = 0; i < n_inputs; ++i) {
    if (b.needs[i] && b.input_gradients[i].defined())
      check_input_gradient(e, i, b.input_gradients[i]);
  }
}

}  // namespace tapegrad::detail
