// glorot_uniform and he_normal: Keras's fan rule, drawn with the random ops.
#include <cmath>
#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/layers.hpp"

namespace tapegrad {
namespace {

struct Fans {
  double in;
  double out;
};

// Keras's _compute_fans: the last two axes are (in, out); the axes before them are the
// receptive field of a convolution kernel and multiply both.
Fans compute_fans(const Shape& shape) {
  if (shape.empty()) return {1.0, 1.0};
  if (shape.size() == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  double receptive_field = 1.0;
  for (std::size_t axis = 0; axis + 2 < shape.size(); ++axis) {
    receptive_field *= static_cast<double>(shape[axis]);
  }
  return {receptive_field * static_cast<double>(shape[shape.size() - 2]),
          receptive_field * static_cast<double>(shape[shape.size() - 1])};
}

void check_floating(const char* initializer, const Shape& shape, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw InvalidArgument(std::string(initializer) + ": shape " + shape_to_string(shape) +
                          ", dtype " + dtype_name(dtype) +
                          ": the dtype must be float32 or float64");
  }
}

bool has_zero(const Shape& shape) {
  for (std::size_t dim : shape) {
    if (dim == 0) return true;
  }
  return false;
}

}  // namespace

Tensor glorot_uniform(const Shape& shape, Generator& generator, DType dtype) {
  check_floating("glorot_uniform", shape, dtype);
  if (has_zero(shape)) return zeros(shape, dtype);
  const Fans fans = compute_fans(shape);
  const double limit = std::sqrt(6.0 / (fans.in + fans.out));
  return random_uniform(shape, generator, -limit, limit, dtype);
}

Tensor he_normal(const Shape& shape, Generator& generator, DType dtype) {
  check_floating("he_normal", shape, dtype);
  if (has_zero(shape)) return zeros(shape, dtype);
  const Fans fans = compute_fans(shape);
  return random_normal(shape, generator, 0.0, std::sqrt(2.0 / fans.in), dtype);
}

}  // namespace tapegrad
