// The strided-index cursor of the kernels (src/kernels/strided_cursor.hpp), and the kernels
// that walk with it (transpose, the reductions' general case, slice, concat, tile) against
// plain index arithmetic on rank-4 tensors.
#include <algorithm>
#include <numeric>

#include "../src/kernels/strided_cursor.hpp"
#include "index_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using tapegrad::testing::unravel;
using tapegrad::testing::values;

namespace {

std::size_t dot(const std::vector<std::size_t>& index, const std::vector<std::size_t>& strides) {
  std::size_t sum = 0;
  for (std::size_t d = 0; d < index.size(); ++d) sum += index[d] * strides[d];
  return sum;
}

std::size_t count(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

// 0, 1, 2, ... in `shape` (exact in float64 and int64).
Tensor iota(const Shape& shape, DType dtype = DType::Float64) {
  std::vector<double> v(count(shape));
  std::iota(v.begin(), v.end(), 0.0);
  return from_values(v, shape, dtype);
}

}  // namespace

TEST_CASE("the cursor's offsets are index . strides for every operand, in row-major order",
          "[kernels]") {
  const Shape shape{2, 3, 1, 4};
  const std::vector<std::size_t> a{100, 7, 50, 1};
  const std::vector<std::size_t> b{0, 4, 0, 1};  // broadcast along axes 0 and 2
  const std::vector<std::size_t> c{12, 0, 3, 0};
  detail::StridedCursor cursor(shape, shape.size(), a, b, c);
  for (std::size_t flat = 0; flat < count(shape); ++flat, cursor.next()) {
    const auto index = unravel(flat, shape);
    INFO("flat position " << flat);
    CHECK(cursor.offset(0) == dot(index, a));
    CHECK(cursor.offset(1) == dot(index, b));
    CHECK(cursor.offset(2) == dot(index, c));
  }
  // Past the last index every offset is back at the start.
  CHECK(cursor.offset(0) == 0);
  CHECK(cursor.offset(1) == 0);
  CHECK(cursor.offset(2) == 0);
}

TEST_CASE("for_each visits the same offsets as next(), in the same order", "[kernels]") {
  const Shape shape{3, 1, 2, 4};
  const std::vector<std::size_t> a{1, 0, 12, 3};
  const std::vector<std::size_t> b{8, 8, 4, 1};
  std::vector<std::pair<std::size_t, std::size_t>> stepped, visited;
  detail::StridedCursor cursor(shape, shape.size(), a, b);
  for (std::size_t flat = 0; flat < count(shape); ++flat, cursor.next()) {
    stepped.emplace_back(cursor.offset(0), cursor.offset(1));
  }
  cursor.for_each([&](std::size_t x, std::size_t y) { visited.emplace_back(x, y); });
  CHECK(visited == stepped);
  // It ends back at the start: a second walk visits the same.
  visited.clear();
  cursor.for_each([&](std::size_t x, std::size_t y) { visited.emplace_back(x, y); });
  CHECK(visited == stepped);

  std::size_t calls = 0;
  detail::StridedCursor(Shape{2, 0, 3}, 3, a).for_each([&](std::size_t) { ++calls; });
  CHECK(calls == 0);  // an empty extent: nothing to visit
  detail::StridedCursor(Shape{}, 0, a).for_each([&](std::size_t offset) {
    ++calls;
    CHECK(offset == 0);
  });
  CHECK(calls == 1);  // rank 0: one position
}

TEST_CASE("the cursor walks only the leading axes it is given", "[kernels]") {
  const Shape shape{3, 2, 5};
  const std::vector<std::size_t> strides{10, 5, 1};
  detail::StridedCursor rows(shape, 2, strides);  // the rows of a [3, 2, 5] tensor
  std::vector<std::size_t> seen;
  for (std::size_t r = 0; r < 6; ++r, rows.next()) seen.push_back(rows.offset(0));
  CHECK(seen == std::vector<std::size_t>{0, 5, 10, 15, 20, 25});

  detail::StridedCursor scalar(Shape{}, 0, std::vector<std::size_t>{});
  scalar.next();  // rank 0: one position, nothing to carry
  CHECK(scalar.offset(0) == 0);
}

TEST_CASE("transpose matches index arithmetic for every permutation of a rank-4 tensor",
          "[kernels][array]") {
  const Shape shape{2, 3, 4, 5};
  const auto strides = std::vector<std::size_t>{60, 20, 5, 1};
  for (DType dtype : {DType::Float64, DType::Int64}) {
    const Tensor x = iota(shape, dtype);
    std::vector<int> perm{0, 1, 2, 3};
    do {
      INFO("perm " << perm[0] << perm[1] << perm[2] << perm[3] << ", dtype " << dtype_name(dtype));
      const Tensor y = transpose(x, perm);
      Shape out_shape(4);
      std::vector<std::size_t> in_strides(4);
      for (std::size_t d = 0; d < 4; ++d) {
        out_shape[d] = shape[static_cast<std::size_t>(perm[d])];
        in_strides[d] = strides[static_cast<std::size_t>(perm[d])];
      }
      REQUIRE(y.shape() == out_shape);
      const auto got = values(y);
      bool all_equal = true;
      for (std::size_t k = 0; k < got.size(); ++k) {
        all_equal =
            all_equal && got[k] == static_cast<double>(dot(unravel(k, out_shape), in_strides));
      }
      CHECK(all_equal);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST_CASE(
    "reduce_sum and reduce_max match index arithmetic for every set of axes of a rank-4 tensor",
    "[kernels][reduce]") {
  const Shape shape{2, 3, 4, 5};
  const Tensor x = iota(shape);
  const auto in = values(x);
  for (unsigned mask = 1; mask < 16; ++mask) {
    std::vector<int> axes;
    Shape kept = shape;
    for (int d = 0; d < 4; ++d) {
      if (mask & (1U << d)) {
        axes.push_back(d);
        kept[static_cast<std::size_t>(d)] = 1;
      }
    }
    INFO("axes mask " << mask);
    std::vector<double> sums(count(kept), 0.0);
    std::vector<double> maxima(count(kept), -1.0);
    const std::vector<std::size_t> kept_strides{kept[1] * kept[2] * kept[3], kept[2] * kept[3],
                                                kept[3], 1};
    for (std::size_t k = 0; k < in.size(); ++k) {
      auto index = unravel(k, shape);
      for (int a : axes) index[static_cast<std::size_t>(a)] = 0;
      const std::size_t cell = dot(index, kept_strides);
      sums[cell] += in[k];
      maxima[cell] = std::max(maxima[cell], in[k]);
    }
    const Tensor sum = reduce_sum(x, axes, /*keepdims=*/true);
    const Tensor max = reduce_max(x, axes, /*keepdims=*/true);
    REQUIRE(sum.shape() == kept);
    CHECK(values(sum) == sums);
    CHECK(values(max) == maxima);
  }
}

TEST_CASE("slice, concat and tile of a rank-4 tensor match index arithmetic", "[kernels][array]") {
  const Shape shape{2, 3, 4, 5};
  const auto strides = std::vector<std::size_t>{60, 20, 5, 1};
  const Tensor x = iota(shape);

  const Tensor part = slice(x, {1, 1, 0, 2}, {1, 2, 3, -1});
  const Shape part_shape{1, 2, 3, 3};
  REQUIRE(part.shape() == part_shape);
  std::vector<double> expected;
  for (std::size_t k = 0; k < count(part_shape); ++k) {
    auto index = unravel(k, part_shape);
    index[0] += 1;
    index[1] += 1;
    index[3] += 2;
    expected.push_back(static_cast<double>(dot(index, strides)));
  }
  CHECK(values(part) == expected);

  const Tensor joined = concat({x, x}, 2);
  const Shape joined_shape{2, 3, 8, 5};
  REQUIRE(joined.shape() == joined_shape);
  expected.clear();
  for (std::size_t k = 0; k < count(joined_shape); ++k) {
    auto index = unravel(k, joined_shape);
    index[2] %= 4;
    expected.push_back(static_cast<double>(dot(index, strides)));
  }
  CHECK(values(joined) == expected);

  const std::vector<std::size_t> multiples{2, 1, 3, 2};
  const Tensor tiled = tile(x, multiples);
  const Shape tiled_shape{4, 3, 12, 10};
  REQUIRE(tiled.shape() == tiled_shape);
  expected.clear();
  for (std::size_t k = 0; k < count(tiled_shape); ++k) {
    auto index = unravel(k, tiled_shape);
    for (std::size_t d = 0; d < 4; ++d) index[d] %= shape[d];
    expected.push_back(static_cast<double>(dot(index, strides)));
  }
  CHECK(values(tiled) == expected);
}
