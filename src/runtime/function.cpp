// tapegrad::function: one trace per signature, replayed op by op through each op's replay rule.
//
// Tracing runs fn eagerly under a TraceScope (the op trace vectorized_map uses) on fresh views
// of the arguments, so that a tensor fn captures is never mistaken for the argument it equals.
// A replay binds the new arguments to the trace's first values, reads the Variables fn read,
// runs each kept op's replay rule (the op's public function: with nothing observing the
// thread it records nothing), or one loop for a run of elementwise ops
// (runtime/fused_elementwise.cpp), and repeats fn's Variable assignments in their order.
#include "tapegrad/function.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>

#include "runtime/anomaly.hpp"
#include "runtime/element_span.hpp"
#include "runtime/fused_elementwise.hpp"
#include "runtime/in_place.hpp"
#include "runtime/new_tensor.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/recording.hpp"
#include "runtime/replay_context.hpp"
#include "runtime/tensor_impl.hpp"
#include "runtime/warn.hpp"
#include "tapegrad/custom_gradient.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace detail {

// What a trace is kept for: each argument's dtype and shape, and which arguments are one
// tensor (fn may tell them apart: the same tensor twice is another signature).
struct FunctionSignature {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::vector<std::size_t> first_of_same_tensor;

  bool operator==(const FunctionSignature& other) const {
    return dtypes == other.dtypes && shapes == other.shapes &&
           first_of_same_tensor == other.first_of_same_tensor;
  }
};

// What a replay runs next: one kept op, or a run of them fused into one loop. Its op's
// definition and attributes, and where its inputs, outputs and releases start in the plan's
// arrays (plan_lifetimes fills them), sit here, so that the replay's loop reads items and those
// arrays in order: the trace's own vectors, one set per op, lie scattered over the heap, and
// GradBench's lstm (about 50,000 items) spent a quarter of its replay waiting for them.
struct ReplayItem {
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t position;       // the trace index of its (last) op: steps before it run first
  std::size_t op = kNone;     // into trace.ops
  std::size_t fused = kNone;  // into FunctionTrace::fused
  const OpDefinition* definition = nullptr;  // an op's: its definition, attributes, signature
  const Attrs* attrs = nullptr;
  const OutputSignature* signature = nullptr;
  std::uint32_t first_input = 0, input_count = 0;      // in FunctionTrace::replay_inputs
  std::uint32_t first_output = 0, output_count = 0;    // in FunctionTrace::replay_outputs
  std::uint32_t first_release = 0, release_count = 0;  // in FunctionTrace::releases
};

struct FunctionTrace {
  OpTrace trace;
  std::vector<TracedInput> results;  // fn's outputs
  std::vector<ReplayItem> items;     // in trace order
  std::vector<FusedElementwise> fused;
  struct ReplayInput {
    std::uint32_t index;  // into the values, into `constants`, or a byte offset in the arena
    bool constant = false;
    bool move = false;   // the item is the value's last reader and reads it once
    bool arena = false;  // a fused loop reads the value's elements in the arena
  };
  std::vector<ReplayInput> replay_inputs;
  std::vector<std::uint32_t> replay_outputs;  // the values each item makes
  // After each item, the values nothing later reads: a replay lets them go, so that it holds
  // no more than the eager call would (a forward chain keeps one buffer, not all).
  std::vector<std::uint32_t> releases;
  // The values' slots in a replay's table of tensors (plan_slots): replay_inputs, replay_outputs
  // and releases hold slots; steps and results find theirs through slot_of_value.
  std::vector<std::uint32_t> slot_of_value;
  std::size_t slot_count = 0;
  std::vector<Tensor> constants;
  // Per constant, its float elements as a loop reads them (kernel_data, once), else null.
  std::vector<const void*> constant_elements;
  std::string eager_reason;  // set: this signature runs fn eagerly
  // Under tapes a replay may stand for fn as one recorded op: it is replayable, assigns no
  // Variable, runs no host step and returns defined floating tensors.
  bool one_op_under_tapes = false;
  // What one replay at a time keeps for the next (a concurrent one makes its own):
  // - `recycled`: the small outputs of the fused loops of the last replay that are tensors, by
  //   position in replay_outputs. A replay of an LSTM's thousands of loops on 14-element rows
  //   spent a fifth of its time making and freeing their tensor handles. The next replay
  //   writes into one again when it holds the only handle (only_handle: nobody can see it).
  // - `arena`: the buffer of the arena values (below), float64 elements of arena_bytes.
  struct ReplayMemory {
    std::mutex mutex;
    std::vector<Tensor> recycled;
    Tensor arena;
  };
  std::shared_ptr<ReplayMemory> kept = std::make_shared<ReplayMemory>();
  // By position in replay_outputs: whether the value may be recycled (plan_recycling).
  std::vector<std::uint8_t> recyclable;
  // The arena (plan_arena): small values that only fused loops make and read get no tensor,
  // only elements at a byte offset of one buffer, the same every call, taken again once the
  // value is dead. An LSTM's replay made and read some 30,000 of them per call, each a
  // tensor handle and a buffer scattered over the heap: a cache miss at each touch.
  static constexpr std::uint32_t kNotInArena = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> output_arena;  // by position in replay_outputs: offset or none
  std::size_t arena_bytes = 0;

