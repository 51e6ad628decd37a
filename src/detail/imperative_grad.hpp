// The backward walk over a tape (TF: imperative_grad / tape.h ComputeGradient).
#pragma once

#include <vector>

#include "detail/tape_impl.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad::detail {

// One gradient per source: d(sum of targets weighted by output_gradients)/d(source).
// `output_gradients` is empty or has one entry per target (undefined = ones). Sources are
// described by id, dtype and shape (a Variable's source is its handle). On a non-persistent
// tape each entry's saved tensors are released as soon as the walk has used it.
std::vector<GradientValue> imperative_grad(TapeImpl& tape, const std::vector<Tensor>& targets,
                                           const std::vector<TensorMeta>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected);

}  // namespace tapegrad::detail
