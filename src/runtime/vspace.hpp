// The vector space the backward walk works in (TF: imperative_grad's VSpace).
#pragma once

#include <vector>

#include "tapegrad/indexed_slices.hpp"

namespace tapegrad::detail {

// Cached per (shape, dtype) on each thread; the cache holds small tensors only.
Tensor vspace_zeros(const Shape& shape, DType dtype);
Tensor vspace_ones(const Shape& shape, DType dtype);
// The sum of a list of gradients: dense ones add; only-sparse lists concatenate into one
// IndexedSlices; a mixed list densifies. Uses differentiable ops, so an outer tape records it.
GradientValue aggregate(std::vector<GradientValue>& grads);
// Several IndexedSlices as one (values and indices concatenated). Lives with gather.
IndexedSlices concat_slices(const std::vector<IndexedSlices>& slices);

}  // namespace tapegrad::detail
