// Pooling windows swept over NHWC inputs. Each output position visits its window's in-bounds
// taps and handles a whole channel run per tap, so the inner loop is contiguous in x and out.
#include "kernels/pooling.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/extremum.hpp"

namespace tapegrad::detail {

namespace {

// The half-open range of window taps [first, last) along one axis that land inside the input.
struct TapRange {
  std::size_t first, last, start;  // start: the input index of tap 0 (may be "negative")
};

inline TapRange taps(std::size_t o, std::size_t stride, std::size_t pad, std::size_t kernel,
                     std::size_t size) {
  const auto origin = static_cast<std::ptrdiff_t>(o * stride) - static_cast<std::ptrdiff_t>(pad);
  const std::size_t first = origin < 0 ? static_cast<std::size_t>(-origin) : 0;
  const auto end = origin + static_cast<std::ptrdiff_t>(kernel);
  const std::size_t last =
      end > static_cast<std::ptrdiff_t>(size)
          ? static_cast<std::size_t>(static_cast<std::ptrdiff_t>(size) - origin)
          : kernel;
  return {first, std::max(first, last), static_cast<std::size_t>(origin)};
}

// For every output position: begin(out offset, count of in-bounds taps), then
// tap(out offset, in offset) for each in-bounds tap in window order (rows, then columns), then
// end(out offset, count). Offsets are those of channel runs.
template <class Begin, class Tap, class End>
void sweep(const ConvGeometry& g, Begin begin, Tap tap, End end) {
  const std::size_t c = g.in_c;
  std::size_t out_offset = 0;
  for (std::size_t n = 0; n < g.batch; ++n) {
    const std::size_t image = n * g.in_h * g.in_w;
    for (std::size_t oh = 0; oh < g.out_h; ++oh) {
      const TapRange rows = taps(oh, g.stride_h, g.pad_top, g.k_h, g.in_h);
      for (std::size_t ow = 0; ow < g.out_w; ++ow, out_offset += c) {
        const TapRange cols = taps(ow, g.stride_w, g.pad_left, g.k_w, g.in_w);
        const std::size_t count = (rows.last - rows.first) * (cols.last - cols.first);
        begin(out_offset, count);
        for (std::size_t kh = rows.first; kh < rows.last; ++kh) {
          const std::size_t ih = rows.start + kh;  // wraps back into range: kh >= first
          for (std::size_t kw = cols.first; kw < cols.last; ++kw) {
            const std::size_t iw = cols.start + kw;
            tap(out_offset, (image + ih * g.in_w + iw) * c);
          }
        }
        end(out_offset, count);
      }
    }
  }
}

}  // namespace

template <class T>
void max_pool_forward(const ConvGeometry& g, const T* x, T* out, std::int64_t* argmax) {
  const std::size_t c = g.in_c;
  // The argmax is followed as the number of the winning tap in the window, an integer as wide
  // as T, so that the channel loop selects values and taps with one mask and vectorizes; each
  // window's taps' input offsets turn it into x's flat index at the end.
  using Tap = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  std::vector<Tap> winner(argmax != nullptr ? c : 0);
  std::vector<std::size_t> offsets;
  offsets.reserve(g.k_h * g.k_w);
  sweep(
      g, [&](std::size_t, std::size_t) { offsets.clear(); },
      [&](std::size_t o, std::size_t i) {
        const auto tap = static_cast<Tap>(offsets.size());
        offsets.push_back(i);
        if (tap == 0) {
          std::copy_n(x + i, c, out + o);
          std::fill(winner.begin(), winner.end(), Tap(0));
          return;
        }
        T* __restrict best = out + o;
        const T* __restrict v = x + i;
        if (argmax == nullptr) {
          for (std::size_t k = 0; k < c; ++k) {
            best[k] = replaces_extremum<true>(v[k], best[k]) ? v[k] : best[k];
          }
          return;
        }
        Tap* __restrict won = winner.data();
        for (std::size_t k = 0; k < c; ++k) {
          const T value = v[k], current = best[k];
          const bool take = replaces_extremum<true>(value, current);
          best[k] = take ? value : current;
          won[k] = take ? tap : won[k];
        }
      },
      [&](std::size_t o, std::size_t) {
        if (argmax == nullptr || offsets.empty()) return;
        for (std::size_t k = 0; k < c; ++k) {
          argmax[o + k] =
              static_cast<std::int64_t>(offsets[static_cast<std::size_t>(winner[k])] + k);
        }
      });
}

template <class T>
void avg_pool_forward(const ConvGeometry& g, const T* x, T* out) {
  const std::size_t c = g.in_c;
  sweep(
      g, [&](std::size_t o, std::size_t) { std::fill_n(out + o, c, T(0)); },
      [&](std::size_t o, std::size_t i) {
        for (std::size_t k = 0; k < c; ++k) out[o + k] += x[i + k];
      },
      [&](std::size_t o, std::size_t count) {
        const T scale = T(1) / static_cast<T>(count);
        for (std::size_t k = 0; k < c; ++k) out[o + k] *= scale;
      });
}

template <class T>
void avg_pool_backward(const ConvGeometry& g, const T* grad, T* dx) {
  std::fill_n(dx, g.input_size(), T(0));
  const std::size_t c = g.in_c;
  T scale = T(0);
  sweep(
      g, [&](std::size_t, std::size_t count) { scale = T(1) / static_cast<T>(count); },
      [&](std::size_t o, std::size_t i) {
        for (std::size_t k = 0; k < c; ++k) dx[i + k] += grad[o + k] * scale;
      },
      [](std::size_t, std::size_t) {});
}

#define TAPEGRAD_POOLING_INSTANTIATE(T)                                                \
  template void max_pool_forward<T>(const ConvGeometry&, const T*, T*, std::int64_t*); \
  template void avg_pool_forward<T>(const ConvGeometry&, const T*, T*);                \
  template void avg_pool_backward<T>(const ConvGeometry&, const T*, T*);
TAPEGRAD_POOLING_INSTANTIATE(float)
TAPEGRAD_POOLING_INSTANTIATE(double)
#undef TAPEGRAD_POOLING_INSTANTIATE

}  // namespace tapegrad::detail
