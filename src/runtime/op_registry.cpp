// The op registry: the built-in ops, each registered during static initialisation by the
// object TAPEGRAD_BUILTIN_OP puts beside it, and the user primitives. Built-in definitions are
// constants; user ones live here for the whole process, since a tape may point at one at any time
// and the walk reads a published gradient without a lock.
#include "runtime/op_registry.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime/recording.hpp"

namespace tapegrad::detail {

// One function per source file in src/ops/ (TAPEGRAD_OP_SOURCE), listed by the build.
#define TAPEGRAD_OP_SOURCE_ENTRY(stem) void op_source_##stem();
#include "op_sources.inc"
#undef TAPEGRAD_OP_SOURCE_ENTRY

RegisteredOp::RegisteredOp(std::string op_name)
    : OpDefinition{nullptr, GradientKind::Registered, nullptr, KeepSet::all(), KeepSet::all()},
      name_storage(std::move(op_name)) {
  name = name_storage.c_str();
}

KeepSet KeepSet::from(const Keep& keep) {
  if (keep.every) return all();
  KeepSet set = none();
  for (std::size_t i : keep.indices) {
    if (i >= 64) return all();
    set.mask_ |= std::uint64_t{1} << i;
  }
  return set;
}

namespace {

class Registry final {
 public:
  static Registry& instance() {
    static Registry registry;
    return registry;
  }

  // Never changes after the constructor: read without the lock.
  const OpDefinition* builtin(const std::string& name) const {
    auto it = builtins_.find(name);
    return it == builtins_.end() ? nullptr : it->second;
  }
  const std::vector<const OpDefinition*>& builtin_list() const { return builtin_list_; }

  RegisteredOp& user_op(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& op = user_ops_[name];
    if (!op) op = std::make_unique<RegisteredOp>(name);
    return *op;
  }

  // Publishes `value` in `slot` of the user op `name`, once. `caller` names the registering
  // function in the errors, `rule` what it registers, `already` what a second one would meet.
  template <class Value>
  void publish(const char* caller, const char* rule, const char* already, const std::string& name,
               std::atomic<const Value*> RegisteredOp::*slot, std::shared_ptr<const Value> value) {
    if (builtin(name) != nullptr) {
      throw InvalidArgument(std::string(caller) + ": '" + name + "' is a built-in op; its " + rule +
                            " cannot be replaced");
    }
    RegisteredOp& op = user_op(name);
    std::lock_guard<std::mutex> lock(mutex_);
    if ((op.*slot).load(std::memory_order_relaxed) != nullptr) {
      throw InvalidArgument(std::string(caller) + ": op type '" + name + "' already has " +
                            already);
    }
    (op.*slot).store(value.get(), std::memory_order_release);
    published_.push_back(std::move(value));
  }

  // A user primitive's forward, batching or structure rule.
  template <class Function>
  void publish_rule(const char* caller, const char* rule, const std::string& name,
                    std::atomic<const Function*> RegisteredOp::*slot, Function fn) {
    if (!fn) {
      throw InvalidArgument(std::string(caller) + ": empty " + rule + " function for '" + name +
                            "'");
    }
    const std::string already = std::string("a ") + rule;
    publish(caller, rule, already.c_str(), name, slot,
            std::make_shared<const Function>(std::move(fn)));
  }

  // Runs during static initialisation, one op at a time: before main, on one thread.
  void add(const OpDefinition& definition) {
    if (!builtins_.emplace(definition.name, &definition).second) {
      throw std::logic_error(std::string("tapegrad: two built-in ops are named '") +
                             definition.name + "'");
    }
    const auto by_name = [](const OpDefinition* a, const OpDefinition* b) {
      return std::strcmp(a->name, b->name) < 0;
    };
    builtin_list_.insert(
        std::upper_bound(builtin_list_.begin(), builtin_list_.end(), &definition, by_name),
        &definition);
  }

 private:
  // Calling each op source keeps it, and so its registrations, in a statically linked program.
  Registry() {
#define TAPEGRAD_OP_SOURCE_ENTRY(stem) op_source_##stem();
#include "op_sources.inc"
#undef TAPEGRAD_OP_SOURCE_ENTRY
  }

  std::unordered_map<std::string, const OpDefinition*> builtins_;
  std::vector<const OpDefinition*> builtin_list_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<RegisteredOp>> user_ops_;
  std::vector<std::shared_ptr<const void>> published_;  // every user gradient and rule
};

// A user primitive's gradient (or its not-differentiable mark): register_gradient's errors for
// all three registering functions, as before.
void publish(const std::string& op_type, std::unique_ptr<UserGradient> gradient) {
  Registry::instance().publish(
      "register_gradient", "gradient", "a gradient or is marked not differentiable", op_type,
      &RegisteredOp::gradient, std::shared_ptr<const UserGradient>(std::move(gradient)));
}

}  // namespace

BuiltinOpRegistration::BuiltinOpRegistration(const OpDefinition& definition) {
  Registry::instance().add(definition);
}

const OpDefinition& op_named(const std::string& op_type) {
  Registry& registry = Registry::instance();
  if (const OpDefinition* d = registry.builtin(op_type)) return *d;
  return registry.user_op(op_type);
}

const std::vector<const OpDefinition*>& builtin_ops() {
  return Registry::instance().builtin_list();
}

}  // namespace tapegrad::detail

