// Sums whose rounding error grows with the logarithm of the number of terms, not with the
// number: reduce_sum, reduce_mean, reduce_logsumexp and the softmax family add through these.
// A running sum's error bound grows with n (every addition rounds relative to the running
// total): summing 10^7 copies of 0.1f in eight interleaved running sums (this library before)
// gave 1,010,791.75 instead of 1,000,000 (1 %). Pairwise summation (split the terms in two
// parts, sum each, add the two) bounds it by about log2(n) roundings; below a leaf size the
// terms are added in one fixed vectorisable order. Every order here depends on the
// number of terms only, never on addresses or threads: the same input gives the same bits, and
// a group gives the same bits whether it is summed alone or as one group of a larger reduction
// (vectorized_map's batched reductions equal the loop over the slices exactly).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "kernels/int_arith.hpp"
#include "kernels/reduce_kernel.hpp"
#include "kernels/shape_util.hpp"

namespace tapegrad::detail {

// Terms summed in one fixed order (sum_leaf: interleaved partial sums) before pairwise
// splitting takes over: 256 terms per partial sum at most in float64, 128 in float32. Smaller
// leaves cost speed (512: float32 sums of 10^6 elements 1.3x slower) for little accuracy.
constexpr std::size_t kPairwiseRunLeaf = 2048;
// Rows of a sum over leading axes added one after the other before pairwise splitting takes
// over (a Function's replay folds that many rows at most the same way: runtime/fold_rule.hpp).
constexpr std::size_t kPairwiseRowLeaf = 32;

// How many partial sums a leaf keeps: four 16-byte vectors' worth (8 float64, 16 float32).
template <class T>
constexpr std::size_t kSumLanes = 64 / sizeof(T);

// The partial sums lane[0..count) added together pairwise: lane[i] + lane[i + count/2], and so
// on (count a power of two).
template <class T>
T add_lanes(T* lane, std::size_t count) {
  for (std::size_t half = count / 2; half != 0; half /= 2) {
    for (std::size_t i = 0; i < half; ++i) lane[i] = wrapping_add(lane[i], lane[i + half]);
  }
  return lane[0];
}

// A 16-byte vector of floating-point lanes (GCC's vector extension; SSE2 registers on
// baseline x86-64, NEON on AArch64).
template <class T>
struct SixteenBytes;
template <>
struct SixteenBytes<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct SixteenBytes<double> {
  typedef double type __attribute__((vector_size(16)));
};

// The partial sums of a leaf: with L = kSumLanes<T>, term j of the leaf goes to partial sum
// j % L. Floating-point partial sums are held in four 16-byte vectors: GCC vectorises a loop
// over an array of partial sums too, but keeps them in memory and waits on store forwarding
// (1 float64 per cycle against 4). Integers wrap (exact in any order).
template <class T>
class LaneSums {
 public:
  static constexpr std::size_t kLanes = kSumLanes<T>;

  // Adds `groups` whole groups of L terms, b[0..groups * L).
  void add(const T* b, std::size_t groups) {
    if constexpr (kVectorised) {
      for (std::size_t group = 0; group < groups; ++group, b += kLanes) {
#pragma GCC unroll 4
        for (std::size_t v = 0; v < kVectors; ++v) {
          Vector terms;
          std::memcpy(&terms, b + v * kPerVector, sizeof terms);
          vectors_[v] += terms;
        }
      }
    } else {
      for (std::size_t group = 0; group < groups; ++group, b += kLanes) {
        for (std::size_t k = 0; k < kLanes; ++k) lanes_[k] = wrapping_add(lanes_[k], b[k]);
      }
    }
  }

  // The partial sums added together (add_lanes).
  T total() {
    if constexpr (kVectorised) std::memcpy(lanes_, vectors_, sizeof lanes_);
    return add_lanes(lanes_, kLanes);
  }

