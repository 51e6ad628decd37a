// The checks every op makes of its operands before it reads them. In the runtime, not with the
// kernels' shape checks (kernels/shape_util.hpp), because telling a variable's handle from a
// tensor with elements needs the tensor's storage (runtime/tensor_impl.hpp).
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// x is defined and holds elements: InvalidArgument naming `op` for an undefined tensor or a
// variable's handle (pass the variable's value instead).
void require_defined(const char* op, const Tensor& x);

// Both operands as require_defined, and of one dtype (no implicit promotion); InvalidArgument
// naming `op`, both shapes and both dtypes otherwise.
void require_same_dtype(const char* op, const Tensor& x, const Tensor& y);

}  // namespace tapegrad::detail
