// Generic batching rules (OpDefinition::batching_rule), so that most ops get theirs in one
// line. Each maker takes the op's public forward function as a template argument, calls it
// once on the whole batch, and comes with the op's replay rule (the same function on a
// Function's new inputs):
//
//   batch_unary<&tapegrad::exp>               one input, any leading axes (elementwise, and
//                                              ops batched over leading axes: cholesky, ...)
//   batch_broadcasting<&tapegrad::where>      n-ary elementwise with NumPy broadcasting
//   batch_binary_broadcasting<&tapegrad::add> the same, picking a binary op's Tensor-Tensor form
//   batch_all_batched<&detail::tanh_grad_op>  any op over leading axes whose inputs must agree
//                                              on them: unbatched inputs are broadcast first
//   batch_fused_activation<&detail::tanh_grad_op, &fixed_y>
//                                              a fused activation gradient F(y, g): the
//                                              above, or fixed_y(y, g) when y is fixed
//   batch_axis<&tapegrad::softmax>            f(x, int axis), the recorded "axis" shifted
//   batch_reduction<&tapegrad::reduce_sum>    f(x, axes, keepdims), recorded "axes" shifted
//   batch_into_first_axis<&conv2d_fn>         ops of a fixed rank whose first input has a
//                                              leading examples axis (NHWC conv, pooling):
//                                              the batch merged into it when only that input
//                                              is batched, else one call per row
//
// e.g.  TAPEGRAD_BUILTIN_OP(exp_op) = differentiable_op("Exp", exp_gradient, KeepSet::none(),
//           KeepSet::all(), exp_tangent, detail::batch_unary<&tapegrad::exp>);
// A function with overloads needs a cast or a one-line static wrapper to be named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/batching_context.hpp"
#include "runtime/replay_context.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The rank of input i's example (without the batch axis).
inline std::size_t example_rank(const BatchingContext& op, const std::vector<Tensor>& inputs,
                                std::size_t i) {
  return inputs[i].rank() - (op.is_batched(i) ? 1 : 0);
}

// A batched x ([B, s...], example rank r) as [B, 1, ..., 1, s...] with `rank` example axes, so
// that it broadcasts against examples of that rank (NumPy aligns trailing axes).
Tensor align_batched(const Tensor& x, std::size_t example_rank, std::size_t rank);

// Input i with the batch axis: itself when batched, else broadcast to [B] ++ its shape.
Tensor with_batch_axis(const BatchingContext& op, const std::vector<Tensor>& inputs, std::size_t i);

// x with axis `from` moved to the front (the others in order).
Tensor move_axis_to_front(const Tensor& x, std::size_t from);
// x with its first axis moved to position `to`.
Tensor move_front_axis_to(const Tensor& x, std::size_t to);

// Broadcasting inputs: every batched one aligned to the largest example rank among all.
std::vector<Tensor> aligned_for_broadcast(const BatchingContext& op,
                                          const std::vector<Tensor>& inputs);

template <class F>
struct ForwardArity;
template <class R, class... A>
struct ForwardArity<R (*)(A...)> : std::integral_constant<std::size_t, sizeof...(A)> {};

inline std::vector<Tensor> as_outputs(Tensor out) { return {std::move(out)}; }
inline std::vector<Tensor> as_outputs(std::vector<Tensor> out) { return out; }

template <auto Forward, std::size_t... I>
std::vector<Tensor> call_on(const std::vector<Tensor>& inputs, std::index_sequence<I...>) {
  return as_outputs(Forward(inputs[I]...));
}
template <auto Forward>
std::vector<Tensor> call_with_all(const std::vector<Tensor>& inputs) {
  constexpr std::size_t n = ForwardArity<decltype(Forward)>::value;
  return call_on<Forward>(inputs, std::make_index_sequence<n>{});
}

template <auto Forward>
std::vector<Tensor> unary_batched(const BatchingContext&, const std::vector<Tensor>& inputs) {
  return as_outputs(Forward(inputs[0]));
}

template <auto Forward>
std::vector<Tensor> broadcasting_batched(const BatchingContext& op,
                                         const std::vector<Tensor>& inputs) {
  return call_with_all<Forward>(aligned_for_broadcast(op, inputs));
}

// The Tensor-Tensor form of a binary op that also has double-operand forms (add(x, 2.0)): a
// template argument of this type picks it from the overload set.
using BinaryForward = Tensor (*)(const Tensor&, const Tensor&);
template <BinaryForward Forward>
std::vector<Tensor> binary_broadcasting_batched(const BatchingContext& op,
                                                const std::vector<Tensor>& inputs) {
  return broadcasting_batched<Forward>(op, inputs);
}

template <auto Forward>
std::vector<Tensor> all_inputs_batched(const BatchingContext& op,
                                       const std::vector<Tensor>& inputs) {
  std::vector<Tensor> all;
  all.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) all.push_back(with_batch_axis(op, inputs, i));
  return call_with_all<Forward>(all);
}

// A fused activation gradient F(y, g) = g s(y) (ops/internal_ops.hpp): with y batched, F on
// the whole batch (a fixed g broadcast first); with y fixed, `FixedY`(y, g) on the batch of g,
// which computes the slope s(y) once on y's example and broadcasts it instead of copying y
// B times.
template <BinaryForward Fused, BinaryForward FixedY>
std::vector<Tensor> fused_activation_batched(const BatchingContext& op,
                                             const std::vector<Tensor>& inputs) {
  if (op.is_batched(0)) return all_inputs_batched<Fused>(op, inputs);
  return {FixedY(inputs[0], inputs[1])};
}

