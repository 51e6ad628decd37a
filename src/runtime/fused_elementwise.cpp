// A run of elementwise ops replayed as one loop over blocks of elements. A trace of small
// tensors (a scalar chain and its backward) pays per op a call of its block kernel instead of
// dispatch, validation and a fresh tensor; a trace of large ones reads each intermediate from
// a block that stays in cache.
#include "runtime/fused_elementwise.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>

#include "runtime/batching_context.hpp"
#include "runtime/id_map.hpp"
#include "runtime/in_place.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/errors.hpp"

namespace tapegrad::detail {
namespace {

bool defined_input(const TracedInput& in) {
  return in.value != TracedInput::kConstant || in.constant.defined();
}
const Shape& shape_of(const OpTrace& trace, const TracedInput& in) {
  return in.value == TracedInput::kConstant ? in.constant.shape() : trace.value_shape(in.value);
}
DType dtype_of_input(const OpTrace& trace, const TracedInput& in) {
  return in.value == TracedInput::kConstant ? in.constant.dtype() : trace.value_dtype(in.value);
}

// How an input of shape `input` is read over a run of shape `output`, or nothing when it does
// not broadcast to it (aligned at the right, each dimension equal or 1) or a loop should not
// read it. Its values repeat over the run's row-major elements with a period: the product of
// output's dimensions from input's first one that is not 1. They are the input's own elements
// in order when no later axis broadcasts (`expanded` false: a row [3] against [n, 3], an input
// of the run's shape, or with leading 1s); otherwise one period is built per call (a column
// [n, 1] against [m, n, 3]: 3n values), and that buffer may take a quarter of the run at most,
// so that a loop never holds more than the op's own output would.
std::optional<FusedElementwise::InputRead> broadcast_read(const Shape& input, const Shape& output) {
  if (input.size() > output.size()) return std::nullopt;
  const std::size_t lead = output.size() - input.size();
  std::size_t first = output.size();
  bool broadcast_after_first = false;
  for (std::size_t d = 0; d < input.size(); ++d) {
    if (input[d] != 1 && input[d] != output[lead + d]) return std::nullopt;
    if (input[d] != 1 && first == output.size()) first = lead + d;
    if (input[d] == 1 && output[lead + d] != 1 && first != output.size()) {
      broadcast_after_first = true;
    }
  }
  const std::size_t elements = num_elements(output);
  if (num_elements(input) == elements) return FusedElementwise::InputRead{0, false};
  const std::size_t period = std::accumulate(output.begin() + static_cast<std::ptrdiff_t>(first),
                                             output.end(), std::size_t{1}, std::multiplies<>());
  const bool expanded = broadcast_after_first || first == output.size();
  if (expanded && period > 1 && period > elements / 4) return std::nullopt;
  return FusedElementwise::InputRead{period, expanded};
}

// pattern[0, period): the values an input of `input_shape` (broadcast_read's `expanded`) takes
// over the first `period` of the run's elements.
template <class T>
void expand_period(const T* input, const Shape& input_shape, const Shape& output,
                   std::size_t period, T* pattern) {
  if (period == 1) {
    pattern[0] = input[0];
    return;
  }
  const std::size_t rank = output.size();
  const std::size_t lead = rank - input_shape.size();
  // The input's strides over the output's axes: 0 where it broadcasts.
  std::vector<std::size_t> strides(rank, 0);
  std::size_t stride = 1;
  for (std::size_t d = input_shape.size(); d-- > 0;) {
    if (input_shape[d] != 1) strides[lead + d] = stride;
    stride *= input_shape[d];
  }
  std::size_t first = rank;  // the first axis the period spans
  for (std::size_t covered = 1; covered < period;) covered *= output[--first];
  const std::size_t row = output[rank - 1];
  std::vector<std::size_t> index(rank, 0);
  std::size_t offset = 0;
  for (T* out = pattern; out < pattern + period; out += row) {
    if (strides[rank - 1] == 0) {
      std::fill(out, out + row, input[offset]);
    } else {
      std::copy(input + offset, input + offset + row, out);
    }
    for (std::size_t d = rank - 1; d-- > first;) {
      offset += strides[d];
      if (++index[d] < output[d]) break;
      offset -= strides[d] * output[d];
      index[d] = 0;
    }
  }
}

// One period of an input's values and how a block reads them: a block starting at the run's
// element i reads `length - i % period` values from data + i % period, or, where a block
// crosses the end, a copy put together in `wrap`.
template <class T>
struct PeriodicInput {
  const T* data = nullptr;
  std::size_t period = 0;
  std::size_t length = 0;  // period, or a whole number of periods >= period + block
  T* wrap = nullptr;       // one block, when length is the period

