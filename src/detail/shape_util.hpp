// Shape arithmetic shared by the op families: broadcasting and axis normalisation.
#pragma once

#include <string>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// NumPy broadcasting of two shapes; InvalidArgument naming `op`, the shapes and dtypes.
Shape broadcast_shapes(const char* op, const Tensor& x, const Tensor& y);
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Axis in [-rank, rank) -> [0, rank); InvalidArgument naming the op and shape otherwise.
std::size_t normalize_axis(const char* op, int axis, std::size_t rank, const Shape& shape);
// Reduction axes: empty = all; sorted, unique-checked.
std::vector<std::size_t> normalize_axes(const char* op, const std::vector<int>& axes,
                                        const Shape& shape);

// "op: x has shape [2, 3] and dtype float64, y has shape [4] and dtype float32"
std::string describe(const char* op, const Tensor& x, const Tensor& y);
std::string describe(const char* op, const Tensor& x);

// Same dtype for both operands (no implicit promotion); InvalidArgument otherwise.
void require_same_dtype(const char* op, const Tensor& x, const Tensor& y);
void require_defined(const char* op, const Tensor& x);

// Row-major strides (in elements) of a shape.
std::vector<std::size_t> row_major_strides(const Shape& shape);

}  // namespace tapegrad::detail
