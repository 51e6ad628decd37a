// The exceptions tapegrad throws. All derive from tapegrad::Error (a std::runtime_error).
#pragma once

#include <stdexcept>
#include <string>

namespace tapegrad {

/// Base of every tapegrad exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad shapes, dtypes, axes or argument values (TF: ValueError / InvalidArgumentError).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// No gradient is registered for a recorded op type (TF: LookupError).
class LookupError : public Error {
 public:
  using Error::Error;
};

/// Misuse of a GradientTape: a used non-persistent tape, re-entering a recording tape,
/// stop_recording on a tape that is not recording (TF: RuntimeError and the tape ValueErrors).
class TapeError : public Error {
 public:
  using Error::Error;
};

/// A tensor too large to allocate: the memory request failed (TF: ResourceExhaustedError).
/// The message names the op, the shape and the dtype. Shapes whose element count does not
/// fit in int64, or whose bytes do not fit in ptrdiff_t, are InvalidArgument instead: they
/// can never be allocated.
class ResourceExhausted : public Error {
 public:
  using Error::Error;
};

/// DetectAnomaly found a NaN or an infinity: the message names the op, forward or backward,
/// the input and output shapes and dtypes, which output (or gradient) holds it, and the op's
/// position on the innermost recording tape with the ops just before it.
class AnomalyError : public Error {
 public:
  using Error::Error;
};

/// verify_gradients found a derivative that disagrees with central differences. The message
/// names the argument, the element, the analytic and the numeric value.
class GradientCheckError : public Error {
 public:
  using Error::Error;
};

}  // namespace tapegrad
