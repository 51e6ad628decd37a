// vectorized_map's engine, shared with the vectorized Jacobians (jacobian.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

using BatchFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct VectorizeOptions {
  bool fallback_to_loop = true;
  std::size_t rows_per_pass = 0;  // 0: the whole batch in one replay
  std::string caller = "vectorized_map";
};

// fn applied to every slice along axis 0 of the elems (one leading size B), results stacked
// along a new axis 0. fn may return undefined tensors: they must be undefined for every slice
// and stay undefined in the result.
//
// How: fn is traced on slice 0 and on slice B - 1 (runtime/op_trace.hpp); the two traces must
// agree (the same ops, attributes and constants: a difference means fn depends on its input
// through something the trace cannot see); then the trace is replayed once per pass of
// `rows_per_pass` rows with each op's batching rule. An op without a rule, or traces that
// disagree: with fallback_to_loop a one-time warning and a loop of fn per slice; without,
// InvalidArgument naming the op.
std::vector<Tensor> vectorize(const BatchFunction& fn, const std::vector<Tensor>& elems,
                              const VectorizeOptions& options);

// vectorize over the single elem the identity [n] ++ example (n elements in example, one
// floating dtype), the results reshaped into `final_shapes` (one per output of fn, each with
// the output's element count; e.g. target.shape ++ source.shape for a Jacobian). A
// single-pass replay never builds the identity: the values derived from it linearly stay
// diagonals (n numbers: derivatives/identity_rows.hpp) while their ops allow it, and an output
// still diagonal at the end is written once, in its final shape. The identity is built only
// when an op needs it dense, for a loop fallback, or for passes of rows_per_pass < n rows.
std::vector<Tensor> vectorize_over_identity(const BatchFunction& fn, const Shape& example,
                                            DType dtype, const std::vector<Shape>& final_shapes,
                                            const VectorizeOptions& options);

// The same with the final shapes asked for only after fn has run (on the traces or the loop's
// slices): a caller that learns its output shapes from fn's calls needs no extra call of its own.
using FinalShapes = std::function<std::vector<Shape>()>;
std::vector<Tensor> vectorize_over_identity(const BatchFunction& fn, const Shape& example,
                                            DType dtype, const FinalShapes& final_shapes,
                                            const VectorizeOptions& options);

// The same computed by the loop (fn per slice, stacked): the reference.
std::vector<Tensor> loop_over_batch(const BatchFunction& fn, const std::vector<Tensor>& elems,
                                    const std::string& caller);

}  // namespace tapegrad::detail
