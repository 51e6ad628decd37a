// IndexedSlices: a row-sparse gradient (TF: tf.IndexedSlices), the gradient of `gather`.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Rows `values[i]` belong at `indices[i]` of a dense tensor of `dense_shape`; rows of a
/// repeated index add up. values: [n, dense_shape[1:]...]; indices: Int32 or Int64, [n].
struct IndexedSlices {
  Tensor values;
  Tensor indices;
  Shape dense_shape;
};

/// The dense tensor that `slices` stands for (duplicate indices summed). Differentiable.
Tensor to_dense(const IndexedSlices& slices);

/// A gradient as the runtime passes it around: dense, sparse, or undefined.
class GradientValue {
 public:
  GradientValue() = default;
  GradientValue(Tensor dense) : dense_(std::move(dense)) {}  // NOLINT
  // Out of line: inline, its make_shared had a user's program (the CNN example) instantiate
  // and optimise the control block of a shared IndexedSlices, which only the library builds.
  GradientValue(IndexedSlices sparse);  // NOLINT

  bool defined() const { return dense_.defined() || sparse_ != nullptr; }
  bool is_sparse() const { return sparse_ != nullptr; }
  /// The dense gradient; InvalidArgument when it is sparse.
  const Tensor& dense() const {
    if (sparse_) throw_not_dense();
    return dense_;
  }
  /// The sparse gradient; InvalidArgument when it is dense.
  const IndexedSlices& sparse() const;
  /// Dense either way (an undefined Tensor when undefined). On an rvalue a dense gradient is
  /// moved out rather than copied.
  Tensor to_dense() const&;
  Tensor to_dense() && {  // inline: the backward walk calls it once per gradient
    if (sparse_) return densify();
    return std::move(dense_);
  }

 private:
  [[noreturn]] static void throw_not_dense();
  Tensor densify() const;

  Tensor dense_;
  std::shared_ptr<const IndexedSlices> sparse_;
};

}  // namespace tapegrad