  const T* block(std::size_t start, std::size_t count) const {
    const std::size_t offset = start % period;
    if (offset + count <= length) return data + offset;
    const std::size_t head = period - offset;
    std::copy(data + offset, data + period, wrap);
    std::copy(data, data + (count - head), wrap + head);
    return wrap;
  }
};

// A gather's output read from its params: element f of the run is row rows[k] of params'
// axis, where f = ((o K) + k) inner + j over outer o, index position k (K of them) and inner j.
template <class T>
struct GatheredInput {
  const T* params = nullptr;
  IndexValues rows;
  std::size_t limit = 0;  // params' length along the axis
  std::size_t inner = 1;
  T* scratch = nullptr;  // one block
  // For the gather's error on an index outside the axis. Where each index stands for one
  // element, the block checks it as it reads it (a pass of its own would read millions of
  // indices twice); otherwise run_typed checked them all before the loop.
  bool checked = false;
  const GatherRule* rule = nullptr;
  const Tensor* params_tensor = nullptr;
  const Tensor* indices_tensor = nullptr;
  std::size_t axis = 0;

  void check_all() {
    const std::size_t k = first_out_of_range(rows, limit);
    if (k < rows.size()) rule->out_of_range(*params_tensor, *indices_tensor, axis, k);
    checked = true;
  }

  const T* block(std::size_t start, std::size_t count) const {
    return checked ? read_block<false>(start, count) : read_block<true>(start, count);
  }

