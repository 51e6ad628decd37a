// The linalg structure and solve ops of 0.2: diag, diag_part, trace, band_part, cross,
// triangular_solve, cholesky_solve, lstsq. Exact values, identities (residuals, the normal
// equations), first- and second-order checks against central differences, float32 and
// float64, batches, and bad input through the misuse harness.
#include <cmath>

#include "linalg_test_support.hpp"
#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr DType kAllFloat[] = {DType::Float32, DType::Float64};

double tolerance_for(DType dtype) { return dtype == DType::Float32 ? 2e-5 : 1e-12; }

// A lower (or upper) triangular batch with diagonal entries in [1, 2): well conditioned.
Tensor triangular(const Shape& shape, unsigned seed, bool lower) {
  auto v = values(random_tensor(shape, seed));
  const std::size_t n = shape.back();
  for (std::size_t start = 0; start < v.size(); start += n * n) {
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t c = 0; c < n; ++c) {
        double& x = v[start + r * n + c];
        if (r == c)
          x = 1.5 + 0.5 * x;
        else if ((c > r) == lower)
          x = 0.0;
      }
    }
  }
  return from_values(v, shape);
}

}  // namespace

// ---- diag, diag_part, trace ----------------------------------------------------------------

TEST_CASE("diag builds diagonal matrices from a batch of vectors", "[linalg2][diag]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const Tensor v = from_values({1, 2, 3, 4, 5, 6}, {2, 3}, dtype);
    const Tensor d = diag(v);
    REQUIRE(d.dtype() == dtype);
    require_close(d, {2, 3, 3}, {1, 0, 0, 0, 2, 0, 0, 0, 3, 4, 0, 0, 0, 5, 0, 0, 0, 6});
  }
  require_close(diag(from_values({}, {0})), {0, 0}, {});
}

TEST_CASE("diag_part takes the main diagonal of square, tall and wide batches", "[linalg2][diag]") {
  const Tensor square = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  require_close(diag_part(square), {3}, {1, 5, 9});
  const Tensor tall = from_values({1, 2, 3, 4, 5, 6}, {3, 2});
  require_close(diag_part(tall), {2}, {1, 4});
  const Tensor wide = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  require_close(diag_part(wide), {2, 2}, {1, 5, 7, 11});
  // diag_part undoes diag.
  const Tensor v = random_tensor({2, 4}, 3);
  require_close(diag_part(diag(v)), {2, 4}, values(v));
}

TEST_CASE("trace sums each diagonal", "[linalg2][trace]") {
  require_close(trace(from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3})), {}, {15});
  require_close(trace(from_values({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})), {2}, {5, 13});
  require_close(trace(from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int64)), {}, {6});
}

