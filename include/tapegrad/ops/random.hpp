// Random numbers: a counter-based generator, uniform and normal tensors, and dropout.
//
// The generator is Random123's Philox4x32-10 (the counter-based generator of TF's stateless
// random ops, JAX and cuRAND), keyed by the seed. A draw of n values is a pure function of
// (seed, the generator's counter before the draw, n, the distribution and dtype): the same
// numbers whatever the thread count, run or machine. See Generator for how the counter
// advances.
#pragma once

#include <atomic>
#include <cstdint>

#include "tapegrad/dtype.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad {

namespace detail {
struct GeneratorAccess;
}

/// A counter-based random generator (TF: tf.random.Generator with the Philox algorithm).
///
/// The counter counts the values drawn so far: a draw of n values takes the counter c, then
/// advances it to c + n. Its values come from Philox4x32-10 with key = seed (the two 32-bit
/// halves) and 128-bit counter blocks (i, c), i = 0, 1, ... the block index within the draw,
/// so draws that start at different counters never share a Philox block, and the first k
/// values of a draw do not depend on how many more it takes. How many values one block gives:
/// uniform float64 2, uniform float32 4, normal float64 2, normal float32 4 (Box-Muller on
/// pairs of words), dropout as uniform in x's dtype.
///
/// Thread safety: one Generator may be used from several threads at once; each draw reserves
/// its range of the counter atomically, so concurrent draws never overlap (which thread gets
/// which range then depends on the scheduling: for reproducible results draw from one thread,
/// or give each thread its own Generator, e.g. seeded by thread index).
///
/// Not copyable (a copy would silently repeat the stream); to resume or fork a stream on
/// purpose, construct `Generator(g.seed(), g.counter())`.
class Generator {
 public:
  explicit Generator(std::uint64_t seed);
  /// Resumes the stream of `seed` at `counter` values drawn (e.g. from a checkpoint).
  Generator(std::uint64_t seed, std::uint64_t counter);
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  std::uint64_t seed() const { return seed_; }
  /// The number of values drawn so far (where the next draw starts).
  std::uint64_t counter() const { return counter_.load(std::memory_order_relaxed); }
  /// Continues as Generator(seed, counter) would (TF: Generator.reset; what
  /// Checkpoint::restore does). Not while another thread draws from this generator.
  void reset(std::uint64_t seed, std::uint64_t counter);

 private:
  friend struct detail::GeneratorAccess;
  std::uint64_t seed_;
  std::atomic<std::uint64_t> counter_;
};

/// A tensor of `shape` with values uniform in [lo, hi) (TF: tf.random.uniform for floats).
/// dtype Float32 or Float64. The result is a constant: not recorded on any tape, no gradient.
/// InvalidArgument naming "random_uniform", the shape, the dtype and the value when hi <= lo,
/// a bound is NaN or infinite or not finite in the dtype, hi - lo overflows, the two bounds are
/// equal in the dtype, or the dtype is not floating; ResourceExhausted when it cannot be
/// allocated.
Tensor random_uniform(const Shape& shape, Generator& generator, double lo = 0.0, double hi = 1.0,
                      DType dtype = DType::Float64);

/// A tensor of `shape` with values normal(mean, stddev) (TF: tf.random.normal), by
/// Box-Muller on the Philox words. dtype Float32 or Float64; stddev 0 gives `mean` everywhere.
/// A constant: not recorded, no gradient. InvalidArgument naming "random_normal", the shape,
/// the dtype and the value when stddev < 0, mean or stddev is NaN or infinite (or beyond
/// float32 for a float32 draw), or the dtype is not floating.
Tensor random_normal(const Shape& shape, Generator& generator, double mean = 0.0,
                     double stddev = 1.0, DType dtype = DType::Float64);

/// TF's tf.nn.dropout: each element of x kept with probability 1 - rate and scaled by
/// 1 / (1 - rate), otherwise 0. x float32 or float64, any shape. Recorded as "Dropout" with
/// inputs (x, mask), mask = the scaled keep mask (0 or 1/(1 - rate), x's dtype); the gradient
/// is g * mask for x and none for the mask. rate 0 returns x itself and draws nothing.
/// InvalidArgument naming "dropout" and the value when rate is not in [0, 1) (NaN included),
/// naming x's shape and dtype when x is not floating.
Tensor dropout(const Tensor& x, double rate, Generator& generator);

}  // namespace tapegrad