  template <bool check>
  const T* read_block(std::size_t start, std::size_t count) const {
    const std::size_t positions = rows.size();
    std::size_t j = start % inner;
    std::size_t k = (start / inner) % positions;
    // Where the current outer block of params starts, moved on as the positions wrap.
    const T* outer_start = params + start / inner / positions * limit * inner;
    T* out = scratch;
    for (std::size_t left = count; left > 0;) {
      const auto row = static_cast<std::uint64_t>(rows[k]);  // a negative row: past limit
      if (check && row >= limit) rule->out_of_range(*params_tensor, *indices_tensor, axis, k);
      const T* from = outer_start + row * inner + j;
      const std::size_t n = std::min(inner - j, left);
      // Short rows (ht's [26, N, 3] tangents of [26, V, 3] vertices: three per index) by
      // fixed-length moves.
      switch (n) {
        case 4:
          out[3] = from[3];
          [[fallthrough]];
        case 3:
          out[2] = from[2];
          [[fallthrough]];
        case 2:
          out[1] = from[1];
          [[fallthrough]];
        case 1:
          out[0] = from[0];
          break;
        default:
          for (std::size_t i = 0; i < n; ++i) out[i] = from[i];
      }
      out += n;
      left -= n;
      j = 0;
      if (++k == positions) {
        k = 0;
        outer_start += limit * inner;
      }
    }
    return scratch;
  }
};

// One loop may compute the op: an elementwise rule, one float output, and every input of
// the output's dtype and of its shape or broadcasting to it. With a batch (vectorized_map's
// replay), the traced values have a leading axis of that size and the constants do not: a
// traced input must have the op's own shape (a batched [b, 3] does not broadcast to
// [b, n, 3] by the trailing axes), a constant broadcast to the batched shape.
bool fusable(const OpTrace& trace, const TracedOp& op, std::size_t batch) {
  const ElementwiseRule* rule = op.op->elementwise_rule;
  if (rule == nullptr || op.outputs.size() != 1 || op.inputs.size() != rule->arity) return false;
  const DType dtype = op.output_dtypes()[0];
  if (dtype != DType::Float32 && dtype != DType::Float64) return false;
  const Shape& own_shape = op.output_shapes()[0];
  const Shape shape = batch == 0 ? own_shape : with_batch_axis(batch, own_shape);
  const std::size_t elements = num_elements(shape);
  if (elements == 0 || rule->for_elements(elements) == nullptr) return false;
  return std::all_of(op.inputs.begin(), op.inputs.end(), [&](const TracedInput& in) {
    if (!defined_input(in) || dtype_of_input(trace, in) != dtype) return false;
    if (batch != 0 && in.value != TracedInput::kConstant) {
      return trace.value_shape(in.value) == own_shape;
    }
    return broadcast_read(shape_of(trace, in), shape).has_value();
  });
}

// Where an instruction's operand lives while the run is being built.
struct OperandRef {
  enum class Kind : std::uint8_t { Input, Scratch, Output };
  Kind kind;
  std::uint32_t index;
};

// What a loop needs besides its outputs, kept per thread from one loop to the next: a replay
// of small ops runs thousands of short loops, and seven vectors allocated and freed by each
// were a good part of them. Scratch of more than kKeptScratch elements is the loop's own (it
// is not kept for the thread's life).
template <class T>
struct LoopWorkspace {
  static constexpr std::size_t kKeptScratch = 4096;
  std::vector<T*> output_data;
  std::vector<const T*> input_data;
  std::vector<T> scratch_memory;
  std::vector<const T*> read;
  std::vector<T*> write;
  std::vector<PeriodicInput<T>> periodic;
  std::vector<GatheredInput<T>> gathered;
  // Small buffers (a short period repeated past a block, a gather's block of rows), kept with
  // their capacity: each broadcast input of each short loop allocated one per call. At most
  // kKeptSmallBuffers stay after a loop (each holds at most two blocks).
  static constexpr std::size_t kKeptSmallBuffers = 64;
  std::vector<std::vector<T>> small_buffers;
};

template <class T>
LoopWorkspace<T>& loop_workspace() {
  thread_local LoopWorkspace<T> workspace;
  return workspace;
}

// An input's elements where the loop reads them: in the arena or a constant's (found when the
// replay was planned), else the tensor's, from the read's offset on.
template <class T>
const T* input_elements(const FusedElementwise& fused, const LoopOperands& operands,
                        std::size_t e) {
  const T* data = operands.input_elements != nullptr && operands.input_elements[e] != nullptr
                      ? static_cast<const T*>(operands.input_elements[e])
                      : kernel_data<T>(*operands.inputs[e]);
  return data + fused.reads[e].offset;
}

// Where each output's elements go: its place in the arena, a kept result written again, a
// donated input's buffer, or a new tensor. After the inputs' elements are found: a donated
// input's handle moves to its output.
template <class T>
void place_outputs(const FusedElementwise& fused, const LoopOperands& operands, T** output_data) {
  Tensor* const* destinations = operands.destinations;
  for (std::size_t o = 0; o < fused.outputs.size(); ++o) {
    Tensor* donor = operands.donors != nullptr ? operands.donors[o] : nullptr;
    if (operands.output_elements != nullptr && operands.output_elements[o] != nullptr) {
      output_data[o] = static_cast<T*>(operands.output_elements[o]);
    } else if (operands.recycled != nullptr && operands.recyclable[o] != 0) {
      Tensor& kept = operands.recycled[o];
      if (only_handle(kept)) {  // nobody else can see it: write it again
        output_data[o] = own_elements<T>(kept);
      } else {
        kept = new_tensor(fused.shape, output_data[o]);
      }
      *destinations[o] = kept;
    } else if (donor != nullptr && only_handle(*donor)) {
      // Nobody else can see the input, and the loop reads each of its elements before it
      // writes the output's (plan_donations, which also made sure it has the run's shape).
      output_data[o] = own_elements<T>(*donor);
      *destinations[o] = std::move(*donor);
    } else {
      *destinations[o] = new_tensor(fused.shape, output_data[o]);
    }
  }
}

// A loop of one block (most of a replay of small tensors: GradBench's lstm runs 4,000 loops of
// about 20 elements per call) whose inputs are read as they are or repeat a short period:
// each operand's place once, then each instruction once, without run_typed's block loop and
// its per-input bookkeeping for gathers and expanded periods.
template <class T>
void run_one_block(const FusedElementwise& fused, const LoopOperands& operands,
                   LoopWorkspace<T>& workspace) {
  const std::size_t input_count = fused.inputs.size();
  const std::size_t scratch = fused.scratch_blocks;
  const std::size_t output_count = fused.outputs.size();
  const std::size_t elements = fused.elements;
  std::vector<const T*>& read = workspace.read;
  grow_to(read, input_count + scratch + output_count);
  std::vector<T*>& write = workspace.write;
  grow_to(write, scratch + output_count);
  std::size_t small_used = 0;
  for (std::size_t e = 0; e < input_count; ++e) {
    const T* data = input_elements<T>(fused, operands, e);
    const std::size_t period = fused.reads[e].period;
    if (period != 0 && period < elements) {
      // The period repeated over the loop's elements, in a kept buffer.
      if (small_used == workspace.small_buffers.size()) workspace.small_buffers.emplace_back();
      std::vector<T>& buffer = workspace.small_buffers[small_used++];
      grow_to(buffer, elements);
      for (std::size_t i = 0; i < elements; i += period) {
        std::copy(data, data + std::min(period, elements - i), buffer.data() + i);
      }
      data = buffer.data();
    }
    read[e] = data;
  }
  grow_to(workspace.scratch_memory, scratch * elements);
  for (std::size_t s = 0; s < scratch; ++s) {
    write[s] = workspace.scratch_memory.data() + s * elements;
    read[input_count + s] = write[s];
  }
  place_outputs<T>(fused, operands, write.data() + scratch);
  for (std::size_t o = 0; o < output_count; ++o)
    read[input_count + scratch + o] = write[scratch + o];
  for (const FusedElementwise::Instruction& instruction : fused.program) {
    const T* operands_of[2] = {read[instruction.operands[0]], read[instruction.operands[1]]};
    instruction.rule->kernel<T>()(operands_of, write[instruction.destination], elements);
  }
  if (workspace.small_buffers.size() > LoopWorkspace<T>::kKeptSmallBuffers) {
    workspace.small_buffers.resize(LoopWorkspace<T>::kKeptSmallBuffers);
  }
}

template <class T>
void run_typed(const FusedElementwise& fused, const LoopOperands& operands) {
  const Tensor* const* inputs = operands.inputs;
  const std::size_t input_count = fused.inputs.size();
  const std::size_t scratch = fused.scratch_blocks;
  const std::size_t output_count = fused.outputs.size();

  // Blocks of at most 1,024 elements whose scratch stays within 256 KiB (a few hundred live
  // intermediates shrink the block, down to 64 elements).
  constexpr std::size_t kMaxBlock = 1024;
  constexpr std::size_t kMinBlock = 64;
  constexpr std::size_t kScratchBytes = std::size_t{256} * 1024;
  const std::size_t bytes_per_element = scratch * sizeof(T);
  LoopWorkspace<T>& workspace = loop_workspace<T>();
  if (fused.reads_as_they_are_or_repeat && fused.elements <= kMaxBlock &&
      bytes_per_element * fused.elements <= LoopWorkspace<T>::kKeptScratch * sizeof(T)) {
    run_one_block<T>(fused, operands, workspace);
    return;
  }
  std::size_t block = kMaxBlock;
  if (bytes_per_element * block > kScratchBytes) {
    block = std::max(kMinBlock, kScratchBytes / std::max<std::size_t>(bytes_per_element, 1));
  }
  block = std::min(block, fused.elements);

  // The inputs' elements first: a donated input's handle moves to its output below.
  std::vector<const T*>& input_data = workspace.input_data;
  grow_to(input_data, input_count);
  for (std::size_t e = 0; e < input_count; ++e) {
    input_data[e] = fused.reads[e].indices_only ? nullptr : input_elements<T>(fused, operands, e);
  }
  std::vector<T*>& output_data = workspace.output_data;
  grow_to(output_data, output_count);  // each set below
  place_outputs<T>(fused, operands, output_data.data());

  std::vector<T> own_scratch;
  T* scratch_memory = nullptr;
  if (scratch * block > LoopWorkspace<T>::kKeptScratch) {
    own_scratch.resize(scratch * block);
    scratch_memory = own_scratch.data();
  } else {
    grow_to(workspace.scratch_memory, scratch * block);
    scratch_memory = workspace.scratch_memory.data();
  }
  std::vector<const T*>& read = workspace.read;
  grow_to(read, input_count + scratch + output_count);  // each set before a block reads it
  std::vector<T*>& write = workspace.write;
  grow_to(write, scratch + output_count);
  for (std::size_t s = 0; s < scratch; ++s) {
    write[s] = scratch_memory + s * block;
    read[input_count + s] = write[s];
  }

  // The inputs that repeat: a period shorter than a block is repeated past period + block, so
  // that no block wraps; a longer one is the input itself when its elements are the period,
  // else built once here (both at most a block's copy where a block crosses its end).
  std::vector<PeriodicInput<T>>& periodic = workspace.periodic;
  grow_to(periodic, input_count);  // set below where an input repeats
  // The workspace outlives the loop: it must not keep the gathers' indices alive after it,
  // nor more than a few small buffers.
  struct ReleaseGathered {
    LoopWorkspace<T>& workspace;
    ~ReleaseGathered() {
      workspace.gathered.clear();
      if (workspace.small_buffers.size() > LoopWorkspace<T>::kKeptSmallBuffers) {
        workspace.small_buffers.resize(LoopWorkspace<T>::kKeptSmallBuffers);
      }
    }
  } release_gathered{workspace};
  std::vector<GatheredInput<T>>& gathered = workspace.gathered;
  gathered.clear();
  if (std::any_of(fused.reads.begin(), fused.reads.end(),
                  [](const FusedElementwise::InputRead& how) { return how.gather != nullptr; })) {
    gathered.resize(input_count);
  }
  std::vector<Tensor> period_buffers;
  std::size_t small_used = 0;
  // A kept buffer of n elements; its data stays where it is until the next loop.
  const auto small_buffer = [&](std::size_t n) -> T* {
    if (small_used == workspace.small_buffers.size()) workspace.small_buffers.emplace_back();
    std::vector<T>& buffer = workspace.small_buffers[small_used++];
    grow_to(buffer, n);
    return buffer.data();
  };
  for (std::size_t e = 0; e < input_count; ++e) {
    const FusedElementwise::InputRead& how = fused.reads[e];
    if (how.gather != nullptr) {
      GatheredInput<T>& g = gathered[e];
      const Shape& params_shape = inputs[e]->shape();
      g.params = input_data[e];
      g.rows = how.gather->rows(*inputs[e], *inputs[e + 1], how.gather_axis);
      g.limit = params_shape[how.gather_axis];
      g.rule = how.gather;
      g.params_tensor = inputs[e];
      g.indices_tensor = inputs[e + 1];
      g.axis = how.gather_axis;
      g.inner =
          std::accumulate(params_shape.begin() + static_cast<std::ptrdiff_t>(how.gather_axis) + 1,
                          params_shape.end(), std::size_t{1}, std::multiplies<>());
      g.checked = false;
      if (fused.elements > g.rows.size()) g.check_all();  // an index read for several elements
      g.scratch = small_buffer(block);
      continue;
    }
    if (how.period == 0) continue;
    PeriodicInput<T>& p = periodic[e];
    p = PeriodicInput<T>{};
    p.period = how.period;
    const T* one_period = input_data[e];
    if (how.expanded) {
      if (how.period < block) {
        T* pattern = small_buffer(how.period);
        expand_period(input_data[e], inputs[e]->shape(), fused.shape, how.period, pattern);
        one_period = pattern;
      } else {
        T* data = nullptr;
        period_buffers.push_back(new_tensor(Shape{how.period}, data));
        expand_period(input_data[e], inputs[e]->shape(), fused.shape, how.period, data);
        one_period = data;
      }
    }
    if (how.period < block) {
      const std::size_t repeats = (how.period + block + how.period - 1) / how.period;
      T* repeated = small_buffer(repeats * how.period);
      for (std::size_t r = 0; r < repeats; ++r) {
        std::copy(one_period, one_period + how.period, repeated + r * how.period);
      }
      p.data = repeated;
      p.length = repeats * how.period;
    } else {
      p.data = one_period;
      p.length = how.period;
      p.wrap = small_buffer(block);
    }
  }

  for (std::size_t start = 0; start < fused.elements; start += block) {
    const std::size_t count = std::min(block, fused.elements - start);
    for (std::size_t e = 0; e < input_count; ++e) {
      const FusedElementwise::InputRead& how = fused.reads[e];
      if (how.gather != nullptr) {
        read[e] = gathered[e].block(start, count);
      } else if (how.indices_only) {
        read[e] = nullptr;  // no instruction reads it
      } else {
        read[e] = how.period == 0 ? input_data[e] + start : periodic[e].block(start, count);
      }
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
}

}  // namespace

RunMembership run_membership(const OpTrace& trace, const BookkeepingVector<std::size_t>& kept,
                             const std::vector<std::vector<std::size_t>>& runs) {
  RunMembership m{BookkeepingVector<std::size_t>(kept.size(), kNoRun),
                  BookkeepingVector<std::size_t>(trace.num_values(), kNoRun)};
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (std::size_t i : runs[r]) {
      m.run_of_kept[i] = r;
      for (std::size_t v : trace.ops[kept[i]].outputs) m.producer_run[v] = r;
    }
  }
  return m;
}

std::vector<std::vector<std::size_t>> fusable_runs(const OpTrace& trace,
                                                   const BookkeepingVector<std::size_t>& kept,
                                                   std::size_t batch) {
  std::vector<std::size_t> step_positions;
  step_positions.reserve(trace.steps.size());
  for (const TraceStep& step : trace.steps) step_positions.push_back(step.position);
  // A step runs before the op at its position: one between ops a < b has a < position <= b.
  const auto step_between = [&](std::size_t a, std::size_t b) {
    auto it = std::upper_bound(step_positions.begin(), step_positions.end(), a);
    return it != step_positions.end() && *it <= b;
  };

  // The runs being built, one per dtype and shape: forward mode and vectorized code
  // interleave ops of two shapes (a primal and its batch of tangents), and each shape's ops
  // make a run of their own. A run is computed where its last op is, so an op between two of
  // its ops may run first unless it reads a value of the run: then the run ends before it.
  constexpr std::size_t kMaxOpen = 4;
  constexpr std::int32_t kNoRun = -1;
  std::vector<std::vector<std::size_t>> open;  // kept indices; empty when the slot is free
  BookkeepingVector<std::int32_t> open_run_of(trace.num_values(), kNoRun);
  std::vector<std::vector<std::size_t>> runs;
  const auto close = [&](std::size_t slot) {
    std::vector<std::size_t>& members = open[slot];
    for (std::size_t i : members) {
      for (std::size_t v : trace.ops[kept[i]].outputs) open_run_of[v] = kNoRun;
    }
    if (members.size() >= 2) runs.push_back(std::move(members));
    members.clear();
  };
  const auto close_all = [&] {
    for (std::size_t slot = 0; slot < open.size(); ++slot) close(slot);
  };
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const TracedOp& op = trace.ops[kept[i]];
    if (i > 0 && step_between(kept[i - 1], kept[i])) close_all();
    const bool can_fuse = fusable(trace, op, batch);
    std::size_t joins = open.size();
    if (can_fuse) {
      for (std::size_t slot = 0; slot < open.size(); ++slot) {
        if (open[slot].empty()) continue;
        const TracedOp& first = trace.ops[kept[open[slot].front()]];
        // One output each: the same signature is the same dtype and shape.
        if (first.signature == op.signature) {
          joins = slot;
          break;
        }
      }
    }
    // A run whose value this op reads from outside it must be computed before this op.
    for (const TracedInput& in : op.inputs) {
      if (in.value == TracedInput::kConstant) continue;
      const std::int32_t slot = open_run_of[in.value];
      if (slot != kNoRun && static_cast<std::size_t>(slot) != joins) {
        close(static_cast<std::size_t>(slot));
      }
    }
    if (!can_fuse) continue;
    if (joins == open.size() || open[joins].empty()) {
      joins = open.size();
      for (std::size_t slot = 0; slot < open.size(); ++slot) {
        if (open[slot].empty()) {
          joins = slot;
          break;
        }
      }
      if (joins == open.size()) {
        if (open.size() < kMaxOpen) {
          open.emplace_back();
        } else {  // the run that started first gives way
          joins = 0;
          for (std::size_t slot = 1; slot < open.size(); ++slot) {
            if (open[slot].front() < open[joins].front()) joins = slot;
          }
          close(joins);
        }
      }
    }
    open[joins].push_back(i);
    for (std::size_t v : op.outputs) open_run_of[v] = static_cast<std::int32_t>(joins);
  }
  close_all();
  // In the order the replay meets them: by their last op.
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.back() < b.back(); });
  return runs;
}

