// SGD and Adam: in-place updates of Variables from dense or row-sparse gradients. The
// arithmetic is plain loops in the variable's dtype: an update is never differentiated.
#include "tapegrad/optim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "kernels/dispatch.hpp"
#include "kernels/shape_util.hpp"
#include "optim/adam_update.hpp"
#include "runtime/in_place.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/warn.hpp"

namespace tapegrad {
namespace {

std::string where(const char* optimizer, const Variable& v) {
  return std::string(optimizer) + "::apply_gradients: variable '" + v.name() + "' (shape " +
         shape_to_string(v.shape()) + ", dtype " + dtype_name(v.dtype()) + ")";
}

std::size_t row_size(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

void check_sparse(const char* optimizer, const Variable& v, const IndexedSlices& s) {
  const std::string at = where(optimizer, v);
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
std::pair<std::vector<std::int64_t>, Tensor> deduplicate(const char* optimizer, const Variable& v,
                                                         const IndexedSlices& s) {
  const std::vector<std::int64_t> raw = detail::index_values(s.indices);
  const std::size_t rows = v.shape()[0];
  const std::size_t width = row_size(v.shape());
  std::unordered_map<std::int64_t, std::size_t> position;
  std::vector<std::int64_t> unique;
  for (std::int64_t index : raw) {
    if (index < 0 || static_cast<std::size_t>(index) >= rows) {
      throw InvalidArgument(where(optimizer, v) + ": index " + std::to_string(index) +
                            " is out of range [0, " + std::to_string(rows) + ")");
    }
    if (position.emplace(index, unique.size()).second) unique.push_back(index);
  }
  Shape summed_shape = v.shape();
  summed_shape[0] = unique.size();
  xt::xarray<T> summed = xt::zeros<T>(summed_shape);
  const T* values = s.values.array<T>().data();
  for (std::size_t k = 0; k < raw.size(); ++k) {
    T* row = summed.data() + position[raw[k]] * width;
    for (std::size_t j = 0; j < width; ++j) row[j] += values[k * width + j];
  }
  return {std::move(unique), Tensor(std::move(summed))};
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

Optimizer::Slots& Optimizer::slots_for(const Variable& variable) {
  auto it = slots_.find(variable.id());
  if (it != slots_.end()) return it->second;
  Slots slots;
  for (std::size_t i = 0; i < slot_names().size(); ++i) {
    slots.push_back(zeros(variable.shape(), variable.dtype()));
  }
  return slots_.emplace(variable.id(), std::move(slots)).first->second;
}

double Optimizer::checkpointed_learning_rate() const {
  return std::numeric_limits<double>::quiet_NaN();
}

void Optimizer::restore_learning_rate(double) {}

Tensor Optimizer::slot(const Variable& variable, const std::string& slot_name) const {
  const auto names = slot_names();
  const auto pos = std::find(names.begin(), names.end(), slot_name);
  auto it = slots_.find(variable.id());
  if (pos == names.end() || it == slots_.end()) {
    throw InvalidArgument(std::string(name()) + "::slot: no slot '" + slot_name +
                          "' for variable '" + variable.name() + "'");
  }
  return it->second[static_cast<std::size_t>(pos - names.begin())];
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
  if (!is_floating(variable.dtype())) {
    throw InvalidArgument(where(name(), variable) +
                          ": only float32 and float64 variables "
                          "can be optimized");
  }
  if (!grad.is_sparse()) {
    const Tensor& g = grad.dense();
    if (g.shape() != variable.shape() || g.dtype() != variable.dtype()) {
      throw InvalidArgument(where(name(), variable) + ": the gradient has shape " +
                            shape_to_string(g.shape()) + " and dtype " + dtype_name(g.dtype()));
    }
    update_dense(variable, g, slots_for(variable), step);
    return;
  }
  check_sparse(name(), variable, grad.sparse());
  auto [unique, summed] = detail::dispatch_floating(name(), variable.dtype(), [&](auto zero) {
    return deduplicate<decltype(zero)>(name(), variable, grad.sparse());
  });
  update_sparse(variable, unique, summed, slots_for(variable), step);
}

// ---- SGD --------------------------------------------------------------------------------

SGD::SGD(double learning_rate, double momentum, bool nesterov)
    : learning_rate_(learning_rate), momentum_(momentum), nesterov_(nesterov) {
  if (!(learning_rate >= 0.0)) {
    throw InvalidArgument("SGD: learning_rate must be >= 0, got " + std::to_string(learning_rate));
  }
  if (!(momentum >= 0.0 && momentum <= 1.0)) {
    throw InvalidArgument("SGD: momentum must be in [0, 1], got " + std::to_string(momentum));
  }
}

void SGD::set_learning_rate(double learning_rate) {
  if (!(learning_rate >= 0.0)) {
    throw InvalidArgument("SGD: learning_rate must be >= 0, got " + std::to_string(learning_rate));
  }
  learning_rate_ = learning_rate;
}

std::vector<std::string> SGD::slot_names() const {
  return momentum_ > 0.0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
}

namespace {

// One SGD step on `n` elements: w[at[i]] from g[i] (and velocity[at[i]]).
template <class T>
void sgd_step(T* w, T* velocity, const T* g, const std::size_t* at, std::size_t n, T lr, T momentum,
              bool nesterov) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = at != nullptr ? at[i] : i;
    if (velocity == nullptr) {
      w[k] -= lr * g[i];
      continue;
    }
    velocity[k] = momentum * velocity[k] - lr * g[i];
    w[k] += nesterov ? momentum * velocity[k] - lr * g[i] : velocity[k];
  }
}

}  // namespace

void SGD::update_dense(Variable& variable, const Tensor& grad, Slots& slots, std::int64_t) {
  detail::dispatch_floating(name(), variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* velocity = slots.empty() ? nullptr : detail::elements_to_overwrite<T>(slots[0]);
    const T* g = detail::kernel_data<T>(grad);
    detail::update_variable(variable, [&](Tensor& value) {
      sgd_step<T>(detail::elements_to_overwrite<T>(value), velocity, g, nullptr, value.size(),
                  static_cast<T>(learning_rate_), static_cast<T>(momentum_), nesterov_);
    });
  });
}

void SGD::update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                        const Tensor& summed_rows, Slots& slots, std::int64_t) {
  detail::dispatch_floating(name(), variable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::size_t width = row_size(variable.shape());
    std::vector<std::size_t> at;
    at.reserve(unique_indices.size() * width);
    for (std::int64_t row : unique_indices) {
      for (std::size_t j = 0; j < width; ++j)
        at.push_back(static_cast<std::size_t>(row) * width + j);
    }
    T* velocity = slots.empty() ? nullptr : detail::elements_to_overwrite<T>(slots[0]);
    const T* rows = detail::kernel_data<T>(summed_rows);
    detail::update_variable(variable, [&](Tensor& value) {
      sgd_step<T>(detail::elements_to_overwrite<T>(value), velocity, rows, at.data(), at.size(),
                  static_cast<T>(learning_rate_), static_cast<T>(momentum_), nesterov_);
    });
  });
}

