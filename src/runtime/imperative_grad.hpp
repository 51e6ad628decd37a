// The backward walk over a tape (TF: imperative_grad / tape.h ComputeGradient). The algorithm,
// its stages and its invariants are stated at the top of imperative_grad.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backward_plan.hpp"
#include "runtime/tape.hpp"
#include "runtime/vspace.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad::detail {

// One gradient per source: d(sum of targets weighted by output_gradients)/d(source).
// `output_gradients` is empty or has one entry per target (undefined = ones). Sources are
// described by id, dtype and shape (a Variable's source is its handle). On a non-persistent
// tape each entry's saved tensors are released as soon as the walk has used it.
std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected,
                                           const VSpace& vspace = default_vspace(),
                                           const std::vector<std::uint64_t>& stop_ids = {});

// Runs a plan made on this tape for these targets (a Jacobian runs one plan once per row).
// `release_entries`: drop each entry's saved tensors once used (only for the last run on a
// non-persistent tape).
std::vector<GradientValue> run_backward(TapeImpl& tape, const BackwardPlan& plan,
                                        const std::vector<Tensor>& targets,
                                        const std::vector<Tensor>& output_gradients,
                                        UnconnectedGradients unconnected, bool release_entries,
                                        const VSpace& vspace = default_vspace());

}  // namespace tapegrad::detail
