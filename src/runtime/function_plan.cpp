// The replay plan of a Function's trace (runtime/function_trace.hpp): which ops a replay
// runs and in what form, when each value is made and let go, which loop outputs live in the
// arena or are written again next call, and each value's slot.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "runtime/fold_rule.hpp"
#include "runtime/function_trace.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {

std::string why_not_replayable(const OpTrace& trace) {
  // An op without a replay first: a user primitive's kernel is a value read it absorbs.
  for (const TracedOp& op : trace.ops) {
    if (op.op->replay_rule == nullptr) {
      return std::string("op '") + op.op->name + "' has no replay rule";
    }
  }
  if (!trace.value_reads.empty()) return trace.value_reads.front().description;
  return {};
}

namespace {

// `read` on each value `step` reads (what an assignment assigns, a host step's inputs).
template <class Read>
void for_each_read(const TraceStep& step, Read read) {
  if (step.kind != TraceStep::Kind::Read) read(step.value);
  for (const TracedInput& in : step.host_inputs) read(in);
}

// The ops a result or a Variable assignment needs (all of them when not optimising).
BookkeepingVector<std::size_t> kept_ops(const FunctionTrace& compiled, bool optimize) {
  const OpTrace& trace = compiled.trace;
  BookkeepingVector<std::size_t> kept;
  if (!optimize) {
    kept.resize(trace.ops.size());
    std::iota(kept.begin(), kept.end(), std::size_t{0});
    return kept;
  }
  BookkeepingVector<bool> needed(trace.num_values(), false);
  const auto need = [&](const TracedInput& in) {
    if (in.value != TracedInput::kConstant) needed[in.value] = true;
  };
  for (const TracedInput& result : compiled.results) need(result);
  for (const TraceStep& step : trace.steps) for_each_read(step, need);
  for (std::size_t k = trace.ops.size(); k-- > 0;) {
    const TracedOp& op = trace.ops[k];
    const bool any_needed =
        std::any_of(op.outputs.begin(), op.outputs.end(), [&](std::size_t v) { return needed[v]; });
    if (!any_needed) continue;
    kept.push_back(k);
    for (const TracedInput& in : op.inputs) need(in);
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

// In run_of_kept: a gather or split that a run's loop absorbed (absorb_gathers, absorb_parts).
constexpr std::size_t kAbsorbed = ReplayItem::kNone - 1;

// Splits (ops with a PartRule) whose outputs only runs read, runs of each output's dtype and
// shape: the loops read the parts in place (`parts`, sized on the first), and the split is
// absorbed (kAbsorbed in run_of_kept, into the first such run) instead of an item. A part may
// have several reading runs (a gate read by a step and by its gradient): the split's input
// lives until the last of them.
void absorb_parts(const OpTrace& trace, const BookkeepingVector<std::size_t>& kept,
                  const std::vector<std::vector<std::size_t>>& runs,
                  const BookkeepingVector<std::uint32_t>& reads,
                  BookkeepingVector<std::size_t>& run_of_kept,
                  BookkeepingVector<std::size_t>& absorbed_into,
                  BookkeepingVector<std::size_t>& producer_run, BookkeepingVector<PartOf>& parts) {
  constexpr std::size_t kNone = ReplayItem::kNone;
  // Per value: the first run reading it, how many reads runs make, and whether a run of
  // another shape or dtype reads it.
  BookkeepingVector<std::size_t> first_reading_run(trace.num_values(), kNone);
  BookkeepingVector<std::uint32_t> reads_by_runs(trace.num_values(), 0);
  BookkeepingVector<bool> read_by_other_shape(trace.num_values(), false);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const TracedOp& first = trace.ops[kept[runs[r].front()]];
    for (std::size_t i : runs[r]) {
      for (const TracedInput& in : trace.ops[kept[i]].inputs) {
        if (in.value == TracedInput::kConstant) continue;
        if (first_reading_run[in.value] == kNone) first_reading_run[in.value] = r;
        ++reads_by_runs[in.value];
        if (trace.value_shape(in.value) != first.output_shapes()[0] ||
            trace.value_dtype(in.value) != first.output_dtypes()[0]) {
          read_by_other_shape[in.value] = true;
        }
      }
    }
  }
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const TracedOp& op = trace.ops[kept[i]];
    if (op.op->part_rule == nullptr || run_of_kept[i] != kNone || op.inputs.size() != 1) continue;
    const TracedInput& whole = op.inputs[0];
    if (whole.value == TracedInput::kConstant && !whole.constant.defined()) continue;
    const Shape& whole_shape = whole.value == TracedInput::kConstant
                                   ? whole.constant.shape()
                                   : trace.value_shape(whole.value);
    bool absorbable = true;
    std::size_t some_run = kNone;
    for (std::size_t j = 0; j < op.outputs.size() && absorbable; ++j) {
      const std::size_t v = op.outputs[j];
      if (reads[v] == 0) continue;
      absorbable = reads_by_runs[v] == reads[v] && !read_by_other_shape[v];
      if (some_run == kNone) some_run = first_reading_run[v];
    }
    if (!absorbable || some_run == kNone ||
        !op.op->part_rule->starts(whole_shape, op.attrs.get(), op.output_shapes(), offsets)) {
      continue;
    }
    if (parts.empty()) parts.resize(trace.num_values());
    run_of_kept[i] = kAbsorbed;
    absorbed_into[i] = some_run;
    for (std::size_t j = 0; j < op.outputs.size(); ++j) {
      const std::size_t v = op.outputs[j];
      if (reads[v] == 0) continue;
      parts[v] = PartOf{kept[i], offsets[j]};
      producer_run[v] = first_reading_run[v];
    }
  }
}

// How many rows a loop folds when it computes `op` (fold_loop), or 0 when the op runs on its
// own: a fold rule, one float input traced of the output's dtype, and at most kFoldRows rows
// (the loop reads each as an input of its own).
constexpr std::size_t kFoldRows = 8;
std::size_t fold_rows(const OpTrace& trace, const TracedOp& op) {
  if (op.op->fold_rule == nullptr || op.inputs.size() != 1 || op.outputs.size() != 1) return 0;
  const TracedInput& in = op.inputs[0];
  const DType dtype = op.output_dtypes()[0];
  if (in.value == TracedInput::kConstant || trace.value_dtype(in.value) != dtype ||
      (dtype != DType::Float32 && dtype != DType::Float64)) {
    return 0;
  }
  const std::size_t rows =
      op.op->fold_rule->rows(trace.value_shape(in.value), op.attrs.get(), op.output_shapes()[0]);
  return rows <= kFoldRows ? rows : 0;
}

// The kept ops as replay items; with `optimize`, each run of elementwise ops one loop can
// compute is one item, and only the values read after the run are made tensors.
void plan_items(FunctionTrace& compiled, const BookkeepingVector<std::size_t>& kept,
                bool optimize) {
  const OpTrace& trace = compiled.trace;
  std::vector<std::vector<std::size_t>> runs;
  if (optimize) runs = fusable_runs(trace, kept);
  constexpr std::size_t kNone = ReplayItem::kNone;
  RunMembership membership = run_membership(trace, kept, runs);
  BookkeepingVector<std::size_t>& run_of_kept = membership.run_of_kept;
  BookkeepingVector<std::size_t>& producer_run = membership.producer_run;
  // Gathers (absorb_gathers) and splits (absorb_parts) that only runs read: the loops read
  // their params or parts instead, and they are not items of their own.
  BookkeepingVector<std::size_t> gathered_by(trace.num_values(), kNoGather);
  BookkeepingVector<std::size_t> absorbed_into(kept.size(), kNone);  // a gather's run
  BookkeepingVector<PartOf> parts;  // per trace value, once a split is absorbed
  if (!runs.empty()) {
    BookkeepingVector<std::uint32_t> reads(trace.num_values(), 0);
    const auto count_read = [&](const TracedInput& in) {
      if (in.value != TracedInput::kConstant) ++reads[in.value];
    };
    for (std::size_t i : kept)
      for (const TracedInput& in : trace.ops[i].inputs) count_read(in);
    for (const TraceStep& step : trace.steps) for_each_read(step, count_read);
    for (const TracedInput& result : compiled.results) count_read(result);
    absorbed_into =
        absorb_gathers(trace, kept, runs, run_of_kept, reads, producer_run, gathered_by, 0);
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (absorbed_into[i] != kNone) run_of_kept[i] = kAbsorbed;
    }
    absorb_parts(trace, kept, runs, reads, run_of_kept, absorbed_into, producer_run, parts);
  }

