// Random123 stays behind this file: its headers are needed to build tapegrad, never to use it.
#include "kernels/philox_fill.hpp"

#include <cmath>
#include <limits>

#include <Random123/philox.h>
#include <Random123/boxmuller.hpp>
#include <Random123/uniform.hpp>

namespace tapegrad::detail {

std::array<std::uint32_t, 4> philox_block(std::uint64_t seed, std::uint64_t start,
                                          std::uint64_t block) {
  const r123::Philox4x32 philox;
  const r123::Philox4x32::ctr_type counter = {
      {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
       static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(start >> 32)}};
  const r123::Philox4x32::key_type key = {
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type words = philox(counter, key);
  return {words[0], words[1], words[2], words[3]};
}

static std::uint64_t join_words(std::uint32_t low, std::uint32_t high) {
  return (std::uint64_t{high} << 32) | low;
}

// Runs `make_values(words, values)` once per block for its `per_block` values and copies them
// to out (fewer from the last block): the one loop every fill shares.
template <class T, std::size_t per_block, class MakeValues>
static void fill_blocks(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start,
                        MakeValues make_values) {
  std::array<T, per_block> values;
  for (std::uint64_t block = 0; n > 0; ++block) {
    make_values(philox_block(seed, start, block), values);
    const std::size_t count = n < per_block ? n : per_block;
    for (std::size_t k = 0; k < count; ++k) *out++ = values[k];
    n -= count;
  }
}

// The block's uniforms in (0, 1) of T's precision: Random123's u01fixedpt of each word (float)
// or of each pair of words, low word first (double).
template <class T>
static std::array<T, uniform_values_per_block<T>> unit_uniforms(
    const std::array<std::uint32_t, 4>& w) {
  if constexpr (uniform_values_per_block<T> == 4) {
    return {r123::u01fixedpt<float>(w[0]), r123::u01fixedpt<float>(w[1]),
            r123::u01fixedpt<float>(w[2]), r123::u01fixedpt<float>(w[3])};
  } else {
    return {r123::u01fixedpt<double>(join_words(w[0], w[1])),
            r123::u01fixedpt<double>(join_words(w[2], w[3]))};
  }
}

template <class T>
void fill_uniform(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double lo,
                  double hi) {
  const double width = hi - lo;
  const T top = static_cast<T>(hi);
  // The largest T below hi: what a value that rounds up to hi becomes, so hi is never drawn.
  const T below_top = std::nextafter(top, -std::numeric_limits<T>::infinity());
  fill_blocks<T, uniform_values_per_block<T>>(
      out, n, seed, start, [&](const auto& w, auto& values) {
        values = unit_uniforms<T>(w);
        for (T& u : values) {
          const T v = static_cast<T>(lo + width * static_cast<double>(u));
          u = v < top ? v : below_top;
        }
      });
}

template <class T>
void fill_normal(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double mean,
                 double stddev) {
  auto scale = [&](auto z) { return static_cast<T>(mean + stddev * static_cast<double>(z)); };
  constexpr std::size_t per_block = normal_values_per_block<T>;
  fill_blocks<T, per_block>(out, n, seed, start, [&](const auto& w, auto& values) {
    if constexpr (per_block == 4) {
      const r123::float2 first = r123::boxmuller(w[0], w[1]);
      const r123::float2 second = r123::boxmuller(w[2], w[3]);
      values = {scale(first.x), scale(first.y), scale(second.x), scale(second.y)};
    } else {
      const r123::double2 pair = r123::boxmuller(join_words(w[0], w[1]), join_words(w[2], w[3]));
      values = {scale(pair.x), scale(pair.y)};
    }
  });
}

template <class T>
void fill_keep_mask(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double rate,
                    T kept) {
  fill_blocks<T, uniform_values_per_block<T>>(
      out, n, seed, start, [&](const auto& w, auto& values) {
        values = unit_uniforms<T>(w);
        for (T& u : values) u = keep_or_zero(static_cast<double>(u) >= rate, kept);
      });
}

template void fill_uniform<float>(float*, std::size_t, std::uint64_t, std::uint64_t, double,
                                  double);
template void fill_uniform<double>(double*, std::size_t, std::uint64_t, std::uint64_t, double,
                                   double);
template void fill_normal<float>(float*, std::size_t, std::uint64_t, std::uint64_t, double, double);
template void fill_normal<double>(double*, std::size_t, std::uint64_t, std::uint64_t, double,
                                  double);
template void fill_keep_mask<float>(float*, std::size_t, std::uint64_t, std::uint64_t, double,
                                    float);
template void fill_keep_mask<double>(double*, std::size_t, std::uint64_t, std::uint64_t, double,
                                     double);

}  // namespace tapegrad::detail
