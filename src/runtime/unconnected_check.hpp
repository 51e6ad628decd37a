// Validation of an UnconnectedGradients argument at the public gradient entry points.
#pragma once

#include <string>
#include <type_traits>

#include "tapegrad/errors.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad::detail {

// A value cast from an out-of-range integer is neither None nor Zero: InvalidArgument
// naming the entry point and the value (TF raises for an unknown unconnected_gradients).
inline void require_valid_unconnected(const char* where, UnconnectedGradients unconnected) {
  if (unconnected == UnconnectedGradients::None || unconnected == UnconnectedGradients::Zero)
    return;
  using Raw = std::underlying_type_t<UnconnectedGradients>;
  throw InvalidArgument(std::string(where) + ": unconnected_gradients has the value " +
                        std::to_string(static_cast<Raw>(unconnected)) +
                        ", which is neither UnconnectedGradients::None (0) nor "
                        "UnconnectedGradients::Zero (1)");
}

}  // namespace tapegrad::detail
