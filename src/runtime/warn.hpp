// Warnings TF logs once: printed once per key on stderr.
#pragma once

#include <string>

namespace tapegrad::detail {

void warn_once(const std::string& key, const std::string& message);

}  // namespace tapegrad::detail
