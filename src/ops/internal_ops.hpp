// The built-in ops that tapegrad's runtime records for itself, defined in src/ops/ like every
// other op: ReadVariableOp (variable_read.cpp), JacobianPack and JacobianUnpack
// (array_rows.cpp). The runtime calls only these functions; the ops' definitions and
// gradients stay in their files.
#pragma once

#include <vector>

#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad::detail {

// Records that variable `v` was read and gave `value` (TF's ReadVariableOp, whose gradient is
// the identity): every tape on this thread that watches accessed variables starts watching a
// trainable `v`, and every tape that watches `v` records, once per value, that `value` came
// from it. Call only when a tape is active.
void read_variable(const Variable& v, const Tensor& value);

// `rows` (one shape, one floating dtype) laid end to end as one tensor of `shape`, recorded
// as JacobianPack, whose gradient splits the output gradient back into rows (JacobianUnpack,
// whose gradient packs again), so a stack of Jacobian rows stays differentiable.
Tensor pack_rows(const std::vector<Tensor>& rows, const Shape& shape);

}  // namespace tapegrad::detail
