// IndexedSlices and GradientValue, built on public ops only (unsorted_segment_sum, concat,
// cast): the runtime's gradient values do not depend on any op family's internals.
#include "runtime/indexed_slices.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "kernels/shape_util.hpp"
#include "runtime/operand_checks.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

Tensor to_dense(const IndexedSlices& slices) {
  detail::require_defined("to_dense", slices.values);
  detail::require_defined("to_dense", slices.indices);
  const Shape& dense = slices.dense_shape;
  const bool consistent =
      !dense.empty() && slices.indices.rank() == 1 && slices.values.rank() == dense.size() &&
      slices.values.shape()[0] == slices.indices.shape()[0] &&
      std::equal(dense.begin() + 1, dense.end(), slices.values.shape().begin() + 1);
  if (!consistent) {
    throw InvalidArgument("to_dense: IndexedSlices with values of shape " +
                          shape_to_string(slices.values.shape()) + ", indices of shape " +
                          shape_to_string(slices.indices.shape()) + " and dense_shape " +
                          shape_to_string(dense) +
                          " are inconsistent (values must be [len(indices), dense_shape[1:]...])");
  }
  return unsorted_segment_sum(slices.values, slices.indices, dense[0]);
}

GradientValue::GradientValue(IndexedSlices sparse)
    : sparse_(std::make_shared<IndexedSlices>(std::move(sparse))) {}

void GradientValue::throw_not_dense() {
  throw InvalidArgument("GradientValue::dense: the gradient is an IndexedSlices; call to_dense()");
}

Tensor GradientValue::densify() const { return tapegrad::to_dense(*sparse_); }

const IndexedSlices& GradientValue::sparse() const {
  if (!sparse_) throw InvalidArgument("GradientValue::sparse: the gradient is dense");
  return *sparse_;
}

Tensor GradientValue::to_dense() const& {
  if (sparse_) return tapegrad::to_dense(*sparse_);
  return dense_;
}

namespace detail {

IndexedSlices concat_slices(const std::vector<IndexedSlices>& slices) {
  if (slices.empty()) throw InvalidArgument("concat_slices: no IndexedSlices to concatenate");
  if (slices.size() == 1) return slices.front();
  bool mixed_index_dtypes = false;
  for (const auto& s : slices) {
    if (s.dense_shape != slices.front().dense_shape) {
      throw InvalidArgument(
          "concat_slices: dense shapes differ: " + shape_to_string(slices.front().dense_shape) +
          " and " + shape_to_string(s.dense_shape));
    }
    mixed_index_dtypes = mixed_index_dtypes || s.indices.dtype() != slices.front().indices.dtype();
  }
  std::vector<Tensor> values, indices;
  values.reserve(slices.size());
  indices.reserve(slices.size());
  for (const auto& s : slices) {
    values.push_back(s.values);
    indices.push_back(mixed_index_dtypes ? cast(s.indices, DType::Int64) : s.indices);
  }
  return IndexedSlices{concat(values, 0), concat(indices, 0), slices.front().dense_shape};
}

}  // namespace detail
}  // namespace tapegrad
