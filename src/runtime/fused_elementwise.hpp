// A run of elementwise ops a Function replays as one loop: the ops' scalar functions
// (OpDefinition::elementwise_rule) applied block by block, their intermediate values in a few
// blocks of scratch memory instead of one fresh tensor each. Only the values something outside
// the run reads become tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/op_trace.hpp"

namespace tapegrad::detail {

struct FusedElementwise {
  DType dtype;
  Shape shape;  // every op's output shape
  std::size_t elements;
  std::vector<TracedInput> inputs;
  // Per input: 1 element spread over the whole shape (a broadcast scalar) when true.
  std::vector<bool> spread;
  std::vector<std::size_t> outputs;  // trace values made tensors
  // Operands are numbered: the inputs, then the scratch blocks, then the outputs.
  struct Instruction {
    const ElementwiseRule* rule;
    std::uint32_t operands[2];
    std::uint32_t destination;  // scratch or output, numbered from the first scratch block
  };
  std::vector<Instruction> program;
  std::size_t scratch_blocks = 0;
};

// The runs of kept ops (indices into trace.ops, ascending) that one loop may compute: ranges
// [first, end) of `kept`, each of at least two ops of one float dtype and output shape, every
// input of that shape or a single element, with no Variable read, assignment or host step
// between two of them.
std::vector<std::pair<std::size_t, std::size_t>> fusable_runs(const OpTrace& trace,
                                                              const std::vector<std::size_t>& kept);

// The fused loop of the ops trace.ops[kept[first..end)], one of fusable_runs(); `read_outside`
// says, per trace value, whether anything after the run (an op, a step, a result) reads it.
FusedElementwise fuse_run(const OpTrace& trace, const std::vector<std::size_t>& kept,
                          std::pair<std::size_t, std::size_t> run,
                          const std::vector<bool>& read_outside);

// Runs `fused` on its inputs (the traced shapes and dtypes): one tensor per fused.outputs.
std::vector<Tensor> run_fused(const FusedElementwise& fused, const std::vector<Tensor>& inputs);

}  // namespace tapegrad::detail
