// The gradient registry and the recording entry point: how built-in ops and user primitives
// tell the tape what they did and how to differentiate it (TF: ops.RegisterGradient,
// ops.NotDifferentiable, record_gradient).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Named attributes of a recorded op (axes, flags, shapes) that its gradient reads.
class Attrs {
 public:
  using Value = std::variant<std::int64_t, double, bool, DType, std::vector<std::int64_t>, Shape>;

  Attrs& set(std::string name, Value value);
  bool has(const std::string& name) const;
  /// Each getter throws InvalidArgument when the name is missing or holds another type.
  std::int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  DType get_dtype(const std::string& name) const;
  const std::vector<std::int64_t>& get_ints(const std::string& name) const;
  const Shape& get_shape(const std::string& name) const;
  bool empty() const { return items_.empty(); }
  /// Same names, in the same order, with equal values.
  bool operator==(const Attrs& other) const;  // out of line: costly to compile in every file
  bool operator!=(const Attrs& other) const { return !(*this == other); }

 private:
  const Value& find(const std::string& name) const;
  std::vector<std::pair<std::string, Value>> items_;
};

/// Which of an op's inputs (or outputs) its gradient reads. The tape keeps only those alive.
struct Keep {
  static Keep all() { return Keep{true, {}}; }
  static Keep none() { return Keep{false, {}}; }
  static Keep only(std::initializer_list<std::size_t> indices) { return Keep{false, indices}; }
  bool keeps(std::size_t index) const;

  bool every = true;
  std::vector<std::size_t> indices;
};

namespace detail {
struct OpEntry;
class OpContextFactory;  // the backward walk: the only place that builds an OpContext
}  // namespace detail

/// What a gradient function sees of the op it differentiates.
class OpContext {
 public:
  const std::string& op_type() const;
  /// One per input; undefined where the registration did not ask to keep that input.
  const std::vector<Tensor>& inputs() const;
  /// One per output; undefined where the registration did not ask to keep that output.
  const std::vector<Tensor>& outputs() const;
  const Attrs& attrs() const;
  /// False when no source of the current gradient call depends on that input: its gradient
  /// may be left undefined (a cheap skip, never required).
  bool needs_gradient(std::size_t input_index) const;

  /// Shapes and dtypes are always known, kept or not.
  std::size_t num_inputs() const;
  std::size_t num_outputs() const;
  Shape input_shape(std::size_t index) const;
  DType input_dtype(std::size_t index) const;
  Shape output_shape(std::size_t index) const;
  DType output_dtype(std::size_t index) const;
  /// True when `t` has the shape of input `index` (cheaper than comparing input_shape()).
  bool input_shape_matches(std::size_t index, const Tensor& t) const;

 private:
  friend class detail::OpContextFactory;
  // The entry's kept tensors, already gathered by the walk (one per input and output,
  // undefined where not kept).
  OpContext(const detail::OpEntry& entry, const std::vector<bool>& needs_gradient,
            const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs)
      : entry_(entry), needs_gradient_(needs_gradient), inputs_(&inputs), outputs_(&outputs) {}

  const detail::OpEntry& entry_;
  const std::vector<bool>& needs_gradient_;
  const std::vector<Tensor>* inputs_;
  const std::vector<Tensor>* outputs_;
  mutable std::string op_type_;  // built on first use
};

/// (op context, one gradient per output: undefined or zeros where the output was unused)
///   -> one gradient per input (undefined where there is none).
using GradientFunction =
    std::function<std::vector<Tensor>(const OpContext&, const std::vector<Tensor>& output_grads)>;
/// The same, for gradients that may be row-sparse (IndexedSlices), as gather's.
using SparseGradientFunction = std::function<std::vector<GradientValue>(
    const OpContext&, const std::vector<Tensor>& output_grads)>;

/// Registers the gradient of `op_type`. `keep_inputs` / `keep_outputs` say which tensors the
/// function reads (the default keeps all of them). InvalidArgument when `op_type` already has
/// a gradient, is marked not differentiable, or is a built-in op (TF: "Registering two
/// gradient with name").
void register_gradient(const std::string& op_type, GradientFunction fn,
                       Keep keep_inputs = Keep::all(), Keep keep_outputs = Keep::all());
void register_sparse_gradient(const std::string& op_type, SparseGradientFunction fn,
                              Keep keep_inputs = Keep::all(), Keep keep_outputs = Keep::all());
/// Marks `op_type` as having no gradient: its inputs receive undefined gradients
/// (TF: ops.NotDifferentiable).
void not_differentiable(const std::string& op_type);
/// True when `op_type` has a gradient or is marked not differentiable; true for every
/// built-in op from the start. A built-in op's gradient cannot be replaced: register_gradient
/// with a built-in name throws InvalidArgument.
bool is_registered(const std::string& op_type);

/// A built-in op type as the registry holds it.
struct RegisteredOpInfo {
  std::string name;
  bool differentiable;  // false: marked not differentiable (its inputs get no gradient)
  bool has_gradient;    // a gradient rule, or the identity gradient
};
/// Every built-in op type, in registration order (for tools and docs).
std::vector<RegisteredOpInfo> registered_ops();

/// Records an op whose forward the caller computed: a no-op unless an active tape on this
/// thread watches one of the floating-point inputs. The gradient is looked up by `op_type`
/// when `gradient()` runs (LookupError naming it when there is none). When an input carries
/// a tangent on an active ForwardAccumulator, the outputs get theirs at once through the
/// transpose of that gradient (LookupError naming the op when it has none yet).
/// InvalidArgument naming the op when, while something observes (a tape or accumulator), an
/// input or output is undefined or an output is one of the inputs (the same tensor, as a
/// shallow copy is): an op's outputs must be new tensors. Nothing is recorded then.
void record_operation(const std::string& op_type, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs);
void record_operation(const std::string& op_type, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs, Attrs attrs);
/// True when some active tape on this thread would record an op with these inputs (tapes
/// only, as TF's should_record_backprop: a primitive guarded by it gets no tangents under a
/// ForwardAccumulator without a tape; call record_operation unconditionally for those).
bool should_record(const std::vector<Tensor>& inputs);

}  // namespace tapegrad
