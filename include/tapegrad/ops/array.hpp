// Shape manipulation, copying and indexing ops.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad {

namespace detail {
// A Shape's entries as the int64 entries reshape and slice take; InvalidArgument naming `op`,
// `what` and the entry when one exceeds 2^63 - 1.
std::vector<std::int64_t> shape_entries(const char* op, const char* what, const Shape& shape);
// Only Shape itself (not a braced list, which cannot deduce S) selects the Shape forms.
template <class S>
using if_shape_t = std::enable_if_t<std::is_same_v<S, Shape>, int>;
}  // namespace detail

/// Same values, a new tensor (TF: tf.identity): a view of x, no element copied (docs/guide.md
/// "Views"). Gradient: the incoming gradient.
Tensor identity(const Tensor& x);
/// Same values, and no gradient flows back through it (TF: tf.stop_gradient). A view of x.
Tensor stop_gradient(const Tensor& x);
/// Converts the dtype (TF: tf.cast): floats to integers truncate toward zero, saturate beyond
/// the integer range and map NaN to 0 (no undefined behaviour); int64 -> int32 wraps; nonzero
/// to bool is true. Differentiable between float dtypes only; the same dtype returns x itself.
Tensor cast(const Tensor& x, DType dtype);

/// TF: tf.reshape. One entry may be -1 (inferred). A view of x's buffer, or of the contiguous
/// copy a transposed or strided x keeps (docs/guide.md "Views"). InvalidArgument when sizes
/// disagree or the target's element count overflows (checked, never wrapped).
Tensor reshape(const Tensor& x, std::vector<std::int64_t> shape);
/// The same for a braced list, reshape(x, {n, -1}): the list reaches the library as it is,
/// where the form above has the caller build (and destroy) a std::vector.
Tensor reshape(const Tensor& x, std::initializer_list<std::int64_t> shape);
/// The same with a Shape, what shape() returns: reshape(x, y.shape()) (no -1 entry, since a
/// Shape is unsigned). A template only so that a braced list, reshape(x, {2, -1}), still
/// means the int64 form: S is Shape. Errors as above, and InvalidArgument for an entry
/// beyond 2^63 - 1.
template <class S, detail::if_shape_t<S> = 0>
Tensor reshape(const Tensor& x, const S& shape) {
  return reshape(x, detail::shape_entries("reshape", "target shape", shape));
}
/// TF: tf.transpose. perm empty reverses the axes. A view of x (strides permuted, no copy).
Tensor transpose(const Tensor& x, std::vector<int> perm = {});
/// TF: tf.expand_dims; axis in [-rank-1, rank]. A view, as reshape.
Tensor expand_dims(const Tensor& x, int axis);
/// TF: tf.squeeze; axes empty removes every dimension of size 1. A view, as reshape.
/// InvalidArgument when a named axis does not have size 1.
Tensor squeeze(const Tensor& x, std::vector<int> axes = {});
/// Broadcasts x to `shape` by NumPy rules (TF: tf.broadcast_to).
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// Sums `grad` over the axes that broadcasting added or stretched so it has `shape`:
/// the gradient of a broadcast. Differentiable.
Tensor unbroadcast(const Tensor& grad, const Shape& shape);

/// TF: tf.concat / tf.stack / tf.split (num equal parts). concat: same dtype and rank, equal
/// dimensions except `axis`; stack: same shape and dtype. InvalidArgument otherwise, and when
/// split's axis does not divide evenly. split is one op with `num` outputs, each a view of x.
Tensor concat(const std::vector<Tensor>& values, int axis);
Tensor stack(const std::vector<Tensor>& values, int axis = 0);
std::vector<Tensor> split(const Tensor& x, int num, int axis = 0);
/// TF: tf.slice; size -1 takes the rest of that dimension. A view of x's buffer (no copy).
/// InvalidArgument when the window does not fit in x.
Tensor slice(const Tensor& x, std::vector<std::int64_t> begin, std::vector<std::int64_t> size);
/// The same with Shapes (what shape() returns): slice(x, begin, y.shape()). With one Shape
/// argument the other may be a braced list of non-negative entries, slice(x, {0, 1},
/// y.shape()); with two braced lists the int64 form above is called. Errors as above, and
/// InvalidArgument for an entry beyond 2^63 - 1.
template <class S, detail::if_shape_t<S> = 0>
Tensor slice(const Tensor& x, const S& begin, const S& size) {
  return slice(x, detail::shape_entries("slice", "begin", begin),
               detail::shape_entries("slice", "size", size));
}
/// TF: tf.gather. indices: Int32 or Int64, any shape; result shape
/// params.shape[:axis] ++ indices.shape ++ params.shape[axis+1:]. Out-of-range indices throw.
/// The gradient for params is an IndexedSlices when axis is 0.
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
/// TF: tf.tile; one multiple per dimension of x. InvalidArgument when the result would have
/// more than 2^63 - 1 elements; ResourceExhausted when it cannot be allocated.
Tensor tile(const Tensor& x, std::vector<std::size_t> multiples);
/// Sums rows of `data` into `num_segments` rows by `segment_ids` (Int32/Int64, shape [n])
/// (TF: tf.math.unsorted_segment_sum, 1-D ids). Every id must be in [0, num_segments)
/// (InvalidArgument otherwise; TF drops negative ids instead).
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids,
                            std::size_t num_segments);

}  // namespace tapegrad