  BookkeepingVector<bool> read_outside(trace.num_values(), false);
  const auto read_after_run = [&](const TracedInput& in) {
    if (in.value != TracedInput::kConstant) read_outside[in.value] = true;
  };
  for (std::size_t i = 0; i < kept.size(); ++i) {
    // An absorbed gather's params and indices are read by its run's loop.
    const std::size_t reader = run_of_kept[i] == kAbsorbed ? absorbed_into[i] : run_of_kept[i];
    for (const TracedInput& in : trace.ops[kept[i]].inputs) {
      if (in.value != TracedInput::kConstant && producer_run[in.value] != reader) {
        read_outside[in.value] = true;
      }
    }
  }
  for (const TraceStep& step : trace.steps) for_each_read(step, read_after_run);
  for (const TracedInput& result : compiled.results) read_after_run(result);

  // Each fold rule's start as a scalar of each dtype, one for all its folds (a constant the
  // trace keeps).
  std::vector<std::pair<std::pair<const FoldRule*, DType>, Tensor>> fold_starts;
  const auto fold_start = [&](const FoldRule& rule, const TracedOp& op) -> const Tensor& {
    const std::pair<const FoldRule*, DType> key{&rule, op.output_dtypes()[0]};
    for (const auto& entry : fold_starts) {
      if (entry.first == key) return entry.second;
    }
    fold_starts.emplace_back(key, scalar(rule.init, key.second));
    return fold_starts.back().second;
  };
  // The items and loops, counted first: both lists are reserved once (an LSTM's 10,000 loops
  // regrew theirs into fresh memory at each doubling).
  static_assert(kFoldRows < 256, "a byte holds each kept op's fold rows");
  BookkeepingVector<std::uint8_t> fold_rows_of_kept(kept.size(), 0);
  std::size_t ops_alone = 0, folds = 0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (run_of_kept[i] != kNone) continue;
    ++ops_alone;
    fold_rows_of_kept[i] =
        optimize ? static_cast<std::uint8_t>(fold_rows(trace, trace.ops[kept[i]])) : 0;
    if (fold_rows_of_kept[i] != 0) ++folds;
  }
  compiled.items.reserve(runs.size() + ops_alone);
  compiled.fused.reserve(runs.size() + folds);
  // A run is one item where its last op is: the ops between its ops that are not its own
  // read none of its values (fusable_runs), so they may run first. A fold of a few rows
  // (FoldRule) is a loop of its own.
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::size_t r = run_of_kept[i];
    const TracedOp& op = trace.ops[kept[i]];
    const std::size_t rows = fold_rows_of_kept[i];
    if (rows != 0) {
      compiled.items.push_back({kept[i], kNone, compiled.fused.size()});
      compiled.fused.push_back(fold_loop(op, rows, fold_start(*op.op->fold_rule, op)));
    } else if (r == kNone) {
      compiled.items.push_back({kept[i], kept[i], kNone});
    } else if (r != kAbsorbed && runs[r].back() == i) {
      compiled.items.push_back({kept[i], kNone, compiled.fused.size()});
      compiled.fused.push_back(fuse_run(trace, kept, runs[r], read_outside, gathered_by, 0,
                                        parts.empty() ? nullptr : &parts));
    }
  }
}