namespace tapegrad {

void register_gradient(const std::string& op_type, GradientFunction fn, Keep keep_inputs,
                       Keep keep_outputs) {
  if (!fn)
    throw InvalidArgument("register_gradient: empty gradient function for '" + op_type + "'");
  auto gradient = std::make_unique<detail::UserGradient>();
  gradient->dense = std::move(fn);
  gradient->keep_inputs = detail::KeepSet::from(keep_inputs);
  gradient->keep_outputs = detail::KeepSet::from(keep_outputs);
  detail::publish(op_type, std::move(gradient));
}

void register_sparse_gradient(const std::string& op_type, SparseGradientFunction fn,
                              Keep keep_inputs, Keep keep_outputs) {
  if (!fn)
    throw InvalidArgument("register_sparse_gradient: empty gradient function for '" + op_type +
                          "'");
  auto gradient = std::make_unique<detail::UserGradient>();
  gradient->sparse = std::move(fn);
  gradient->keep_inputs = detail::KeepSet::from(keep_inputs);
  gradient->keep_outputs = detail::KeepSet::from(keep_outputs);
  detail::publish(op_type, std::move(gradient));
}

void register_forward_rule(const std::string& op_type, ForwardRuleFunction fn) {
  detail::Registry::instance().publish_rule("register_forward_rule", "forward rule", op_type,
                                            &detail::RegisteredOp::user_forward, std::move(fn));
}

void register_batching_rule(const std::string& op_type, BatchingRuleFunction fn) {
  detail::Registry::instance().publish_rule("register_batching_rule", "batching rule", op_type,
                                            &detail::RegisteredOp::user_batching, std::move(fn));
}

void register_structure_rule(const std::string& op_type, StructureRuleFunction fn) {
  detail::Registry::instance().publish_rule("register_structure_rule", "structure rule", op_type,
                                            &detail::RegisteredOp::user_structure, std::move(fn));
}

void not_differentiable(const std::string& op_type) {
  auto gradient = std::make_unique<detail::UserGradient>();
  gradient->not_differentiable = true;
  gradient->keep_inputs = detail::KeepSet::none();
  gradient->keep_outputs = detail::KeepSet::none();
  detail::publish(op_type, std::move(gradient));
}

bool is_registered(const std::string& op_type) {
  const detail::OpDefinition& op = detail::op_named(op_type);
  return op.kind != detail::GradientKind::Registered || detail::registered_gradient(op) != nullptr;
}

std::vector<RegisteredOpInfo> registered_ops() {
  std::vector<RegisteredOpInfo> ops;
  for (const detail::OpDefinition* d : detail::builtin_ops()) {
    const bool has_gradient = (d->kind == detail::GradientKind::Rule && d->gradient != nullptr) ||
                              d->kind == detail::GradientKind::Identity;
    ops.push_back(RegisteredOpInfo{d->name, d->kind != detail::GradientKind::NotDifferentiable,
                                   has_gradient});
  }
  return ops;
}

void record_operation(const std::string& op_type, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs) {
  record_operation(op_type, inputs, outputs, Attrs());
}

void record_operation(const std::string& op_type, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs, Attrs attrs) {
  if (!detail::any_observer()) return;
  for (const auto& t : inputs) {
    if (!t.defined())
      throw InvalidArgument("record_operation('" + op_type + "'): an input is undefined");
  }
  for (const auto& t : outputs) {
    if (!t.defined())
      throw InvalidArgument("record_operation('" + op_type + "'): an output is undefined");
  }
  // An output that is one of the inputs would make the tape's producer of that tensor this
  // op, whose gradient then also reaches the input it was meant to come from: every later use
  // of the tensor would be counted twice (gradient(x * 3, x) gave 6).
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (outputs[j].id() != inputs[i].id()) continue;
      throw InvalidArgument("record_operation('" + op_type + "'): output " + std::to_string(j) +
                            " is input " + std::to_string(i) + " (the same tensor, shape " +
                            shape_to_string(outputs[j].shape()) + " and dtype " +
                            dtype_name(outputs[j].dtype()) +
                            "): an op's outputs must be new tensors, not its inputs");
    }
  }
  detail::record_on_tapes(detail::op_named(op_type), inputs, outputs, &attrs, nullptr);
}

}  // namespace tapegrad
