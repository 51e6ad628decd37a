// A run of elementwise ops a Function replays as one loop: the ops' scalar functions
// (OpDefinition::elementwise_rule) applied block by block, their intermediate values in a few
// blocks of scratch memory instead of one fresh tensor each. Only the values something outside
// the run reads become tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/buffer_cache.hpp"
#include "runtime/element_span.hpp"
#include "runtime/gather_rule.hpp"
#include "runtime/op_trace.hpp"

namespace tapegrad::detail {

struct FusedElementwise {
  // Per input, how the loop reads it (broadcast_read in fused_elementwise.cpp): as it is
  // (period 0: the run's shape, but for leading 1s), or as values that repeat over the run's
  // row-major elements with this period (1 for a single element, 3 for a [3] against [n, 3],
  // 3n for an [n, 1] against [m, n, 3]), one period of which is built per call when `expanded`
  // (a later axis broadcasts) and is the input's own elements otherwise.
  //
  // An input may also stand for a gather's output that the loop reads from the gather's params
  // (this input, `gather` set) and indices (the next input, `indices_only`), rows along
  // `gather_axis`: the gather itself does not run, its rule checks the indices.
  // 32 bytes: a replay of thousands of short loops reads each loop's reads from memory.
  struct InputRead {
    std::size_t period = 0;
    bool expanded = false;
    bool indices_only = false;
    std::uint32_t gather_axis = 0;
    const GatherRule* gather = nullptr;
    // Elements of the input to skip: the loop reads a part of it (an output of an op with a
    // PartRule, of the run's shape) in place.
    std::size_t offset = 0;
  };
  // Operands are numbered: the inputs, then the scratch blocks, then the outputs.
  struct Instruction {
    const ElementwiseRule* rule;
    std::uint32_t operands[2];
    std::uint32_t destination;  // scratch or output, numbered from the first scratch block
  };

  DType dtype;
  Shape shape;  // every op's output shape
  std::size_t elements;
  std::vector<TracedInput> inputs;
  ElementSpan<InputRead> reads{nullptr, 0};  // per input
  // No read is a gather's, an expanded period's or indices only: a loop of one block may
  // then place each operand once (run_fused).
  bool reads_as_they_are_or_repeat = false;
  ElementSpan<std::size_t> outputs{nullptr, 0};  // trace values made tensors
  ElementSpan<Instruction> program{nullptr, 0};
  std::size_t scratch_blocks = 0;

  // Sets reads, outputs and program to copies of these lists, kept in one block of the loop's
  // own: a trace of small ops plans thousands of loops, and three lists allocated for each
  // were a good part of a Function's first call.
  void set_lists(const std::vector<InputRead>& input_reads,
                 const std::vector<std::size_t>& output_values,
                 const std::vector<Instruction>& instructions);

