// The kernels' short-row paths (issue 13, ht's Jacobian): gather of rows of 1-4 elements,
// box copies whose fully spanned trailing axes fold into one run or whose runs are a few
// elements (slice, concat, split, pad), broadcasting with short innermost rows, and the
// same-shape reshapes that are no longer copied (reshape's gradient, tangent and batching
// rule; gather's gradient). Each against plain index arithmetic or the loop Jacobian.
#include <numeric>

#include "index_support.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::random_tensor;
using tapegrad::testing::ravel;
using tapegrad::testing::require_close;
using tapegrad::testing::require_gradient_matches;
using tapegrad::testing::require_second_order_matches;
using tapegrad::testing::unravel;
using tapegrad::testing::values;

namespace {

Tensor iota(const Shape& shape, DType dtype = DType::Float64) {
  std::vector<double> v(num_elements(shape));
  std::iota(v.begin(), v.end(), 0.0);
  return from_values(v, shape, dtype);
}

Tensor int64_values(const std::vector<double>& v) {
  return from_values(v, {v.size()}, DType::Int64);
}

}  // namespace

TEST_CASE("gather of short rows (1 to 5 elements) matches index arithmetic on every axis",
          "[kernels][array]") {
  const std::vector<double> picks{2, 0, 2, 1, 3, 0};
  for (std::size_t inner = 1; inner <= 5; ++inner) {
    for (DType dtype : {DType::Float64, DType::Int64, DType::Bool}) {
      const Shape shape{4, 5, inner};
      const Tensor x =
          dtype == DType::Bool ? cast(iota(shape, DType::Int64), DType::Bool) : iota(shape, dtype);
      const auto source = values(x);
      for (int axis : {0, 1}) {
        INFO("inner " << inner << ", dtype " << dtype_name(dtype) << ", axis " << axis);
        const Tensor y = gather(x, int64_values(picks), axis);
        Shape out_shape = shape;
        out_shape[static_cast<std::size_t>(axis)] = picks.size();
        REQUIRE(y.shape() == out_shape);
        std::vector<double> expected;
        for (std::size_t k = 0; k < num_elements(out_shape); ++k) {
          auto index = unravel(k, out_shape);
          index[static_cast<std::size_t>(axis)] =
              static_cast<std::size_t>(picks[index[static_cast<std::size_t>(axis)]]);
          expected.push_back(source[ravel(index, shape)]);
        }
        CHECK(values(y) == expected);
      }
    }
  }
}

