// Runtime element types of a Tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace tapegrad {

/// The element type of a Tensor, known at run time (TF: tf.DType).
enum class DType { Float32, Float64, Int32, Int64, Bool };

/// A tensor's dimensions, outermost first. An empty Shape is a scalar.
using Shape = std::vector<std::size_t>;

/// True for the dtypes that can be differentiated (Float32, Float64).
bool is_floating(DType dtype);

/// "float32", "float64", "int32", "int64", "bool": used in every error message.
const char* dtype_name(DType dtype);

/// "[2, 3]": used in every error message.
std::string shape_to_string(const Shape& shape);

/// The number of elements of a shape (1 for a scalar).
std::size_t num_elements(const Shape& shape);

/// The DType of a C++ element type: dtype_of<double>::value == DType::Float64.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};

}  // namespace tapegrad
