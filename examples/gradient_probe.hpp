// A quick check of a model's gradients for the digits examples (--check-gradients): along a
// random direction d per variable, the tape's directional derivative <dL/dv, d> against the
// central difference (L(v + h d) - L(v - h d)) / 2h. Cheap (two extra losses per variable)
// and it catches what an accuracy threshold cannot: a model can still learn with a wrong or
// missing gradient in one layer, since the other layers compensate.
#pragma once

#include <cstdint>
#include <functional>

#include <tapegrad/tapegrad.hpp>

namespace digits {

// Checks each trainable variable of `model` and prints one line per variable, named by its
// path ("hidden/kernel"); returns 0 when every directional derivative agrees with its central
// difference within 10 % (relative, plus 1e-4 absolute; ReLU kinks and float32 rounding stay
// within ~5 %, a wrong gradient is off by far more), 4 otherwise. `loss` must be
// deterministic (no dropout) and read the model's variables inside the call.
int check_gradients(const std::function<tapegrad::Tensor()>& loss, const tapegrad::Module& model,
                    std::uint32_t seed);

}  // namespace digits
