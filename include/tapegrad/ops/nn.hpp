// Neural-network activations and losses.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// TF: tf.nn.relu (gradient 0 at 0), tf.sigmoid, tf.nn.softplus.
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softplus(const Tensor& x);
/// TF: tf.nn.softmax / tf.nn.log_softmax along `axis`; stable for large logits.
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
/// Per-row loss -sum(labels * log_softmax(logits)) over the last axis; gradients flow to
/// both labels and logits (TF2 tf.nn.softmax_cross_entropy_with_logits).
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
/// Elementwise max(x,0) - x*z + log(1+exp(-|x|)) (TF: tf.nn.sigmoid_cross_entropy_with_logits).
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

}  // namespace tapegrad
