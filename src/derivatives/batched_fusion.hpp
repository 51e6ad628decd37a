// vectorized_map's replay computes runs of elementwise ops on large batched values as one loop
// each (runtime/fused_elementwise.hpp), as a Function's replay does: forward mode's 26
// tangents of a [n, 3] residual are [26, n, 3] tensors, and an op per pass over them writes and
// reads each intermediate from memory. A gather that only such a loop reads is not computed:
// the loop reads its rows from the gather's params.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/fused_elementwise.hpp"
#include "runtime/op_trace.hpp"

namespace tapegrad::detail {

struct BatchedFusion {
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  struct Run {
    std::vector<std::size_t> ops;  // trace op indices, ascending: the loop replaces them all
    FusedElementwise loop;
  };
  std::vector<Run> runs;
  std::vector<std::size_t> run_of_op;  // per trace op: its run, or kNone (empty: no runs)

  // The run trace op `k` belongs to, or kNone.
  std::size_t run_of(std::size_t k) const { return runs.empty() ? kNone : run_of_op[k]; }
};

// The runs of the needed ops of `trace` that a replay over `batch` rows computes as loops: at
// least two elementwise ops of one dtype and shape (fusable_runs with the batch) whose batched
// outputs have 8,192 elements or more (below that, planning costs more than the loop saves).
// `outputs` are what the replay returns (read outside any run). None while anything observes
// the thread's ops (any_observer): a loop is not an op anyone could record.
BatchedFusion plan_batched_fusion(const OpTrace& trace, const std::vector<bool>& needed,
                                  const std::vector<TracedInput>& outputs, std::size_t batch);

}  // namespace tapegrad::detail