TEST_CASE("diag, diag_part and trace gradients: first and second order", "[linalg2][grad]") {
  verify_gradients([](const std::vector<Tensor>& x) { return square(diag(x[0])); },
                   {random_tensor({2, 3}, 1)});
  for (const Shape& shape : {Shape{3, 3}, Shape{2, 4, 3}, Shape{2, 3, 4}}) {
    INFO(shape_to_string(shape));
    verify_gradients([](const std::vector<Tensor>& x) { return square(diag_part(x[0])); },
                     {random_tensor(shape, 2)});
    verify_gradients([](const std::vector<Tensor>& x) { return square(trace(x[0])); },
                     {random_tensor(shape, 3)});
  }
  // By hand: d trace(a)/da = I; d sum(diag(v))/dv = 1.
  const Tensor a = random_tensor({3, 3}, 4);
  GradientTape tape;
  tape.watch(a);
  const Tensor t = trace(a);
  require_close(tape.gradient(t, a), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
}

// ---- band_part ------------------------------------------------------------------------------

TEST_CASE("band_part keeps the band TF keeps, negative bounds keep everything",
          "[linalg2][band_part]") {
  const Tensor a = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  require_close(band_part(a, -1, 0), {3, 4}, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  require_close(band_part(a, 0, -1), {3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  require_close(band_part(a, 0, 0), {3, 4}, {1, 0, 0, 0, 0, 6, 0, 0, 0, 0, 11, 0});
  require_close(band_part(a, 1, 1), {3, 4}, {1, 2, 0, 0, 5, 6, 7, 0, 0, 10, 11, 12});
  require_close(band_part(a, -1, -1), {3, 4}, values(a));
  const Tensor batch = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}, DType::Int32);
  require_close(band_part(batch, 0, -1), {2, 2, 2}, {1, 2, 0, 4, 5, 6, 0, 8});
}

TEST_CASE("band_part gradient is band_part of the gradient", "[linalg2][band_part][grad]") {
  const Tensor a = random_tensor({2, 3, 4}, 5);
  for (auto [lower, upper] : {std::pair<int, int>{-1, 0}, {0, -1}, {1, 2}, {0, 0}}) {
    INFO(lower << ", " << upper);
    verify_gradients(
        [lower = lower, upper = upper](const std::vector<Tensor>& x) {
          return square(band_part(x[0], lower, upper));
        },
        {a});
  }
}

// ---- cross ----------------------------------------------------------------------------------

TEST_CASE("cross of unit vectors and a batch", "[linalg2][cross]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32}) {
    const Tensor x = from_values({1, 0, 0, 0, 1, 0}, {2, 3}, dtype);
    const Tensor y = from_values({0, 1, 0, 0, 0, 1}, {2, 3}, dtype);
    require_close(cross(x, y), {2, 3}, {0, 0, 1, 1, 0, 0});
    require_close(cross(y, x), {2, 3}, {0, 0, -1, -1, 0, 0});
  }
  const Tensor a = from_values({1, 2, 3}, {3});
  const Tensor b = from_values({4, 5, 6}, {3});
  require_close(cross(a, b), {3}, {-3, 6, -3});
  // a x b is orthogonal to a and b.
  const Tensor u = random_tensor({4, 3}, 6), v = random_tensor({4, 3}, 7);
  const Tensor w = cross(u, v);
  require_close(reduce_sum(multiply(w, u), {-1}), {4}, {0, 0, 0, 0}, 1e-14);
  require_close(reduce_sum(multiply(w, v), {-1}), {4}, {0, 0, 0, 0}, 1e-14);
}

TEST_CASE("cross gradients: first and second order", "[linalg2][cross][grad]") {
  verify_gradients([](const std::vector<Tensor>& x) { return cross(x[0], x[1]); },
                   {random_tensor({2, 3}, 8), random_tensor({2, 3}, 9)});
  verify_gradients([](const std::vector<Tensor>& x) { return square(cross(x[0], x[1])); },
                   {random_tensor({2, 2, 3}, 10), random_tensor({2, 2, 3}, 11)});
}

// ---- triangular_solve -----------------------------------------------------------------------

TEST_CASE("triangular_solve: op(a) x = b for lower/upper and adjoint, f32 and f64",
          "[linalg2][triangular_solve]") {
  for (DType dtype : kAllFloat) {
    for (bool lower : {true, false}) {
      for (bool adjoint : {false, true}) {
        INFO(dtype_name(dtype) << " lower=" << lower << " adjoint=" << adjoint);
        // Garbage in the triangle that is not read must not matter.
        const Tensor tri = triangular({2, 4, 4}, 12, lower);
        const Tensor junk = lower ? band_part(random_tensor({2, 4, 4}, 13), 0, -1)
                                  : band_part(random_tensor({2, 4, 4}, 13), -1, 0);
        const Tensor read = cast(tri, dtype);
        const Tensor a = cast(add(tri, subtract(junk, band_part(junk, 0, 0))), dtype);
        const Tensor b = cast(random_tensor({2, 4, 3}, 14), dtype);
        const Tensor x = triangular_solve(a, b, lower, adjoint);
        REQUIRE(x.dtype() == dtype);
        const Tensor residual = subtract(matmul(read, x, adjoint, false), b);
        CHECK(max_abs(residual) < tolerance_for(dtype) * 10);
      }
    }
  }
  // By hand: [[2, 0], [1, 4]] x = [2, 9] -> x = [1, 2].
  const Tensor a = from_values({2, 0, 1, 4}, {2, 2});
  require_close(triangular_solve(a, from_values({2, 9}, {2, 1})), {2, 1}, {1, 2});
  // Its transpose [[2, 1], [0, 4]] x = [4, 8] -> x = [1, 2].
  require_close(triangular_solve(a, from_values({4, 8}, {2, 1}), true, true), {2, 1}, {1, 2});
}

TEST_CASE("triangular_solve gradients: first and second order, gradient in the triangle",
          "[linalg2][triangular_solve][grad]") {
  for (bool lower : {true, false}) {
    for (bool adjoint : {false, true}) {
      INFO("lower=" << lower << " adjoint=" << adjoint);
      const Tensor a = triangular({2, 3, 3}, 15, lower);
      const Tensor b = random_tensor({2, 3, 2}, 16);
      verify_gradients(
          [lower, adjoint](const std::vector<Tensor>& x) {
            return triangular_solve(x[0], x[1], lower, adjoint);
          },
          {a, b});
      GradientTape tape;
      tape.watch(a);
      const Tensor y = reduce_sum(triangular_solve(a, b, lower, adjoint));
      const Tensor grad = tape.gradient(y, a);
      // Nothing outside the triangle a reads.
      CHECK(max_abs(subtract(grad, lower ? band_part(grad, -1, 0) : band_part(grad, 0, -1))) ==
            0.0);
    }
  }
}

// ---- cholesky_solve -------------------------------------------------------------------------

TEST_CASE("cholesky_solve solves a x = b from a's Cholesky factor", "[linalg2][cholesky_solve]") {
  for (DType dtype : kAllFloat) {
    const Tensor a = cast(symmetric_positive_definite({3, 4, 4}, 17), dtype);
    const Tensor b = cast(random_tensor({3, 4, 2}, 18), dtype);
    const Tensor x = cholesky_solve(cholesky(a), b);
    CHECK(max_abs(subtract(matmul(a, x), b)) < tolerance_for(dtype) * 10);
    CHECK(max_abs(subtract(x, solve(a, b))) < tolerance_for(dtype) * 10);
  }
}

TEST_CASE("cholesky_solve gradients: first and second order", "[linalg2][cholesky_solve][grad]") {
  const Tensor chol = triangular({2, 3, 3}, 19, true);
  verify_gradients([](const std::vector<Tensor>& x) { return cholesky_solve(x[0], x[1]); },
                   {chol, random_tensor({2, 3, 2}, 20)});
}

// ---- lstsq ----------------------------------------------------------------------------------

TEST_CASE("lstsq: exact for square systems, normal equations for tall, minimum norm for wide",
          "[linalg2][lstsq]") {
  for (DType dtype : kAllFloat) {
    INFO(dtype_name(dtype));
    const double tol = dtype == DType::Float32 ? 1e-3 : 1e-10;
    const Tensor square_a = cast(symmetric_positive_definite({4, 4}, 21), dtype);
    const Tensor b4 = cast(random_tensor({4, 2}, 22), dtype);
    CHECK(max_abs(subtract(lstsq(square_a, b4), solve(square_a, b4))) < tol);
    // Tall: the residual is orthogonal to a's columns.
    const Tensor tall = cast(random_tensor({2, 6, 3}, 23), dtype);
    const Tensor b6 = cast(random_tensor({2, 6, 2}, 24), dtype);
    const Tensor x = lstsq(tall, b6);
    REQUIRE(x.shape() == Shape{2, 3, 2});
    CHECK(max_abs(matmul(tall, subtract(matmul(tall, x), b6), true, false)) < tol);
    // With l2: (a^T a + l2 I) x = a^T b.
    const double l2 = 0.5;
    const Tensor xr = lstsq(tall, b6, l2);
    const Tensor lhs =
        add(matmul(tall, matmul(tall, xr), true, false), multiply(xr, scalar(l2, dtype)));
    CHECK(max_abs(subtract(lhs, matmul(tall, b6, true, false))) < tol);
    // Wide: a x = b exactly, and x is in a's row space (x = a^T y).
    const Tensor wide = cast(random_tensor({3, 5}, 25), dtype);
    const Tensor b3 = cast(random_tensor({3, 1}, 26), dtype);
    const Tensor xw = lstsq(wide, b3);
    REQUIRE(xw.shape() == Shape{5, 1});
    CHECK(max_abs(subtract(matmul(wide, xw), b3)) < tol);
    const Tensor y = solve(matmul(wide, wide, false, true), b3);
    CHECK(max_abs(subtract(xw, matmul(wide, y, true, false))) < tol);
  }
}

TEST_CASE("lstsq gradients: first and second order, tall and wide, with l2",
          "[linalg2][lstsq][grad]") {
  verify_gradients([](const std::vector<Tensor>& x) { return lstsq(x[0], x[1]); },
                   {random_tensor({2, 4, 2}, 27), random_tensor({2, 4, 2}, 28)});
  verify_gradients([](const std::vector<Tensor>& x) { return lstsq(x[0], x[1], 0.3); },
                   {random_tensor({4, 3}, 29), random_tensor({4, 1}, 30)});
  verify_gradients([](const std::vector<Tensor>& x) { return lstsq(x[0], x[1]); },
                   {random_tensor({2, 4}, 31), random_tensor({2, 2}, 32)});
}

// ---- bad input ------------------------------------------------------------------------------

TEST_CASE("linalg structure and solve ops reject bad input, naming op and shapes",
          "[linalg2][errors]") {
  const Tensor m23 = random_tensor({2, 3}, 40);
  const Tensor v3 = random_tensor({3}, 41);
  const Tensor sq = triangular({3, 3}, 42, true);
  expect_misuse<InvalidArgument>("diag of a scalar", [] { diag(constant(1.0)); },
                                 {"diag", "[]", "rank >= 1"});
  expect_misuse<InvalidArgument>("diag_part of a vector", [&] { diag_part(v3); },
                                 {"diag_part", "[3]", "rank >= 2"});
  expect_misuse<InvalidArgument>("trace of a vector", [&] { trace(v3); },
                                 {"trace", "[3]", "rank >= 2"});
  expect_misuse<InvalidArgument>("diag of bool",
                                 [] {
                                   diag(from_values({1, 0}, {2}, DType::Bool));
                                 },
                                 {"diag", "bool"});
  expect_misuse<InvalidArgument>("band_part lower too large", [&] { band_part(m23, 3, 0); },
                                 {"band_part", "[2, 3]", "lower = 3", "rows (2)"});
  expect_misuse<InvalidArgument>("band_part upper too large", [&] { band_part(m23, 0, 4); },
                                 {"band_part", "[2, 3]", "upper = 4", "columns (3)"});
  expect_misuse<InvalidArgument>("band_part of a vector", [&] { band_part(v3, -1, 0); },
                                 {"band_part", "[3]"});
  expect_misuse<InvalidArgument>("cross with size-2 vectors",
                                 [] { cross(random_tensor({2}, 1), random_tensor({2}, 2)); },
                                 {"cross", "[2]", "size 3"});
  expect_misuse<InvalidArgument>("cross with different shapes",
                                 [&] {
                                   cross(v3, random_tensor({2, 3}, 3));
                                 },
                                 {"cross", "[3]", "[2, 3]", "shapes differ"});
  expect_misuse<InvalidArgument>("cross with different dtypes",
                                 [&] { cross(v3, cast(v3, DType::Float32)); },
                                 {"cross", "float64", "float32", "dtypes differ"});
  expect_misuse<InvalidArgument>("triangular_solve with a non-square a",
                                 [&] { triangular_solve(m23, m23); },
                                 {"triangular_solve", "[2, 3]", "square"});
  expect_misuse<InvalidArgument>("triangular_solve with a mismatched b",
                                 [&] {
                                   triangular_solve(sq, random_tensor({2, 1}, 4));
                                 },
                                 {"triangular_solve", "[3, 3]", "[2, 1]", "lower=true"});
  expect_misuse<InvalidArgument>(
      "triangular_solve with mismatched batches",
      [] {
        triangular_solve(triangular({2, 3, 3}, 5, true), random_tensor({3, 3, 1}, 6));
      },
      {"triangular_solve", "[2, 3, 3]", "[3, 3, 1]", "batch"});
  expect_misuse<InvalidArgument>(
      "triangular_solve with a zero on the diagonal",
      [] {
        triangular_solve(from_values({1, 0, 5, 0}, {2, 2}), from_values({1, 1}, {2, 1}));
      },
      {"triangular_solve", "[2, 2]", "singular", "diagonal entry 1"});
  expect_misuse<InvalidArgument>("triangular_solve with an integer a",
                                 [] {
                                   triangular_solve(from_values({1}, {1, 1}, DType::Int32),
                                                    from_values({1}, {1, 1}, DType::Int32));
                                 },
                                 {"triangular_solve", "int32"});
  expect_misuse<InvalidArgument>("cholesky_solve with a mismatched b",
                                 [&] {
                                   cholesky_solve(sq, random_tensor({4, 1}, 7));
                                 },
                                 {"cholesky_solve", "chol", "[3, 3]", "[4, 1]"});
  // A singular factor: named as cholesky_solve's (it was triangular_solve's alone, with flags
  // the caller never passed).
  expect_misuse<InvalidArgument>("cholesky_solve with a singular chol",
                                 [] {
                                   cholesky_solve(zeros({3, 3}), from_values({1, 2, 3}, {3, 1}));
                                 },
                                 {"cholesky_solve", "chol", "[3, 3]", "b", "[3, 1]", "float64",
                                  "singular", "diagonal entry 0"});
  expect_misuse<InvalidArgument>("lstsq with a mismatched b",
                                 [&] {
                                   lstsq(m23, random_tensor({3, 1}, 8));
                                 },
                                 {"lstsq", "[2, 3]", "[3, 1]"});
  expect_misuse<InvalidArgument>("lstsq with a negative l2",
                                 [&] {
                                   lstsq(m23, random_tensor({2, 1}, 9), -1.0);
                                 },
                                 {"lstsq", "[2, 3]", "l2", "-1"});
  expect_misuse<InvalidArgument>(
      "lstsq with a rank-deficient a and no l2",
      [] {
        lstsq(from_values({1, 0, 2, 0, 3, 0}, {3, 2}), random_tensor({3, 1}, 10));
      },
      {"lstsq", "[3, 2]", "not positive definite", "l2 > 0"});
  expect_misuse<InvalidArgument>("lstsq of a vector", [&] { lstsq(v3, v3); },
                                 {"lstsq", "[3]", "rank >= 2"});
}

TEST_CASE("float32 gradients of the structure and solve ops (first order, loose tolerance)",
          "[linalg2][grad][float32]") {
  const auto f32 = [](const Shape& shape, unsigned seed) {
    return cast(random_tensor(shape, seed), DType::Float32);
  };
  const VerifyOptions loose{1, 1e-2, 2e-3, 2e-3};
  verify_gradients([](const std::vector<Tensor>& x) { return diag(x[0]); }, {f32({2, 3}, 50)},
                   loose);
  verify_gradients([](const std::vector<Tensor>& x) { return diag_part(x[0]); },
                   {f32({2, 3, 4}, 51)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return band_part(x[0], 1, 0); },
                   {f32({3, 3}, 52)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return cross(x[0], x[1]); },
                   {f32({2, 3}, 53), f32({2, 3}, 54)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return triangular_solve(x[0], x[1]); },
                   {cast(triangular({3, 3}, 55, true), DType::Float32), f32({3, 2}, 56)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return lstsq(x[0], x[1], 0.1); },
                   {f32({4, 2}, 57), f32({4, 1}, 58)}, VerifyOptions{1, 1e-2, 1e-2, 1e-2});
}
