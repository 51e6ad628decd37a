// Module: a named container of Variables and submodules (TF: tf.Module; PyTorch:
// torch.nn.Module's parameter registry).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

/// The base of a model: a subclass registers its Variables with add_variable and its parts
/// with add_module, and gets them back by name and in a stable order (the order of
/// registration, a submodule's variables where the submodule was added), e.g.
///
///   struct Mlp : Module {
///     layers::Dense& hidden;
///     layers::Dense& output;
///     explicit Mlp(Generator& g)
///         : hidden(add_module("hidden", layers::Dense(64, 128, g))),
///           output(add_module("output", layers::Dense(128, 10, g))) {}
///   };
///   mlp.named_variables();  // "hidden/kernel", "hidden/bias", "output/kernel", "output/bias"
///
/// A module owns its submodules: add_module moves the given module into the parent and returns
/// a reference that stays valid while the parent lives, moves included. Modules move but do
/// not copy (a copy would have to choose between sharing and duplicating the Variables).
/// Names are one path component: non-empty, without '/', unique within their module
/// (InvalidArgument naming the module's call and the name otherwise).
class Module {
 public:
  virtual ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The trainable variables of this module and its submodules, in order (TF:
  /// Module.trainable_variables); what an optimizer and a tape's gradient take.
  std::vector<Variable> trainable_variables() const;
  /// Every variable, trainable or not, in order (TF: Module.variables).
  std::vector<Variable> variables() const;
  /// Every variable with its path: "kernel" for this module's own, "conv1/kernel" for a
  /// submodule's (the names a Checkpoint stores them under).
  std::vector<std::pair<std::string, Variable>> named_variables() const;

 protected:
  Module();
  /// Creates a Variable holding `initial` (named `name`), registers it and returns it.
  Variable add_variable(const std::string& name, Tensor initial, bool trainable = true);
  /// Moves `module` into this one under `name`; the reference stays valid while this module
  /// (or the module it is moved into) lives.
  /// The library's layers (layers::Dense, layers::Conv2D) have explicit specializations,
  /// declared in <tapegrad/layers.hpp>, compiled in the library.
  template <class M>
  M& add_module(const std::string& name, M module) {
    return adopt_module(name, std::move(module));
  }
  /// The same for a name given as a literal, add_module("conv1", ...): for the library's
  /// layers the std::string is then built in the library, not in the user's constructor.
  template <class M>
  M& add_module(const char* name, M module) {
    return adopt_module(std::string(name), std::move(module));
  }

 private:
  struct Entry;
  // add_module's body, shared by the template and the library's specializations.
  template <class M>
  M& adopt_module(const std::string& name, M&& module) {
    static_assert(std::is_base_of<Module, M>::value,
                  "add_module takes a class derived from Module");
    auto owned = std::make_unique<M>(std::move(module));
    M& added = *owned;
    register_module(name, std::move(owned));
    return added;
  }
  void check_new_name(const char* call, const std::string& name) const;
  void register_module(const std::string& name, std::unique_ptr<Module> module);
  void collect(const std::string& prefix, bool trainable_only,
               std::vector<std::pair<std::string, Variable>>& out) const;

  std::vector<Entry> entries_;
};

}  // namespace tapegrad
