// The loops of kernels/direct_conv.hpp for one xsimd architecture, included by the files of
// kernels/simd/ (each compiled with its own -m flags) and by kernels/direct_conv.cpp for the
// baseline. As vector_math_loops.hpp: flattened, in an anonymous namespace, so that no copy
// compiled with wider instructions reaches the linker as a shared symbol.
//
// Register tiles: the forward keeps a block of output positions times one or two SIMD batches
// of output channels in registers while it runs over the filter's taps and input channels
// (each product one broadcast input value times one batch of filter values); the filter
// gradient keeps a block of input channels times one or two batches of output channels of
// one tap while it runs over the output positions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "kernels/direct_conv.hpp"

namespace tapegrad::detail {
namespace {

// Output positions per block: their input pointers are gathered once and the block's inputs
// stay in cache while every batch of output channels runs over them.
constexpr std::size_t kPositionsPerBlock = 256;

// The first input element that output position p (row-major over batch, out_h, out_w) reads,
// for every p in [first, first + count).
template <class T>
void gather_positions(const DirectConvShape& s, const T* x, std::size_t first, std::size_t count,
                      const T** at) {
  const std::size_t per_image = s.out_h * s.out_w;
  std::size_t n = first / per_image;
  std::size_t oh = first % per_image / s.out_w;
  std::size_t ow = first % s.out_w;
  for (std::size_t i = 0; i < count; ++i) {
    at[i] =
        x + n * s.image_stride + oh * s.stride_h * s.row_stride + ow * s.stride_w * s.column_stride;
    if (++ow == s.out_w) {
      ow = 0;
      if (++oh == s.out_h) {
        oh = 0;
        ++n;
      }
    }
  }
}

// Writes `lanes` (at most a batch) of a batch to `to`.
template <class Arch, class T>
inline void store_lanes(const xsimd::batch<T, Arch>& b, T* to, std::size_t lanes) {
  constexpr std::size_t width = xsimd::batch<T, Arch>::size;
  if (lanes >= width) {
    b.store_unaligned(to);
    return;
  }
  alignas(64) T all[width];
  b.store_aligned(all);
  std::copy_n(all, lanes, to);
}

// Positions outputs at `at[0..Positions)`, channels [0, channels) of the batches at
// `filters` (out_c_padded apart per input channel), written `out_c` apart from `out`.
template <class Arch, class T, bool UnitChannelStride, std::size_t Positions, std::size_t Batches>
inline void forward_tile(const DirectConvShape& s, const T* const* at, const T* filters, T* out,
                         std::size_t channels) {
  using Batch = xsimd::batch<T, Arch>;
  constexpr std::size_t width = Batch::size;
  const T* in[Positions];
  for (std::size_t p = 0; p < Positions; ++p) in[p] = at[p];
  Batch sum[Positions][Batches];
#pragma GCC unroll 16
  for (std::size_t p = 0; p < Positions; ++p) {
#pragma GCC unroll 2
    for (std::size_t j = 0; j < Batches; ++j) sum[p][j] = Batch(T(0));
  }
  const std::size_t row_step = s.dilation_h * s.row_stride;
  const std::size_t column_step = s.dilation_w * s.column_stride;
  const std::size_t channel_step = UnitChannelStride ? 1 : s.channel_stride;
  const std::size_t tap_size = s.in_c * s.out_c_padded;
  for (std::size_t kh = 0; kh < s.k_h; ++kh) {
    for (std::size_t kw = 0; kw < s.k_w; ++kw) {
      const std::size_t offset = kh * row_step + kw * column_step;
      const T* f = filters + (kh * s.k_w + kw) * tap_size;
      for (std::size_t c = 0; c < s.in_c; ++c) {
        Batch w[Batches];
#pragma GCC unroll 2
        for (std::size_t j = 0; j < Batches; ++j) {
          w[j] = Batch::load_unaligned(f + c * s.out_c_padded + j * width);
        }
#pragma GCC unroll 16
        for (std::size_t p = 0; p < Positions; ++p) {
          const Batch v(in[p][offset + c * channel_step]);
#pragma GCC unroll 2
          for (std::size_t j = 0; j < Batches; ++j) sum[p][j] = xsimd::fma(v, w[j], sum[p][j]);
        }
      }
    }
  }
  for (std::size_t p = 0; p < Positions; ++p) {
    for (std::size_t j = 0; j < Batches && j * width < channels; ++j) {
      store_lanes<Arch>(sum[p][j], out + p * s.out_c + j * width, channels - j * width);
    }
  }
}

template <class Arch, class T, bool UnitChannelStride>
void forward_blocks(const DirectConvShape& s, const T* x, const T* filters, T* out) {
  constexpr std::size_t width = xsimd::batch<T, Arch>::size;
  const std::size_t positions = s.batch * s.out_h * s.out_w;
  const T* at[kPositionsPerBlock];
  for (std::size_t first = 0; first < positions; first += kPositionsPerBlock) {
    const std::size_t count = std::min(kPositionsPerBlock, positions - first);
    gather_positions(s, x, first, count, at);
    T* block_out = out + first * s.out_c;
    for (std::size_t c0 = 0; c0 < s.out_c; c0 += 2 * width) {
      const std::size_t channels = std::min(2 * width, s.out_c - c0);
      const T* f = filters + c0;
      T* to = block_out + c0;
      std::size_t p = 0;
      if (channels > width) {
        for (; p + 4 <= count; p += 4) {
          forward_tile<Arch, T, UnitChannelStride, 4, 2>(s, at + p, f, to + p * s.out_c, channels);
        }
        for (; p < count; ++p) {
          forward_tile<Arch, T, UnitChannelStride, 1, 2>(s, at + p, f, to + p * s.out_c, channels);
        }
      } else {
        for (; p + 8 <= count; p += 8) {
          forward_tile<Arch, T, UnitChannelStride, 8, 1>(s, at + p, f, to + p * s.out_c, channels);
        }
        for (; p < count; ++p) {
          forward_tile<Arch, T, UnitChannelStride, 1, 1>(s, at + p, f, to + p * s.out_c, channels);
        }
      }
    }
  }
}

template <class Arch, class T>
[[gnu::flatten]] void forward_loop(const DirectConvShape& s, const T* x, const T* filters, T* out) {
  if (s.channel_stride == 1) {
    forward_blocks<Arch, T, true>(s, x, filters, out);
  } else {
    forward_blocks<Arch, T, false>(s, x, filters, out);
  }
}

// Adds to the Channels x Batches filter-gradient values at `df` (input channels out_c_padded
// apart) the products of the input channels at at[q] + offset with g's row q, for q < count.
template <class Arch, class T, std::size_t Channels, std::size_t Batches>
inline void filter_tile(const DirectConvShape& s, const T* const* at, std::size_t count,
                        std::size_t offset, const T* g, T* df) {
  const std::size_t channel_step = s.channel_stride;
  using Batch = xsimd::batch<T, Arch>;
  constexpr std::size_t width = Batch::size;
  Batch sum[Channels][Batches];
#pragma GCC unroll 8
  for (std::size_t c = 0; c < Channels; ++c) {
#pragma GCC unroll 2
    for (std::size_t j = 0; j < Batches; ++j) {
      sum[c][j] = Batch::load_unaligned(df + c * s.out_c_padded + j * width);
    }
  }
  for (std::size_t q = 0; q < count; ++q) {
    Batch gq[Batches];
#pragma GCC unroll 2
    for (std::size_t j = 0; j < Batches; ++j) {
      gq[j] = Batch::load_unaligned(g + q * s.out_c_padded + j * width);
    }
    const T* in = at[q] + offset;
#pragma GCC unroll 8
    for (std::size_t c = 0; c < Channels; ++c) {
      const Batch v(in[c * channel_step]);
#pragma GCC unroll 2
      for (std::size_t j = 0; j < Batches; ++j) sum[c][j] = xsimd::fma(v, gq[j], sum[c][j]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t c = 0; c < Channels; ++c) {
#pragma GCC unroll 2
    for (std::size_t j = 0; j < Batches; ++j) {
      sum[c][j].store_unaligned(df + c * s.out_c_padded + j * width);
    }
  }
}

constexpr std::size_t kChannelsPerTile = 8;

template <class Arch, class T, std::size_t Batches, std::size_t... channels>
inline void filter_tile_of(std::size_t count_of_channels, std::index_sequence<channels...>,
                           const DirectConvShape& s, const T* const* at, std::size_t count,
                           std::size_t offset, const T* g, T* df) {
  // One instantiation per channel count 1..kChannelsPerTile; the call picks the one asked.
  ((count_of_channels == channels + 1
        ? filter_tile<Arch, T, channels + 1, Batches>(s, at, count, offset, g, df)
        : void()),
   ...);
}

template <class Arch, class T>
[[gnu::flatten]] void filter_gradient_loop(const DirectConvShape& s, const T* x, const T* g,
                                           T* df) {
  constexpr std::size_t width = xsimd::batch<T, Arch>::size;
  std::fill_n(df, s.k_h * s.k_w * s.in_c * s.out_c_padded, T(0));
  const std::size_t positions = s.batch * s.out_h * s.out_w;
  const std::size_t row_step = s.dilation_h * s.row_stride;
  const std::size_t column_step = s.dilation_w * s.column_stride;
  const T* at[kPositionsPerBlock];
  for (std::size_t first = 0; first < positions; first += kPositionsPerBlock) {
    const std::size_t count = std::min(kPositionsPerBlock, positions - first);
    gather_positions(s, x, first, count, at);
    const T* block_g = g + first * s.out_c_padded;
    for (std::size_t kh = 0; kh < s.k_h; ++kh) {
      for (std::size_t kw = 0; kw < s.k_w; ++kw) {
        const std::size_t tap_offset = kh * row_step + kw * column_step;
        T* df_tap = df + (kh * s.k_w + kw) * s.in_c * s.out_c_padded;
        for (std::size_t c0 = 0; c0 < s.in_c; c0 += kChannelsPerTile) {
          const std::size_t channels = std::min(kChannelsPerTile, s.in_c - c0);
          for (std::size_t j0 = 0; j0 < s.out_c_padded; j0 += 2 * width) {
            T* to = df_tap + c0 * s.out_c_padded + j0;
            const auto each = std::make_index_sequence<kChannelsPerTile>{};
            if (s.out_c_padded - j0 > width) {
              filter_tile_of<Arch, T, 2>(channels, each, s, at, count,
                                         tap_offset + c0 * s.channel_stride, block_g + j0, to);
            } else {
              filter_tile_of<Arch, T, 1>(channels, each, s, at, count,
                                         tap_offset + c0 * s.channel_stride, block_g + j0, to);
            }
          }
        }
      }
    }
  }
}

template <class Arch>
constexpr DirectConvKernels direct_conv_kernels_for() {
  return {&forward_loop<Arch, float>,         &forward_loop<Arch, double>,
          &filter_gradient_loop<Arch, float>, &filter_gradient_loop<Arch, double>,
          xsimd::batch<float, Arch>::size,    xsimd::batch<double, Arch>::size};
}

}  // namespace
}  // namespace tapegrad::detail