// For each item, the values whose last reader it is (a step reading a value counts as the
// first item at or after its position: it runs before that item), and which of its inputs it
// may take by move (it reads that value last, and once). fn's results are kept.
void plan_lifetimes(FunctionTrace& compiled) {
  const OpTrace& trace = compiled.trace;
  const std::size_t item_count = compiled.items.size();
  constexpr std::size_t kNever = static_cast<std::size_t>(-1);
  BookkeepingVector<std::size_t> last_reader(trace.num_values(), kNever);
  const auto read_at = [&](const TracedInput& in, std::size_t i) {
    if (in.value == TracedInput::kConstant) return;
    std::size_t& last = last_reader[in.value];
    if (last == kNever || (last < item_count && i > last)) last = i;
  };
  for (std::size_t i = 0; i < item_count; ++i) {
    for (const TracedInput& in : compiled.inputs_of(compiled.items[i])) read_at(in, i);
  }
  for (const TraceStep& step : trace.steps) {
    const std::size_t i = static_cast<std::size_t>(
        std::lower_bound(
            compiled.items.begin(), compiled.items.end(), step.position,
            [](const ReplayItem& item, std::size_t position) { return item.position < position; }) -
        compiled.items.begin());
    // A step after the last item: its values live to the end (i == item_count).
    for_each_read(step, [&](const TracedInput& in) { read_at(in, i); });
  }
  for (const TracedInput& result : compiled.results) {
    if (result.value != TracedInput::kConstant) last_reader[result.value] = item_count;
  }
  // The values released after each item, item by item in one array (an LSTM's 20,000 items
  // had a list each): first its outputs that nothing reads, then the values it reads last.
  BookkeepingVector<std::size_t> first_released(item_count + 1, 0);
  const auto for_each_release = [&](auto release) {
    for (std::size_t i = 0; i < item_count; ++i) {
      for (std::size_t v : compiled.outputs_of(compiled.items[i])) {  // read by nothing: gone
        if (last_reader[v] == kNever) release(i, v);
      }
    }
    for (std::size_t v = 0; v < last_reader.size(); ++v) {
      if (last_reader[v] < item_count) release(last_reader[v], v);
    }
  };
  for_each_release([&](std::size_t i, std::size_t) { ++first_released[i + 1]; });
  std::partial_sum(first_released.begin(), first_released.end(), first_released.begin());
  BookkeepingVector<std::size_t> released(first_released[item_count]);
  {
    BookkeepingVector<std::size_t> next(first_released.begin(), first_released.end() - 1);
    for_each_release([&](std::size_t i, std::size_t v) { released[next[i]++] = v; });
  }
  const auto index = [](std::size_t i) {
    if (i > std::numeric_limits<std::uint32_t>::max()) {
      throw Error(
          "function: a trace of more than 2^32 values, inputs or releases is more than "
          "a replay plan can number");
    }
    return static_cast<std::uint32_t>(i);
  };
  std::vector<std::size_t> read_values;
  for (std::size_t i = 0; i < item_count; ++i) {
    ReplayItem& item = compiled.items[i];
    if (item.op != ReplayItem::kNone) {
      item.definition = trace.ops[item.op].op;
      item.attrs = trace.ops[item.op].attrs.get();
      item.signature = trace.ops[item.op].signature;
    }
    const ElementSpan<TracedInput> inputs = compiled.inputs_of(item);
    item.first_input = index(compiled.replay_inputs.size());
    item.input_count = index(inputs.size());
    // The item's traced inputs, sorted: how often it reads a value, in O(log k) (a concat of
    // thousands of parts reads each once).
    read_values.clear();
    for (const TracedInput& in : inputs) {
      if (in.value != TracedInput::kConstant) read_values.push_back(in.value);
    }
    std::sort(read_values.begin(), read_values.end());
    const auto reads_once = [&](std::size_t v) {
      const auto range = std::equal_range(read_values.begin(), read_values.end(), v);
      return range.second - range.first == 1;
    };
    for (const TracedInput& in : inputs) {
      FunctionTrace::ReplayInput replay_input{};
      if (in.value == TracedInput::kConstant) {
        replay_input.index = index(compiled.constants.size());
        replay_input.constant = true;
        compiled.constants.push_back(in.constant);
      } else {
        replay_input.index = index(in.value);
        replay_input.move = last_reader[in.value] == i && reads_once(in.value);
      }
      compiled.replay_inputs.push_back(replay_input);
    }
    const ElementSpan<std::size_t> outputs = compiled.outputs_of(item);
    item.first_output = index(compiled.replay_outputs.size());
    item.output_count = index(outputs.size());
    for (std::size_t v : outputs) compiled.replay_outputs.push_back(index(v));
    item.first_release = index(compiled.releases.size());
    item.release_count = index(first_released[i + 1] - first_released[i]);
    for (std::size_t r = first_released[i]; r < first_released[i + 1]; ++r) {
      compiled.releases.push_back(index(released[r]));
    }
  }
}

