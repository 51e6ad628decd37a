// Gradients with respect to the variables a function reads (TF:
// tf.contrib.eager.implicit_value_and_gradients).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

/// Runs f under a fresh tape and returns f's value and, for every trainable Variable f read,
/// (d f / d variable, variable) in the variables' creation order. A variable that was read
/// but does not affect the value gets an undefined gradient. InvalidArgument "No trainable
/// variables were accessed while the function was being computed." when f read none.
std::pair<Tensor, std::vector<std::pair<Tensor, Variable>>> implicit_value_and_gradients(
    std::function<Tensor()> f);

/// The gradients alone (TF: implicit_gradients); same order and errors.
std::vector<std::pair<Tensor, Variable>> implicit_gradients(std::function<Tensor()> f);

}  // namespace tapegrad
