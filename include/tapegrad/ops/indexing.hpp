// Array-building, indexing, sorting, scan, padding and contraction ops added in 0.2 (TF
// semantics and names; axes are int, negative counts from the end). Index tensors are Int32
// or Int64; an index out of range is an InvalidArgument naming the op, the index value and the
// shape (TF raises on CPU).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

// ---- Building arrays (constants: never recorded, no gradient) -------------------------------

/// TF tf.one_hot(indices, depth) with on_value 1, off_value 0, axis -1: shape
/// indices.shape ++ [depth]. An index outside [0, depth) gives an all-off row (TF). indices:
/// Int32|Int64; dtype: any numeric. No gradient (indices are integers).
Tensor one_hot(const Tensor& indices, int depth, DType dtype = DType::Float64);
/// TF tf.range(start, limit, delta): ceil((limit - start) / delta) values start + i delta
/// (empty when the sign of delta points away from limit). InvalidArgument when delta is 0.
Tensor range(double start, double limit, double delta = 1, DType dtype = DType::Float64);
/// TF tf.eye(n): the n x n identity in `dtype`.
Tensor eye(std::size_t n, DType dtype = DType::Float64);
/// TF tf.linspace(start, stop, num): num evenly spaced values, both ends included (num 1 gives
/// [start]); floating dtypes only. InvalidArgument when num < 1.
Tensor linspace(double start, double stop, std::int64_t num, DType dtype = DType::Float64);

// ---- Positions of extrema, sorting ----------------------------------------------------------

/// TF tf.math.argmax / argmin along `axis` (removed): Int64; ties give the first position;
/// a NaN counts as the extremum (NumPy). No gradient. Numeric dtypes; the axis must be
/// non-empty.
Tensor argmax(const Tensor& x, int axis);
Tensor argmin(const Tensor& x, int axis);
/// TF tf.sort along `axis` (ascending unless `descending`). Numeric dtypes. Gradient: the
/// incoming gradient scattered back through the permutation.
Tensor sort(const Tensor& x, int axis = -1, bool descending = false);
/// TF tf.argsort (stable: equal values keep their order, in both directions): Int32 indices.
/// No gradient.
Tensor argsort(const Tensor& x, int axis = -1, bool descending = false);
/// TF tf.math.top_k(x, k, sorted=True) along the last axis: the k largest values (first
/// occurrence first among equals) and their Int32 indices. InvalidArgument when k < 0 or
/// k > the last dimension. Gradient of values: scattered back to the indices; indices: none.
struct TopK {
  Tensor values;
  Tensor indices;
};
TopK top_k(const Tensor& x, int k = 1);

// ---- Scans, reversal, padding ----------------------------------------------------------------

/// TF tf.math.cumsum / cumprod along `axis`; `exclusive` leaves out the element itself (the
/// first result is 0, resp. 1), `reverse` runs from the end. Numeric dtypes. Gradient of
/// cumsum: cumsum(g, exclusive, !reverse). Gradient of cumprod: TF's formula
/// cumsum(y g, exclusive, !reverse) / x when x has no zero; when it has one (TF gives NaN or
/// inf there) the exact partials, built in O(n^2) per line along the axis.
Tensor cumsum(const Tensor& x, int axis, bool exclusive = false, bool reverse = false);
Tensor cumprod(const Tensor& x, int axis, bool exclusive = false, bool reverse = false);
/// TF tf.reverse: the elements in reverse order along each of `axes` (unique). Any dtype. A
/// view of x (negative strides, no copy).
Tensor reverse(const Tensor& x, std::vector<int> axes);

/// TF tf.pad modes: Constant fills with `value`; Reflect mirrors without the edge
/// (padding <= dim - 1), Symmetric with it (padding <= dim).
enum class PadMode { Constant, Reflect, Symmetric };
/// TF tf.pad(x, paddings, mode, constant_values): one (before, after) pair per dimension, each
/// >= 0. Numeric dtypes (and Bool for Constant with value 0 or 1). Gradient: the padded-out
/// window taken back, mirrored parts added onto the elements they copy. InvalidArgument
/// naming pad, x's shape and dtype, the paddings and the mode for a pair per dimension
/// missing, a negative padding, a Reflect (Symmetric) padding above dim - 1 (dim), a
/// constant x's dtype cannot hold, or a bool x with Reflect or Symmetric.
Tensor pad(const Tensor& x, std::vector<std::pair<std::int64_t, std::int64_t>> paddings,
           PadMode mode = PadMode::Constant, double value = 0);

// ---- N-d gather and scatter, masking ---------------------------------------------------------

/// TF tf.gather_nd (batch_dims 0): indices of shape [..., m], m <= rank(params); result
/// indices.shape[:-1] ++ params.shape[m:]. Gradient of params: scatter_nd of g.
Tensor gather_nd(const Tensor& params, const Tensor& indices);
/// TF tf.scatter_nd: zeros of `shape` with updates added at indices (duplicates add); updates
/// must have shape indices.shape[:-1] ++ shape[m:]. Gradient of updates: gather_nd of g.
Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const Shape& shape);
/// TF tf.tensor_scatter_nd_add: tensor plus scatter_nd(indices, updates, tensor.shape).
Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
/// TF tf.tensor_scatter_nd_update: tensor with the slots at indices replaced by updates (a
/// duplicate index keeps the last update). Gradient: tensor gets g with the replaced slots
/// zeroed; updates get gather_nd(g, indices), but zeros for an update a later duplicate
/// overwrote (it reaches nothing; TF gives it its slot's gradient too).
Tensor tensor_scatter_nd_update(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
/// TF tf.boolean_mask(x, mask) (axis 0): mask is Bool with shape x.shape[:k]; the result
/// stacks the x[i...] where mask is true: [count] ++ x.shape[k:]. Gradient: scattered back.
Tensor boolean_mask(const Tensor& x, const Tensor& mask);

// ---- Contractions and norms ------------------------------------------------------------------

/// TF tf.einsum / NumPy einsum: "ij,jk->ik", implicit output ("ij,jk" gives the labels seen
/// once, in alphabetical order), "..." for broadcast batch dimensions, a label repeated in one
/// operand for a diagonal ("ii->i") or trace ("ii"). Floating operands of one dtype. Lowered to
/// transpose, reshape, reduce_sum and one matmul per pair of operands (contracted left to
/// right), so gradients and second derivatives follow from those ops.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
/// TF tf.tensordot(a, b, axes): contracts the last `axes` dimensions of a with the first
/// `axes` of b (one matmul).
Tensor tensordot(const Tensor& a, const Tensor& b, int axes);
/// TF tf.norm: ord "euclidean" (default; "fro" is the same over two axes), "1", "2", "inf", or
/// any p >= 1 written as a number ("3", "1.5"). axes empty: the whole tensor as one vector;
/// one axis: vector norms; two axes: matrix norms ("fro"/"euclidean", "1": largest column
/// sum, "inf": largest row sum; "2" is not supported for matrices). The gradient at a zero
/// vector is 0 (a subgradient; TF gives NaN).
Tensor norm(const Tensor& x, const std::string& ord = "euclidean", std::vector<int> axes = {});

}  // namespace tapegrad
