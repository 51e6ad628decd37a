// The gradient registry and the recording entry point: how built-in ops and user primitives
// tell the tape what they did and how to differentiate it (TF: ops.RegisterGradient,
// ops.NotDifferentiable, record_gradient), and how a user primitive adds the rules a built-in
// op has: forward mode, batching, and the vectorized Jacobian's diagonal (JAX: defjvp /
// primitive_jvps, primitive_batchers).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
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
  /// Names are looked up as views: a literal costs no std::string.
  bool has(std::string_view name) const;
  /// Each getter throws InvalidArgument when the name is missing or holds another type.
  std::int64_t get_int(std::string_view name) const;
  double get_double(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  DType get_dtype(std::string_view name) const;
  const std::vector<std::int64_t>& get_ints(std::string_view name) const;
  const Shape& get_shape(std::string_view name) const;
  bool empty() const;  // out of line: inline, it instantiated the item vector in every file
  /// Same names, in the same order, with equal values.
  bool operator==(const Attrs& other) const;  // out of line: costly to compile in every file
  bool operator!=(const Attrs& other) const { return !(*this == other); }

 private:
  const Value& find(std::string_view name) const;
  std::vector<std::pair<std::string, Value>> items_;
};

/// Which of an op's inputs (or outputs) its gradient reads. The tape keeps only those alive.
struct Keep {
  // Out of line, as the next two: inline, their std::vector constructions were instantiated
  // in every program that includes tapegrad.hpp.
  static Keep all();
  static Keep none();
  static Keep only(std::initializer_list<std::size_t> indices);
  bool keeps(std::size_t index) const;

  bool every = true;
  std::vector<std::size_t> indices;
};

namespace detail {
struct OpEntry;
struct RuleOpView;       // what a forward, batching or structure rule sees (no tape entry)
class OpContextFactory;  // the runtime: the only place that builds an OpContext
}  // namespace detail

/// What a gradient function sees of the op it differentiates; a user primitive's forward,
/// batching and structure rules (below) see their op through it too.
///
/// In a forward rule, inputs() and outputs() hold every input and output of the op as it ran,
/// and needs_gradient(i) is true when input i carries a tangent. In a batching or structure
/// rule the shapes are one example's (no batch axis), inputs() holds the value of each input
/// that is not batched and undefined for the batched (or diagonal) ones, whose batches are the
/// rule's arguments; outputs() are undefined (not computed yet) and needs_gradient() is false.
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

  /// Shapes and dtypes are always known, kept or not (one example's in a batching rule).
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
      : entry_(&entry), needs_gradient_(&needs_gradient), inputs_(&inputs), outputs_(&outputs) {}
  // A rule's view of an op that has no tape entry (forward, batching and structure rules).
  OpContext(const detail::RuleOpView& view, const std::vector<bool>& needs_gradient,
            const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs)
      : view_(&view), needs_gradient_(&needs_gradient), inputs_(&inputs), outputs_(&outputs) {}

  const detail::OpEntry* entry_ = nullptr;    // a gradient function's op: the tape's entry
  const detail::RuleOpView* view_ = nullptr;  // another rule's op
  const std::vector<bool>* needs_gradient_;
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
/// a tangent on an active ForwardAccumulator, the outputs get theirs at once from the op's
/// forward rule (register_forward_rule) or else through the transpose of that gradient
/// (LookupError naming the op when it has neither yet).
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

// ---- A user primitive's other rules ------------------------------------------------------
// Each is registered once per op type, like its gradient, and may be registered after the op
// was recorded (it is looked up when it is needed). Each throws InvalidArgument naming the
// registering function and the op type when the function is empty, when `op_type` is a built-in
// op (its rules cannot be replaced), or when the op type already has that rule. Rules are
// written with tapegrad ops (or user primitives), so that tapes, accumulators and traces
// observe them: they nest like the built-in ones.

/// The batch-axis entry of an input that carries no batch axis (the same value for every row).
inline constexpr int kNotBatched = -1;

/// (the op as it ran, one tangent per input: undefined where the input carries none) -> one
/// tangent per output (undefined: none), each of its output's shape and dtype.
using ForwardRuleFunction =
    std::function<std::vector<Tensor>(const OpContext&, const std::vector<Tensor>& input_tangents)>;
/// (the op as it ran on one example, its inputs, and for each input its batch axis: 0 when it
/// carries an extra leading batch axis of size B (B = inputs[i].shape()[0]), kNotBatched when
/// it is the example's own value) -> its outputs, each [B] ++ the output's example shape
/// (OpContext::output_shape), row b being the op on row b of the inputs.
using BatchingRuleFunction = std::function<std::vector<Tensor>(
    const OpContext&, const std::vector<Tensor>& inputs, const std::vector<int>& batch_axes)>;
/// (the op as it ran on one example, its inputs, and which of them are diagonal) -> its outputs
/// as diagonals or dense batches, or an empty vector to decline (the batching rule then runs on
/// the dense batches). A diagonal input `inputs[i]` has the example's shape and stands for the
/// batch of B = inputs[i].size() rows whose row b is e_b * inputs[i][b] (e_b: one-hot at flat
/// position b); the other inputs are the example's own values. Each output is returned as such
/// a diagonal (the output's example shape) or as the dense batch ([B] ++ that shape).
using StructureRuleFunction = std::function<std::vector<Tensor>(
    const OpContext&, const std::vector<Tensor>& inputs, const std::vector<bool>& diagonal)>;

/// Registers the forward-mode rule (JVP) of `op_type`: ForwardAccumulator, jvp and
/// jacobian_forward use it instead of the transpose of the gradient (and without that
/// fallback's warning). Its result is checked: InvalidArgument naming the op when it returns
/// the wrong number of tangents, or one of another shape or dtype than its output. Used
/// whenever registered, before the gradient (JAX: defjvp, ad.primitive_jvps; TF: none).
void register_forward_rule(const std::string& op_type, ForwardRuleFunction fn);
/// Registers the batching rule of `op_type`: vectorized_map, the vectorized jacobian and
/// batch_jacobian and jacobian_forward replay the op once on the whole batch with it, instead
/// of a loop (no warning; works with fallback_to_loop = false). InvalidArgument naming the op,
/// its output and the shapes when it returns the wrong number of outputs or one of another
/// shape or dtype (JAX: batching.primitive_batchers; TF: pfor's RegisterPFor).
void register_batching_rule(const std::string& op_type, BatchingRuleFunction fn);
/// Registers the structure rule of `op_type`, for an op linear in its batched inputs: the
/// vectorized Jacobian keeps the identity seed's descendants diagonal (B numbers, not B^2)
/// through it instead of making them dense before the op. Runs only when every batched input is
/// diagonal and the op also has a batching rule; row b of its result must be the op's forward on
/// row b. InvalidArgument naming the op and the shapes on a result of the wrong shape or dtype
/// (JAX: no analogue; its sparse-aware batching rules come closest).
void register_structure_rule(const std::string& op_type, StructureRuleFunction fn);

}  // namespace tapegrad
