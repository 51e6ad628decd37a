// A small Keras-like layer set on Module, and the two standard initialisers (TF:
// tf.keras.layers.Dense / Conv2D, tf.keras.initializers.GlorotUniform; PyTorch:
// torch.nn.init.kaiming_normal_).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "tapegrad/dtype.hpp"
#include "tapegrad/module.hpp"
#include "tapegrad/ops/nn.hpp"
#include "tapegrad/ops/random.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Glorot (Xavier) uniform (TF: tf.keras.initializers.GlorotUniform, Keras's default kernel
/// initialiser): values uniform in [-limit, limit), limit = sqrt(6 / (fan_in + fan_out)).
/// The fans are Keras's: [in, out] -> in, out; a convolution kernel [h, w, in, out] (any
/// rank >= 3) -> h*w*in, h*w*out; rank 1 [n] -> n, n; a scalar -> 1, 1. A shape with a zero
/// gives an empty tensor. Draws from `generator` like random_uniform.
/// InvalidArgument naming glorot_uniform, the shape and the dtype when the dtype is not
/// float32 or float64.
Tensor glorot_uniform(const Shape& shape, Generator& generator, DType dtype = DType::Float32);

/// He (Kaiming) normal: values normal(0, sqrt(2 / fan_in)), fans as glorot_uniform; the
/// initialiser for layers followed by a ReLU. This is PyTorch's kaiming_normal_ (mode
/// "fan_in", ReLU gain): Keras's HeNormal draws the same variance from a normal truncated at
/// two standard deviations. InvalidArgument naming he_normal as glorot_uniform does.
Tensor he_normal(const Shape& shape, Generator& generator, DType dtype = DType::Float32);

namespace layers {

/// A fully connected layer (TF: tf.keras.layers.Dense without activation; PyTorch:
/// torch.nn.Linear): y = x kernel + bias. Variables "kernel" [in, out] (glorot_uniform from
/// `generator`) and "bias" [out] (zeros; absent when `bias` is false), of `dtype`.
/// x has rank >= 2 and last dimension `in`: [..., in] -> [..., out].
/// InvalidArgument naming the layer for in or out == 0, a dtype that is not float32 or
/// float64, and (at a call) an input of another rank, last dimension or dtype (no implicit
/// casts).
class Dense : public Module {
 public:
  Dense(std::size_t in, std::size_t out, Generator& generator, bool bias = true,
        DType dtype = DType::Float32);
  // Out of line (the destructor is the vtable's key function): a user's program that
  // constructs or moves a layer neither emits its vtable nor compiles its destructor.
  ~Dense() override;
  Dense(Dense&& other) noexcept;
  Dense& operator=(Dense&& other) noexcept;
  Tensor operator()(const Tensor& x) const;

  /// The kernel variable (a handle: assigning it changes the layer's).
  Variable kernel() const { return kernel_; }
  /// The bias variable; InvalidArgument when the layer was made without one.
  Variable bias() const;

 private:
  std::size_t in_;
  std::size_t out_;
  DType dtype_;
  Variable kernel_;
  std::vector<Variable> bias_;  // empty or one: a Variable cannot be default-constructed
};

/// A 2-D convolution with bias (TF: tf.keras.layers.Conv2D without activation; PyTorch:
/// torch.nn.Conv2d): conv2d(x, kernel, strides, padding, data_format) + bias. Variables
/// "kernel" [kh, kw, in_channels, filters] (HWIO in both layouts, glorot_uniform) and "bias"
/// [filters] (zeros), of `dtype`. `kernel` is {kh, kw}.
/// NHWC x [batch, h, w, in_channels] -> [batch, out_h, out_w, filters];
/// NCHW x [batch, in_channels, h, w] -> [batch, filters, out_h, out_w].
/// InvalidArgument naming the layer for in_channels or filters == 0, a kernel that is not
/// two positive sizes, a dtype that is not float32 or float64, and (at a call) an input of
/// another rank, channel count or dtype; conv2d's own checks name conv2d (strides, sizes).
class Conv2D : public Module {
 public:
  Conv2D(std::size_t in_channels, std::size_t filters, std::vector<int> kernel,
         Generator& generator, Padding padding = Padding::Valid, std::vector<int> strides = {1, 1},
         DataFormat data_format = DataFormat::NHWC, DType dtype = DType::Float32);
  /// The same for braced lists, Conv2D(1, 16, {3, 3}, generator): the lists reach the library
  /// as they are, where the form above has the caller build (and destroy) two std::vectors.
  Conv2D(std::size_t in_channels, std::size_t filters, std::initializer_list<int> kernel,
         Generator& generator, Padding padding = Padding::Valid,
         std::initializer_list<int> strides = {1, 1}, DataFormat data_format = DataFormat::NHWC,
         DType dtype = DType::Float32);
  // Out of line, as Dense's.
  ~Conv2D() override;
  Conv2D(Conv2D&& other) noexcept;
  Conv2D& operator=(Conv2D&& other) noexcept;
  Tensor operator()(const Tensor& x) const;

  /// The kernel and bias variables (handles: assigning them changes the layer's).
  Variable kernel() const { return kernel_; }
  Variable bias() const { return bias_; }

 private:
  std::size_t in_channels_;
  std::size_t filters_;
  Padding padding_;
  std::vector<int> strides_;
  DataFormat data_format_;
  DType dtype_;
  Variable kernel_;
  Variable bias_;
};

}  // namespace layers

// Compiled in the library: inlined into a user's model constructor, each add_module of a layer
// was a make_unique, a move, the unique_ptrs' destructions and (for a literal name) a
// std::string for the user's program to optimise.
template <>
layers::Dense& Module::add_module<layers::Dense>(const std::string& name, layers::Dense module);
template <>
layers::Conv2D& Module::add_module<layers::Conv2D>(const std::string& name, layers::Conv2D module);
template <>
layers::Dense& Module::add_module<layers::Dense>(const char* name, layers::Dense module);
template <>
layers::Conv2D& Module::add_module<layers::Conv2D>(const char* name, layers::Conv2D module);

}  // namespace tapegrad
