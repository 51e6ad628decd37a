// is_floating (tapegrad/dtype.hpp) inlined, for the record path and the backward walk, which
// ask it for every input and output of every op.
#pragma once

#include "tapegrad/dtype.hpp"

namespace tapegrad::detail {

inline bool floating(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

}  // namespace tapegrad::detail