// The float constants' elements, found once: a replay's loops then read them without a
// tensor's checks per call (the trace keeps the constants alive; a strided view's copy is
// built once and kept with it).
void plan_constant_elements(FunctionTrace& compiled) {
  compiled.constant_elements.assign(compiled.constants.size(), nullptr);
  for (std::size_t c = 0; c < compiled.constants.size(); ++c) {
    const Tensor& constant = compiled.constants[c];
    if (!constant.defined() || !impl_of(constant).holds_elements) continue;
    if (constant.dtype() == DType::Float32) {
      compiled.constant_elements[c] = kernel_data<float>(constant);
    } else if (constant.dtype() == DType::Float64) {
      compiled.constant_elements[c] = kernel_data<double>(constant);
    }
  }
}

// Each value gets a slot of the replay's table of tensors, taken again once the value is
// released: the table is as long as the most values alive at once (a trace of small ops has
// hundreds of thousands of values and a few hundred alive), not one entry per trace value, so
// a replay neither allocates nor walks a table of the whole trace. The arguments are slots
// 0 to argument_count - 1. A slot is taken where the replay makes its value (an item's output,
// a Variable read by a step) and given back after the item that releases it.
void plan_slots(FunctionTrace& compiled, std::size_t argument_count) {
  const OpTrace& trace = compiled.trace;
  constexpr std::uint32_t kNoSlot = std::numeric_limits<std::uint32_t>::max();
  BookkeepingVector<std::uint32_t>& slot_of = compiled.slot_of_value;
  slot_of.assign(trace.num_values(), kNoSlot);
  std::vector<std::uint32_t> free_slots;
  std::uint32_t slot_count = 0;
  const auto new_slot = [&] {
    if (slot_count == kNoSlot) {
      throw Error("function: a replay plan of more than 2^32 - 1 live values");
    }
    return slot_count++;
  };
  const auto make = [&](std::size_t value) {
    if (slot_of[value] != kNoSlot) return;
    if (free_slots.empty()) {
      slot_of[value] = new_slot();
    } else {
      slot_of[value] = free_slots.back();
      free_slots.pop_back();
    }
  };
  for (std::size_t v = 0; v < argument_count; ++v) make(v);
  const std::vector<TraceStep>& steps = trace.steps;
  std::size_t next_step = 0;
  const auto run_steps_until = [&](std::size_t position) {
    for (; next_step < steps.size() && steps[next_step].position <= position; ++next_step) {
      if (steps[next_step].kind == TraceStep::Kind::Read) make(steps[next_step].value.value);
    }
  };
  for (const ReplayItem& item : compiled.items) {
    run_steps_until(item.position);
    for (std::uint32_t j = 0; j < item.output_count; ++j) {
      if (compiled.output_arena[item.first_output + j] != FunctionTrace::kNotInArena) continue;
      make(compiled.replay_outputs[item.first_output + j]);
    }
    for (std::uint32_t k = 0; k < item.release_count; ++k) {
      const std::uint32_t slot = slot_of[compiled.releases[item.first_release + k]];
      if (slot != kNoSlot) free_slots.push_back(slot);
    }
  }
  run_steps_until(static_cast<std::size_t>(-1));
  // Every value an item, a step or a result reads was made before (plan_lifetimes releases
  // only what an item made or read).
  const auto slot = [&](std::size_t value) {
    if (slot_of[value] == kNoSlot) {
      throw Error("function: the replay plan reads value " + std::to_string(value) +
                  ", which nothing makes (an error in tapegrad's planning)");
    }
    return slot_of[value];
  };
  for (FunctionTrace::ReplayInput& in : compiled.replay_inputs) {
    if (!in.constant && !in.arena) in.index = slot(in.index);
  }
  for (std::size_t j = 0; j < compiled.replay_outputs.size(); ++j) {
    std::uint32_t& value = compiled.replay_outputs[j];
    value = compiled.output_arena[j] != FunctionTrace::kNotInArena ? kNoSlot : slot(value);
  }
  for (std::uint32_t& value : compiled.releases) value = slot(value);
  const auto slot_of_input = [&](const TracedInput& in) {
    if (in.value != TracedInput::kConstant) slot(in.value);
  };
  for (const TraceStep& step : steps) {
    for_each_read(step, slot_of_input);
    if (step.kind == TraceStep::Kind::Read) slot_of_input(step.value);
  }
  for (const TracedInput& result : compiled.results) slot_of_input(result);
  compiled.slot_count = slot_count;
}
// The bytes of an element of a loop's dtype (loops are float32 or float64).
std::size_t float_bytes(DType dtype) {
  return dtype == DType::Float32 ? sizeof(float) : sizeof(double);
}