TEST_CASE("slice, split, concat and pad match index arithmetic for every box of a [3, 4, 5] tensor",
          "[kernels][array]") {
  const Shape shape{3, 4, 5};
  const Tensor x = iota(shape);
  // Every begin/size per axis among: the whole axis, a leading part, an inner part, one element:
  // full trailing axes fold into one run, partial ones do not; runs of 1 to 5 elements.
  const auto boxes_of = [](std::size_t n) {
    return std::vector<std::pair<std::size_t, std::size_t>>{
        {0, n}, {0, n - 1}, {1, n - 2}, {n - 1, 1}};
  };
  for (auto [b0, s0] : boxes_of(shape[0])) {
    for (auto [b1, s1] : boxes_of(shape[1])) {
      for (auto [b2, s2] : boxes_of(shape[2])) {
        const std::vector<std::size_t> begin{b0, b1, b2};
        const Shape box{s0, s1, s2};
        INFO("begin " << b0 << "," << b1 << "," << b2 << " size " << s0 << "," << s1 << "," << s2);
        const Tensor part = slice(x,
                                  {static_cast<std::int64_t>(b0), static_cast<std::int64_t>(b1),
                                   static_cast<std::int64_t>(b2)},
                                  {static_cast<std::int64_t>(s0), static_cast<std::int64_t>(s1),
                                   static_cast<std::int64_t>(s2)});
        REQUIRE(part.shape() == box);
        std::vector<double> expected;
        for (std::size_t k = 0; k < num_elements(box); ++k) {
          auto index = unravel(k, box);
          for (std::size_t d = 0; d < 3; ++d) index[d] += begin[d];
          expected.push_back(static_cast<double>(ravel(index, shape)));
        }
        CHECK(values(part) == expected);

        // Slice's gradient pads the box back into zeros of x's shape.
        GradientTape tape;
        tape.watch(x);
        const Tensor y = slice(x,
                               {static_cast<std::int64_t>(b0), static_cast<std::int64_t>(b1),
                                static_cast<std::int64_t>(b2)},
                               {static_cast<std::int64_t>(s0), static_cast<std::int64_t>(s1),
                                static_cast<std::int64_t>(s2)});
        const Tensor padded = tape.gradient({y}, {x}, {iota(box) + 1.0})[0];
        std::vector<double> want(num_elements(shape), 0.0);
        for (std::size_t k = 0; k < num_elements(box); ++k) {
          auto index = unravel(k, box);
          for (std::size_t d = 0; d < 3; ++d) index[d] += begin[d];
          want[ravel(index, shape)] = static_cast<double>(k + 1);
        }
        CHECK(values(padded) == want);
      }
    }
  }
  for (int axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    const auto a = static_cast<std::size_t>(axis);
    // Concat of x and 100 + x along `axis`, then split back.
    const Tensor joined = concat({x, x + 100.0}, axis);
    Shape joined_shape = shape;
    joined_shape[a] *= 2;
    REQUIRE(joined.shape() == joined_shape);
    std::vector<double> expected;
    for (std::size_t k = 0; k < num_elements(joined_shape); ++k) {
      auto index = unravel(k, joined_shape);
      const bool second = index[a] >= shape[a];
      index[a] %= shape[a];
      expected.push_back(static_cast<double>(ravel(index, shape)) + (second ? 100.0 : 0.0));
    }
    CHECK(values(joined) == expected);
    const std::vector<Tensor> halves = split(joined, 2, axis);
    REQUIRE(halves.size() == 2);
    CHECK(values(halves[0]) == values(x));
    CHECK(values(halves[1]) == values(x + 100.0));
  }
  // Columns of 2 next to columns of 26 (ht's Jacobian assembly): runs of 2 and 26.
  const Tensor left = iota({7, 2});
  const Tensor right = iota({7, 26}) + 1000.0;
  const Tensor both = concat({left, right}, 1);
  std::vector<double> expected;
  for (std::size_t r = 0; r < 7; ++r) {
    for (std::size_t c = 0; c < 28; ++c) {
      expected.push_back(c < 2 ? static_cast<double>(r * 2 + c)
                               : 1000.0 + static_cast<double>(r * 26 + c - 2));
    }
  }
  CHECK(values(both) == expected);
}

TEST_CASE("broadcasting with short innermost rows matches index arithmetic", "[kernels][math]") {
  // (a shape, b shape): b broadcast along the row axis, along the innermost axis, or both.
  const std::vector<std::pair<Shape, Shape>> cases{
      {{4, 5, 3}, {5, 1}},       {{4, 5, 3}, {1, 3}},    {{4, 5, 3}, {4, 1, 3}},
      {{4, 5, 1}, {5, 1}},       {{5, 3}, {5, 1}},       {{5, 3}, {1, 3}},
      {{2, 3, 5, 7}, {3, 1, 1}}, {{2, 3, 5, 7}, {5, 7}}, {{2, 3, 5, 2}, {2, 1, 5, 1}},
      {{5, 8}, {5, 1}},          {{3, 1, 4}, {5, 1}}};
  for (const auto& [sa, sb] : cases) {
    const Tensor a = random_tensor(sa, 1);
    const Tensor b = random_tensor(sb, 2);
    const auto av = values(a);
    const auto bv = values(b);
    const std::size_t rank = std::max(sa.size(), sb.size());
    Shape out_shape(rank, 1);
    for (std::size_t d = 0; d < rank; ++d) {
      const std::size_t da = d + sa.size() >= rank ? sa[d + sa.size() - rank] : 1;
      const std::size_t db = d + sb.size() >= rank ? sb[d + sb.size() - rank] : 1;
      out_shape[d] = std::max(da, db);
    }
    const auto at = [&](const Shape& s, const std::vector<double>& v,
                        const std::vector<std::size_t>& index) {
      std::vector<std::size_t> own(s.size());
      for (std::size_t d = 0; d < s.size(); ++d)
        own[d] = s[d] == 1 ? 0 : index[d + rank - s.size()];
      return v[ravel(own, s)];
    };
    std::vector<double> products, sums, differences;
    for (std::size_t k = 0; k < num_elements(out_shape); ++k) {
      const auto index = unravel(k, out_shape);
      const double x = at(sa, av, index), y = at(sb, bv, index);
      products.push_back(x * y);
      sums.push_back(x + y);
      differences.push_back(y - x);
    }
    INFO("a " << shape_to_string(sa) << ", b " << shape_to_string(sb));
    require_close(a * b, out_shape, products, 0.0);
    require_close(a + b, out_shape, sums, 0.0);
    require_close(b - a, out_shape, differences, 0.0);
  }
}

