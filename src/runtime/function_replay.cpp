// A Function's replay (runtime/function_trace.hpp): the plan's items in order, each one op
// through its replay rule or one fused loop, with fn's Variable reads, assignments and host
// steps between them where the trace had them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/function_trace.hpp"
#include "runtime/in_place.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/replay_context.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

namespace {

const Tensor& value_of(const TracedInput& in, const FunctionTrace& compiled,
                       const std::vector<Tensor>& values) {
  return in.value == TracedInput::kConstant ? in.constant
                                            : values[compiled.slot_of_value[in.value]];
}

void run_step(const TraceStep& step, const FunctionTrace& compiled, std::vector<Tensor>& values) {
  switch (step.kind) {
    case TraceStep::Kind::Host: {
      std::vector<Tensor> inputs;
      inputs.reserve(step.host_inputs.size());
      for (const TracedInput& in : step.host_inputs) {
        inputs.push_back(value_of(in, compiled, values));
      }
      (*step.host)(inputs);
      break;
    }
    case TraceStep::Kind::Read:
      // value() as fn read it: a custom-gradient call's observer learns the variables read.
      values[compiled.slot_of_value[step.value.value]] =
          step.through_value ? step.variable->value() : step.variable->peek();
      break;
    case TraceStep::Kind::Assign:
      Variable(*step.variable).assign(value_of(step.value, compiled, values));
      break;
    case TraceStep::Kind::AssignAdd:
      Variable(*step.variable).assign_add(value_of(step.value, compiled, values));
      break;
    case TraceStep::Kind::AssignSub:
      Variable(*step.variable).assign_sub(value_of(step.value, compiled, values));
      break;
  }
}

// One op through its replay rule: its outputs. Only a rule that reads its outputs' shapes or
// dtypes reads the signature the trace kept for them.
ReplayOutputs replay_op(const ReplayItem& item, const std::vector<Tensor>& inputs) {
  const ReplayContext context{
      {*item.definition, item.attrs}, item.signature->shapes, item.signature->dtypes};
  ReplayOutputs outputs = item.definition->replay_rule(context, inputs);
  if (outputs.size() != item.output_count) {
    throw Error(std::string("function: the replay of op '") + item.definition->name + "' gave " +
                std::to_string(outputs.size()) + " outputs; the trace has " +
                std::to_string(item.output_count));
  }
  return outputs;
}

// The lists a loop's LoopOperands point into, kept across a replay's items.
struct LoopOperandLists {
  std::vector<const Tensor*> inputs;
  std::vector<const void*> input_elements;
  std::vector<Tensor*> destinations;
  std::vector<void*> output_elements;
  std::vector<Tensor*> donors;
};

// A fused item: its operands from the value slots, the constants and the arena (no copy of
// any input's handle), then its loop.
void run_loop_item(const FunctionTrace& compiled, const ReplayItem& item,
                   std::vector<Tensor>& values, std::byte* arena_base,
                   std::vector<Tensor>* recycled, LoopOperandLists& lists) {
  grow_to(lists.inputs, item.input_count);
  grow_to(lists.input_elements, item.input_count);
  const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
  for (std::uint32_t k = 0; k < item.input_count; ++k, ++in) {
    lists.inputs[k] = in->constant ? &compiled.constants[in->index]
                      : in->arena  ? nullptr
                                   : &values[in->index];
    lists.input_elements[k] = in->arena      ? arena_base + in->index
                              : in->constant ? compiled.constant_elements[in->index]
                                             : nullptr;
  }
  grow_to(lists.destinations, item.output_count);
  grow_to(lists.output_elements, item.output_count);
  const std::uint32_t* output = compiled.replay_outputs.data() + item.first_output;
  const std::uint32_t* output_arena = compiled.output_arena.data() + item.first_output;
  for (std::uint32_t j = 0; j < item.output_count; ++j) {
    const bool in_arena = output_arena[j] != FunctionTrace::kNotInArena;
    lists.destinations[j] = in_arena ? nullptr : &values[output[j]];
    lists.output_elements[j] = in_arena ? arena_base + output_arena[j] : nullptr;
  }
  LoopOperands operands;
  operands.inputs = lists.inputs.data();
  operands.input_elements = lists.input_elements.data();
  operands.destinations = lists.destinations.data();
  operands.output_elements = lists.output_elements.data();
  if (item.has_donor) {
    const std::uint32_t* donor = compiled.output_donor.data() + item.first_output;
    const FunctionTrace::ReplayInput* first = compiled.replay_inputs.data() + item.first_input;
    grow_to(lists.donors, item.output_count);
    for (std::uint32_t j = 0; j < item.output_count; ++j) {
      lists.donors[j] =
          donor[j] != FunctionTrace::kNoDonor ? &values[first[donor[j]].index] : nullptr;
    }
    operands.donors = lists.donors.data();
  }
  if (recycled != nullptr) {
    operands.recycled = recycled->data() + item.first_output;
    operands.recyclable = compiled.recyclable.data() + item.first_output;
  }
  run_fused(compiled.fused[item.fused], operands);
}

// A copied join's output (plan_arena): its tensor parts written into its place in the arena
// (loops read it there), then a tensor of the join's shape and dtype holding those bytes.
// `in`: the whole's offset, then per tensor part its slot and its start in elements.
template <class T>
Tensor copy_out_of_arena(std::byte* arena_base, const FunctionTrace::ReplayInput* in,
                         std::uint32_t input_count, const std::vector<Tensor>& values,
                         const Shape& shape) {
  T* whole = reinterpret_cast<T*>(arena_base + in[0].index);
  for (std::uint32_t k = 1; k + 1 < input_count; k += 2) {
    const Tensor& part = values[in[k].index];
    const T* elements = kernel_data<T>(part);
    std::copy(elements, elements + part.size(), whole + in[k + 1].index);
  }
  T* data = nullptr;
  Tensor copy = new_tensor(shape, data);
  std::copy(whole, whole + num_elements(shape), data);
  return copy;
}

Tensor copy_out_of_arena(const FunctionTrace& compiled, const ReplayItem& item,
                         std::byte* arena_base, const std::vector<Tensor>& values) {
  const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
  const Shape& shape = item.signature->shapes[0];
  return item.signature->dtypes[0] == DType::Float32
             ? copy_out_of_arena<float>(arena_base, in, item.input_count, values, shape)
             : copy_out_of_arena<double>(arena_base, in, item.input_count, values, shape);
}

}  // namespace