 private:
  static constexpr bool kVectorised = std::is_same_v<T, float> || std::is_same_v<T, double>;
  using Vector = typename SixteenBytes<std::conditional_t<kVectorised, T, double>>::type;
  static constexpr std::size_t kPerVector = 16 / sizeof(T);
  static constexpr std::size_t kVectors = kVectorised ? kLanes / kPerVector : 1;
  Vector vectors_[kVectors] = {};
  T lanes_[kLanes] = {};
};

// b[0] + ... + b[count - 1] from zero: when count >= 2L, the whole groups of L terms through
// LaneSums, then the remaining terms in order; else all in order.
template <class T>
T sum_leaf(const T* b, std::size_t count) {
  constexpr std::size_t kLanes = kSumLanes<T>;
  T acc = T(0);
  std::size_t j = 0;
  if (count >= 2 * kLanes) {
    LaneSums<T> lanes;
    lanes.add(b, count / kLanes);
    j = count / kLanes * kLanes;
    acc = lanes.total();
  }
  for (; j < count; ++j) acc = wrapping_add(acc, b[j]);
  return acc;
}

// sum_leaf of term(0), ..., term(count - 1) (the same bits), the terms made a few groups at a
// time in a small buffer.
template <class T, class Term>
T sum_leaf_of(std::size_t count, const Term& term) {
  constexpr std::size_t kLanes = kSumLanes<T>;
  T acc = T(0);
  std::size_t j = 0;
  if (count >= 2 * kLanes) {
    constexpr std::size_t kGroups = 4;
    T buffer[kGroups * kLanes];
    LaneSums<T> lanes;
    const std::size_t whole = count / kLanes * kLanes;
    while (j < whole) {
      const std::size_t n = std::min(kGroups * kLanes, whole - j);
      for (std::size_t k = 0; k < n; ++k) buffer[k] = T(term(j + k));
      lanes.add(buffer, n / kLanes);
      j += n;
    }
    acc = lanes.total();
  }
  for (; j < count; ++j) acc = wrapping_add(acc, T(term(j)));
  return acc;
}

// Terms first .. first + count - 1 summed pairwise: leaf(start, n) gives the sum of n <=
// kPairwiseRunLeaf terms from `start` (sum_leaf's order); a larger range is split in two, the
// first part a whole number of leaves, and the two sums added. The one split of every pairwise
// sum below, so they all give the same bits for the same terms.
template <class T, class Leaf>
T pairwise_tree(std::size_t first, std::size_t count, const Leaf& leaf) {
  if (count <= kPairwiseRunLeaf) return leaf(first, count);
  const std::size_t half = (count / kPairwiseRunLeaf + 1) / 2 * kPairwiseRunLeaf;
  return wrapping_add(pairwise_tree<T>(first, half, leaf),
                      pairwise_tree<T>(first + half, count - half, leaf));
}

// The sum of b[0..count).
template <class T>
T pairwise_sum(const T* b, std::size_t count) {
  return pairwise_tree<T>(0, count,
                          [b](std::size_t start, std::size_t n) { return sum_leaf(b + start, n); });
}

// The sum of term(0), ..., term(count - 1), each term computed as the leaves need it.
template <class T, class Term>
T pairwise_sum_of(std::size_t count, const Term& term) {
  return pairwise_tree<T>(0, count, [&](std::size_t start, std::size_t n) {
    return sum_leaf_of<T>(n, [&](std::size_t k) { return term(start + k); });
  });
}

// The sum of count terms that fill(start, n, out) writes to out n <= kPairwiseRunLeaf at a
// time (`buffer` holds min(count, kPairwiseRunLeaf)): a leaf's terms made together (SIMD)
// without an array of all of them.
template <class T, class Fill>
T pairwise_sum_of_blocks(std::size_t count, const Fill& fill, T* buffer) {
  return pairwise_tree<T>(0, count, [&](std::size_t start, std::size_t n) {
    fill(start, n, buffer);
    return sum_leaf(buffer, n);
  });
}

namespace pairwise_detail {

// out[j] += row[j] for j < width (out and row do not overlap); floating point in 16-byte
// vectors.
template <class T>
void add_into(T* out, const T* row, std::size_t width) {
  std::size_t j = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using Vector = typename SixteenBytes<T>::type;
    constexpr std::size_t kPerVector = 16 / sizeof(T);
    for (; j + kPerVector <= width; j += kPerVector) {
      Vector sums, terms;
      std::memcpy(&sums, out + j, sizeof sums);
      std::memcpy(&terms, row + j, sizeof terms);
      sums += terms;
      std::memcpy(out + j, &sums, sizeof sums);
    }
  }
  for (; j < width; ++j) out[j] = wrapping_add(out[j], row[j]);
}

// out[j] = 0 + in[j] + in[inner + j] + ... over `rows` rows, for j < width: floating point
// four 16-byte vectors of columns at a time, summed over every row in registers.
template <class T>
void sum_rows_in_order(const T* in, std::size_t rows, std::size_t inner, std::size_t width,
                       T* out) {
  std::size_t j = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using Vector = typename SixteenBytes<T>::type;
    constexpr std::size_t kPerVector = 16 / sizeof(T);
    constexpr std::size_t kVectors = 4;
    for (; j + kVectors * kPerVector <= width; j += kVectors * kPerVector) {
      Vector sums[kVectors] = {};
      for (std::size_t r = 0; r < rows; ++r) {
        const T* row = in + r * inner + j;
#pragma GCC unroll 4
        for (std::size_t v = 0; v < kVectors; ++v) {
          Vector terms;
          std::memcpy(&terms, row + v * kPerVector, sizeof terms);
          sums[v] += terms;
        }
      }
      std::memcpy(out + j, sums, sizeof sums);
    }
  }
  for (; j < width; ++j) {
    T sum = T(0);
    for (std::size_t r = 0; r < rows; ++r) sum = wrapping_add(sum, in[r * inner + j]);
    out[j] = sum;
  }
}

// Where add_row_range splits `rows` rows: the first part a whole number of leaves.
inline std::size_t row_split(std::size_t rows) {
  return (rows / kPairwiseRowLeaf + 1) / 2 * kPairwiseRowLeaf;
}

// How many partial sums add_row_range keeps at once below the top for `rows` rows: the depth
// of its splitting (the larger part is never the shallower one).
inline std::size_t row_split_depth(std::size_t rows) {
  std::size_t depth = 0;
  for (std::size_t r = rows; r > kPairwiseRowLeaf; ++depth) {
    const std::size_t half = row_split(r);
    r = std::max(half, r - half);
  }
  return depth;
}

