// Filling arrays from Random123's Philox4x32-10: the value stream of one draw of a
// counter-based generator (tapegrad::Generator). No autodiff knowledge.
//
// A draw is identified by (seed, start): the key is the seed's two 32-bit halves, the i-th
// 128-bit block of the draw has the counter words (i low, i high, start low, start high).
// Each fill writes out[0..n) from blocks 0, 1, ... in order, so the result is a pure function
// of (seed, start, n) and its first k values do not depend on n.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tapegrad::detail {

// The four 32-bit words of block `block` of the draw (seed, start).
std::array<std::uint32_t, 4> philox_block(std::uint64_t seed, std::uint64_t start,
                                          std::uint64_t block);

// How many values one block gives to each fill below.
template <class T>
constexpr std::size_t uniform_values_per_block = sizeof(T) == 4 ? 4 : 2;
template <class T>
constexpr std::size_t normal_values_per_block = sizeof(T) == 4 ? 4 : 2;
constexpr std::size_t unit_values_per_block = 2;

// Uniform in [lo, hi) for T = float or double: lo + (hi - lo) * u with u Random123's
// u01fixedpt of one word (float) or two words (double), strictly inside (0, 1); a value that
// rounds up to hi in T becomes the largest T below hi. Requires T(lo) < T(hi), finite hi - lo.
template <class T>
void fill_uniform(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double lo,
                  double hi);

// mean + stddev * z, z standard normal by Random123's Box-Muller on pairs of words (float) or
// pairs of two-word integers (double); both values of each pair are used.
template <class T>
void fill_normal(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double mean,
                 double stddev);

// Uniform doubles strictly inside (0, 1) with 53 random bits each (two words per value).
void fill_unit_uniform(double* out, std::size_t n, std::uint64_t seed, std::uint64_t start);

}  // namespace tapegrad::detail