// Per trace value, whether it leaves a replay: a result, or read by a step (a Variable
// assignment, a host step).
BookkeepingVector<bool> leaving_values(const FunctionTrace& compiled) {
  BookkeepingVector<bool> leaves(compiled.trace.num_values(), false);
  const auto mark = [&](const TracedInput& in) {
    if (in.value != TracedInput::kConstant) leaves[in.value] = true;
  };
  for (const TracedInput& result : compiled.results) mark(result);
  for (const TraceStep& step : compiled.trace.steps) for_each_read(step, mark);
  return leaves;
}

// Which outputs of fused loops the next replay may write again (ReplayMemory::recycled):
// those of at most kRecycledBytes (where a tensor handle costs more than its elements) that
// are neither a result nor read by a step (a Variable assignment, a host step).
// Those are the only ways a value leaves a replay, and whoever gets one may remember its id
// (a tape records ids), which a recycled tensor keeps. A view of a value that leaves holds
// the value's handle, so the value is not written again while the view lives.
constexpr std::size_t kRecycledBytes = 4096;
void plan_recycling(FunctionTrace& compiled, const BookkeepingVector<bool>& leaves) {
  compiled.recyclable.assign(compiled.replay_outputs.size(), 0);
  for (const ReplayItem& item : compiled.items) {
    if (item.fused == ReplayItem::kNone) continue;
    const FusedElementwise& loop = compiled.fused[item.fused];
    const std::size_t element_bytes = float_bytes(loop.dtype);
    if (loop.elements * element_bytes > kRecycledBytes) continue;
    const auto& outputs = loop.outputs;
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      compiled.recyclable[item.first_output + j] = leaves[outputs[j]] ? 0 : 1;
    }
  }
}

// plan_arena's markers: no join output (a value that is no part), no offset (not in the arena).
constexpr std::size_t kNoValue = static_cast<std::size_t>(-1);
constexpr std::uint64_t kNoOffset = std::numeric_limits<std::uint64_t>::max();

// A loop reads the input as its elements in order: not expanded over a broadcast, nor as a
// gather's params or indices (those reads need the input's tensor).
bool reads_elements_in_order(const FusedElementwise::InputRead& how) {
  return !how.expanded && how.gather == nullptr && !how.indices_only;
}

// What plan_arena finds out, per trace value (and per item: `absorbed`, `copied`).
struct ArenaCandidates {
  // Read by loops alone, each as its elements in order, and leaving nowhere.
  BookkeepingVector<std::uint8_t> loops_only;
  BookkeepingVector<std::uint32_t> item_reads;        // how many item inputs read it
  BookkeepingVector<std::uint32_t> op_reads;          // how many inputs of ops (not loops)
  BookkeepingVector<std::uint8_t> read_in_order;      // no loop reads it expanded or gathered
  BookkeepingVector<std::uint8_t> recyclable_output;  // a recyclable output of a loop
  BookkeepingVector<std::uint8_t> in_arena;           // goes to the arena
  BookkeepingVector<std::uint8_t> tensor_too;         // in the arena and a tensor: a copied join's
  BookkeepingVector<std::size_t> joined_into;         // a part: its join's output, else kNoValue
  BookkeepingVector<std::size_t> start_in_whole;      // a part: where it starts, in elements
  BookkeepingVector<std::uint8_t> absorbed;           // per item: a join the loops write in place
  BookkeepingVector<std::uint8_t> copied;  // per item: such a join, copied out as a tensor
};

// The loop outputs that may live in the arena: recyclable ones that loops alone read.
ArenaCandidates arena_candidates(const FunctionTrace& compiled,
                                 const BookkeepingVector<bool>& leaves) {
  const std::size_t value_count = compiled.trace.num_values();
  ArenaCandidates c;
  c.loops_only.resize(value_count);
  for (std::size_t v = 0; v < value_count; ++v) c.loops_only[v] = leaves[v] ? 0 : 1;
  c.item_reads.assign(value_count, 0);
  c.op_reads.assign(value_count, 0);
  c.read_in_order.assign(value_count, 1);
  for (const ReplayItem& item : compiled.items) {
    const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
    for (std::uint32_t e = 0; e < item.input_count; ++e) {
      if (in[e].constant) continue;
      ++c.item_reads[in[e].index];
      if (item.fused == ReplayItem::kNone) {
        c.loops_only[in[e].index] = 0;
        ++c.op_reads[in[e].index];
        continue;
      }
      if (!reads_elements_in_order(compiled.fused[item.fused].reads[e])) {
        c.loops_only[in[e].index] = 0;
        c.read_in_order[in[e].index] = 0;
      }
    }
  }
  c.in_arena.assign(value_count, 0);
  c.recyclable_output.assign(value_count, 0);
  for (const ReplayItem& item : compiled.items) {
    if (item.fused == ReplayItem::kNone) continue;
    for (std::uint32_t j = 0; j < item.output_count; ++j) {
      const std::uint32_t v = compiled.replay_outputs[item.first_output + j];
      c.recyclable_output[v] = compiled.recyclable[item.first_output + j];
      c.in_arena[v] = c.recyclable_output[v] != 0 && c.loops_only[v] != 0 ? 1 : 0;
    }
  }
  c.tensor_too.assign(value_count, 0);
  c.joined_into.assign(value_count, kNoValue);
  c.start_in_whole.assign(value_count, 0);
  c.absorbed.assign(compiled.items.size(), 0);
  c.copied.assign(compiled.items.size(), 0);
  return c;
}

