// Module's registry: one ordered list of named entries, each a Variable or an owned submodule,
// so that the order of named_variables() is the order of registration across both kinds.
#include "tapegrad/module.hpp"

#include <optional>

#include "tapegrad/errors.hpp"

namespace tapegrad {

struct Module::Entry {
  std::string name;
  std::optional<Variable> variable;  // set for a variable entry
  std::unique_ptr<Module> module;    // set for a submodule entry
};

Module::Module() = default;
Module::~Module() = default;
Module::Module(Module&& other) noexcept = default;
Module& Module::operator=(Module&& other) noexcept = default;

void Module::check_new_name(const char* call, const std::string& name) const {
  if (name.empty()) throw InvalidArgument(std::string(call) + ": the name is empty");
  if (name.find('/') != std::string::npos) {
    throw InvalidArgument(std::string(call) + ": the name '" + name +
                          "' contains '/' (the separator of variable paths)");
  }
  for (const Entry& entry : entries_) {
    if (entry.name == name) {
      throw InvalidArgument(std::string(call) + ": the name '" + name + "' is already used by a " +
                            (entry.module ? "submodule" : "variable") + " of this module");
    }
  }
}

Variable Module::add_variable(const std::string& name, Tensor initial, bool trainable) {
  check_new_name("Module::add_variable", name);
  if (!initial.defined()) {
    throw InvalidArgument("Module::add_variable: the initial value of '" + name + "' is undefined");
  }
  Variable variable(std::move(initial), trainable, name);
  entries_.push_back(Entry{name, variable, nullptr});
  return variable;
}

void Module::register_module(const std::string& name, std::unique_ptr<Module> module) {
  check_new_name("Module::add_module", name);
  entries_.push_back(Entry{name, std::nullopt, std::move(module)});
}

void Module::collect(const std::string& prefix, bool trainable_only,
                     std::vector<std::pair<std::string, Variable>>& out) const {
  for (const Entry& entry : entries_) {
    if (entry.module) {
      entry.module->collect(prefix + entry.name + "/", trainable_only, out);
    } else if (!trainable_only || entry.variable->trainable()) {
      out.emplace_back(prefix + entry.name, *entry.variable);
    }
  }
}

std::vector<std::pair<std::string, Variable>> Module::named_variables() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", false, out);
  return out;
}

std::vector<Variable> Module::variables() const {
  std::vector<Variable> out;
  for (auto& named : named_variables()) out.push_back(std::move(named.second));
  return out;
}

std::vector<Variable> Module::trainable_variables() const {
  std::vector<std::pair<std::string, Variable>> named;
  collect("", true, named);
  std::vector<Variable> out;
  for (auto& entry : named) out.push_back(std::move(entry.second));
  return out;
}

}  // namespace tapegrad