bool gather_readable(const TracedOp& op, DType dtype, const Shape& shape) {
  return op.op->gather_rule != nullptr && op.outputs.size() == 1 && op.inputs.size() == 2 &&
         op.output_dtypes()[0] == dtype && op.output_shapes()[0] == shape && op.attrs != nullptr &&
         op.attrs->has("axis") && num_elements(shape) > 0;
}

BookkeepingVector<std::size_t> absorb_gathers(const OpTrace& trace,
                                              const BookkeepingVector<std::size_t>& kept,
                                              const std::vector<std::vector<std::size_t>>& runs,
                                              const BookkeepingVector<std::size_t>& run_of_kept,
                                              const BookkeepingVector<std::uint32_t>& reads,
                                              BookkeepingVector<std::size_t>& producer_run,
                                              BookkeepingVector<std::size_t>& gathered_by,
                                              std::size_t batch) {
  BookkeepingVector<std::size_t> producer(trace.num_values(), kNoRun);  // into kept
  for (std::size_t i = 0; i < kept.size(); ++i) {
    for (std::size_t v : trace.ops[kept[i]].outputs) producer[v] = i;
  }
  BookkeepingVector<std::size_t> absorbed_into(kept.size(), kNoRun);
  BookkeepingVector<std::uint32_t> reads_in_run(trace.num_values(), 0);
  std::vector<std::size_t> candidates;
  // Where fn assigns a Variable or runs host code (the ops traced before each such step). A
  // gather absorbed into a run checks its indices when the run's loop runs, at the run's last
  // op: with such a step in between, a bad index would throw after the step's effect instead
  // of before it, as the eager fn does.
  std::vector<std::size_t> effect_positions;
  for (const TraceStep& step : trace.steps) {
    if (step.kind != TraceStep::Kind::Read) effect_positions.push_back(step.position);
  }
  const auto effect_between = [&](std::size_t gather_op, std::size_t last_op) {
    const auto after =
        std::upper_bound(effect_positions.begin(), effect_positions.end(), gather_op);
    return after != effect_positions.end() && *after <= last_op;
  };
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const TracedOp& first = trace.ops[kept[runs[r].front()]];
    const std::size_t last_op = kept[runs[r].back()];
    candidates.clear();
    for (std::size_t i : runs[r]) {
      for (const TracedInput& in : trace.ops[kept[i]].inputs) {
        if (in.value == TracedInput::kConstant) continue;
        const std::size_t p = producer[in.value];
        if (p == kNoRun || run_of_kept[p] != kNoRun || absorbed_into[p] != kNoRun) continue;
        const TracedOp& gather = trace.ops[kept[p]];
        if (!gather_readable(gather, first.output_dtypes()[0], first.output_shapes()[0])) continue;
        if (effect_between(kept[p], last_op)) continue;
        // Batched: the loop reads batched params (the gather axis one further out) at
        // constant rows.
        if (batch != 0 && (gather.inputs[0].value == TracedInput::kConstant ||
                           gather.inputs[1].value != TracedInput::kConstant)) {
          continue;
        }
        if (reads_in_run[in.value]++ == 0) candidates.push_back(in.value);
      }
    }
    for (std::size_t v : candidates) {
      if (reads_in_run[v] == reads[v]) {
        gathered_by[v] = kept[producer[v]];
        absorbed_into[producer[v]] = r;
        producer_run[v] = r;
      }
      reads_in_run[v] = 0;
    }
  }
  return absorbed_into;
}

