// The backward walk (TF: imperative_grad, tape.h's ComputeGradient): a driver over named
// stages, each in its own function or file.
//
//   plan       backward_plan.cpp   The ops between the targets and the sources: reachable
//                                  backwards from the targets, kept when an input leads to a
//                                  source; not-differentiable ops, integer and bool tensors
//                                  and stop_gradients cut both ways, so an op off every
//                                  differentiable path is never visited (nor its gradient
//                                  function called). A dense slot per tensor on that path; per op,
//                                  the number of gradients its outputs wait for (one per use of an
//                                  output by a later op on the path).
//   seed       seed()              Each target's slot receives its output gradient, or
//                                  VSpace::ones when the caller gave none.
//   sum        sum_outputs()       A popped op's output gradients, each list summed (dense
//              gradient_lists.hpp  ones were added as they arrived); hooks run on each sum.
//   call and   gradient_call.cpp   Zeros for the outputs that received nothing, the kept
//   check                          tensors gathered, the rule called, its result checked
//                                  against the op's inputs (count, shape, dtype).
//   release    in run()            What the call read dies; on a non-persistent tape the
//                                  entry's extras too.
//   propagate  propagate()         Each input gradient joins its tensor's list; each input's
//                                  producer has one gradient less to wait for and is pushed
//                                  on the ready stack when none is left.
//
// The ready stack starts with the ops no other op on the path uses; the walk pops one op at a
// time until it is empty, then hands each source its list's sum.
//
// Invariants:
// - An op runs once, and only after every gradient that can reach its used outputs has been
//   summed: its pending count reaches zero when, and only when, its last user has run.
// - Its rule is called only when some output received a gradient; zeros are asked of the
//   VSpace then, and only for the outputs that received none. A fan-in of n dense gradients
//   costs n - 1 VSpace::add calls; sparse ones are aggregated once, when the sum is read.
// - Iterative, no recursion: a chain of 10^6 ops never deepens the call stack.
// - Release: on a non-persistent tape (its only walk) an entry's kept tensors are moved into
//   its call and die with it, and its attributes and custom backward right after, before the
//   next op runs; so do the output gradients it read. An op output's list is dropped when its
//   producer reads it; what lives until the walk returns is the plan's arrays (a few bytes
//   per op) and the sources' lists.
// - The default VSpace's ones and zeros are new tensors each time, so nothing the walk hands
//   to a rule, a hook or the caller is shared with another walk.
#include "runtime/imperative_grad.hpp"

#include <optional>

#include "runtime/anomaly.hpp"
#include "runtime/gradient_call.hpp"
#include "runtime/gradient_lists.hpp"

namespace tapegrad::detail {
namespace {

using Slot = BackwardPlan::Slot;

// What a run consumes of its plan: a copy for one of many runs (Jacobian rows), the plan's own
// for the only run.
struct Counters {
  std::vector<std::uint32_t> pending;      // per step
  std::vector<std::uint32_t> source_uses;  // per source slot
};

void seed(const BackwardPlan& plan, const std::vector<Tensor>& targets,
          const std::vector<Tensor>& output_gradients, const VSpace& vspace, GradientSlots& grads) {
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Slot s = plan.target_slots[i];
    if (s == kNoSlot) continue;
    const bool given = i < output_gradients.size() && output_gradients[i].defined();
    grads.get(static_cast<std::size_t>(s))
        .push(given ? output_gradients[i] : vspace.ones(targets[i].shape(), targets[i].dtype()),
              vspace);
  }
}

// The sum stage of one op: each output's summed gradient in `out` (undefined where none
// arrived). A row-sparse sum through an identity op stays sparse: it comes back in
// `passed_through` instead. False when no output received anything.
bool sum_outputs(const TapeImpl& tape, const BackwardPlan& plan, const BackwardPlan::Step& step,
                 const OpEntry& e, GradientKind kind, const VSpace& vspace, GradientSlots& grads,
                 std::vector<Tensor>& out, GradientValue& passed_through) {
  const RecordedTensors outputs = e.outputs();
  const Slot* slots = plan.output_slots(step, e);
  out.resize(outputs.size());
  bool any = false;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const Slot s = slots[j];
    if (s == kNoSlot) continue;
    const auto slot = static_cast<std::size_t>(s);
    GradientList* list = grads.find(slot);
    if (list == nullptr || list->empty()) continue;
    any = true;
    if (kind != GradientKind::Identity && !tape.has_hooks() && !plan.is_source(s)) {
      out[j] = grads.take_dense(slot, vspace);
      continue;
    }
    GradientValue sum;
    if (tape.has_hooks()) {
      sum = hooked_sum(tape.hooks(), outputs[j].id, *list, vspace);
      if (!plan.is_source(s)) grads.take(slot, vspace);
    } else {
      sum = plan.is_source(s) ? list->sum(vspace) : grads.take(slot, vspace);
    }
    if (kind == GradientKind::Identity && sum.is_sparse()) {
      passed_through = std::move(sum);  // keeps a row-sparse gradient sparse (variable reads)
    } else {
      out[j] = std::move(sum).to_dense();
    }
  }
  return any;
}

