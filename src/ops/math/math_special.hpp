// The internal op of math_special.cpp that other ops' gradients use: polygamma.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// psi^(n)(x) elementwise (TF: tf.math.polygamma with an integer order), n >= 0: digamma's
// gradient is polygamma(1, x), polygamma(n, x)'s is polygamma(n + 1, x), so every order
// nests. Recorded as "Polygamma" with the attribute "n". Floating x; InvalidArgument for
// n < 0 or an integer x.
Tensor polygamma(int n, const Tensor& x);

}  // namespace tapegrad::detail