 private:
  std::unique_ptr<std::byte[]> lists_;
};

// The runs of kept ops that one loop may compute, each as the indices into `kept` of its ops
// (ascending), the runs ordered by their last op: at least two ops of one float dtype and
// output shape, every input of that shape or broadcasting to it, with no Variable read,
// assignment or host step between the first and the last. Ops of other shapes may lie between
// a run's ops (forward mode interleaves primals and tangents) when they read none of its
// values: the replay computes a run where its last op was, after them. With a `batch`, the
// runs of vectorized_map's replay, in which every traced value has a leading axis of that
// size and the constants do not: a traced input must have its op's own shape, a constant
// broadcast to the batched one.
std::vector<std::vector<std::size_t>> fusable_runs(const OpTrace& trace,
                                                   const BookkeepingVector<std::size_t>& kept,
                                                   std::size_t batch = 0);

// Which run of `runs` (fusable_runs of `kept`) each kept op and each trace value's producer
// belongs to, kNoRun for the others.
constexpr std::size_t kNoRun = static_cast<std::size_t>(-1);
struct RunMembership {
  BookkeepingVector<std::size_t> run_of_kept;   // by position in kept
  BookkeepingVector<std::size_t> producer_run;  // by trace value
};
RunMembership run_membership(const OpTrace& trace, const BookkeepingVector<std::size_t>& kept,
                             const std::vector<std::vector<std::size_t>>& runs);

// The fused loop of the ops trace.ops[kept[i]] for i in `run`, one of fusable_runs();
// `read_outside` says, per trace value, whether anything outside the run (an op, a step, a
// result) reads it; `gathered_by`, per trace value, the trace op of a gather (one with a
// GatherRule, of the run's dtype and shape) that only the run reads and whose output the loop
// reads from its params instead (kNoGather for the rest). With a `batch`, the loop is
// vectorized_map's: every traced value has a leading axis of that size (a gather's params
// too), the constants do not, and the run must come from fusable_runs with that batch.
// `parts`, when given, says per trace value whether it is a part of an op's input (runtime/
// part_rule.hpp) that the loop reads in place; the op does not run.
constexpr std::size_t kNoGather = static_cast<std::size_t>(-1);
struct PartOf {
  static constexpr std::size_t kNoPart = static_cast<std::size_t>(-1);
  std::size_t op = kNoPart;  // the trace op whose output it is
  std::size_t offset = 0;    // where it starts in that op's input, in elements
};
FusedElementwise fuse_run(const OpTrace& trace, const BookkeepingVector<std::size_t>& kept,
                          const std::vector<std::size_t>& run,
                          const BookkeepingVector<bool>& read_outside,
                          const BookkeepingVector<std::size_t>& gathered_by, std::size_t batch = 0,
                          const BookkeepingVector<PartOf>* parts = nullptr);

// The loop of a reduction with a FoldRule whose input (a traced value) it folds as `rows`
// rows (FoldRule::rows, at least 1): each row read in place at its offset, combined in
// order into the output starting from `start` (a scalar of the output's dtype holding the
// rule's init; one per dtype serves every fold of a trace). Computes what the op's eager
// kernel does, bit for bit.
FusedElementwise fold_loop(const TracedOp& op, std::size_t rows, const Tensor& start);

// Whether the loop of a run of `dtype` and `shape` may read the output of the traced op `op`
// from its params: a gather with a GatherRule, one output of that dtype and shape.
bool gather_readable(const TracedOp& op, DType dtype, const Shape& shape);

// The gathers whose loops read their params instead of running them: a kept op in no run
// (run_of_kept[i] == kNoRun), gather_readable for a run's dtype and shape, whose output that
// run alone reads (`reads` counts every read of each value: kept ops, steps, results). With a
// batch (vectorized_map's replay), only gathers of batched params by constant indices. Sets
// gathered_by[output] (fuse_run's argument) and producer_run[output] to the run, and returns
// per kept index the run that absorbed the op, kNoRun for the rest.
BookkeepingVector<std::size_t> absorb_gathers(const OpTrace& trace,
                                              const BookkeepingVector<std::size_t>& kept,
                                              const std::vector<std::vector<std::size_t>>& runs,
                                              const BookkeepingVector<std::size_t>& run_of_kept,
                                              const BookkeepingVector<std::uint32_t>& reads,
                                              BookkeepingVector<std::size_t>& producer_run,
                                              BookkeepingVector<std::size_t>& gathered_by,
                                              std::size_t batch);

// Runs `fused` on its inputs (the traced shapes and dtypes): one tensor per fused.outputs.
std::vector<Tensor> run_fused(const FusedElementwise& fused, const std::vector<Tensor>& inputs);
// What one loop of a Function's replay reads and writes (run_fused below). Per input e: the
// tensor inputs[e], or, where input_elements is given and input_elements[e] is set, those
// elements (a value in the replay's arena, which has no tensor, or a constant's, found once
// when the replay was planned); an arena value is never read as a gather's or expanded. Per
// output o: the elements at output_elements[o] where that is set, else a tensor made in
// *destinations[o]; with `recycled` (one tensor per output, kept by the caller from one call
// to the next), an output whose `recyclable` flag is set is written into recycled[o] when
// that handle is the only one, else into a new tensor that recycled[o] then keeps.
struct LoopOperands {
  const Tensor* const* inputs = nullptr;
  const void* const* input_elements = nullptr;
  Tensor* const* destinations = nullptr;
  void* const* output_elements = nullptr;
  Tensor* recycled = nullptr;
  const std::uint8_t* recyclable = nullptr;
  // Per output, where given and set: the handle of an input (one of `inputs`, read in order
  // with the run's shape) whose buffer the output takes when that handle is the only one
  // (the caller's plan made sure the loop reads it before writing the output); the handle is
  // moved into the output's destination.
  Tensor* const* donors = nullptr;
};
// A replay runs thousands of loops of small tensors: no vector per loop.
void run_fused(const FusedElementwise& fused, const LoopOperands& operands);

// Makes `list` hold at least `n` elements, never fewer than it has: for the lists a replay's
// loops reuse, each loop setting the first n it reads. Resizing them down and up again loop
// after loop cost 4 % of GradBench lstm's replay (the regrowth's value-initialising calls).
template <class T, class Allocator>
void grow_to(std::vector<T, Allocator>& list, std::size_t n) {
  if (list.size() < n) list.resize(n);
}

}  // namespace tapegrad::detail
