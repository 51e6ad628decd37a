// layers::Dense: x kernel + bias on the last axis, inputs of rank > 2 flattened to a matrix.
#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/layers.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::layers {
namespace {

std::string describe(std::size_t in, std::size_t out, DType dtype) {
  return "layers::Dense(" + std::to_string(in) + " -> " + std::to_string(out) + ", " +
         dtype_name(dtype) + ")";
}

// Validates the arguments before anything is drawn from the generator.
std::size_t checked_in(std::size_t in, std::size_t out, DType dtype) {
  if (in == 0 || out == 0) {
    throw InvalidArgument(describe(in, out, dtype) + ": in and out must be positive");
  }
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw InvalidArgument(describe(in, out, dtype) + ": the dtype must be float32 or float64");
  }
  return in;
}

}  // namespace

Dense::Dense(std::size_t in, std::size_t out, Generator& generator, bool bias, DType dtype)
    : in_(checked_in(in, out, dtype)),
      out_(out),
      dtype_(dtype),
      kernel_(add_variable("kernel", glorot_uniform({in, out}, generator, dtype))) {
  if (bias) bias_.push_back(add_variable("bias", zeros({out}, dtype)));
}

Dense::~Dense() = default;
Dense::Dense(Dense&& other) noexcept = default;
Dense& Dense::operator=(Dense&& other) noexcept = default;

Variable Dense::bias() const {
  if (bias_.empty()) {
    throw InvalidArgument(describe(in_, out_, dtype_) + ": the layer was made without a bias");
  }
  return bias_.front();
}

Tensor Dense::operator()(const Tensor& x) const {
  if (!x.defined()) throw InvalidArgument(describe(in_, out_, dtype_) + ": the input is undefined");
  if (x.rank() < 2 || x.shape().back() != in_ || x.dtype() != dtype_) {
    throw InvalidArgument(describe(in_, out_, dtype_) + ": input of shape " +
                          shape_to_string(x.shape()) + " and dtype " + dtype_name(x.dtype()) +
                          "; the layer takes [..., " + std::to_string(in_) + "] " +
                          dtype_name(dtype_));
  }
  Tensor y;
  if (x.rank() == 2) {
    y = matmul(x, kernel_);
  } else {
    // [..., in] as a matrix [rows, in]; the product back to [..., out].
    Shape out_shape = x.shape();
    out_shape.back() = out_;
    std::size_t rows = 1;
    for (std::size_t axis = 0; axis + 1 < x.rank(); ++axis) rows *= x.shape()[axis];
    y = reshape(matmul(reshape(x, Shape{rows, in_}), kernel_), out_shape);
  }
  return bias_.empty() ? y : y + bias_.front();
}

}  // namespace tapegrad::layers

namespace tapegrad {

template <>
layers::Dense& Module::add_module<layers::Dense>(const std::string& name, layers::Dense module) {
  return adopt_module(name, std::move(module));
}

template <>
layers::Dense& Module::add_module<layers::Dense>(const char* name, layers::Dense module) {
  return adopt_module(std::string(name), std::move(module));
}

}  // namespace tapegrad