// Columns [0, width) of rows [0, rows) of `in` (rows `inner` apart) summed into out[0..width);
// `scratch` holds width elements per level of splitting below this one.
template <class T>
void add_row_range(const T* in, std::size_t rows, std::size_t inner, std::size_t width, T* out,
                   T* scratch) {
  if (rows <= kPairwiseRowLeaf) {
    sum_rows_in_order(in, rows, inner, width, out);
    return;
  }
  const std::size_t half = row_split(rows);
  add_row_range(in, half, inner, width, out, scratch);
  add_row_range(in + half * inner, rows - half, inner, width, scratch, scratch + width);
  add_into(out, scratch, width);
}

}  // namespace pairwise_detail

// out[j] = the sum over r of in[r * inner + j], for j < inner: rows added in order from zero
// up to kPairwiseRowLeaf rows, pairwise above (column by column, the same order for every
// column). Columns go in tiles so the partial sums stay in cache.
template <class T>
void add_rows_pairwise(const T* in, std::size_t rows, std::size_t inner, T* out) {
  if (rows <= kPairwiseRowLeaf) {
    pairwise_detail::add_row_range(in, rows, inner, inner, out, static_cast<T*>(nullptr));
    return;
  }
  constexpr std::size_t kTile = 512;
  const std::size_t tile = std::min(kTile, inner);
  std::vector<T> scratch(pairwise_detail::row_split_depth(rows) * tile);
  for (std::size_t first = 0; first < inner; first += tile) {
    const std::size_t width = std::min(tile, inner - first);
    pairwise_detail::add_row_range(in + first, rows, inner, width, out + first, scratch.data());
  }
}

// The sum of `a` (row-major, contiguous: a.data(), a.shape(), a.size()) over the sorted,
// non-negative `axes`, in the keepdims or reduced shape. Dimensions of extent 1 are dropped
// and neighbouring ones that are both reduced or both kept merged; then the last group of
// reduced dimensions is summed (pairwise_sum over each run when it is innermost,
// add_rows_pairwise of each outer block when kept dimensions follow it) into an intermediate
// array without it, until none is left. An empty group sums to 0.
template <class T, class A>
xt::xarray<T> sum_axes(const A& a, const std::vector<std::size_t>& axes, bool keepdims) {
  const Shape in_shape(a.shape().begin(), a.shape().end());
  Shape kept = in_shape;
  for (auto axis : axes) kept[axis] = 1;
  xt::xarray<T> out = xt::empty<T>(kept);
  // Groups of dimensions: extent and whether they are reduced.
  xt::svector<std::pair<std::size_t, bool>, 8> groups;
  bool empty = false;
  for (std::size_t d = 0; d < in_shape.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (in_shape[d] == 0) empty = true;
    if (in_shape[d] == 1) continue;
    if (!groups.empty() && groups.back().second == reduced) {
      groups.back().first *= in_shape[d];
    } else {
      groups.push_back({in_shape[d], reduced});
    }
  }
  T* o = out.data();
  if (empty) {
    std::fill(out.begin(), out.end(), T(0));
  } else {
    const T* source = a.data();
    std::vector<T> intermediate;
    std::vector<T> next;
    bool summed = false;
    for (;;) {
      std::size_t g = groups.size();
      for (std::size_t i = groups.size(); i-- > 0;) {
        if (groups[i].second) {
          g = i;
          break;
        }
      }
      if (g == groups.size()) break;
      std::size_t outer = 1;
      std::size_t inner = 1;
      bool more = false;
      for (std::size_t i = 0; i < g; ++i) {
        outer *= groups[i].first;
        more = more || groups[i].second;
      }
      for (std::size_t i = g + 1; i < groups.size(); ++i) inner *= groups[i].first;
      const std::size_t length = groups[g].first;
      T* target = o;
      if (more) {
        next.resize(outer * inner);
        target = next.data();
      }
      for (std::size_t k = 0; k < outer; ++k) {
        const T* block = source + k * length * inner;
        if (inner == 1 && length < 2 * kSumLanes<T>) {
          // sum_leaf's order for so few terms, without a call per run.
          T sum = T(0);
          for (std::size_t i = 0; i < length; ++i) sum = wrapping_add(sum, block[i]);
          target[k] = sum;
        } else if (inner == 1) {
          target[k] = pairwise_sum(block, length);
        } else {
          add_rows_pairwise(block, length, inner, target + k * inner);
        }
      }
      groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(g));
      summed = true;
      if (!more) break;
      intermediate.swap(next);
      source = intermediate.data();
    }
    // Nothing of extent above 1 was reduced: each output element is its one term (+ 0, as a
    // sum from zero: -0 becomes +0).
    if (!summed) {
      for (std::size_t i = 0; i < out.size(); ++i) o[i] = wrapping_add(T(0), source[i]);
    }
  }
  if (!keepdims) out.reshape(reduced_shape(in_shape, axes));
  return out;
}

}  // namespace tapegrad::detail
