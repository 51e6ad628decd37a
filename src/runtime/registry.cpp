#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime/op_registry.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape.hpp"

namespace tapegrad {

// ---- Attrs -----------------------------------------------------------------------------

Attrs& Attrs::set(std::string name, Value value) {
  for (auto& item : items_) {
    if (item.first == name) {
      item.second = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

bool Attrs::has(const std::string& name) const {
  return std::any_of(items_.begin(), items_.end(),
                     [&](const auto& item) { return item.first == name; });
}

const Attrs::Value& Attrs::find(const std::string& name) const {
  for (const auto& item : items_) {
    if (item.first == name) return item.second;
  }
  throw InvalidArgument("Attrs: no attribute '" + name + "'");
}

namespace {
template <class T>
const T& get_as(const Attrs::Value& v, const std::string& name, const char* type) {
  const T* p = std::get_if<T>(&v);
  if (p == nullptr) throw InvalidArgument("Attrs: attribute '" + name + "' is not " + type);
  return *p;
}
}  // namespace

std::int64_t Attrs::get_int(const std::string& name) const {
  return get_as<std::int64_t>(find(name), name, "an int");
}
double Attrs::get_double(const std::string& name) const {
  return get_as<double>(find(name), name, "a double");
}
bool Attrs::get_bool(const std::string& name) const {
  return get_as<bool>(find(name), name, "a bool");
}
DType Attrs::get_dtype(const std::string& name) const {
  return get_as<DType>(find(name), name, "a dtype");
}
const std::vector<std::int64_t>& Attrs::get_ints(const std::string& name) const {
  return get_as<std::vector<std::int64_t>>(find(name), name, "a list of ints");
}
const Shape& Attrs::get_shape(const std::string& name) const {
  return get_as<Shape>(find(name), name, "a shape");
}

bool Keep::keeps(std::size_t index) const {
  return every || std::find(indices.begin(), indices.end(), index) != indices.end();
}

// ---- OpContext -------------------------------------------------------------------------

const std::string& OpContext::op_type() const { return entry_.op->name(); }
namespace {
// An entry's kept handles as a vector, undefined where nothing was kept. Built on first use
// only: the walk passes its own vectors when it has them (the runtime constructor).
const std::vector<Tensor>& kept_as_vector(const Tensor* saved, std::size_t n,
                                          std::vector<Tensor>& storage) {
  if (saved != nullptr) {
    storage.assign(saved, saved + n);
  } else {
    storage.resize(n);
  }
  return storage;
}
}  // namespace

const std::vector<Tensor>& OpContext::inputs() const {
  if (inputs_ == nullptr) {
    inputs_ = &kept_as_vector(entry_.saved_inputs(), entry_.n_inputs, undefined_inputs_);
  }
  return *inputs_;
}
const std::vector<Tensor>& OpContext::outputs() const {
  if (outputs_ == nullptr) {
    outputs_ = &kept_as_vector(entry_.saved_outputs(), entry_.n_outputs, undefined_outputs_);
  }
  return *outputs_;
}
const Attrs& OpContext::attrs() const {
  static const Attrs none;
  const Attrs* attrs = entry_.attrs();
  return attrs != nullptr ? *attrs : none;
}
bool OpContext::needs_gradient(std::size_t i) const {
  return i < needs_gradient_.size() && needs_gradient_[i];
}
std::size_t OpContext::num_inputs() const { return entry_.n_inputs; }
std::size_t OpContext::num_outputs() const { return entry_.n_outputs; }
Shape OpContext::input_shape(std::size_t i) const { return entry_.inputs().at(i).full_shape(); }
DType OpContext::input_dtype(std::size_t i) const { return entry_.inputs().at(i).dtype(); }
Shape OpContext::output_shape(std::size_t i) const { return entry_.outputs().at(i).full_shape(); }
bool OpContext::input_shape_matches(std::size_t i, const Tensor& t) const {
  return entry_.inputs().at(i).same_shape(t);
}
DType OpContext::output_dtype(std::size_t i) const { return entry_.outputs().at(i).dtype(); }

namespace detail {

// Slots and specs live for the whole process: a tape may reference a slot at any time and
// a published spec is read without a lock.
class Registry {
 public:
  static Registry& instance() {
    static Registry registry;
    return registry;
  }

  OpSlot& slot(const std::string& op_type) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = slots_[op_type];
    if (!s) s = std::make_unique<OpSlot>(op_type);
    return *s;
  }

  const OpSlot& publish(const std::string& op_type, std::unique_ptr<GradientSpec> spec) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = slots_[op_type];
    if (!s) s = std::make_unique<OpSlot>(op_type);
    if (s->spec() != nullptr) {
      throw InvalidArgument("register_gradient: op type '" + op_type +
                            "' already has a gradient or is marked not differentiable");
    }
    s->spec_.store(spec.get(), std::memory_order_release);
    specs_.push_back(std::move(spec));
    return *s;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<OpSlot>> slots_;
  std::vector<std::unique_ptr<GradientSpec>> specs_;
};

OpSlot& op_slot(const std::string& op_type) { return Registry::instance().slot(op_type); }

const OpSlot& define_op(const std::string& op_type, SparseGradientFunction fn, Keep keep_inputs,
                        Keep keep_outputs) {
  auto spec = std::make_unique<GradientSpec>();
  spec->sparse = std::move(fn);
  spec->keep_inputs = std::move(keep_inputs);
  spec->keep_outputs = std::move(keep_outputs);
  return Registry::instance().publish(op_type, std::move(spec));
}

const OpSlot& define_not_differentiable_op(const std::string& op_type) {
  auto spec = std::make_unique<GradientSpec>();
  spec->not_differentiable = true;
  spec->keep_inputs = Keep::none();
  spec->keep_outputs = Keep::none();
  return Registry::instance().publish(op_type, std::move(spec));
}

const OpSlot& define_identity_op(const std::string& op_type) {
  auto spec = std::make_unique<GradientSpec>();
  spec->sparse = [](const OpContext&, const std::vector<Tensor>& grads) {
    return std::vector<GradientValue>{GradientValue(grads[0])};
  };
  spec->keep_inputs = Keep::none();
  spec->keep_outputs = Keep::none();
  spec->identity_gradient = true;
  return Registry::instance().publish(op_type, std::move(spec));
}

}  // namespace detail

void register_gradient(const std::string& op_type, GradientFunction fn, Keep keep_inputs,
                       Keep keep_outputs) {
  if (!fn) throw InvalidArgument("register_gradient: empty gradient function for '" + op_type + "'");
  auto spec = std::make_unique<detail::GradientSpec>();
  spec->dense = std::move(fn);
  spec->keep_inputs = std::move(keep_inputs);
  spec->keep_outputs = std::move(keep_outputs);
  detail::Registry::instance().publish(op_type, std::move(spec));
}

void register_sparse_gradient(const std::string& op_type, SparseGradientFunction fn,
                              Keep keep_inputs, Keep keep_outputs) {
  if (!fn) throw InvalidArgument("register_sparse_gradient: empty gradient function for '" + op_type + "'");
  detail::define_op(op_type, std::move(fn), std::move(keep_inputs), std::move(keep_outputs));
}

void not_differentiable(const std::string& op_type) {
  detail::define_not_differentiable_op(op_type);
}

bool is_registered(const std::string& op_type) {
  return detail::op_slot(op_type).spec() != nullptr;
}

namespace {
std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> p;
  p.reserve(tensors.size());
  for (const auto& t : tensors) p.push_back(&t);
  return p;
}
}  // namespace

void record_operation(const std::string& op_type, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs) {
  record_operation(op_type, inputs, outputs, Attrs());
}

void record_operation(const std::string& op_type, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs, Attrs attrs) {
  if (!detail::any_tape_active()) return;
  for (const auto& t : inputs) {
    if (!t.defined()) throw InvalidArgument("record_operation('" + op_type + "'): an input is undefined");
  }
  for (const auto& t : outputs) {
    if (!t.defined()) throw InvalidArgument("record_operation('" + op_type + "'): an output is undefined");
  }
  const auto in = pointers(inputs);
  detail::record_on_tapes(detail::op_slot(op_type), in.data(), in.size(), outputs.data(),
                          outputs.size(), attrs);
}

}  // namespace tapegrad