  ElementSpan<TracedInput> inputs_of(const ReplayItem& item) const {
    if (item.op != ReplayItem::kNone) return trace.ops[item.op].inputs;
    return fused[item.fused].inputs;
  }
  ElementSpan<std::size_t> outputs_of(const ReplayItem& item) const {
    if (item.op != ReplayItem::kNone) return trace.ops[item.op].outputs;
    return fused[item.fused].outputs;
  }
};

namespace {

FunctionSignature signature_of(const std::vector<Tensor>& args) {
  FunctionSignature s;
  s.dtypes.reserve(args.size());
  s.shapes.reserve(args.size());
  s.first_of_same_tensor.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    s.dtypes.push_back(args[i].dtype());
    s.shapes.push_back(args[i].shape());
    std::size_t first = i;
    for (std::size_t k = 0; k < i; ++k) {
      if (args[k].id() == args[i].id()) {
        first = k;
        break;
      }
    }
    s.first_of_same_tensor.push_back(first);
  }
  return s;
}

std::string signature_to_string(const FunctionSignature& s) {
  std::string text = "(";
  for (std::size_t i = 0; i < s.dtypes.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::string(dtype_name(s.dtypes[i])) + " " + shape_to_string(s.shapes[i]);
  }
  return text + ")";
}

void check_arguments(const std::vector<Tensor>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) {
      throw InvalidArgument("function: argument " + std::to_string(i) + " is undefined");
    }
    if (!impl_of(args[i]).holds_elements) {
      throw InvalidArgument("function: argument " + std::to_string(i) +
                            " is a variable handle (shape " + shape_to_string(args[i].shape()) +
                            ", dtype " + dtype_name(args[i].dtype()) +
                            "), which holds no elements; pass the Variable's value");
    }
  }
}

// Why a finished trace cannot be replayed, or empty.
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

// `read` on each value `step` reads (what an assignment assigns, a host step's inputs).
template <class Read>
void for_each_read(const TraceStep& step, Read read) {
  if (step.kind != TraceStep::Kind::Read) read(step.value);
  for (const TracedInput& in : step.host_inputs) read(in);
}