// The largest join whose parts the loops write into the arena and that is then copied out as
// a tensor (absorb_joins): the arena holds it until its last reader.
constexpr std::size_t kCopiedJoinBytes = std::size_t{1} << 20;

// The joins loops write in place: per part, the join's output and where the part starts.
// - A small join that loops alone read lives in the arena, and the join is no item any more
//   (an LSTM's gradient joins each step's two gate gradients this way).
// - Another join of recyclable loop outputs that no other op reads (an RNN's hidden states,
//   each read by the next step's loop and joined for the layer above) has its parts written
//   into its place in the arena, and the join copies its elements out as one tensor: one copy
//   instead of a tensor per part (GradBench's lstm made 6,000 per call to join them).
void absorb_joins(FunctionTrace& compiled, ArenaCandidates& c) {
  std::vector<Shape> part_shapes;
  std::vector<std::size_t> part_starts;
  std::vector<std::uint8_t> written_by_loop;  // per part of a copied join
  for (std::size_t i = 0; i < compiled.items.size(); ++i) {
    const ReplayItem& item = compiled.items[i];
    if (item.fused != ReplayItem::kNone || item.definition->join_rule == nullptr ||
        item.output_count != 1 || item.input_count == 0) {
      continue;
    }
    const std::uint32_t whole = compiled.replay_outputs[item.first_output];
    const DType dtype = item.signature->dtypes[0];
    const Shape& whole_shape = item.signature->shapes[0];
    if (dtype != DType::Float32 && dtype != DType::Float64) continue;
    const std::size_t whole_bytes = num_elements(whole_shape) * float_bytes(dtype);
    const bool in_arena_only = c.loops_only[whole] != 0 && whole_bytes <= kRecycledBytes;
    if (!in_arena_only && (whole_bytes > kCopiedJoinBytes || whole_bytes == 0)) continue;
    FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
    part_shapes.clear();
    written_by_loop.assign(item.input_count, 0);
    std::size_t from_loops = 0;
    bool absorbable = true;
    for (std::uint32_t e = 0; e < item.input_count && absorbable; ++e) {
      const std::uint32_t part = in[e].index;
      absorbable = !in[e].constant;
      if (!absorbable) break;
      const bool loop_part = c.recyclable_output[part] != 0 &&
                             (in_arena_only ? c.item_reads[part] == 1
                                            : c.op_reads[part] == 1 && c.read_in_order[part] != 0);
      // A copied join may have a few parts that are tensors (an op's output: the first step's
      // gradient of a recurrence): the copy writes them over their place.
      absorbable = loop_part || !in_arena_only;
      written_by_loop[e] = loop_part ? 1 : 0;
      from_loops += loop_part ? 1 : 0;
      part_shapes.push_back(compiled.trace.value_shape(part));
    }
    // The copy's inputs are the whole's bytes and two entries per tensor part, in the join's
    // own entries: more parts from loops than tensors.
    const std::size_t tensor_parts = item.input_count - from_loops;
    if (!absorbable || (!in_arena_only && from_loops <= tensor_parts) ||
        !item.definition->join_rule->starts(whole_shape, item.attrs, part_shapes, part_starts)) {
      continue;
    }
    for (std::uint32_t e = 0; e < item.input_count; ++e) {
      if (written_by_loop[e] == 0) continue;
      c.start_in_whole[in[e].index] = part_starts[e];
      c.joined_into[in[e].index] = whole;
      c.in_arena[in[e].index] = 1;
    }
    c.in_arena[whole] = 1;
    if (in_arena_only) {
      c.absorbed[i] = 1;
      continue;
    }
    c.tensor_too[whole] = 1;
    c.copied[i] = 1;
    // Entry 0: the whole's bytes (use_arena sets the offset); then per tensor part its value
    // and its start in elements; the rest is read by nobody (marked as arena reads, so that no
    // slot is asked for them).
    std::vector<FunctionTrace::ReplayInput> entries(item.input_count);
    entries[0].arena = true;
    std::size_t next = 1;
    for (std::uint32_t e = 0; e < item.input_count; ++e) {
      if (written_by_loop[e] != 0) continue;
      entries[next] = in[e];
      entries[next].move = false;
      entries[next + 1].arena = true;
      entries[next + 1].index = static_cast<std::uint32_t>(part_starts[e]);
      next += 2;
    }
    for (std::size_t e = next; e < entries.size(); ++e) entries[e].arena = true;
    std::copy(entries.begin(), entries.end(), in);
    compiled.items[i].input_count = static_cast<std::uint32_t>(next);
  }
}

