// Optimizer::apply_gradients: checks each gradient, sums a row-sparse one's repeated rows,
// and hands it to the optimizer's update (apply_sgd.cpp, apply_adam.cpp); under a Function's
// trace the whole step is a host step the Function replays. Among the ops, not in src/optim/,
// because it uses the runtime (traces, one-time warnings) and the kernels (index values).
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/segment_sum.hpp"
#include "kernels/shape_util.hpp"
#include "ops/training/training_support.hpp"
#include "runtime/op_definition.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/warn.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/optim.hpp"

namespace tapegrad {
namespace {

// "SGD::apply_gradients: variable 'w' (shape [2, 3], dtype float32)": where an error happened.
std::string describe_variable(const char* optimizer, const Variable& v) {
  return std::string(optimizer) + "::apply_gradients: variable '" + v.name() + "' (shape " +
         shape_to_string(v.shape()) + ", dtype " + dtype_name(v.dtype()) + ")";
}

void check_sparse(const char* optimizer, const Variable& v, const IndexedSlices& s) {
  const std::string at = describe_variable(optimizer, v);
  if (v.shape().empty())
    throw InvalidArgument(at + ": a sparse gradient needs a variable of rank >= 1");
  if (s.dense_shape != v.shape()) {
    throw InvalidArgument(at + ": the IndexedSlices has dense_shape " +
                          shape_to_string(s.dense_shape));
  }
  if (!s.indices.defined() || !s.values.defined()) {
    throw InvalidArgument(at + ": the IndexedSlices has undefined values or indices");
  }
  if ((s.indices.dtype() != DType::Int32 && s.indices.dtype() != DType::Int64) ||
      s.indices.rank() != 1) {
    throw InvalidArgument(
        at + ": the IndexedSlices indices must be int32 or int64 of rank 1, got " +
        dtype_name(s.indices.dtype()) + " of shape " + shape_to_string(s.indices.shape()));
  }
  Shape expected = v.shape();
  expected[0] = s.indices.size();
  if (s.values.shape() != expected || s.values.dtype() != v.dtype()) {
    throw InvalidArgument(at + ": the IndexedSlices values have shape " +
                          shape_to_string(s.values.shape()) + " and dtype " +
                          dtype_name(s.values.dtype()) + ", expected shape " +
                          shape_to_string(expected) + " and the variable's dtype");
  }
}

// Repeated indices become one row holding their sum (TF: _deduplicate_indexed_slices).
template <class T>
std::pair<std::vector<std::int64_t>, Tensor> deduplicate(const Variable& v,
                                                         const IndexedSlices& s) {
  const detail::IndexValues raw = detail::index_values(s.indices);
  const std::size_t width = detail::elements_per_row(v.shape());
  std::unordered_map<std::int64_t, std::size_t> position;
  std::vector<std::int64_t> unique;
  std::vector<std::int64_t> slot;  // per slice, its row in the summed tensor
  slot.reserve(raw.size());
  for (std::int64_t index : raw) {  // each in [0, rows) (check_gradient)
    const auto [at, inserted] = position.emplace(index, unique.size());
    if (inserted) unique.push_back(index);
    slot.push_back(static_cast<std::int64_t>(at->second));
  }
  Shape summed_shape = v.shape();
  summed_shape[0] = unique.size();
  xt::xarray<T> summed = xt::empty<T>(summed_shape);
  // Summed as unsorted_segment_sum sums (a float32 row hit more than 32 times in float64).
  detail::segment_sum_rows(s.values.array<T>().data(), slot, width, unique.size(), summed.data(),
                           [](std::size_t) { return std::logic_error("no slot is out of range"); });
  return {std::move(unique), Tensor(std::move(summed))};
}

// What apply_one checks before it changes anything, for one pair: apply_now checks every pair
// first, so that a bad one leaves every variable, slot and the step count as they were.
void check_gradient(const char* optimizer, const GradientValue& grad, const Variable& variable) {
  if (!grad.defined()) return;
  if (!is_floating(variable.dtype())) {
    throw InvalidArgument(describe_variable(optimizer, variable) +
                          ": only float32 and float64 variables can be optimized");
  }
  if (!grad.is_sparse()) {
    const Tensor& g = grad.dense();
    if (g.shape() != variable.shape() || g.dtype() != variable.dtype()) {
      throw InvalidArgument(describe_variable(optimizer, variable) + ": the gradient has shape " +
                            shape_to_string(g.shape()) + " and dtype " + dtype_name(g.dtype()));
    }
    return;
  }
  check_sparse(optimizer, variable, grad.sparse());
  const std::size_t rows = variable.shape()[0];
  for (std::int64_t index : detail::index_values(grad.sparse().indices)) {
    if (index < 0 || static_cast<std::size_t>(index) >= rows) {
      throw InvalidArgument(describe_variable(optimizer, variable) + ": index " +
                            std::to_string(index) + " is out of range [0, " + std::to_string(rows) +
                            ")");
    }
  }
}

}  // namespace

// ---- Optimizer --------------------------------------------------------------------------

void Optimizer::apply_gradients(const std::vector<std::pair<Tensor, Variable>>& grads_and_vars) {
  std::vector<std::pair<GradientValue, Variable>> values;
  values.reserve(grads_and_vars.size());
  for (const auto& [grad, variable] : grads_and_vars) {
    values.emplace_back(GradientValue(grad), variable);
  }
  apply_gradients(values);
}

namespace {

// A gradient as tensors (a row-sparse one as its values and indices) and back: what a
// Function's trace holds of an update's inputs.
struct GradientLayout {
  bool sparse;
  Shape dense_shape;
};

}  // namespace

void Optimizer::apply_gradients(
    const std::vector<std::pair<GradientValue, Variable>>& grads_and_vars) {
  if (detail::live_trace_count.load(std::memory_order_relaxed) == 0) {
    apply_now(grads_and_vars);
    return;
  }
  // Under a trace: the update is C++ on the optimizer's own state (slots, iterations), which a
  // Function replays as it is, on each replay's gradients. The optimizer must outlive it.
  std::vector<Tensor> inputs;
  std::vector<GradientLayout> layouts;
  std::vector<Variable> variables;
  for (const auto& [grad, variable] : grads_and_vars) {
    variables.push_back(variable);
    if (grad.is_sparse()) {
      layouts.push_back({true, grad.sparse().dense_shape});
      inputs.push_back(grad.sparse().values);
      inputs.push_back(grad.sparse().indices);
    } else {
      layouts.push_back({false, {}});
      inputs.push_back(grad.defined() ? grad.dense() : Tensor());
    }
  }
  detail::run_host_step(inputs, [this, layouts, variables](const std::vector<Tensor>& in) {
    std::vector<std::pair<GradientValue, Variable>> rebuilt;
    std::size_t next = 0;
    for (std::size_t k = 0; k < variables.size(); ++k) {
      if (layouts[k].sparse) {
        IndexedSlices slices{in[next], in[next + 1], layouts[k].dense_shape};
        rebuilt.emplace_back(GradientValue(std::move(slices)), variables[k]);
        next += 2;
      } else {
        rebuilt.emplace_back(in[next].defined() ? GradientValue(in[next]) : GradientValue(),
                             variables[k]);
        next += 1;
      }
    }
    apply_now(rebuilt);
  });
}

void Optimizer::apply_now(const std::vector<std::pair<GradientValue, Variable>>& grads_and_vars) {
  for (const auto& [grad, variable] : grads_and_vars) check_gradient(name(), grad, variable);
  const std::int64_t step = iterations_ + 1;
  for (const auto& [grad, variable] : grads_and_vars) {
    Variable v = variable;
    apply_one(grad, v, step);
  }
  iterations_ = step;
}

void Optimizer::apply_gradients(std::initializer_list<std::pair<Tensor, Variable>> grads_and_vars) {
  apply_gradients(std::vector<std::pair<Tensor, Variable>>(grads_and_vars));
}

void Optimizer::apply_one(const GradientValue& grad, Variable& variable, std::int64_t step) {
  if (!grad.defined()) {
    detail::warn_once(std::string("optimizer-no-gradient-") + variable.name(),
                      std::string(name()) +
                          "::apply_gradients: Gradients do not exist for "
                          "variables ['" +
                          variable.name() +
                          "'] when minimizing the loss; they "
                          "are left unchanged.");
    return;
  }
  if (!grad.is_sparse()) {  // checked (check_gradient)
    update_dense(variable, grad.dense(), slots_for(variable), step);
    return;
  }
  auto [unique, summed] = detail::dispatch_floating(name(), variable.dtype(), [&](auto zero) {
    return deduplicate<decltype(zero)>(variable, grad.sparse());
  });
  update_sparse(variable, unique, summed, slots_for(variable), step);
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(apply_gradients)