// ---- Adam -------------------------------------------------------------------------------

Adam::Adam(double learning_rate, double beta_1, double beta_2, double epsilon)
    : learning_rate_(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon) {
  if (!(learning_rate >= 0.0)) {
    throw InvalidArgument("Adam: learning_rate must be >= 0, got " + std::to_string(learning_rate));
  }
  if (!(beta_1 >= 0.0 && beta_1 < 1.0) || !(beta_2 >= 0.0 && beta_2 < 1.0)) {
    throw InvalidArgument("Adam: beta_1 and beta_2 must be in [0, 1), got " +
                          std::to_string(beta_1) + " and " + std::to_string(beta_2));
  }
  if (!(epsilon >= 0.0)) {
    throw InvalidArgument("Adam: epsilon must be >= 0, got " + std::to_string(epsilon));
  }
}

Adam::Adam(const AdamOptions& options)
    : Adam(options.learning_rate, options.beta1, options.beta2, options.epsilon) {
  pytorch_epsilon_ = options.pytorch_epsilon;
}

void Adam::set_learning_rate(double learning_rate) {
  if (!(learning_rate >= 0.0)) {
    throw InvalidArgument("Adam: learning_rate must be >= 0, got " + std::to_string(learning_rate));
  }
  learning_rate_ = learning_rate;
}

std::vector<std::string> Adam::slot_names() const { return {"m", "v"}; }

void Adam::update_dense(Variable& variable, const Tensor& grad, Slots& slots, std::int64_t step) {
  const detail::AdamRule rule{learning_rate_, beta_1_, beta_2_, epsilon_, pytorch_epsilon_, 0.0};
  detail::adam_update(name(), rule, variable, grad, slots, step);
}

void Adam::update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                         const Tensor& summed_rows, Slots& slots, std::int64_t step) {
  // TF's Adam decays m and v on every row, then adds the (deduplicated) rows: the same as the
  // dense update with zeros in the rows not named.
  update_dense(variable, detail::densify_rows(name(), variable, unique_indices, summed_rows), slots,
               step);
}

}  // namespace tapegrad