TEST_CASE("a reshape that keeps the shape still differentiates to any order",
          "[array][gradients]") {
  const Tensor x = random_tensor({4, 3}, 3);
  const Fn f = [](const std::vector<Tensor>& a) {
    return reduce_sum(pow(reshape(a[0], {4, 3}), 3.0) * reshape(a[0], {-1, 3}));
  };
  require_gradient_matches(f, {x});
  require_second_order_matches(f, {x});
  // Forward mode through it: the tangent passes through unchanged.
  const Tensor direction = random_tensor({4, 3}, 4);
  const auto [value, tangent] = jvp(
      [](const std::vector<Tensor>& a) {
        return reshape(a[0], {4, 3}) * 2.0;
      },
      {x}, {direction});
  require_close(tangent, {4, 3}, values(direction * 2.0), 1e-15);
  require_close(value, {4, 3}, values(x * 2.0), 1e-15);
}

TEST_CASE(
    "the Jacobian of a vjp through gather and short-row broadcasts: vectorized equals the loop",
    "[jacobian][kernels]") {
  // ht's shape in small: residuals = points - sum_k w_k * gather(vertices(theta), index_k), the
  // Jacobian taken as the Jacobian in the cotangent u of the vjp u -> J^T u.
  const Tensor theta = random_tensor({4}, 5);
  const Tensor basis = random_tensor({6, 4, 3}, 6);  // vertices = sum_j theta_j^2 basis[:, j, :]
  const Tensor weights = random_tensor({7, 2}, 7, 0.1, 0.9);
  const Tensor ia = int64_values({0, 1, 2, 3, 4, 5, 0});
  const Tensor ib = int64_values({5, 3, 1, 0, 2, 4, 4});
  const auto residuals = [&](const Tensor& t) {
    const Tensor vertices = reduce_sum(basis * reshape(square(t), {1, 4, 1}), {1});  // [6, 3]
    const Tensor w0 = slice(weights, {0, 0}, {-1, 1});
    const Tensor w1 = slice(weights, {0, 1}, {-1, 1});
    return 1.0 - (w0 * gather(vertices, ia) + w1 * gather(vertices, ib));  // [7, 3]
  };
  const auto nested_jacobian = [&](bool vectorize) {
    const Tensor cotangent = zeros({7, 3});
    GradientTape outer;
    outer.watch(cotangent);
    Tensor vjp;
    {
      GradientTape inner;
      inner.watch(theta);
      vjp = inner.gradient({residuals(theta)}, {theta}, {cotangent})[0];
    }
    JacobianOptions options;
    options.vectorize = vectorize;
    return outer.jacobian(vjp, cotangent, options);  // [4, 7, 3]
  };
  const Tensor vectorized = nested_jacobian(true);
  const Tensor loop = nested_jacobian(false);
  require_close(vectorized, {4, 7, 3}, values(loop), 1e-13);
  // Against forward mode: J[i, r, c] = d residual[r, c] / d theta[i].
  const Tensor forward = jacobian_forward(residuals, theta);  // [7, 3, 4]
  require_close(transpose(vectorized, {1, 2, 0}), {7, 3, 4}, values(forward), 1e-12);
}
