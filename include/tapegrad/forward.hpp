// Forward-mode differentiation: Jacobian-vector products computed alongside the ops
// (TF: tf.autodiff.ForwardAccumulator; JAX: jax.jvp, jax.jacfwd).
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tapegrad/check.hpp"  // Fn: (const std::vector<Tensor>&) -> Tensor
#include "tapegrad/tape.hpp"   // UnconnectedGradients
#include "tapegrad/tensor.hpp"

namespace tapegrad {

namespace detail {
struct AccumulatorState;
}

/// Watches primals with tangents, from construction to destruction: every op run on this
/// thread meanwhile whose inputs carry tangents computes its outputs' tangents at once (the
/// directional derivative along the tangents), readable with jvp().
///
/// Tangents are computed with tapegrad's ops, so accumulators and tapes nest both ways (TF): a
/// tape that is recording records the tangent computations (reverse-over-forward), an
/// accumulator around a tape sees the ops of its gradient() (forward-over-reverse), and an
/// accumulator sees the tangent computations of the accumulators created after it (nested
/// accumulators give higher derivatives). An op's tangents come from its forward rule or, when
/// it has none, from TF's generic fallback: the transpose of its gradient (a user primitive
/// without register_forward_rule says so once on stderr). Tangents are kept until the accumulator
/// dies.
///
/// Errors: InvalidArgument when the lists differ in length, a primal or tangent is undefined,
/// a tangent's shape or dtype differs from its primal's (both named), or a primal is given
/// twice. Integer and bool primals get no tangent (a warning is printed once). Belongs to the
/// thread that created it: jvp() on another thread throws TapeError; destroying it on another
/// thread is safe (it stops observing). Not copyable, not movable.
class ForwardAccumulator {
 public:
  ForwardAccumulator(const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents);
  ForwardAccumulator(const Tensor& primal, const Tensor& tangent);
  ~ForwardAccumulator();
  ForwardAccumulator(const ForwardAccumulator&) = delete;
  ForwardAccumulator& operator=(const ForwardAccumulator&) = delete;
  ForwardAccumulator(ForwardAccumulator&&) = delete;
  ForwardAccumulator& operator=(ForwardAccumulator&&) = delete;

  /// The tangent of t (TF: ForwardAccumulator.jvp): t's shape and dtype. When t carries none
  /// (computed without a watched primal, before the accumulator, or integer): an undefined
  /// Tensor (None) or zeros like t (Zero). InvalidArgument when t is undefined.
  Tensor jvp(const Tensor& t, UnconnectedGradients unconnected = UnconnectedGradients::None) const;

 private:
  std::shared_ptr<detail::AccumulatorState> state_;
};

/// f(primals) and its directional derivative along `tangents` (JAX: jvp; TF: a
/// ForwardAccumulator around one call). Each floating primal is a distinct argument, even when
/// the same tensor is passed twice. Zeros when f does not depend on a watched primal.
/// InvalidArgument as ForwardAccumulator, or when f returns an undefined Tensor.
std::pair<Tensor, Tensor> jvp(const Fn& f, const std::vector<Tensor>& primals,
                              const std::vector<Tensor>& tangents);

/// d f(x)[i...] / d x[j...], shape f(x).shape ++ x.shape, by one forward pass per element of
/// x (JAX: jacfwd): the better choice when f(x) has more elements than x. Zeros where f does
/// not depend on x. InvalidArgument when x is not floating or f returns an undefined Tensor.
Tensor jacobian_forward(const std::function<Tensor(const Tensor&)>& f, const Tensor& x);

}  // namespace tapegrad
