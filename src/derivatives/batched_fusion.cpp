#include "derivatives/batched_fusion.hpp"

#include <algorithm>
#include <cstdint>

#include "runtime/recording.hpp"

namespace tapegrad::detail {
namespace {

constexpr std::size_t kFusedFromElements = 8192;

bool large_elementwise(const TracedOp& op, std::size_t batch) {
  return op.op->elementwise_rule != nullptr && op.outputs.size() == 1 &&
         batch * num_elements(op.output_shapes()[0]) >= kFusedFromElements;
}

}  // namespace

BatchedFusion plan_batched_fusion(const OpTrace& trace, const std::vector<bool>& needed,
                                  const std::vector<TracedInput>& outputs, std::size_t batch) {
  BatchedFusion plan;
  // A loop records nothing: a tape, an accumulator or a trace watching the replay (a Jacobian
  // under an outer tape, a Function tracing fn) must see every op, and an anomaly check each
  // op's output.
  if (any_observer()) return plan;
  constexpr std::size_t kNone = BatchedFusion::kNone;
  BookkeepingVector<std::size_t> kept;
  bool any_large = false;
  for (std::size_t k = 0; k < trace.ops.size(); ++k) {
    if (!needed[k]) continue;
    kept.push_back(k);
    any_large = any_large || large_elementwise(trace.ops[k], batch);
  }
  if (!any_large) return plan;
  std::vector<std::vector<std::size_t>> runs = fusable_runs(trace, kept, batch);
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [&](const std::vector<std::size_t>& run) {
                              return !large_elementwise(trace.ops[kept[run.front()]], batch);
                            }),
             runs.end());
  if (runs.empty()) return plan;

  // Which run each kept op and each value belongs to; how often each value is read.
  RunMembership membership = run_membership(trace, kept, runs);
  BookkeepingVector<std::size_t>& run_of_kept = membership.run_of_kept;
  BookkeepingVector<std::size_t>& producer_run = membership.producer_run;
  BookkeepingVector<std::uint32_t> reads(trace.num_values(), 0);
  for (std::size_t k : kept) {
    for (const TracedInput& in : trace.ops[k].inputs) {
      if (in.value != TracedInput::kConstant) ++reads[in.value];
    }
  }
  for (const TracedInput& out : outputs) {
    if (out.value != TracedInput::kConstant) ++reads[out.value];
  }

  // Gathers of batched params by constant indices whose output only one run reads: computed
  // with that run.
  BookkeepingVector<std::size_t> gathered_by(trace.num_values(), kNoGather);
  const BookkeepingVector<std::size_t> absorbed_into =
      absorb_gathers(trace, kept, runs, run_of_kept, reads, producer_run, gathered_by, batch);
  std::vector<std::vector<std::size_t>> absorbed(runs.size());  // kept indices
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (absorbed_into[i] == kNoRun) continue;
    run_of_kept[i] = absorbed_into[i];
    absorbed[absorbed_into[i]].push_back(i);
  }

  BookkeepingVector<bool> read_outside(trace.num_values(), false);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    for (const TracedInput& in : trace.ops[kept[i]].inputs) {
      if (in.value != TracedInput::kConstant && producer_run[in.value] != run_of_kept[i]) {
        read_outside[in.value] = true;
      }
    }
  }
  for (const TracedInput& out : outputs) {
    if (out.value != TracedInput::kConstant) read_outside[out.value] = true;
  }

  plan.run_of_op.assign(trace.ops.size(), kNone);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    BatchedFusion::Run run;
    run.loop = fuse_run(trace, kept, runs[r], read_outside, gathered_by, batch);
    for (std::size_t i : runs[r]) run.ops.push_back(kept[i]);
    for (std::size_t i : absorbed[r]) run.ops.push_back(kept[i]);
    std::sort(run.ops.begin(), run.ops.end());
    for (std::size_t k : run.ops) plan.run_of_op[k] = r;
    plan.runs.push_back(std::move(run));
  }
  return plan;
}

}  // namespace tapegrad::detail
