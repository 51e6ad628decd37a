// A run of elementwise ops replayed as one loop over blocks of elements. A trace of small
// tensors (a scalar chain and its backward) pays per op a call of its block kernel instead of
// dispatch, validation and a fresh tensor; a trace of large ones reads each intermediate from
// a block that stays in cache.
#include "runtime/fused_elementwise.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "runtime/id_map.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/errors.hpp"

namespace tapegrad::detail {
namespace {

std::size_t element_count(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

bool defined_input(const TracedInput& in) {
  return in.value != TracedInput::kConstant || in.constant.defined();
}
const Shape& shape_of(const OpTrace& trace, const TracedInput& in) {
  return in.value == TracedInput::kConstant ? in.constant.shape() : trace.value_shapes[in.value];
}
DType dtype_of_input(const OpTrace& trace, const TracedInput& in) {
  return in.value == TracedInput::kConstant ? in.constant.dtype() : trace.value_dtypes[in.value];
}

// One loop may compute the op: an elementwise rule, one float output, and every input of
// the output's dtype and of its shape or a single element.
bool fusable(const OpTrace& trace, const TracedOp& op) {
  const ElementwiseRule* rule = op.op->elementwise_rule;
  if (rule == nullptr || op.outputs.size() != 1 || op.inputs.size() != rule->arity) return false;
  const DType dtype = op.output_dtypes[0];
  if (dtype != DType::Float32 && dtype != DType::Float64) return false;
  const Shape& shape = op.output_shapes[0];
  const std::size_t elements = element_count(shape);
  if (elements == 0 || elements > rule->max_elements) return false;
  return std::all_of(op.inputs.begin(), op.inputs.end(), [&](const TracedInput& in) {
    if (!defined_input(in) || dtype_of_input(trace, in) != dtype) return false;
    const Shape& input_shape = shape_of(trace, in);
    return input_shape == shape || element_count(input_shape) == 1;
  });
}

// Where an instruction's operand lives while the run is being built.
struct OperandRef {
  enum class Kind : std::uint8_t { Input, Scratch, Output };
  Kind kind;
  std::uint32_t index;
};

template <class T>
std::vector<Tensor> run_typed(const FusedElementwise& fused, const std::vector<Tensor>& inputs) {
  const std::size_t input_count = fused.inputs.size();
  const std::size_t scratch = fused.scratch_blocks;
  const std::size_t output_count = fused.outputs.size();
  const std::size_t spread_count =
      static_cast<std::size_t>(std::count(fused.spread.begin(), fused.spread.end(), true));

  // Blocks of at most 1,024 elements whose scratch stays within 256 KiB (a few hundred live
  // intermediates shrink the block, down to 64 elements).
  constexpr std::size_t kMaxBlock = 1024;
  constexpr std::size_t kMinBlock = 64;
  constexpr std::size_t kScratchBytes = std::size_t{256} * 1024;
  const std::size_t bytes_per_element = (scratch + spread_count) * sizeof(T);
  std::size_t block = kMaxBlock;
  if (bytes_per_element * block > kScratchBytes) {
    block = std::max(kMinBlock, kScratchBytes / std::max<std::size_t>(bytes_per_element, 1));
  }
  block = std::min(block, fused.elements);

  std::vector<Tensor> outputs(output_count);
  std::vector<T*> output_data(output_count);
  for (std::size_t o = 0; o < output_count; ++o)
    outputs[o] = new_tensor(fused.shape, output_data[o]);
  std::vector<const T*> input_data(input_count);
  for (std::size_t e = 0; e < input_count; ++e) input_data[e] = kernel_data<T>(inputs[e]);

  std::vector<T> scratch_memory((scratch + spread_count) * block);
  std::vector<const T*> read(input_count + scratch + output_count);
  std::vector<T*> write(scratch + output_count);
  for (std::size_t s = 0; s < scratch; ++s) {
    write[s] = scratch_memory.data() + s * block;
    read[input_count + s] = write[s];
  }
  std::size_t next_spread = scratch;
  for (std::size_t e = 0; e < input_count; ++e) {
    if (!fused.spread[e]) continue;
    T* spread = scratch_memory.data() + (next_spread++) * block;
    std::fill(spread, spread + block, input_data[e][0]);
    read[e] = spread;
  }

  for (std::size_t start = 0; start < fused.elements; start += block) {
    const std::size_t count = std::min(block, fused.elements - start);
    for (std::size_t e = 0; e < input_count; ++e) {
      if (!fused.spread[e]) read[e] = input_data[e] + start;
    }
    for (std::size_t o = 0; o < output_count; ++o) {
      write[scratch + o] = output_data[o] + start;
      read[input_count + scratch + o] = write[scratch + o];
    }
    for (const FusedElementwise::Instruction& instruction : fused.program) {
      const T* operands[2] = {read[instruction.operands[0]], read[instruction.operands[1]]};
      instruction.rule->kernel<T>()(operands, write[instruction.destination], count);
    }
  }
  return outputs;
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> fusable_runs(
    const OpTrace& trace, const std::vector<std::size_t>& kept) {
  std::vector<std::size_t> step_positions;
  step_positions.reserve(trace.steps.size());
  for (const TraceStep& step : trace.steps) step_positions.push_back(step.position);
  // A step runs before the op at its position: one between ops a < b has a < position <= b.
  const auto step_between = [&](std::size_t a, std::size_t b) {
    auto it = std::upper_bound(step_positions.begin(), step_positions.end(), a);
    return it != step_positions.end() && *it <= b;
  };

  std::vector<std::pair<std::size_t, std::size_t>> runs;
  std::size_t start = 0;
  std::size_t length = 0;
  const auto close = [&](std::size_t end) {
    if (length >= 2) runs.emplace_back(start, end);
    length = 0;
  };
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const TracedOp& op = trace.ops[kept[i]];
    if (!fusable(trace, op)) {
      close(i);
      continue;
    }
    if (length != 0) {
      const TracedOp& first = trace.ops[kept[start]];
      const bool joins = op.output_dtypes[0] == first.output_dtypes[0] &&
                         op.output_shapes[0] == first.output_shapes[0] &&
                         !step_between(kept[i - 1], kept[i]);
      if (joins) {
        ++length;
        continue;
      }
      close(i);
    }
    start = i;
    length = 1;
  }
  close(kept.size());
  return runs;
}

FusedElementwise fuse_run(const OpTrace& trace, const std::vector<std::size_t>& kept,
                          std::pair<std::size_t, std::size_t> run,
                          const std::vector<bool>& read_outside) {
  const TracedOp& first = trace.ops[kept[run.first]];
  FusedElementwise fused;
  fused.dtype = first.output_dtypes[0];
  fused.shape = first.output_shapes[0];
  fused.elements = element_count(fused.shape);

  // The last op of the run that reads each value the run computes.
  // Flat maps keyed by trace value + 1 (IdMap keeps 0 for an empty cell): a trace of small ops
  // has thousands of short runs, and a node-based map per run was most of its planning.
  const auto key = [](std::size_t value) { return static_cast<std::uint64_t>(value) + 1; };
  IdMap<std::size_t> last_use;
  for (std::size_t i = run.first; i < run.second; ++i) {
    const TracedOp& op = trace.ops[kept[i]];
    for (const TracedInput& in : op.inputs) {
      if (in.value != TracedInput::kConstant) last_use.assign(key(in.value), i);
    }
  }

  IdMap<OperandRef> computed;              // trace value -> where it lives
  IdMap<std::uint32_t> input_of;           // trace value -> input number
  IdMap<std::uint32_t> constant_input_of;  // tensor id -> input
  std::vector<std::uint32_t> free_scratch;
  const auto operand_for = [&](const TracedInput& in) -> OperandRef {
    if (in.value != TracedInput::kConstant) {
      if (const OperandRef* where = computed.find(key(in.value))) return *where;
      auto [slot, added] =
          input_of.try_emplace(key(in.value), static_cast<std::uint32_t>(fused.inputs.size()));
      if (added) fused.inputs.push_back(in);
      return {OperandRef::Kind::Input, *slot};
    }
    auto [slot, added] = constant_input_of.try_emplace(
        in.constant.id(), static_cast<std::uint32_t>(fused.inputs.size()));
    if (added) fused.inputs.push_back(in);
    return {OperandRef::Kind::Input, *slot};
  };

  struct PendingInstruction {
    const ElementwiseRule* rule;
    OperandRef operands[2];
    OperandRef destination;
  };
  std::vector<PendingInstruction> pending;
  for (std::size_t i = run.first; i < run.second; ++i) {
    const TracedOp& op = trace.ops[kept[i]];
    PendingInstruction instruction{op.op->elementwise_rule, {}, {}};
    for (std::size_t k = 0; k < 2; ++k) {
      // A unary op's second operand is never read: any valid one does.
      instruction.operands[k] = operand_for(op.inputs[std::min(k, op.inputs.size() - 1)]);
    }
    const std::size_t value = op.outputs[0];
    if (read_outside[value]) {
      instruction.destination = {OperandRef::Kind::Output,
                                 static_cast<std::uint32_t>(fused.outputs.size())};
      fused.outputs.push_back(value);
    } else if (!free_scratch.empty()) {
      instruction.destination = {OperandRef::Kind::Scratch, free_scratch.back()};
      free_scratch.pop_back();
    } else {
      instruction.destination = {OperandRef::Kind::Scratch,
                                 static_cast<std::uint32_t>(fused.scratch_blocks++)};
    }
    computed.assign(key(value), instruction.destination);
    // Scratch whose last reader this op is may be written by the ops after it.
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      const std::size_t v = op.inputs[k].value;
      if (v == TracedInput::kConstant) continue;
      const OperandRef* where = computed.find(key(v));
      const bool first_read_here =
          std::find_if(op.inputs.begin(), op.inputs.begin() + static_cast<std::ptrdiff_t>(k),
                       [&](const TracedInput& in) { return in.value == v; }) ==
          op.inputs.begin() + static_cast<std::ptrdiff_t>(k);
      if (where != nullptr && where->kind == OperandRef::Kind::Scratch &&
          *last_use.find(key(v)) == i && first_read_here) {
        free_scratch.push_back(where->index);
      }
    }
    pending.push_back(instruction);
  }

  const auto input_count = static_cast<std::uint32_t>(fused.inputs.size());
  const auto scratch = static_cast<std::uint32_t>(fused.scratch_blocks);
  const auto number = [&](const OperandRef& ref) -> std::uint32_t {
    switch (ref.kind) {
      case OperandRef::Kind::Input:
        return ref.index;
      case OperandRef::Kind::Scratch:
        return input_count + ref.index;
      case OperandRef::Kind::Output:
        return input_count + scratch + ref.index;
    }
    return 0;
  };
  for (const PendingInstruction& p : pending) {
    fused.program.push_back({p.rule,
                             {number(p.operands[0]), number(p.operands[1])},
                             number(p.destination) - input_count});
  }
  fused.spread.reserve(fused.inputs.size());
  for (const TracedInput& in : fused.inputs) {
    fused.spread.push_back(fused.elements > 1 && element_count(shape_of(trace, in)) == 1);
  }
  return fused;
}

std::vector<Tensor> run_fused(const FusedElementwise& fused, const std::vector<Tensor>& inputs) {
  if (fused.dtype == DType::Float32) return run_typed<float>(fused, inputs);
  return run_typed<double>(fused, inputs);
}

}  // namespace tapegrad::detail