// The ops a result or a Variable assignment needs (all of them when not optimising).
std::vector<std::size_t> kept_ops(const FunctionTrace& compiled, bool optimize) {
  const OpTrace& trace = compiled.trace;
  std::vector<std::size_t> kept;
  if (!optimize) {
    kept.resize(trace.ops.size());
    std::iota(kept.begin(), kept.end(), std::size_t{0});
    return kept;
  }
  std::vector<bool> needed(trace.num_values(), false);
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
void absorb_parts(const OpTrace& trace, const std::vector<std::size_t>& kept,
                  const std::vector<std::vector<std::size_t>>& runs,
                  const std::vector<std::uint32_t>& reads, std::vector<std::size_t>& run_of_kept,
                  std::vector<std::size_t>& absorbed_into, std::vector<std::size_t>& producer_run,
                  std::vector<PartOf>& parts) {
  constexpr std::size_t kNone = ReplayItem::kNone;
  // Per value: the first run reading it, how many reads runs make, and whether a run of
  // another shape or dtype reads it.
  std::vector<std::size_t> first_reading_run(trace.num_values(), kNone);
  std::vector<std::uint32_t> reads_by_runs(trace.num_values(), 0);
  std::vector<bool> read_by_other_shape(trace.num_values(), false);
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
    offsets.assign(op.outputs.size(), PartRule::kNotAPart);
    for (std::size_t j = 0; j < op.outputs.size() && absorbable; ++j) {
      const std::size_t v = op.outputs[j];
      if (reads[v] == 0) continue;
      offsets[j] = op.op->part_rule->offset(whole_shape, op.attrs.get(), op.output_shapes(), j);
      absorbable = reads_by_runs[v] == reads[v] && !read_by_other_shape[v] &&
                   offsets[j] != PartRule::kNotAPart;
      if (some_run == kNone) some_run = first_reading_run[v];
    }
    if (!absorbable || some_run == kNone) continue;
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
void plan_items(FunctionTrace& compiled, const std::vector<std::size_t>& kept, bool optimize) {
  const OpTrace& trace = compiled.trace;
  std::vector<std::vector<std::size_t>> runs;
  if (optimize) runs = fusable_runs(trace, kept);
  constexpr std::size_t kNone = ReplayItem::kNone;
  std::vector<std::size_t> run_of_kept(kept.size(), kNone);
  std::vector<std::size_t> producer_run(trace.num_values(), kNone);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (std::size_t i : runs[r]) {
      run_of_kept[i] = r;
      for (std::size_t v : trace.ops[kept[i]].outputs) producer_run[v] = r;
    }
  }
  // Gathers (absorb_gathers) and splits (absorb_parts) that only runs read: the loops read
  // their params or parts instead, and they are not items of their own.
  std::vector<std::size_t> gathered_by(trace.num_values(), kNoGather);
  std::vector<std::size_t> absorbed_into(kept.size(), kNone);  // a gather's run
  std::vector<PartOf> parts;  // per trace value, once a split is absorbed
  if (!runs.empty()) {
    std::vector<std::uint32_t> reads(trace.num_values(), 0);
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

  std::vector<bool> read_outside(trace.num_values(), false);
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
  // A run is one item where its last op is: the ops between its ops that are not its own
  // read none of its values (fusable_runs), so they may run first. A fold of a few rows
  // (FoldRule) is a loop of its own.
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::size_t r = run_of_kept[i];
    const TracedOp& op = trace.ops[kept[i]];
    const std::size_t rows = r == kNone && optimize ? fold_rows(trace, op) : 0;
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
  std::vector<std::size_t> last_reader(trace.num_values(), kNever);
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
  std::vector<std::vector<std::size_t>> released_after(item_count);
  for (std::size_t i = 0; i < item_count; ++i) {
    for (std::size_t v : compiled.outputs_of(compiled.items[i])) {  // read by nothing: gone
      if (last_reader[v] == kNever) released_after[i].push_back(v);
    }
  }
  for (std::size_t v = 0; v < last_reader.size(); ++v) {
    if (last_reader[v] < item_count) released_after[last_reader[v]].push_back(v);
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
    item.release_count = index(released_after[i].size());
    for (std::size_t v : released_after[i]) compiled.releases.push_back(index(v));
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
  std::vector<std::uint32_t>& slot_of = compiled.slot_of_value;
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
};

// A fused item: its operands from the value slots, the constants and the arena (no copy of
// any input's handle), then its loop.
void run_loop_item(const FunctionTrace& compiled, const ReplayItem& item,
                   std::vector<Tensor>& values, std::byte* arena_base,
                   std::vector<Tensor>* recycled, LoopOperandLists& lists) {
  lists.inputs.resize(item.input_count);
  lists.input_elements.resize(item.input_count);
  const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
  for (std::uint32_t k = 0; k < item.input_count; ++k, ++in) {
    lists.inputs[k] = in->constant ? &compiled.constants[in->index]
                      : in->arena  ? nullptr
                                   : &values[in->index];
    lists.input_elements[k] = in->arena      ? arena_base + in->index
                              : in->constant ? compiled.constant_elements[in->index]
                                             : nullptr;
  }
  lists.destinations.resize(item.output_count);
  lists.output_elements.resize(item.output_count);
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
  if (recycled != nullptr) {
    operands.recycled = recycled->data() + item.first_output;
    operands.recyclable = compiled.recyclable.data() + item.first_output;
  }
  run_fused(compiled.fused[item.fused], operands);
}

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
    } else {
      inputs.clear();
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

// The bytes of an element of a loop's dtype (loops are float32 or float64).
std::size_t float_bytes(DType dtype) {
  return dtype == DType::Float32 ? sizeof(float) : sizeof(double);
}

// Per trace value, whether it leaves a replay: a result, or read by a step (a Variable
// assignment, a host step).
std::vector<bool> leaving_values(const FunctionTrace& compiled) {
  std::vector<bool> leaves(compiled.trace.num_values(), false);
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
void plan_recycling(FunctionTrace& compiled, const std::vector<bool>& leaves) {
  compiled.recyclable.assign(compiled.replay_outputs.size(), 0);
  for (const ReplayItem& item : compiled.items) {
    if (item.fused == ReplayItem::kNone) continue;
    const FusedElementwise& loop = compiled.fused[item.fused];
    const std::size_t element_bytes = float_bytes(loop.dtype);
    if (loop.elements * element_bytes > kRecycledBytes) continue;
    const std::vector<std::size_t>& outputs = loop.outputs;
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      compiled.recyclable[item.first_output + j] = leaves[outputs[j]] ? 0 : 1;
    }
  }
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
void plan_arena(FunctionTrace& compiled, const std::vector<bool>& leaves) {
  const OpTrace& trace = compiled.trace;
  constexpr std::size_t kNoValue = static_cast<std::size_t>(-1);
  const std::size_t value_count = trace.num_values();
  compiled.output_arena.assign(compiled.replay_outputs.size(), FunctionTrace::kNotInArena);
  // Per value: whether loops alone read it, as its elements in order, and how many item
  // inputs read it.
  std::vector<std::uint8_t> loops_only(value_count);
  for (std::size_t v = 0; v < value_count; ++v) loops_only[v] = leaves[v] ? 0 : 1;
  std::vector<std::uint32_t> item_reads(value_count, 0);
  for (const ReplayItem& item : compiled.items) {
    const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
    for (std::uint32_t e = 0; e < item.input_count; ++e) {
      if (in[e].constant) continue;
      ++item_reads[in[e].index];
      if (item.fused == ReplayItem::kNone) {
        loops_only[in[e].index] = 0;
        continue;
      }
      const FusedElementwise::InputRead& how = compiled.fused[item.fused].reads[e];
      if (how.expanded || how.gather != nullptr || how.indices_only) loops_only[in[e].index] = 0;
    }
  }
  std::vector<std::uint8_t> in_arena(value_count, 0);
  std::vector<std::uint8_t> recyclable_output(value_count, 0);  // of a loop
  for (const ReplayItem& item : compiled.items) {
    if (item.fused == ReplayItem::kNone) continue;
    for (std::uint32_t j = 0; j < item.output_count; ++j) {
      const std::uint32_t v = compiled.replay_outputs[item.first_output + j];
      recyclable_output[v] = compiled.recyclable[item.first_output + j];
      in_arena[v] = recyclable_output[v] != 0 && loops_only[v] != 0 ? 1 : 0;
    }
  }

  // The joins loops write in place: per part, the join's output and where the part starts.
  std::vector<std::size_t> joined_into(value_count, kNoValue);
  std::vector<std::size_t> start_in_whole(value_count, 0);  // in elements
  std::vector<std::uint8_t> absorbed(compiled.items.size(), 0);
  std::vector<Shape> part_shapes;
  for (std::size_t i = 0; i < compiled.items.size(); ++i) {
    const ReplayItem& item = compiled.items[i];
    if (item.fused != ReplayItem::kNone || item.definition->join_rule == nullptr ||
        item.output_count != 1 || item.input_count == 0) {
      continue;
    }
    const std::uint32_t whole = compiled.replay_outputs[item.first_output];
    const DType dtype = item.signature->dtypes[0];
    const Shape& whole_shape = item.signature->shapes[0];
    if (loops_only[whole] == 0 || (dtype != DType::Float32 && dtype != DType::Float64) ||
        num_elements(whole_shape) * float_bytes(dtype) > kRecycledBytes) {
      continue;
    }
    const FunctionTrace::ReplayInput* in = compiled.replay_inputs.data() + item.first_input;
    part_shapes.clear();
    bool absorbable = true;
    for (std::uint32_t e = 0; e < item.input_count && absorbable; ++e) {
      absorbable =
          !in[e].constant && recyclable_output[in[e].index] != 0 && item_reads[in[e].index] == 1;
      if (absorbable) part_shapes.push_back(trace.value_shape(in[e].index));
    }
    if (!absorbable) continue;
    for (std::uint32_t e = 0; e < item.input_count && absorbable; ++e) {
      const std::size_t start =
          item.definition->join_rule->offset(whole_shape, item.attrs, part_shapes, e);
      absorbable = start != PartRule::kNotAPart;
      start_in_whole[in[e].index] = start;
    }
    if (!absorbable) continue;
    for (std::uint32_t e = 0; e < item.input_count; ++e) {
      joined_into[in[e].index] = whole;
      in_arena[in[e].index] = 1;
    }
    in_arena[whole] = 1;
    absorbed[i] = 1;
  }

  // Offsets in 64-byte steps: a value starts on a cache line of its own. A part's offset is
  // inside its join's output, which alone is given back.
  constexpr std::uint64_t kAlignment = 64;
  constexpr std::uint64_t kNoOffset = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint64_t> offset_of(value_count, kNoOffset);
  std::vector<std::uint64_t> bytes_of(value_count, 0);               // 0 for a part
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
  for (const ReplayItem& item : compiled.items) {
    if (item.fused != ReplayItem::kNone) {
      const FusedElementwise& loop = compiled.fused[item.fused];
      const std::size_t element_bytes = float_bytes(loop.dtype);
      for (std::uint32_t j = 0; j < item.output_count; ++j) {
        const std::uint32_t v = compiled.replay_outputs[item.first_output + j];
        if (in_arena[v] == 0) continue;
        const std::size_t whole = joined_into[v];
        if (whole == kNoValue) {
          take(v, loop.elements * element_bytes);
          continue;
        }
        if (offset_of[whole] == kNoOffset) {
          take(whole, num_elements(trace.value_shape(whole)) * element_bytes);
        }
        offset_of[v] = offset_of[whole] + start_in_whole[v] * element_bytes;
      }
    }
    const std::uint32_t* release = compiled.releases.data() + item.first_release;
    for (std::uint32_t k = 0; k < item.release_count; ++k) give_back(release[k]);
  }
  if (top >= FunctionTrace::kNotInArena) return;  // everything stays a tensor

  compiled.arena_bytes = top;
  for (const ReplayItem& item : compiled.items) {
    for (std::uint32_t j = 0; j < item.output_count; ++j) {
      const std::uint32_t v = compiled.replay_outputs[item.first_output + j];
      if (offset_of[v] != kNoOffset) {
        compiled.output_arena[item.first_output + j] = static_cast<std::uint32_t>(offset_of[v]);
      }
    }
  }
  for (FunctionTrace::ReplayInput& in : compiled.replay_inputs) {
    if (in.constant || offset_of[in.index] == kNoOffset) continue;
    in.arena = true;
    in.move = false;
    in.index = static_cast<std::uint32_t>(offset_of[in.index]);
  }
  // Arena values have no tensor to let go, and absorbed joins are no items.
  std::vector<ReplayItem> items;
  items.reserve(compiled.items.size());
  std::vector<std::uint32_t> releases;
  releases.reserve(compiled.releases.size());
  for (std::size_t i = 0; i < compiled.items.size(); ++i) {
    if (absorbed[i] != 0) continue;
    ReplayItem item = compiled.items[i];
    const auto first = static_cast<std::uint32_t>(releases.size());
    for (std::uint32_t k = 0; k < item.release_count; ++k) {
      const std::uint32_t v = compiled.releases[item.first_release + k];
      if (offset_of[v] == kNoOffset) releases.push_back(v);
    }
    item.first_release = first;
    item.release_count = static_cast<std::uint32_t>(releases.size()) - first;
    items.push_back(item);
  }
  compiled.items = std::move(items);
  compiled.releases = std::move(releases);
}

// Under tapes, fn as one recorded op: see FunctionState::gradient_function and call_as_one_op.
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

// Names a Function in its one-time warnings (an address could be a dead Function's).
std::atomic<std::uint64_t> next_function_id{1};

}  // namespace

struct FunctionState {
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn;
  const std::uint64_t id = next_function_id.fetch_add(1, std::memory_order_relaxed);
  FunctionOptions options;
  std::mutex mutex;  // guards the members below
  // Most recently used first.
  std::list<std::pair<FunctionSignature, std::shared_ptr<const FunctionTrace>>> traces;
  std::size_t trace_count = 0;

  std::shared_ptr<const FunctionTrace> find(const FunctionSignature& signature) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = traces.begin(); it != traces.end(); ++it) {
      if (it->first == signature) {
        traces.splice(traces.begin(), traces, it);
        return traces.front().second;
      }
    }
    return nullptr;
  }

  void keep(const FunctionSignature& signature, std::shared_ptr<const FunctionTrace> compiled) {
    std::lock_guard<std::mutex> lock(mutex);
    ++trace_count;
    // Another thread may have traced the same signature meanwhile: one trace is kept.
    for (const auto& entry : traces) {
      if (entry.first == signature) return;
    }
    traces.emplace_front(signature, std::move(compiled));
    if (traces.size() > options.max_traces) {
      traces.pop_back();
      warn_once("function-retracing-" + std::to_string(id),
                "function: more than " + std::to_string(options.max_traces) +
                    " signatures (max_traces); the least recently used trace was dropped and "
                    "fn is traced again for it. Retracing is slow: pass arguments of fixed "
                    "shapes and dtypes, or raise FunctionOptions::max_traces");
    }
  }

  // Under tapes: the gradient of fn as a Function of (args, output gradients) -> (the
  // gradients of args, then of `variables`), one per argument count and list of variables fn
  // read. Its replay is fn's forward and backward ops; under an outer tape it is one recorded
  // op in turn (higher orders).
  std::vector<std::pair<std::vector<std::uint64_t>, Function>> gradient_functions;

  Function gradient_function(const std::vector<Variable>& variables, std::size_t argument_count) {
    // Keyed by the argument count too: it says where the output gradients start.
    std::vector<std::uint64_t> ids{argument_count};
    ids.reserve(variables.size() + 1);
    for (const Variable& v : variables) ids.push_back(v.handle().id());
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& entry : gradient_functions) {
      if (entry.first == ids) return entry.second;
    }
    auto body = [fn = fn, variables, argument_count](const std::vector<Tensor>& in) {
      GradientTape tape;
      std::vector<Tensor> sources;
      sources.reserve(argument_count + variables.size());
      for (std::size_t i = 0; i < argument_count; ++i) {
        sources.push_back(identity(in[i]));  // one source per argument, even a repeated one
        if (is_floating(in[i].dtype())) tape.watch(sources.back());
      }
      tape.watch(variables);
      const std::vector<Tensor> outputs = fn(sources);
      for (const Variable& v : variables) sources.push_back(v.handle());
      const std::vector<Tensor> output_gradients(
          in.begin() + static_cast<std::ptrdiff_t>(argument_count), in.end());
      return tape.gradient(outputs, sources, output_gradients, UnconnectedGradients::Zero);
    };
    gradient_functions.emplace_back(std::move(ids), tapegrad::function(body, options));
    return gradient_functions.back().second;
  }

  std::vector<Tensor> trace_and_run(const FunctionSignature& signature,
                                    const std::vector<Tensor>& args, bool observed = false) {
    auto compiled = std::make_shared<FunctionTrace>();
    OpTrace& trace = compiled->trace;
    trace.for_function = true;
    std::vector<Tensor> traced_args;
    traced_args.reserve(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      // Arguments that are one tensor stay one traced value (their signature says so).
      // Under tapes or accumulators, an identity they record connects the traced copy to
      // the argument (fn runs eagerly for them while the trace watches).
      traced_args.push_back(signature.first_of_same_tensor[i] != i
                                ? traced_args[signature.first_of_same_tensor[i]]
                            : observed ? identity(args[i])
                                       : make_view(view_geometry(args[i])));
      trace.add_value(traced_args[i]);
    }
    std::vector<Tensor> results;
    {
      TraceScope scope(trace);
      results = fn(traced_args);
    }
    compiled->results.reserve(results.size());
    for (const Tensor& r : results) {
      TracedInput in;
      if (r.defined()) in.value = trace.value_of(r);
      if (in.value == TracedInput::kConstant) in.constant = r;
      compiled->results.push_back(std::move(in));
    }
    compiled->eager_reason = why_not_replayable(trace);
    if (compiled->eager_reason.empty()) {
      plan_items(*compiled, kept_ops(*compiled, options.optimize), options.optimize);
      plan_lifetimes(*compiled);
      plan_constant_elements(*compiled);
      const std::vector<bool> leaves = leaving_values(*compiled);
      plan_recycling(*compiled, leaves);
      plan_arena(*compiled, leaves);
      plan_slots(*compiled, traced_args.size());
      compiled->one_op_under_tapes = one_op_under_tapes(*compiled);
    } else {
      warn_once("function-eager-" + std::to_string(id) + signature_to_string(signature),
                "function: the trace for arguments " + signature_to_string(signature) +
                    " cannot be replayed: " + compiled->eager_reason +
                    ". fn runs eagerly on every call with these arguments");
      // An eager signature needs no ops, values or constants: keep only the reason.
      compiled->trace = OpTrace();
      compiled->results.clear();
    }
    trace.value_of_id = IdMap<std::size_t>();  // only needed while tracing
    keep(signature, std::move(compiled));
    return results;
  }
};

