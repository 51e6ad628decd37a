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
#include <cstring>
#include <type_traits>

namespace tapegrad::detail {

// The four 32-bit words of block `block` of the draw (seed, start).
std::array<std::uint32_t, 4> philox_block(std::uint64_t seed, std::uint64_t start,
                                          std::uint64_t block);

// How many values one block gives to each fill below (fill_keep_mask: as fill_uniform).
template <class T>
constexpr std::size_t uniform_values_per_block = sizeof(T) == 4 ? 4 : 2;
template <class T>
constexpr std::size_t normal_values_per_block = sizeof(T) == 4 ? 4 : 2;

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

// Dropout's scaled keep mask: `kept` where the uniform u in (0, 1) that fill_uniform<T> with
// lo 0, hi 1 would give is >= rate, else 0 (TF: random_uniform(x.dtype) >= rate).
template <class T>
void fill_keep_mask(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double rate,
                    T kept);

// `value` where keep, else +0, without a branch (one would mispredict on about half the
// elements at dropout rate 0.5) and without a multiply (0 * NaN is NaN): a bit mask.
template <class T>
inline T keep_or_zero(bool keep, T value) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  Bits bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits &= Bits{0} - static_cast<Bits>(keep);
  std::memcpy(&value, &bits, sizeof bits);
  return value;
}

}  // namespace tapegrad::detail