// The propagate stage of one op: its input gradients onto their tensors' lists, and the
// producers of its inputs one gradient closer to ready.
void propagate(const TapeImpl& tape, const BackwardPlan& plan, const BackwardPlan::Step& step,
               const OpEntry& e, std::vector<GradientValue>& input_gradients, const VSpace& vspace,
               GradientSlots& grads, Counters& counters, std::vector<std::uint32_t>& ready) {
  const Slot* slots = plan.input_slots(step);
  for (std::size_t i = 0; i < e.n_inputs; ++i) {
    const Slot s = slots[i];
    if (s == kNoSlot) continue;
    const auto slot = static_cast<std::size_t>(s);
    if (i < input_gradients.size() && input_gradients[i].defined()) {
      grads.get(slot).push(std::move(input_gradients[i]), vspace);
    }
    const std::int32_t producer = plan.producer_step[slot];
    if (producer >= 0) {
      if (--counters.pending[static_cast<std::size_t>(producer)] == 0) {
        ready.push_back(static_cast<std::uint32_t>(producer));
      }
    } else if (--counters.source_uses[slot] == 0 && tape.has_hooks()) {
      // A leaf's gradient is complete: its hooks run now.
      GradientList* leaf = grads.find(slot);
      if (leaf != nullptr && !leaf->empty())
        hooked_sum(tape.hooks(), e.inputs()[i].id, *leaf, vspace);
    }
  }
  input_gradients.clear();
}

std::vector<GradientValue> source_gradients(const BackwardPlan& plan, GradientSlots& grads,
                                            UnconnectedGradients unconnected,
                                            const VSpace& vspace) {
  std::vector<GradientValue> result;
  result.reserve(plan.sources.size());
  for (std::size_t k = 0; k < plan.sources.size(); ++k) {
    const Slot s = plan.source_slots[k];
    GradientList* list = s != kNoSlot ? grads.find(static_cast<std::size_t>(s)) : nullptr;
    if (list != nullptr && !list->empty()) {
      result.push_back(list->sum(vspace));  // a source named twice gets the same sum twice
    } else if (unconnected == UnconnectedGradients::Zero) {
      result.emplace_back(zeros(plan.sources[k].shape, plan.sources[k].dtype));
    } else {
      result.emplace_back();
    }
  }
  return result;
}

std::vector<GradientValue> run(TapeImpl& tape, const BackwardPlan& plan, Counters counters,
                               const std::vector<Tensor>& targets,
                               const std::vector<Tensor>& output_gradients,
                               UnconnectedGradients unconnected, bool release_entries,
                               const VSpace& vspace) {
  GradientSlots grads(plan.num_slots());
  seed(plan, targets, output_gradients, vspace, grads);

  std::vector<std::uint32_t> ready;
  for (std::size_t i = plan.steps.size(); i-- > 0;) {
    if (counters.pending[i] == 0) ready.push_back(static_cast<std::uint32_t>(i));
  }
  CallBuffers buffers;
  const bool check_anomalies = anomaly_checks_active();
  std::optional<AnomalyBackwardScope> anomaly_scope;
  if (check_anomalies) anomaly_scope.emplace();
  while (!ready.empty()) {
    const BackwardPlan::Step& step = plan.steps[ready.back()];
    ready.pop_back();
    OpEntry& e = tape.entry(step.op_id);  // a deque element: stable if the walk records new ops
    const Differentiation how = differentiation_of(e);

    GradientValue passed_through;
    const bool any = sum_outputs(tape, plan, step, e, how.kind, vspace, grads,
                                 buffers.output_gradients, passed_through);
    buffers.input_gradients.clear();
    if (passed_through.defined()) {
      buffers.input_gradients.push_back(std::move(passed_through));
    } else if (any && how.kind == GradientKind::Identity) {
      buffers.input_gradients.emplace_back(std::move(buffers.output_gradients[0]));
    } else if (any && how.kind == GradientKind::Rule) {
      call_and_check(e, how, plan.input_slots(step), release_entries, vspace, buffers);
      if (check_anomalies) {
        check_backward_gradients(tape, step.op_id, buffers.input_gradients,
                                 buffers.output_gradients);
      }
    }

    // Release, before the next op allocates.
    buffers.release_call_inputs();
    if (release_entries) tape.release(step.op_id);

    propagate(tape, plan, step, e, buffers.input_gradients, vspace, grads, counters, ready);
  }
  return source_gradients(plan, grads, unconnected, vspace);
}

}  // namespace

std::vector<GradientValue> run_backward(TapeImpl& tape, const BackwardPlan& plan,
                                        const std::vector<Tensor>& targets,
                                        const std::vector<Tensor>& output_gradients,
                                        UnconnectedGradients unconnected, bool release_entries,
                                        const VSpace& vspace) {
  return run(tape, plan, Counters{plan.pending, plan.source_uses}, targets, output_gradients,
             unconnected, release_entries, vspace);
}

std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected, const VSpace& vspace,
                                           const std::vector<std::uint64_t>& stop_ids) {
  const bool last_use = !tape.persistent();
  BackwardPlan plan =
      plan_backward(tape, targets, sources, /*forget_producers=*/last_use, stop_ids);
  // The plan runs once: its counters are consumed in place rather than copied.
  Counters counters{std::move(plan.pending), std::move(plan.source_uses)};
  return run(tape, plan, std::move(counters), targets, output_gradients, unconnected, last_use,
             vspace);
}

}  // namespace tapegrad::detail