namespace {

// fn as one op on the tapes (and accumulators) of the thread, as tf.function under a
// GradientTape: the replay computes the outputs with the tapes paused, and the op's gradient
// is the Function of fn's gradient (FunctionState::gradient_function), called on the recorded
// arguments and the output gradients.
std::vector<Tensor> call_as_one_op(const std::shared_ptr<FunctionState>& state,
                                   const std::shared_ptr<const FunctionTrace>& compiled,
                                   const std::vector<Tensor>& args) {
  CustomFunction forward = [&](const TensorList& in) {
    CustomForward result;
    result.outputs = replay(*compiled, in);
    result.takes_variables = true;
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const Tensor& y : result.outputs) {
      shapes.push_back(y.shape());
      dtypes.push_back(y.dtype());
    }
    result.gradient = [state, in, shapes, dtypes](const TensorList& output_gradients,
                                                  const std::vector<Variable>& variables) {
      std::vector<Tensor> gradient_args = in;
      for (std::size_t k = 0; k < output_gradients.size(); ++k) {
        gradient_args.push_back(output_gradients[k].defined() ? output_gradients[k]
                                                              : zeros(shapes[k], dtypes[k]));
      }
      std::vector<Tensor> gradients = state->gradient_function(variables, in.size())(gradient_args);
      TensorList variable_gradients(gradients.begin() + static_cast<std::ptrdiff_t>(in.size()),
                                    gradients.end());
      gradients.resize(in.size());
      return std::pair<TensorList, TensorList>(std::move(gradients), std::move(variable_gradients));
    };
    return result;
  };
  return call_with_custom_gradient(forward, args, "Function");
}