namespace {

struct PendingInstruction {
  const ElementwiseRule* rule;
  OperandRef operands[2];
  OperandRef destination;
};

// What fuse_run builds a loop with, kept per thread from one run to the next: a trace of small
// ops has thousands of short runs, and five maps and four lists allocated afresh for each (and
// the loop's own lists regrown as they filled) were two thirds of fusing GradBench's lstm.
// The maps are keyed by trace value + 1 (IdMap keeps 0 for an empty cell).
struct FuseWorkspace {
  IdMap<std::size_t> last_use;              // trace value -> the last op of the run reading it
  IdMap<OperandRef> computed;               // trace value -> where it lives
  IdMap<std::uint32_t> input_of;            // trace value -> input number
  IdMap<std::uint32_t> constant_input_of;   // tensor id -> input
  IdMap<std::uint32_t> gather_input_of;     // trace value of a gather's output -> params input
  std::vector<std::uint32_t> free_scratch;  // scratch blocks no later op of the run reads
  std::vector<PendingInstruction> pending;
  std::vector<TracedInput> inputs;
  std::vector<FusedElementwise::InputRead> reads;
  std::vector<std::size_t> outputs;
  std::vector<FusedElementwise::Instruction> program;

  void reset() {
    last_use.reset();
    computed.reset();
    input_of.reset();
    constant_input_of.reset();
    gather_input_of.reset();
    free_scratch.clear();
    pending.clear();
    inputs.clear();
    reads.clear();
    outputs.clear();
    program.clear();
  }
};

}  // namespace