// The recorded non-negative "axis" of the example, as an axis of the batch.
int shifted_axis(const BatchingContext& op, const char* name = "axis");

template <auto Forward>
std::vector<Tensor> axis_batched(const BatchingContext& op, const std::vector<Tensor>& inputs) {
  return as_outputs(Forward(inputs[0], shifted_axis(op)));
}

// A reduction's recorded "axes" and "keepdims" on the batch; over no axes (a rank-0 example)
// the input itself.
std::vector<Tensor> reduce_batch(const BatchingContext& op, const std::vector<Tensor>& inputs,
                                 Tensor (*reduce)(const Tensor&, std::vector<int>, bool));

template <auto Forward>
std::vector<Tensor> reduction_batched(const BatchingContext& op,
                                      const std::vector<Tensor>& inputs) {
  return reduce_batch(op, inputs, Forward);
}

// The replays that go with the makers above: the op's public function on the new inputs, with
// the recorded attributes where it takes any (a replay runs with nothing observing the thread,
// so the function records nothing).
template <auto Forward, std::size_t... I>
ReplayOutputs replay_on(const std::vector<Tensor>& inputs, std::index_sequence<I...>) {
  return Forward(inputs[I]...);
}
template <auto Forward>
ReplayOutputs replay_unary(const ReplayContext&, const std::vector<Tensor>& inputs) {
  return Forward(inputs[0]);
}
template <auto Forward>
ReplayOutputs replay_all(const ReplayContext&, const std::vector<Tensor>& inputs) {
  return replay_on<Forward>(inputs,
                            std::make_index_sequence<ForwardArity<decltype(Forward)>::value>{});
}
// The recorded "axis".
int recorded_axis(const ReplayContext& op, const char* name = "axis");
template <auto Forward>
ReplayOutputs replay_axis(const ReplayContext& op, const std::vector<Tensor>& inputs) {
  return Forward(inputs[0], recorded_axis(op));
}
// A reduction with its recorded "axes" and "keepdims".
ReplayOutputs replay_reduce(const ReplayContext& op, const std::vector<Tensor>& inputs,
                            Tensor (*reduce)(const Tensor&, std::vector<int>, bool));
template <auto Forward>
ReplayOutputs replay_reduction(const ReplayContext& op, const std::vector<Tensor>& inputs) {
  return replay_reduce(op, inputs, Forward);
}

// The generic makers: each op names its forward once and gets its batching rule and its
// replay (OpDefinition's GenericRules).
template <auto Forward>
inline constexpr GenericRules batch_unary{&unary_batched<Forward>, &replay_unary<Forward>};
template <auto Forward>
inline constexpr GenericRules batch_broadcasting{&broadcasting_batched<Forward>,
                                                 &replay_all<Forward>};
template <BinaryForward Forward>
inline constexpr GenericRules batch_binary_broadcasting{&binary_broadcasting_batched<Forward>,
                                                        &replay_all<Forward>};
template <auto Forward>
inline constexpr GenericRules batch_all_batched{&all_inputs_batched<Forward>, &replay_all<Forward>};
template <BinaryForward Fused, BinaryForward FixedY>
inline constexpr GenericRules batch_fused_activation{&fused_activation_batched<Fused, FixedY>,
                                                     &replay_all<Fused>};
template <auto Forward>
inline constexpr GenericRules batch_axis{&axis_batched<Forward>, &replay_axis<Forward>};
template <auto Forward>
inline constexpr GenericRules batch_reduction{&reduction_batched<Forward>,
                                              &replay_reduction<Forward>};

// Row b of every input (a recorded gather; unbatched inputs as they are).
std::vector<Tensor> row_of(const BatchingContext& op, const std::vector<Tensor>& inputs,
                           std::size_t b);
// Row results stacked along a new axis 0, output by output.
std::vector<Tensor> stack_rows(const std::vector<std::vector<Tensor>>& rows);
// x [B, N, ...] as [B N, ...], and back (N given: B N may be 0).
Tensor merge_first_two_axes(const Tensor& x);
Tensor split_first_axis(const Tensor& x, std::size_t batch, std::size_t examples);

// The op's forward on a list of inputs (an op whose forward also reads recorded attributes
// binds them in a lambda).
using BatchForward = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Whether input 0 alone is batched and has an examples axis to merge the batch into.
bool only_first_batched(const BatchingContext& op, const std::vector<Tensor>& inputs);
// forward once, with input 0's batch merged into its examples axis ([B, N, ...] -> [B N, ...])
// and every output split back ([B N, ...] -> [B, N, ...]).
std::vector<Tensor> merged_into_first_axis(const BatchingContext& op,
                                           const std::vector<Tensor>& inputs,
                                           const BatchForward& forward);
// forward once per row b (row b of each batched input), the results stacked: the rule of an
// op that has no single-kernel batched form.
std::vector<Tensor> row_by_row(const BatchingContext& op, const std::vector<Tensor>& inputs,
                               const BatchForward& forward);

// merged_into_first_axis when only input 0 is batched; else (a batched weight, say, has no
// single-kernel form) row_by_row.
std::vector<Tensor> batch_into_first_axis(const BatchingContext& op,
                                          const std::vector<Tensor>& inputs,
                                          const BatchForward& forward);

template <auto Forward>
std::vector<Tensor> batch_into_first_axis(const BatchingContext& op,
                                          const std::vector<Tensor>& inputs) {
  return batch_into_first_axis(
      op, inputs, [](const std::vector<Tensor>& in) { return call_with_all<Forward>(in); });
}

}  // namespace tapegrad::detail
