// Images between TF's channels-last and PyTorch's channels-first layouts, for the NCHW tests
// of convolution and pooling.
#pragma once

#include <tapegrad/tapegrad.hpp>

namespace tapegrad::testing {

// An image between channels last and channels first: [n, h, w, c] <-> [n, c, h, w], and
// [n, w, c] <-> [n, c, w] (conv1d).
inline Tensor to_channels_first(const Tensor& t) {
  return t.rank() == 3 ? transpose(t, {0, 2, 1}) : transpose(t, {0, 3, 1, 2});
}
inline Tensor to_channels_last(const Tensor& t) {
  return t.rank() == 3 ? transpose(t, {0, 2, 1}) : transpose(t, {0, 2, 3, 1});
}

}  // namespace tapegrad::testing
