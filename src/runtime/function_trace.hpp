// A Function's trace of one signature and its replay plan: what the plan holds
// (FunctionTrace), how it is made from the trace (function_plan.cpp: dead ops dropped, runs of
// elementwise ops fused into loops, lifetimes, recycled outputs, the arena, slots) and how it
// runs (function_replay.cpp). function.cpp keeps one per signature and calls these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/element_span.hpp"
#include "runtime/fused_elementwise.hpp"
#include "runtime/op_trace.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

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
  // A join whose parts the loops wrote in place into the arena (plan_arena): the item makes its
  // one output, a tensor of its signature, from the arena's bytes at its first input's offset,
  // after writing there the parts that are tensors (then two inputs each: the part's slot, and
  // its start in elements, marked as an arena read so that no slot is planned for it).
  bool copies_from_arena = false;
  // A loop with an output that may take an input's buffer (FunctionTrace::output_donor).
  bool has_donor = false;
};

struct FunctionTrace {
  OpTrace trace;
  std::vector<TracedInput> results;  // fn's outputs
  // The plan's arrays take their blocks as other large bookkeeping (kernels/buffer_cache.hpp):
  // an LSTM's plan has 20,000 items and 10,000 loops, and arrays of hundreds of kilobytes
  // regrown into fresh small pages were a sixth of a first call's page faults.
  BookkeepingVector<ReplayItem> items;  // in trace order
  BookkeepingVector<FusedElementwise> fused;
  struct ReplayInput {
    std::uint32_t index;  // into the values, into `constants`, or a byte offset in the arena
    bool constant = false;
    bool move = false;   // the item is the value's last reader and reads it once
    bool arena = false;  // a fused loop reads the value's elements in the arena
  };
  BookkeepingVector<ReplayInput> replay_inputs;
  BookkeepingVector<std::uint32_t> replay_outputs;  // the values each item makes
  // After each item, the values nothing later reads: a replay lets them go, so that it holds
  // no more than the eager call would (a forward chain keeps one buffer, not all).
  BookkeepingVector<std::uint32_t> releases;
  // The values' slots in a replay's table of tensors (plan_slots): replay_inputs, replay_outputs
  // and releases hold slots; steps and results find theirs through slot_of_value.
  BookkeepingVector<std::uint32_t> slot_of_value;
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
  BookkeepingVector<std::uint8_t> recyclable;
  // The arena (plan_arena): small values that only fused loops make and read get no tensor,
  // only elements at a byte offset of one buffer, the same every call, taken again once the
  // value is dead. An LSTM's replay made and read some 30,000 of them per call, each a
  // tensor handle and a buffer scattered over the heap: a cache miss at each touch.
  static constexpr std::uint32_t kNotInArena = std::numeric_limits<std::uint32_t>::max();
  BookkeepingVector<std::uint32_t> output_arena;  // by position in replay_outputs: offset or none
  std::size_t arena_bytes = 0;
  // By position in replay_outputs (plan_donations): the input of its loop, by position in the
  // item's inputs, whose buffer the loop writes the output into when the replay's handle to
  // it is the only one (the loop is its last reader and reads it once, in order, before it
  // writes the output): a large elementwise chain then reuses its inputs' buffers, as the
  // eager walk sums gradients in place, instead of writing each output into fresh memory.
  static constexpr std::uint32_t kNoDonor = std::numeric_limits<std::uint32_t>::max();
  BookkeepingVector<std::uint32_t> output_donor;

  ElementSpan<TracedInput> inputs_of(const ReplayItem& item) const {
    if (item.op != ReplayItem::kNone) return trace.ops[item.op].inputs;
    return fused[item.fused].inputs;
  }
  ElementSpan<std::size_t> outputs_of(const ReplayItem& item) const {
    if (item.op != ReplayItem::kNone) return trace.ops[item.op].outputs;
    return fused[item.fused].outputs;
  }
};

// Why a finished trace cannot be replayed (an op without a replay rule, a value fn read from
// C++), or empty.
std::string why_not_replayable(const OpTrace& trace);

// Plans the replay of a replayable trace whose results are set: the kept ops as items (loops
// where optimize), their inputs, outputs and releases, the constants' elements, the recycled
// outputs, the arena and the value slots (arguments first, argument_count of them), and
// whether the replay may stand for fn as one op under tapes.
void plan_replay(FunctionTrace& compiled, std::size_t argument_count, bool optimize);

// Runs the plan on `args` (in the trace's argument order, the signature's shapes and dtypes):
// fn's results. Several threads may replay one plan at once.
std::vector<Tensor> replay(const FunctionTrace& compiled, const std::vector<Tensor>& args);

}  // namespace tapegrad::detail
