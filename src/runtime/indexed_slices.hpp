// What the runtime does with row-sparse gradients beyond the public IndexedSlices API.
#pragma once

#include <vector>

#include "tapegrad/indexed_slices.hpp"

namespace tapegrad::detail {

// Several IndexedSlices of one dense shape as one: values and indices concatenated (indices
// cast to int64 when their dtypes differ). InvalidArgument for an empty list or differing
// dense shapes. Differentiable (concat and cast), so an outer tape records it.
IndexedSlices concat_slices(const std::vector<IndexedSlices>& slices);

}  // namespace tapegrad::detail