FusedElementwise fuse_run(const OpTrace& trace, const BookkeepingVector<std::size_t>& kept,
                          const std::vector<std::size_t>& run,
                          const BookkeepingVector<bool>& read_outside,
                          const BookkeepingVector<std::size_t>& gathered_by, std::size_t batch,
                          const BookkeepingVector<PartOf>* parts) {
  const TracedOp& first = trace.ops[kept[run.front()]];
  FusedElementwise fused;
  fused.dtype = first.output_dtypes()[0];
  fused.shape =
      batch == 0 ? first.output_shapes()[0] : with_batch_axis(batch, first.output_shapes()[0]);
  fused.elements = num_elements(fused.shape);

  thread_local FuseWorkspace workspace;
  workspace.reset();
  // Named references, not a structured binding: C++17 lambdas cannot capture those.
  IdMap<std::size_t>& last_use = workspace.last_use;
  IdMap<OperandRef>& computed = workspace.computed;
  IdMap<std::uint32_t>& input_of = workspace.input_of;
  IdMap<std::uint32_t>& constant_input_of = workspace.constant_input_of;
  IdMap<std::uint32_t>& gather_input_of = workspace.gather_input_of;
  std::vector<std::uint32_t>& free_scratch = workspace.free_scratch;
  std::vector<PendingInstruction>& pending = workspace.pending;
  std::vector<TracedInput>& inputs = workspace.inputs;
  std::vector<FusedElementwise::InputRead>& reads = workspace.reads;
  std::vector<std::size_t>& outputs = workspace.outputs;
  // The last op of the run that reads each value the run computes.
  const auto key = [](std::size_t value) { return static_cast<std::uint64_t>(value) + 1; };
  for (std::size_t i : run) {
    const TracedOp& op = trace.ops[kept[i]];
    for (const TracedInput& in : op.inputs) {
      if (in.value != TracedInput::kConstant) last_use.assign(key(in.value), i);
    }
  }

  const auto add_input = [&](const TracedInput& in) {
    inputs.push_back(in);
    // A batched traced value has the run's shape (fusable): read as it is.
    reads.push_back(batch != 0 && in.value != TracedInput::kConstant
                        ? FusedElementwise::InputRead{0, false}
                        : *broadcast_read(shape_of(trace, in), fused.shape));
  };
  const auto operand_for = [&](const TracedInput& in) -> OperandRef {
    if (in.value != TracedInput::kConstant) {
      if (const OperandRef* where = computed.find(key(in.value))) return *where;
      if (gathered_by[in.value] != kNoGather) {
        auto [slot, added] =
            gather_input_of.try_emplace(key(in.value), static_cast<std::uint32_t>(inputs.size()));
        if (added) {
          const TracedOp& gather = trace.ops[gathered_by[in.value]];
          FusedElementwise::InputRead params_read;
          params_read.gather = gather.op->gather_rule;
          // Batched params have the batch axis in front of the gather's own axes.
          params_read.gather_axis =
              static_cast<std::uint32_t>(gather.attrs->get_int("axis") + (batch != 0 ? 1 : 0));
          inputs.push_back(gather.inputs[0]);
          reads.push_back(params_read);
          FusedElementwise::InputRead indices_read;
          indices_read.indices_only = true;
          inputs.push_back(gather.inputs[1]);
          reads.push_back(indices_read);
        }
        return {OperandRef::Kind::Input, *slot};
      }
      auto [slot, added] =
          input_of.try_emplace(key(in.value), static_cast<std::uint32_t>(inputs.size()));
      if (added) {
        const PartOf* part = parts != nullptr ? &(*parts)[in.value] : nullptr;
        if (part != nullptr && part->op != PartOf::kNoPart) {
          // A part of the op's input with the run's shape: its elements in place.
          inputs.push_back(trace.ops[part->op].inputs[0]);
          FusedElementwise::InputRead read;
          read.offset = part->offset;
          reads.push_back(read);
        } else {
          add_input(in);
        }
      }
      return {OperandRef::Kind::Input, *slot};
    }
    auto [slot, added] =
        constant_input_of.try_emplace(in.constant.id(), static_cast<std::uint32_t>(inputs.size()));
    if (added) add_input(in);
    return {OperandRef::Kind::Input, *slot};
  };

  for (std::size_t i : run) {
    const TracedOp& op = trace.ops[kept[i]];
    PendingInstruction instruction{op.op->elementwise_rule->for_elements(fused.elements), {}, {}};
    for (std::size_t k = 0; k < 2; ++k) {
      // A unary op's second operand is never read: any valid one does.
      instruction.operands[k] = operand_for(op.inputs[std::min(k, op.inputs.size() - 1)]);
    }
    const std::size_t value = op.outputs[0];
    if (read_outside[value]) {
      instruction.destination = {OperandRef::Kind::Output,
                                 static_cast<std::uint32_t>(outputs.size())};
      outputs.push_back(value);
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

  fused.inputs.assign(inputs.begin(), inputs.end());
  inputs.clear();  // the workspace holds no constant past the call
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
  fused.reads_as_they_are_or_repeat =
      std::none_of(reads.begin(), reads.end(), [](const FusedElementwise::InputRead& r) {
        return r.gather != nullptr || r.indices_only || r.expanded;
      });
  std::vector<FusedElementwise::Instruction>& program = workspace.program;
  for (const PendingInstruction& p : pending) {
    program.push_back({p.rule,
                       {number(p.operands[0]), number(p.operands[1])},
                       number(p.destination) - input_count});
  }
  fused.set_lists(reads, outputs, program);
  return fused;
}

FusedElementwise fold_loop(const TracedOp& op, std::size_t rows, const Tensor& start) {
  FusedElementwise fused;
  fused.dtype = op.output_dtypes()[0];
  fused.shape = op.output_shapes()[0];
  fused.elements = num_elements(fused.shape);
  const FoldRule& rule = *op.op->fold_rule;
  // The start, a constant scalar read as one repeated element; then each row.
  TracedInput start_input;
  start_input.constant = start;
  fused.inputs.reserve(rows + 1);
  fused.inputs.push_back(start_input);
  std::vector<FusedElementwise::InputRead> reads;
  reads.reserve(rows + 1);
  reads.push_back(*broadcast_read(Shape{}, fused.shape));
  for (std::size_t r = 0; r < rows; ++r) {
    fused.inputs.push_back(op.inputs[0]);
    FusedElementwise::InputRead row;
    row.offset = r * fused.elements;
    reads.push_back(row);
  }
  fused.reads_as_they_are_or_repeat = true;  // the start repeats, each row is read in place
  // Two scratch blocks taken in turn (a block kernel's output may not alias its input).
  const auto input_count = static_cast<std::uint32_t>(fused.inputs.size());
  fused.scratch_blocks = rows == 1 ? 0 : rows == 2 ? 1 : 2;
  const auto scratch = static_cast<std::uint32_t>(fused.scratch_blocks);
  std::uint32_t previous = 0;  // the start
  std::vector<FusedElementwise::Instruction> program;
  program.reserve(rows);
  for (std::uint32_t r = 0; r < rows; ++r) {
    const bool last = r + 1 == rows;
    const std::uint32_t destination = last ? scratch : r % 2;  // numbered from the scratch
    program.push_back({rule.combine, {previous, 1 + r}, destination});
    previous = input_count + destination;
  }
  fused.set_lists(reads, {op.outputs[0]}, program);
  return fused;
}

void FusedElementwise::set_lists(const std::vector<InputRead>& input_reads,
                                 const std::vector<std::size_t>& output_values,
                                 const std::vector<Instruction>& instructions) {
  // The block is aligned for any of the three; each list's elements are a multiple of the
  // next list's alignment long.
  static_assert(sizeof(InputRead) % alignof(std::size_t) == 0 &&
                    sizeof(std::size_t) % alignof(Instruction) == 0,
                "each list starts aligned where the one before it ends");
  const std::size_t read_bytes = input_reads.size() * sizeof(InputRead);
  const std::size_t output_bytes = output_values.size() * sizeof(std::size_t);
  lists_ = std::make_unique<std::byte[]>(read_bytes + output_bytes +
                                         instructions.size() * sizeof(Instruction));
  std::byte* at = lists_.get();
  const InputRead* first_read = std::uninitialized_copy(input_reads.begin(), input_reads.end(),
                                                        reinterpret_cast<InputRead*>(at)) -
                                input_reads.size();
  reads = {first_read, input_reads.size()};
  at += read_bytes;
  const std::size_t* first_output =
      std::uninitialized_copy(output_values.begin(), output_values.end(),
                              reinterpret_cast<std::size_t*>(at)) -
      output_values.size();
  outputs = {first_output, output_values.size()};
  at += output_bytes;
  const Instruction* first_instruction =
      std::uninitialized_copy(instructions.begin(), instructions.end(),
                              reinterpret_cast<Instruction*>(at)) -
      instructions.size();
  program = {first_instruction, instructions.size()};
}

std::vector<Tensor> run_fused(const FusedElementwise& fused, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outputs(fused.outputs.size());
  std::vector<Tensor*> destinations(outputs.size());
  for (std::size_t o = 0; o < outputs.size(); ++o) destinations[o] = &outputs[o];
  std::vector<const Tensor*> input_tensors(inputs.size());
  for (std::size_t e = 0; e < inputs.size(); ++e) input_tensors[e] = &inputs[e];
  LoopOperands operands;
  operands.inputs = input_tensors.data();
  operands.destinations = destinations.data();
  run_fused(fused, operands);
  return outputs;
}

void run_fused(const FusedElementwise& fused, const LoopOperands& operands) {
  if (fused.dtype == DType::Float32) {
    run_typed<float>(fused, operands);
  } else {
    run_typed<double>(fused, operands);
  }
}

}  // namespace tapegrad::detail