std::vector<Tensor> replay(const FunctionTrace& compiled, const std::vector<Tensor>& args) {
  // Taken before the values: it is let go after the replay's own handles are.
  std::unique_lock<std::mutex> keeping(compiled.kept->mutex, std::try_to_lock);
  std::vector<Tensor>* recycled = keeping.owns_lock() ? &compiled.kept->recycled : nullptr;
  if (recycled != nullptr) recycled->resize(compiled.replay_outputs.size());
  // A concurrent replay has an arena of its own. It is a tensor's buffer, so that
  // memory_stats() counts it; it never leaves the replay.
  Tensor own_arena;
  Tensor& arena = recycled != nullptr ? compiled.kept->arena : own_arena;
  std::byte* arena_base = nullptr;
  if (compiled.arena_bytes != 0) {
    if (!arena.defined()) {
      double* elements = nullptr;
      arena =
          new_tensor(Shape{(compiled.arena_bytes + sizeof(double) - 1) / sizeof(double)}, elements);
    }
    arena_base = reinterpret_cast<std::byte*>(own_elements<double>(arena));
  }
  const OpTrace& trace = compiled.trace;
  std::vector<Tensor> values(compiled.slot_count);
  std::copy(args.begin(), args.end(), values.begin());  // slots 0 to args.size() - 1
  const std::vector<TraceStep>& steps = trace.steps;
  std::size_t next_step = 0;
  std::vector<Tensor> inputs;
  LoopOperandLists loop_operands;
  for (std::size_t i = 0; i < compiled.items.size(); ++i) {
    const ReplayItem& item = compiled.items[i];
    while (next_step < steps.size() && steps[next_step].position <= item.position) {
      run_step(steps[next_step++], compiled, values);
    }
    const std::uint32_t* output = compiled.replay_outputs.data() + item.first_output;
    if (item.fused != ReplayItem::kNone) {
      run_loop_item(compiled, item, values, arena_base, recycled, loop_operands);
    } else if (item.copies_from_arena) {
      values[output[0]] = copy_out_of_arena(compiled, item, arena_base, values);
    } else {  // `inputs` is empty: cleared after the last op
      const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
      for (std::uint32_t k = 0; k < item.input_count; ++k, ++in) {
        if (in->constant) {
          inputs.push_back(compiled.constants[in->index]);
        } else if (in->move) {
          inputs.push_back(std::move(values[in->index]));
        } else {
          inputs.push_back(values[in->index]);
        }
      }
      ReplayOutputs outputs = replay_op(item, inputs);
      // Its inputs go now, not at the next op: a loop after it may then find itself the only
      // holder of one (and write over it), and a moved input's buffer is free for what follows.
      inputs.clear();
      for (std::uint32_t j = 0; j < item.output_count; ++j) {
        values[output[j]] = std::move(outputs[j]);
      }
    }
    const std::uint32_t* release = compiled.releases.data() + item.first_release;
    for (std::uint32_t k = 0; k < item.release_count; ++k) {
      Tensor& value = values[release[k]];
      if (value.defined()) value = Tensor();  // most were moved into their last reader
    }
  }
  while (next_step < steps.size()) run_step(steps[next_step++], compiled, values);
  std::vector<Tensor> results;
  results.reserve(compiled.results.size());
  for (const TracedInput& r : compiled.results) results.push_back(value_of(r, compiled, values));
  return results;
}

}  // namespace tapegrad::detail
