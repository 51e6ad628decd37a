// The chain every per-op benchmark uses: y = tanh(y * c + b), repeated, so one third of the
// ops are multiplies by a constant tensor, one third adds, one third tanh.
#pragma once

#include <tapegrad/tapegrad.hpp>

namespace chain_workload {

inline tapegrad::Tensor run(const tapegrad::Tensor& x, const tapegrad::Tensor& c,
                            const tapegrad::Tensor& b, int steps) {
  tapegrad::Tensor y = x;
  for (int i = 0; i < steps; ++i) y = tapegrad::tanh(tapegrad::add(tapegrad::multiply(y, c), b));
  return y;
}

}  // namespace chain_workload