// Each arena value's byte offset (kNoOffset for the others), in 64-byte steps: a value starts
// on a cache line of its own. A part's offset is inside its join's output, which alone is
// given back. Returns the arena's size in bytes.
std::uint64_t arena_offsets(const FunctionTrace& compiled, const ArenaCandidates& c,
                            BookkeepingVector<std::uint64_t>& offset_of) {
  constexpr std::uint64_t kAlignment = 64;
  const std::size_t value_count = compiled.trace.num_values();
  offset_of.assign(value_count, kNoOffset);
  BookkeepingVector<std::uint64_t> bytes_of(value_count, 0);         // 0 for a part
  std::map<std::uint64_t, std::vector<std::uint64_t>> free_offsets;  // by size
  std::uint64_t top = 0;
  const auto take = [&](std::size_t v, std::uint64_t bytes) {
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    std::vector<std::uint64_t>& reusable = free_offsets[bytes];
    if (reusable.empty()) {
      offset_of[v] = top;
      top += bytes;
    } else {
      offset_of[v] = reusable.back();
      reusable.pop_back();
    }
    bytes_of[v] = bytes;
  };
  const auto give_back = [&](std::size_t v) {
    if (offset_of[v] != kNoOffset && bytes_of[v] != 0) {
      free_offsets[bytes_of[v]].push_back(offset_of[v]);
    }
  };
  // A join's bytes hold its parts: they are given back once the join and every part are
  // released (a copied join's parts may be read after the join is dead: an RNN's hidden state,
  // read again by the gradient of its weights).
  BookkeepingVector<std::uint32_t> unreleased(value_count, 0);  // a join's: its parts, itself
  for (std::size_t v = 0; v < value_count; ++v) {
    if (c.joined_into[v] != kNoValue) ++unreleased[c.joined_into[v]];
  }
  for (std::uint32_t& count : unreleased) count += count != 0 ? 1 : 0;
  const auto released = [&](std::size_t v) {
    const std::size_t whole = c.joined_into[v] != kNoValue ? c.joined_into[v] : v;
    if (unreleased[whole] == 0) {
      give_back(v);
    } else if (--unreleased[whole] == 0) {
      give_back(whole);
    }
  };
  for (const ReplayItem& item : compiled.items) {
    if (item.fused != ReplayItem::kNone) {
      const FusedElementwise& loop = compiled.fused[item.fused];
      const std::size_t element_bytes = float_bytes(loop.dtype);
      for (std::uint32_t j = 0; j < item.output_count; ++j) {
        const std::uint32_t v = compiled.replay_outputs[item.first_output + j];
        if (c.in_arena[v] == 0) continue;
        const std::size_t whole = c.joined_into[v];
        if (whole == kNoValue) {
          take(v, loop.elements * element_bytes);
          continue;
        }
        if (offset_of[whole] == kNoOffset) {
          take(whole, num_elements(compiled.trace.value_shape(whole)) * element_bytes);
        }
        offset_of[v] = offset_of[whole] + c.start_in_whole[v] * element_bytes;
      }
    }
    const std::uint32_t* release = compiled.releases.data() + item.first_release;
    for (std::uint32_t k = 0; k < item.release_count; ++k) released(release[k]);
  }
  return top;
}

// Rewrites the plan for the arena: loop outputs and inputs at their offsets, no release of an
// arena value (it has no tensor to let go), no item for an absorbed join; a copied join reads
// its whole from the arena and makes it a tensor, which ops read and the plan releases.
void use_arena(FunctionTrace& compiled, const ArenaCandidates& c,
               const BookkeepingVector<std::uint64_t>& offset_of, std::uint64_t arena_bytes) {
  compiled.arena_bytes = arena_bytes;
  for (std::size_t i = 0; i < compiled.items.size(); ++i) {
    ReplayItem& item = compiled.items[i];
    if (c.copied[i] != 0) {  // its entries are absorb_joins'
      compiled.replay_inputs[item.first_input].index =
          static_cast<std::uint32_t>(offset_of[compiled.replay_outputs[item.first_output]]);
      item.copies_from_arena = true;
      continue;
    }
    for (std::uint32_t j = 0; j < item.output_count; ++j) {
      const std::uint32_t v = compiled.replay_outputs[item.first_output + j];
      if (offset_of[v] != kNoOffset) {
        compiled.output_arena[item.first_output + j] = static_cast<std::uint32_t>(offset_of[v]);
      }
    }
    // Only loops read the arena: an op reads a copied join's tensor (an absorbed join's
    // entries are read by nobody: marked so that no slot is asked for them).
    if (item.fused == ReplayItem::kNone && c.absorbed[i] == 0) continue;
    const FusedElementwise* loop =
        item.fused != ReplayItem::kNone ? &compiled.fused[item.fused] : nullptr;
    FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
    for (std::uint32_t e = 0; e < item.input_count; ++e) {
      if (in[e].constant || offset_of[in[e].index] == kNoOffset) continue;
      // A loop that reads a copied join expanded or gathered reads its tensor: those reads
      // need the tensor's shape (the other arena values have no such reads).
      if (loop != nullptr && c.tensor_too[in[e].index] != 0 &&
          !reads_elements_in_order(loop->reads[e])) {
        continue;
      }
      in[e].arena = true;
      in[e].move = false;
      in[e].index = static_cast<std::uint32_t>(offset_of[in[e].index]);
    }
  }
  BookkeepingVector<ReplayItem> items;
  items.reserve(compiled.items.size());
  BookkeepingVector<std::uint32_t> releases;
  releases.reserve(compiled.releases.size());
  for (std::size_t i = 0; i < compiled.items.size(); ++i) {
    if (c.absorbed[i] != 0) continue;
    ReplayItem item = compiled.items[i];
    const auto first = static_cast<std::uint32_t>(releases.size());
    for (std::uint32_t k = 0; k < item.release_count; ++k) {
      const std::uint32_t v = compiled.releases[item.first_release + k];
      if (offset_of[v] == kNoOffset || c.tensor_too[v] != 0) releases.push_back(v);
    }
    item.first_release = first;
    item.release_count = static_cast<std::uint32_t>(releases.size()) - first;
    items.push_back(item);
  }
  compiled.items = std::move(items);
  compiled.releases = std::move(releases);
}

