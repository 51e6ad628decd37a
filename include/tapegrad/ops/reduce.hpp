// Reductions. `axes` empty means every axis; negative axes count from the end; a repeated or
// out-of-range axis throws InvalidArgument naming the op, the axes and the shape.
#pragma once

#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// TF: tf.reduce_sum. Float and integer dtypes.
Tensor reduce_sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
/// TF: tf.reduce_mean (integer means truncate, as TF).
Tensor reduce_mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
/// TF: tf.reduce_max / tf.reduce_min; the gradient is split evenly between tied extrema.
/// Float and integer dtypes. InvalidArgument when a non-empty output reduces an empty set.
Tensor reduce_max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
/// TF: tf.reduce_prod. Float and integer dtypes; the gradient never divides by zero (exact
/// to second order with at most one zero per reduced group).
Tensor reduce_prod(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
/// log(sum(exp(x))), computed stably (TF: tf.reduce_logsumexp). Floating only.
Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);

}  // namespace tapegrad
