// The reduction loop shared by the reduce ops (and the shapes of their results).
#pragma once

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "kernels/shape_util.hpp"
#include "kernels/strided_cursor.hpp"

namespace tapegrad::detail {

// The shape of a reduction with keepdims: reduced axes become 1.
inline Shape keepdims_shape(const Shape& shape, const std::vector<std::size_t>& axes) {
  Shape out = shape;
  for (auto a : axes) out[a] = 1;
  return out;
}

// The shape of a reduction without keepdims: reduced axes are dropped.
inline Shape reduced_shape(const Shape& shape, const std::vector<std::size_t>& axes) {
  Shape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(shape[d]);
  }
  return out;
}

// The number of elements each output cell of the reduction summarises.
inline std::size_t reduced_count(const Shape& shape, const std::vector<std::size_t>& axes) {
  std::size_t n = 1;
  for (auto a : axes) n *= shape[a];
  return n;
}

// Whether Combine has its own loop for a contiguous run: `R run(const T*, std::size_t, R init)`
// (a branch-free, vectorisable form of the same fold).
template <class Combine, class R, class T, class = void>
struct HasRunFold : std::false_type {};
template <class Combine, class R, class T>
struct HasRunFold<Combine, R, T,
                  std::void_t<decltype(std::declval<const Combine&>().run(
                      std::declval<const T*>(), std::size_t{}, std::declval<R>()))>>
    : std::true_type {};

// The fold of b[0..count) from init. `reorderable`: combine is exactly associative and
// commutative (min, max, sums of small whole numbers), so four interleaved accumulators give
// the same value while the loop runs without one long dependency chain. A Combine with its
// own `run` folds the run itself.
template <class R, class T, class Combine>
R fold_run(const T* b, std::size_t count, R init, Combine combine, bool reorderable) {
  if constexpr (HasRunFold<Combine, R, T>::value) {
    return combine.run(b, count, init);
  } else if constexpr (std::is_same_v<R, T>) {
    if (reorderable && count >= 8) {
      R a0 = init, a1 = init, a2 = init, a3 = init;
      std::size_t j = 0;
      for (; j + 4 <= count; j += 4) {
        a0 = combine(a0, b[j]);
        a1 = combine(a1, b[j + 1]);
        a2 = combine(a2, b[j + 2]);
        a3 = combine(a3, b[j + 3]);
      }
      for (; j < count; ++j) a0 = combine(a0, b[j]);
      return combine(combine(a0, a1), combine(a2, a3));
    }
  }
  R acc = init;
  for (std::size_t j = 0; j < count; ++j) acc = combine(acc, b[j]);
  return acc;
}

// Folds every element of `a` into its output cell: out = combine(out, a[i]) starting from
// `init`. Returns the result in the keepdims or reduced shape. `reorderable` as fold_run.
template <class R, class A, class Combine>
xt::xarray<R> reduce_axes(const A& a, const std::vector<std::size_t>& axes, bool keepdims, R init,
                          Combine combine, bool reorderable = false) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(a.data())>>;
  const Shape in_shape(a.shape().begin(), a.shape().end());
  const Shape kept = keepdims_shape(in_shape, axes);
  xt::xarray<R> out = xt::empty<R>(kept);
  std::fill(out.begin(), out.end(), init);
  const T* in = a.data();
  R* o = out.data();
  const std::size_t n = a.size();
  // Axes that are a leading or trailing run of dimensions (a bias gradient summing over the
  // batch, a row sum) reduce with contiguous inner loops the compiler vectorises.
  bool leading = !axes.empty();
  bool trailing = !axes.empty();
  for (std::size_t i = 0; i < axes.size(); ++i) {
    leading = leading && axes[i] == i;
    trailing = trailing && axes[i] == in_shape.size() - axes.size() + i;
  }
  if (out.size() == 1) {
    o[0] = fold_run(in, n, init, combine, reorderable);
  } else if (n != 0 && leading) {
    const std::size_t inner = out.size();
    for (std::size_t row = 0; row < n / inner; ++row) {
      const T* r = in + row * inner;
      for (std::size_t j = 0; j < inner; ++j) o[j] = combine(o[j], r[j]);
    }
  } else if (n != 0 && trailing) {
    const std::size_t block = n / out.size();
    for (std::size_t k = 0; k < out.size(); ++k) {
      o[k] = fold_run(in + k * block, block, init, combine, reorderable);
    }
  } else if (n != 0) {
    // Any other axes: walk the input row by row; the output is the kept shape broadcast to
    // the input's (stride 0 along the reduced axes). Each cell folds its elements in input order.
    const std::size_t rank = in_shape.size();
    const auto out_strides = broadcast_strides(kept, in_shape);
    const std::size_t run = in_shape[rank - 1];
    const bool run_reduced = out_strides[rank - 1] == 0;
    StridedCursor(in_shape, rank - 1, row_major_strides(in_shape), out_strides)
        .for_each([&](std::size_t row, std::size_t cell_offset) {
          const T* r = in + row;
          R* cell = o + cell_offset;
          if (run_reduced) {
            R acc = cell[0];
            for (std::size_t j = 0; j < run; ++j) acc = combine(acc, r[j]);
            cell[0] = acc;
          } else {
            for (std::size_t j = 0; j < run; ++j) cell[j] = combine(cell[j], r[j]);
          }
        });
  }
  if (!keepdims) out.reshape(reduced_shape(in_shape, axes));
  return out;
}

// Calls visit(i, cell) for every element a[i] (row-major offset i) equal to its reduction
// cell's value cells[cell], where `cells` is the reduction's result in the keepdims shape
// `kept` (the ties of a max or min). One read of a; nothing the size of a is written.
template <class T, class Visit>
void for_each_equal_to_cell(const xt::xarray<T>& a, const T* cells, const Shape& kept,
                            Visit visit) {
  const std::size_t n = a.size();
  const T* in = a.data();
  // A run compared with one value: blocks without a match (nearly all) are skipped after a
  // branch-free test the compiler vectorises; a block with one is scanned element by element.
  auto visit_run = [&](std::size_t start, std::size_t length, T target, std::size_t cell) {
    constexpr std::size_t kBlock = 32;
    std::size_t j = 0;
    for (; j + kBlock <= length; j += kBlock) {
      const T* block = in + start + j;
      unsigned hits = 0;
#pragma GCC unroll 1
      for (std::size_t k = 0; k < kBlock; ++k) hits |= block[k] == target ? 1u : 0u;
      if (hits == 0) continue;
      for (std::size_t k = 0; k < kBlock; ++k) {
        if (block[k] == target) visit(start + j + k, cell);
      }
    }
    for (; j < length; ++j) {
      if (in[start + j] == target) visit(start + j, cell);
    }
  };
  if (num_elements(kept) == 1) {
    visit_run(0, n, cells[0], 0);
    return;
  }
  if (n == 0) return;
  const Shape in_shape(a.shape().begin(), a.shape().end());
  const std::size_t rank = in_shape.size();
  const std::size_t run = in_shape[rank - 1];
  const auto cell_strides = broadcast_strides(kept, in_shape);
  const bool run_reduced = cell_strides[rank - 1] == 0;
  StridedCursor(in_shape, rank - 1, row_major_strides(in_shape), cell_strides)
      .for_each([&](std::size_t row, std::size_t cell) {
        if (run_reduced) {
          visit_run(row, run, cells[cell], cell);
          return;
        }
        for (std::size_t j = 0; j < run; ++j) {
          if (in[row + j] == cells[cell + j]) visit(row + j, cell + j);
        }
      });
}

}  // namespace tapegrad::detail