// Which values live in the arena (FunctionTrace::output_arena) instead of tensors, and which
// joins fused loops write in place.
// - A recyclable output of a loop (plan_recycling: small, never leaving the replay) that only
//   loops read, each as its elements in order (not expanded over a broadcast, nor a gather's
//   params or indices, which need the tensor).
// - A join (a concat with a join rule) whose output is such a value for loops and whose inputs
//   are recyclable loop outputs that only it reads: the loops write them at their offsets
//   into the join's output, and the join is not an item any more. An LSTM's gradient joins
//   each step's two gate gradients this way.
// Offsets are taken in replay order (a join's output with its first part) and given back
// after the value's last reader, most recently freed first, so that a recursion's temporaries
// keep reusing the same few cache lines. Runs before plan_slots, on trace values: arena values
// get no slot. Nothing goes to the arena when it would pass 4 GiB (offsets are 32-bit).
void plan_arena(FunctionTrace& compiled, const BookkeepingVector<bool>& leaves) {
  compiled.output_arena.assign(compiled.replay_outputs.size(), FunctionTrace::kNotInArena);
  ArenaCandidates candidates = arena_candidates(compiled, leaves);
  absorb_joins(compiled, candidates);
  BookkeepingVector<std::uint64_t> offset_of;
  const std::uint64_t arena_bytes = arena_offsets(compiled, candidates, offset_of);
  if (arena_bytes >= FunctionTrace::kNotInArena) return;  // everything stays a tensor
  use_arena(compiled, candidates, offset_of, arena_bytes);
}

// Which loop outputs may take the buffer of one of their loop's inputs (output_donor): an
// input the loop reads last and once (ReplayInput::move), a tensor of the run's shape read in
// order (no broadcast, gather or offset), that no instruction reads after the one that writes
// the output: block by block, every read of its elements then comes before the output's
// write over them. An output in the arena or recycled has its memory already. The replay
// checks at each call that the input's handle is the only one.
void plan_donations(FunctionTrace& compiled) {
  compiled.output_donor.assign(compiled.replay_outputs.size(), FunctionTrace::kNoDonor);
  std::vector<std::uint8_t> taken;
  for (ReplayItem& item : compiled.items) {
    if (item.fused == ReplayItem::kNone) continue;
    const FusedElementwise& loop = compiled.fused[item.fused];
    const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
    taken.assign(item.input_count, 0);
    for (std::uint32_t o = 0; o < item.output_count; ++o) {
      const std::size_t position = item.first_output + o;
      if (compiled.output_arena[position] != FunctionTrace::kNotInArena ||
          compiled.recyclable[position] != 0) {
        continue;
      }
      const auto destination = static_cast<std::uint32_t>(loop.scratch_blocks + o);
      const auto writer = std::find_if(
          loop.program.begin(), loop.program.end(),
          [&](const FusedElementwise::Instruction& i) { return i.destination == destination; });
      if (writer == loop.program.end()) continue;
      for (std::uint32_t e = 0; e < item.input_count; ++e) {
        const FusedElementwise::InputRead& how = loop.reads[e];
        if (taken[e] != 0 || !in[e].move || in[e].arena || in[e].constant || how.period != 0 ||
            how.offset != 0 || !reads_elements_in_order(how) ||
            compiled.trace.value_shape(loop.inputs[e].value) != loop.shape) {
          continue;
        }
        const bool read_later = std::any_of(writer + 1, loop.program.end(),
                                            [&](const FusedElementwise::Instruction& i) {
                                              return i.operands[0] == e || i.operands[1] == e;
                                            });
        if (read_later) continue;
        compiled.output_donor[position] = e;
        taken[e] = 1;
        item.has_donor = true;
        break;
      }
    }
  }
}

// Under tapes, fn as one recorded op: FunctionState::gradient_function and call_as_one_op
// (function.cpp).
bool one_op_under_tapes(const FunctionTrace& compiled) {
  if (!compiled.eager_reason.empty()) return false;
  const OpTrace& trace = compiled.trace;
  for (const TraceStep& step : trace.steps) {
    if (step.kind != TraceStep::Kind::Read) return false;
  }
  return std::all_of(compiled.results.begin(), compiled.results.end(), [&](const TracedInput& r) {
    if (r.value == TracedInput::kConstant)
      return r.constant.defined() && is_floating(r.constant.dtype());
    return is_floating(trace.value_dtype(r.value));
  });
}

}  // namespace

void plan_replay(FunctionTrace& compiled, std::size_t argument_count, bool optimize) {
  plan_items(compiled, kept_ops(compiled, optimize), optimize);
  plan_lifetimes(compiled);
  plan_constant_elements(compiled);
  const BookkeepingVector<bool> leaves = leaving_values(compiled);
  plan_recycling(compiled, leaves);
  plan_arena(compiled, leaves);
  plan_donations(compiled);
  plan_slots(compiled, argument_count);
  compiled.one_op_under_tapes = one_op_under_tapes(compiled);
}

}  // namespace tapegrad::detail
