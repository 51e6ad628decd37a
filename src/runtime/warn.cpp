#include "runtime/warn.hpp"

#include <iostream>
#include <mutex>
#include <set>

namespace tapegrad::detail {

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(key).second) std::cerr << "tapegrad warning: " << message << '\n';
}

}  // namespace tapegrad::detail
