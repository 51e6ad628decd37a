// The scan kernel behind cumsum and cumprod: a running combine (+ or *) along one axis of a
// row-major buffer seen as [outer, n, inner], forward or reversed, inclusive or exclusive.
// Each line's values are combined in the order of the line, so the results do not depend on
// how lines are grouped below (a parallel prefix would reorder the rounding). float32 lines run
// in float64 (kernels/running_accumulator.hpp), each result rounded once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/running_accumulator.hpp"

namespace tapegrad::detail {

struct ScanLayout {
  std::size_t outer = 1;  // lines before the axis
  std::size_t n = 0;      // the scanned axis
  std::size_t inner = 1;  // lines after the axis (contiguous, walked side by side)
};

namespace scan_impl {

// Lines along the last axis (inner == 1). One line is a chain of dependent combines (a
// multiply's latency per element). Out-of-order execution overlaps consecutive short lines by
// itself; long lines are walked two side by side, two independent chains. Measured on double
// cumprods (bench/README.md, array_kernels): pairs took 0.65x the time on [128, 16392] in every
// round, but between 1.0x and 1.8x on [16392, 128] depending on the round; 3, 4 or 8 lines
// side by side were slower than 2 everywhere.
constexpr std::size_t kPairedLineLength = 1024;

template <bool Exclusive, bool Reverse, class T, class Combine>
void last_axis(const T* src, T* dst, std::size_t outer, std::size_t n, T identity,
               Combine combine) {
  using A = RunningAccumulator<T>;
  constexpr std::size_t kLines = 2;
  std::size_t o = 0;
  for (; n >= kPairedLineLength && o + kLines <= outer; o += kLines) {
    A run[kLines];
    std::fill(run, run + kLines, A(identity));
    const T* in = src + o * n;
    T* out = dst + o * n;
    for (std::size_t step = 0; step < n; ++step) {
      const std::size_t k = Reverse ? n - 1 - step : step;
      for (std::size_t l = 0; l < kLines; ++l) {
        const A before = run[l];
        run[l] = combine(before, A(in[l * n + k]));
        out[l * n + k] = T(Exclusive ? before : run[l]);
      }
    }
  }
  for (; o < outer; ++o) {
    A run = identity;
    const T* in = src + o * n;
    T* out = dst + o * n;
    for (std::size_t step = 0; step < n; ++step) {
      const std::size_t k = Reverse ? n - 1 - step : step;
      const A before = run;
      run = combine(before, A(in[k]));
      out[k] = T(Exclusive ? before : run);
    }
  }
}

// inner > 1: the inner lines are contiguous, so one running row is combined with each row of
// the axis in turn (a loop the compiler vectorizes).
template <bool Exclusive, bool Reverse, class T, class Combine>
void side_by_side(const T* src, T* dst, const ScanLayout& layout, T identity, Combine combine) {
  using A = RunningAccumulator<T>;
  const std::size_t n = layout.n, inner = layout.inner;
  std::vector<A> running(inner);
  for (std::size_t o = 0; o < layout.outer; ++o) {
    std::fill(running.begin(), running.end(), A(identity));
    A* run = running.data();
    for (std::size_t step = 0; step < n; ++step) {
      const std::size_t k = Reverse ? n - 1 - step : step;
      const T* in = src + (o * n + k) * inner;
      T* out = dst + (o * n + k) * inner;
      for (std::size_t i = 0; i < inner; ++i) {
        const A before = run[i];
        run[i] = combine(before, A(in[i]));
        out[i] = T(Exclusive ? before : run[i]);
      }
    }
  }
}

template <bool Exclusive, bool Reverse, class T, class Combine>
void scan(const T* src, T* dst, const ScanLayout& layout, T identity, Combine combine) {
  if (layout.inner == 1) {
    last_axis<Exclusive, Reverse>(src, dst, layout.outer, layout.n, identity, combine);
  } else {
    side_by_side<Exclusive, Reverse>(src, dst, layout, identity, combine);
  }
}

}  // namespace scan_impl

// Writes to dst (the size of src, not aliasing it) the scan of src: along each line,
// dst[k] = combine of identity and the elements up to k (inclusive) or before k (exclusive),
// counted from the line's end when `reverse`.
template <class T, class Combine>
void scan_lines(const T* src, T* dst, const ScanLayout& layout, bool exclusive, bool reverse,
                T identity, Combine combine) {
  if (exclusive) {
    if (reverse) {
      scan_impl::scan<true, true>(src, dst, layout, identity, combine);
    } else {
      scan_impl::scan<true, false>(src, dst, layout, identity, combine);
    }
  } else if (reverse) {
    scan_impl::scan<false, true>(src, dst, layout, identity, combine);
  } else {
    scan_impl::scan<false, false>(src, dst, layout, identity, combine);
  }
}

}  // namespace tapegrad::detail
