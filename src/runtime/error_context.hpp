// Putting context before an error's message while keeping its type.
#pragma once

#include <string>

#include "tapegrad/errors.hpp"

namespace tapegrad::detail {

// Call only inside a catch block. Rethrows the exception being handled with `context` put
// before its message, as the same tapegrad type (InvalidArgument stays InvalidArgument; a
// class derived from one of them comes back as that tapegrad class). Anything that is not a
// tapegrad::Error (a user's own exception, std::bad_alloc) is rethrown unchanged.
[[noreturn]] inline void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(context + e.what());
  } catch (const LookupError& e) {
    throw LookupError(context + e.what());
  } catch (const TapeError& e) {
    throw TapeError(context + e.what());
  } catch (const Error& e) {
    throw Error(context + e.what());
  }
}

}  // namespace tapegrad::detail