// Called while something observes the thread. vectorized_map's traces and DetectAnomaly must
// see each op: fn runs eagerly. Tapes and accumulators get one op when the signature's trace
// allows it, else fn's own ops (the first call of a signature traces while they record).
std::vector<Tensor> observed_call(const std::shared_ptr<FunctionState>& state,
                                  const FunctionSignature& signature,
                                  const std::vector<Tensor>& args) {
  if (any_tracer_active() || anomaly_checks_active()) return state->fn(args);
  const auto compiled = state->find(signature);
  if (!compiled) return state->trace_and_run(signature, args, true);
  if (!compiled->one_op_under_tapes) return state->fn(args);
  return call_as_one_op(state, compiled, args);
}

}  // namespace
}  // namespace detail

Function::Function(std::shared_ptr<detail::FunctionState> state) : state_(std::move(state)) {}

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& args) const {
  detail::check_arguments(args);
  const detail::FunctionSignature signature = detail::signature_of(args);
  if (detail::any_observer()) return detail::observed_call(state_, signature, args);
  if (auto compiled = state_->find(signature)) {
    if (!compiled->eager_reason.empty()) return state_->fn(args);
    return detail::replay(*compiled, args);
  }
  return state_->trace_and_run(signature, args);
}

std::size_t Function::trace_count() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->trace_count;
}

Function function(std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
                  FunctionOptions options) {
  if (!fn) throw InvalidArgument("function: fn is empty");
  if (options.max_traces == 0) {
    throw InvalidArgument(
        "function: FunctionOptions::max_traces is 0; at least one trace must "
        "be kept");
  }
  auto state = std::make_shared<detail::FunctionState>();
  state->fn = std::move(fn);
  state->options = options;
  return Function(std::move(state));
}

}  // namespace tapegrad
