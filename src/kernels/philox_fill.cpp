// Random123 stays behind this file: its headers are needed to build tapegrad, never to use it.
#include "kernels/philox_fill.hpp"

#include <cmath>
#include <limits>

#include <Random123/boxmuller.hpp>
#include <Random123/philox.h>
#include <Random123/uniform.hpp>

namespace tapegrad::detail {

std::array<std::uint32_t, 4> philox_block(std::uint64_t seed, std::uint64_t start,
                                          std::uint64_t block) {
  const r123::Philox4x32 philox;
  const r123::Philox4x32::ctr_type counter = {{static_cast<std::uint32_t>(block),
                                               static_cast<std::uint32_t>(block >> 32),
                                               static_cast<std::uint32_t>(start),
                                               static_cast<std::uint32_t>(start >> 32)}};
  const r123::Philox4x32::key_type key = {
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type words = philox(counter, key);
  return {words[0], words[1], words[2], words[3]};
}

static std::uint64_t join_words(std::uint32_t low, std::uint32_t high) {
  return (std::uint64_t{high} << 32) | low;
}

// Runs `emit(values, count)` once per block with the block's `per_block` values (fewer in the
// last), and copies them to out: the one loop every fill shares.
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

template <class T>
void fill_uniform(T* out, std::size_t n, std::uint64_t seed, std::uint64_t start, double lo,
                  double hi) {
  const double width = hi - lo;
  const T top = static_cast<T>(hi);
  // The largest T below hi: what a value that rounds up to hi becomes, so hi is never drawn.
  const T below_top = std::nextafter(top, -std::numeric_limits<T>::infinity());
  auto scale = [&](auto u) {
    const T v = static_cast<T>(lo + width * static_cast<double>(u));
    return v < top ? v : below_top;
  };
  constexpr std::size_t per_block = uniform_values_per_block<T>;
  fill_blocks<T, per_block>(out, n, seed, start, [&](const auto& w, auto& values) {
    if constexpr (per_block == 4) {
      for (std::size_t k = 0; k < 4; ++k) values[k] = scale(r123::u01fixedpt<float>(w[k]));
    } else {
      values[0] = scale(r123::u01fixedpt<double>(join_words(w[0], w[1])));
      values[1] = scale(r123::u01fixedpt<double>(join_words(w[2], w[3])));
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
      const r123::double2 pair =
          r123::boxmuller(join_words(w[0], w[1]), join_words(w[2], w[3]));
      values = {scale(pair.x), scale(pair.y)};
    }
  });
}

void fill_unit_uniform(double* out, std::size_t n, std::uint64_t seed, std::uint64_t start) {
  fill_blocks<double, unit_values_per_block>(out, n, seed, start, [](const auto& w, auto& values) {
    values = {r123::u01fixedpt<double>(join_words(w[0], w[1])),
              r123::u01fixedpt<double>(join_words(w[2], w[3]))};
  });
}

template void fill_uniform<float>(float*, std::size_t, std::uint64_t, std::uint64_t, double, double);
template void fill_uniform<double>(double*, std::size_t, std::uint64_t, std::uint64_t, double, double);
template void fill_normal<float>(float*, std::size_t, std::uint64_t, std::uint64_t, double, double);
template void fill_normal<double>(double*, std::size_t, std::uint64_t, std::uint64_t, double, double);

}  // namespace tapegrad::detail
