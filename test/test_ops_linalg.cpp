// The linalg op family: matmul (2-D and batched), matrix_inverse, matrix_determinant, solve,
// cholesky. Forward values against hand-computed results, gradients against central
// differences, second derivatives for the ops used inside gradients, and bad input.
#include "linalg_test_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr DType kAllFloat[] = {DType::Float32, DType::Float64};

double tolerance_for(DType dtype) { return dtype == DType::Float32 ? 1e-5 : 1e-12; }

// Random matrices [..., n, n] with n added to the diagonal: well conditioned, never singular.
Tensor well_conditioned(const Shape& shape, unsigned seed) {
  auto v = values(random_tensor(shape, seed));
  const std::size_t n = shape.back();
  add_to_diagonals(v, n, static_cast<double>(n));
  return from_values(v, shape);
}

// Reference batched product by explicit index arithmetic (no BLAS), for broadcast batches of
// rank 2 (a) and 1 (b): a [p, q, m, k], b [r, k, n] with q and r broadcasting.
std::vector<double> reference_batched(const std::vector<double>& a, const Shape& sa,
                                      const std::vector<double>& b, const Shape& sb) {
  const std::size_t p = sa[0], q = sa[1], m = sa[2], k = sa[3];
  const std::size_t r = sb[0], n = sb[2];
  const std::size_t batch_1 = std::max(q, r);
  std::vector<double> out;
  for (std::size_t i = 0; i < p; ++i) {
    for (std::size_t j = 0; j < batch_1; ++j) {
      const std::size_t ja = q == 1 ? 0 : j, jb = r == 1 ? 0 : j;
      for (std::size_t row = 0; row < m; ++row) {
        for (std::size_t col = 0; col < n; ++col) {
          double sum = 0;
          for (std::size_t t = 0; t < k; ++t) {
            sum += a[((i * q + ja) * m + row) * k + t] * b[(jb * k + t) * n + col];
          }
          out.push_back(sum);
        }
      }
    }
  }
  return out;
}

}  // namespace

// ---- matmul forward ----------------------------------------------------------------------

TEST_CASE("matmul of 2x2 matrices with every transpose flag combination", "[linalg][matmul]") {
  for (DType dtype : kAllFloat) {
    const Tensor a = from_values({1, 2, 3, 4}, {2, 2}, dtype);
    const Tensor b = from_values({5, 6, 7, 8}, {2, 2}, dtype);
    const double tol = tolerance_for(dtype);
    require_close(matmul(a, b), {2, 2}, {19, 22, 43, 50}, tol);
    require_close(matmul(a, b, true, false), {2, 2}, {26, 30, 38, 44}, tol);
    require_close(matmul(a, b, false, true), {2, 2}, {17, 23, 39, 53}, tol);
    require_close(matmul(a, b, true, true), {2, 2}, {23, 31, 34, 46}, tol);
    CHECK(matmul(a, b).dtype() == dtype);
  }
}

TEST_CASE("matmul of non-square matrices and the identity", "[linalg][matmul]") {
  const Tensor a = constant({{1, 2, 3}, {4, 5, 6}});
  const Tensor b = constant({{1, 0}, {0, 1}, {1, 1}});
  require_close(matmul(a, b), {2, 2}, {4, 5, 10, 11});
  require_close(matmul(a, constant({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})), {2, 3}, {1, 2, 3, 4, 5, 6});
  // a^T a via flags: [3, 3]
  require_close(matmul(a, a, true, false), {3, 3}, {17, 22, 27, 22, 29, 36, 27, 36, 45});
}

TEST_CASE("batched matmul broadcasts batch dimensions [2,1,2,3] x [3,3,2] -> [2,3,2,2]",
          "[linalg][matmul]") {
  const Shape sa{2, 1, 2, 3}, sb{3, 3, 2};
  std::vector<double> va(12), vb(18);
  for (std::size_t i = 0; i < va.size(); ++i) va[i] = static_cast<double>(i) - 5.0;
  for (std::size_t i = 0; i < vb.size(); ++i) vb[i] = 0.5 * static_cast<double>(i % 7) - 1.0;
  const auto expected = reference_batched(va, sa, vb, sb);
  for (DType dtype : kAllFloat) {
    const Tensor c = matmul(from_values(va, sa, dtype), from_values(vb, sb, dtype));
    require_close(c, {2, 3, 2, 2}, expected, tolerance_for(dtype));
  }
  // One element by hand: batch (1, 2), row 1, column 0 = a[1,0,1,:] . b[2,:,0]
  // a[1,0,1,:] = {4, 5, 6}; b[2,:,0] = {0.5*5-1, 0.5*0-1, 0.5*2-1} = {1.5, -1, 0}
  const Tensor c = matmul(from_values(va, sa), from_values(vb, sb));
  CHECK(values(c)[((1 * 3 + 2) * 2 + 1) * 2 + 0] == Approx(4 * 1.5 - 5));
}

TEST_CASE("batched matmul mixes rank 2 with rank 3 and honours transpose flags",
          "[linalg][matmul]") {
  // a [2, 2] against b [2, 2, 1]: the matrix a multiplies each batch matrix of b.
  const Tensor a = constant({{1, 2}, {3, 4}});
  const Tensor b = from_values({1, 1, 2, -1}, {2, 2, 1});
  require_close(matmul(a, b), {2, 2, 1}, {3, 7, 0, 2});
  require_close(matmul(a, b, true, false), {2, 2, 1}, {4, 6, -1, 0});
  // a [2, 1, 2] transposed per batch ([2, 1]) against the rank-2 b [3, 1] transposed ([1, 3]).
  const Tensor c = from_values({1, 2, 3, 4}, {2, 1, 2});
  const Tensor d = from_values({10, 100, 1000}, {3, 1});
  require_close(matmul(c, d, true, true), {2, 2, 3},
                {10, 100, 1000, 20, 200, 2000, 30, 300, 3000, 40, 400, 4000});
}

// One row or one column goes to gemv rather than gemm: every flag combination, values and
// gradients.
TEST_CASE("matrix-vector and vector-matrix products with every transpose flag",
          "[linalg][matmul][gemv]") {
  const Tensor m = constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});  // [2, 3]
  const Tensor v3 = reshape(constant({1.0, -1.0, 2.0}), {3, 1});
  const Tensor v2 = reshape(constant({2.0, -3.0}), {2, 1});
  require_close(matmul(m, v3), {2, 1}, {5, 11});
  require_close(matmul(m, v2, true, false), {3, 1}, {-10, -11, -12});
  require_close(matmul(transpose(v3), m, false, true), {1, 2}, {5, 11});
  require_close(matmul(v3, m, true, true), {1, 2}, {5, 11});
  require_close(matmul(v2, m, true, false), {1, 3}, {-10, -11, -12});
  require_close(matmul(transpose(v2), m), {1, 3}, {-10, -11, -12});
  require_close(matmul(m, transpose(v3), false, true), {2, 1}, {5, 11});
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a_col = random_tensor(ta ? Shape{4, 3} : Shape{3, 4}, 11);
      const Tensor b_col = random_tensor(tb ? Shape{1, 4} : Shape{4, 1}, 12);
      const Tensor a_row = random_tensor(ta ? Shape{4, 1} : Shape{1, 4}, 13);
      const Tensor b_row = random_tensor(tb ? Shape{5, 4} : Shape{4, 5}, 14);
      Fn col = [ta, tb](const std::vector<Tensor>& x) { return matmul(x[0], x[1], ta, tb); };
      for (std::size_t arg : {0u, 1u}) {
        require_gradient_matches(col, {a_col, b_col}, arg);
        require_gradient_matches(col, {a_row, b_row}, arg);
      }
    }
  }
}

TEST_CASE("matmul with a zero inner dimension gives zeros", "[linalg][matmul]") {
  const Tensor c = matmul(zeros({2, 0}), zeros({0, 3}));
  require_close(c, {2, 3}, std::vector<double>(6, 0.0));
  require_close(matmul(zeros({4, 2, 0}), zeros({0, 1})), {4, 2, 1}, std::vector<double>(8, 0.0));
}

// ---- matmul gradients --------------------------------------------------------------------

TEST_CASE("matmul gradient for all four transpose flag combinations", "[linalg][matmul][grad]") {
  const std::size_t m = 2, k = 3, n = 4;
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    INFO("transpose_a=" << ta << " transpose_b=" << tb);
    const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 11 + flags);
    const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 21 + flags);
    const Fn f = [ta, tb](const std::vector<Tensor>& x) { return matmul(x[0], x[1], ta, tb); };
    verify_gradients(f, {a, b}, VerifyOptions{1});  // both arguments
  }
}

TEST_CASE("matmul gradient by hand: d sum(a b) / da = ones b^T", "[linalg][matmul][grad]") {
  const Tensor a = constant({{1, 2}, {3, 4}});
  const Tensor b = constant({{5, 6}, {7, 8}});
  GradientTape tape;
  tape.watch(a);
  const Tensor y = reduce_sum(matmul(a, b));
  require_close(tape.gradient(y, a), {2, 2}, {11, 15, 11, 15});
}

TEST_CASE("batched matmul gradient sums over broadcast batch dimensions",
          "[linalg][matmul][grad]") {
  const Tensor a = random_tensor({2, 1, 2, 3}, 31);
  const Tensor b = random_tensor({3, 3, 2}, 32);
  const Fn f = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  verify_gradients(f, {a, b}, VerifyOptions{1});  // both arguments

  // Rank 2 against rank 3, with transposes: a [3, 2]^T, b [4, 2, 3]^T -> [4, 2, 2].
  const Tensor c = random_tensor({3, 2}, 33);
  const Tensor d = random_tensor({4, 2, 3}, 34);
  const Fn g = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1], true, true); };
  verify_gradients(g, {c, d}, VerifyOptions{1});  // both arguments
  // The gradient of a shared rank-2 operand is the sum over the batch: shape [3, 2].
  GradientTape tape;
  tape.watch(c);
  const Tensor grad = tape.gradient(matmul(c, d, true, true), c);
  CHECK(grad.shape() == Shape{3, 2});
}

TEST_CASE("matmul second derivatives", "[linalg][matmul][grad2]") {
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    INFO("transpose_a=" << ta << " transpose_b=" << tb);
    const Tensor a = random_tensor(ta ? Shape{3, 2} : Shape{2, 3}, 41 + flags);
    const Tensor b = random_tensor(tb ? Shape{2, 3} : Shape{3, 2}, 51 + flags);
    // square() makes the function nonlinear in each operand, so the Hessian is not zero.
    const Fn f = [ta, tb](const std::vector<Tensor>& x) {
      return square(matmul(x[0], x[1], ta, tb));
    };
    verify_gradients(f, {a, b});  // first and second order, both arguments
  }
  const Tensor a = random_tensor({2, 1, 2, 3}, 61);
  const Tensor b = random_tensor({3, 3, 2}, 62);
  const Fn f = [](const std::vector<Tensor>& x) { return square(matmul(x[0], x[1])); };
  verify_gradients(f, {a, b});  // first and second order, both arguments
}

// ---- matrix_inverse ----------------------------------------------------------------------

TEST_CASE("matrix_inverse of 2x2, 3x3, identity and a batch", "[linalg][inverse]") {
  for (DType dtype : kAllFloat) {
    const double tol = tolerance_for(dtype);
    require_close(matrix_inverse(from_values({4, 7, 2, 6}, {2, 2}, dtype)), {2, 2},
                  {0.6, -0.7, -0.2, 0.4}, tol);
    require_close(matrix_inverse(from_values({1, 2, 3, 0, 1, 4, 5, 6, 0}, {3, 3}, dtype)), {3, 3},
                  {-24, 18, 5, 20, -15, -4, -5, 4, 1}, 10 * tol);
    require_close(matrix_inverse(from_values({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}, dtype)), {3, 3},
                  {1, 0, 0, 0, 1, 0, 0, 0, 1}, tol);
    require_close(matrix_inverse(from_values({4, 7, 2, 6, 2, 0, 0, 4}, {2, 2, 2}, dtype)),
                  {2, 2, 2}, {0.6, -0.7, -0.2, 0.4, 0.5, 0, 0, 0.25}, tol);
    CHECK(matrix_inverse(from_values({2}, {1, 1}, dtype)).dtype() == dtype);
  }
}

TEST_CASE("matrix_inverse gradient", "[linalg][inverse][grad]") {
  const Fn f = [](const std::vector<Tensor>& x) { return matrix_inverse(x[0]); };
  require_gradient_matches(f, {well_conditioned({3, 3}, 71)});
  require_gradient_matches(f, {well_conditioned({2, 3, 3}, 72)});
  // d inv(a)/da for 1x1 a = [2]: -1/4
  GradientTape tape;
  const Tensor a = from_values({2.0}, {1, 1});
  tape.watch(a);
  require_close(tape.gradient(matrix_inverse(a), a), {1, 1}, {-0.25});
}

TEST_CASE("matrix_inverse second derivative", "[linalg][inverse][grad2]") {
  const Fn f = [](const std::vector<Tensor>& x) { return matrix_inverse(x[0]); };
  require_second_order_matches(f, {well_conditioned({3, 3}, 73)});
  require_second_order_matches(f, {well_conditioned({2, 2, 2}, 74)});
}

// ---- matrix_determinant ------------------------------------------------------------------

TEST_CASE("matrix_determinant of 2x2, 3x3, permutations, singular and a batch",
          "[linalg][determinant]") {
  for (DType dtype : kAllFloat) {
    const double tol = tolerance_for(dtype);
    require_close(matrix_determinant(from_values({4, 7, 2, 6}, {2, 2}, dtype)), {}, {10}, tol);
    require_close(matrix_determinant(from_values({2, -3, 1, 2, 0, -1, 1, 4, 5}, {3, 3}, dtype)), {},
                  {49}, 10 * tol);
    // One row swap: -1; a cyclic permutation (two swaps): +1.
    require_close(matrix_determinant(from_values({0, 1, 0, 1, 0, 0, 0, 0, 1}, {3, 3}, dtype)), {},
                  {-1}, tol);
    require_close(matrix_determinant(from_values({0, 1, 0, 0, 0, 1, 1, 0, 0}, {3, 3}, dtype)), {},
                  {1}, tol);
    require_close(matrix_determinant(from_values({1, 2, 2, 4}, {2, 2}, dtype)), {}, {0}, tol);
    require_close(matrix_determinant(from_values({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}, dtype)), {},
                  {1}, tol);
    require_close(
        matrix_determinant(from_values({4, 7, 2, 6, 2, 0, 0, 3, 1, 2, 3, 4}, {3, 2, 2}, dtype)),
        {3}, {10, 6, -2}, tol);
  }
}

TEST_CASE("matrix_determinant gradient", "[linalg][determinant][grad]") {
  // d det/da = det(a) inv(a)^T = [[d, -c], [-b, a]] for a 2x2 [[a, b], [c, d]].
  const Tensor a = constant({{4, 7}, {2, 6}});
  GradientTape tape;
  tape.watch(a);
  require_close(tape.gradient(matrix_determinant(a), a), {2, 2}, {6, -2, -7, 4});

  const Fn f = [](const std::vector<Tensor>& x) { return matrix_determinant(x[0]); };
  require_gradient_matches(f, {well_conditioned({3, 3}, 81)});
  require_gradient_matches(f, {well_conditioned({2, 3, 2, 2}, 82)});
}

TEST_CASE("matrix_determinant second derivative", "[linalg][determinant][grad2]") {
  const Fn f = [](const std::vector<Tensor>& x) { return matrix_determinant(x[0]); };
  require_second_order_matches(f, {well_conditioned({3, 3}, 83)});
  require_second_order_matches(f, {well_conditioned({2, 2, 2}, 84)});
}

// ---- solve -------------------------------------------------------------------------------

TEST_CASE("solve a x = b for one and several right-hand sides, and a batch", "[linalg][solve]") {
  for (DType dtype : kAllFloat) {
    const double tol = tolerance_for(dtype);
    const Tensor a = from_values({3, 1, 1, 2}, {2, 2}, dtype);
    require_close(solve(a, from_values({9, 8}, {2, 1}, dtype)), {2, 1}, {2, 3}, tol);
    require_close(solve(a, from_values({9, 1, 8, 2}, {2, 2}, dtype)), {2, 2}, {2, 0, 3, 1}, tol);
    // A system that needs a row swap: [[0, 1], [1, 0]] x = [[5], [7]] -> [[7], [5]]
    require_close(
        solve(from_values({0, 1, 1, 0}, {2, 2}, dtype), from_values({5, 7}, {2, 1}, dtype)), {2, 1},
        {7, 5}, tol);
    const Tensor batch_a = from_values({3, 1, 1, 2, 2, 0, 0, 2}, {2, 2, 2}, dtype);
    const Tensor batch_b = from_values({9, 8, 4, 6}, {2, 2, 1}, dtype);
    require_close(solve(batch_a, batch_b), {2, 2, 1}, {2, 3, 2, 3}, tol);
  }
}

TEST_CASE("solve gradients for a and b", "[linalg][solve][grad]") {
  const Fn f = [](const std::vector<Tensor>& x) { return solve(x[0], x[1]); };
  const Tensor a = well_conditioned({3, 3}, 91);
  const Tensor b = random_tensor({3, 2}, 92);
  verify_gradients(f, {a, b}, VerifyOptions{1});  // both arguments
  const Tensor batch_a = well_conditioned({2, 3, 3}, 93);
  const Tensor batch_b = random_tensor({2, 3, 1}, 94);
  verify_gradients(f, {batch_a, batch_b}, VerifyOptions{1});  // both arguments
}

TEST_CASE("solve second derivatives", "[linalg][solve][grad2]") {
  // square() keeps the function nonlinear in b, so its second derivative is not zero.
  const Fn f = [](const std::vector<Tensor>& x) { return square(solve(x[0], x[1])); };
  const Tensor a = well_conditioned({3, 3}, 95);
  const Tensor b = random_tensor({3, 2}, 96);
  verify_gradients(f, {a, b});  // first and second order, both arguments
}

// ---- cholesky ----------------------------------------------------------------------------

TEST_CASE("cholesky of a 3x3, the identity and a batch", "[linalg][cholesky]") {
  for (DType dtype : kAllFloat) {
    const double tol = tolerance_for(dtype);
    const std::vector<double> spd{4, 12, -16, 12, 37, -43, -16, -43, 98};
    const std::vector<double> lower{2, 0, 0, 6, 1, 0, -8, 5, 3};
    require_close(cholesky(from_values(spd, {3, 3}, dtype)), {3, 3}, lower, tol);
    require_close(cholesky(from_values({1, 0, 0, 1}, {2, 2}, dtype)), {2, 2}, {1, 0, 0, 1}, tol);
    std::vector<double> batch = spd;
    for (double v : {4, 0, 0, 0, 9, 0, 0, 0, 1}) batch.push_back(v);
    std::vector<double> expected = lower;
    for (double v : {2, 0, 0, 0, 3, 0, 0, 0, 1}) expected.push_back(v);
    require_close(cholesky(from_values(batch, {2, 3, 3}, dtype)), {2, 3, 3}, expected, tol);
  }
}

TEST_CASE("cholesky reproduces its input: L L^T = A", "[linalg][cholesky]") {
  const Tensor a = symmetric_positive_definite({4, 4}, 101);
  const Tensor l = cholesky(a);
  require_close(matmul(l, l, false, true), {4, 4}, values(a), 1e-12);
}

TEST_CASE("cholesky gradient on symmetrised input", "[linalg][cholesky][grad]") {
  // The op reads one triangle of a symmetric matrix; symmetrising first makes the central
  // differences perturb a symmetric matrix, which the formula assumes.
  const Fn f = [](const std::vector<Tensor>& x) {
    return cholesky(multiply(add(x[0], transpose_last_two(x[0])), scalar(0.5, x[0].dtype())));
  };
  require_gradient_matches(f, {symmetric_positive_definite({3, 3}, 111)});
  require_gradient_matches(f, {symmetric_positive_definite({2, 3, 3}, 112)});
  // 1x1: L = sqrt(a), dL/da = 1 / (2 sqrt(a)) = 1/4 at a = 4
  const Tensor a = from_values({4.0}, {1, 1});
  GradientTape tape;
  tape.watch(a);
  require_close(tape.gradient(cholesky(a), a), {1, 1}, {0.25});
}

// ---- bad input ---------------------------------------------------------------------------

TEST_CASE("matmul rejects mismatched inner dimensions", "[linalg][errors]") {
  const std::string msg = message_of<InvalidArgument>([] { matmul(zeros({2, 3}), zeros({2, 3})); });
  CHECK_THAT(msg, Catch::Contains("matmul"));
  CHECK_THAT(msg, Catch::Contains("[2, 3]"));
  CHECK_THAT(msg, Catch::Contains("inner dimensions"));
  CHECK_THAT(msg, Catch::Contains("transpose_a=false"));
  CHECK_THAT(msg, Catch::Contains("float64"));
  // Transposing b makes the same shapes compatible; transposing a as well breaks them again.
  CHECK(matmul(zeros({2, 3}), zeros({2, 3}), false, true).shape() == Shape{2, 2});
  const std::string msg2 = message_of<InvalidArgument>([] {
    matmul(zeros({2, 3}), zeros({2, 3}), true, true);
  });
  CHECK_THAT(msg2, Catch::Contains("transpose_a=true, transpose_b=true"));
  CHECK_THAT(msg2, Catch::Contains("(2 vs 3)"));
}

TEST_CASE("matmul rejects mismatched and integer dtypes", "[linalg][errors]") {
  const std::string msg = message_of<InvalidArgument>([] {
    matmul(zeros({2, 2}, DType::Float32), zeros({2, 2}, DType::Float64));
  });
  CHECK_THAT(msg, Catch::Contains("matmul"));
  CHECK_THAT(msg, Catch::Contains("float32"));
  CHECK_THAT(msg, Catch::Contains("float64"));
  CHECK_THAT(msg, Catch::Contains("dtypes differ"));
  const std::string ints = message_of<InvalidArgument>([] {
    matmul(zeros({2, 2}, DType::Int32), zeros({2, 2}, DType::Int32));
  });
  CHECK_THAT(ints, Catch::Contains("matmul"));
  CHECK_THAT(ints, Catch::Contains("int32"));
  CHECK_THAT(ints, Catch::Contains("[2, 2]"));
}

TEST_CASE("matmul rejects rank-1 operands and unbroadcastable batches", "[linalg][errors]") {
  const std::string msg = message_of<InvalidArgument>([] { matmul(zeros({3}), zeros({3, 2})); });
  CHECK_THAT(msg, Catch::Contains("matmul"));
  CHECK_THAT(msg, Catch::Contains("a has shape [3]"));
  CHECK_THAT(msg, Catch::Contains("rank >= 2"));
  const std::string msg_b = message_of<InvalidArgument>([] { matmul(zeros({2, 3}), zeros({3})); });
  CHECK_THAT(msg_b, Catch::Contains("b has shape [3]"));
  const std::string batch = message_of<InvalidArgument>([] {
    matmul(zeros({2, 2, 2}), zeros({3, 2, 2}));
  });
  CHECK_THAT(batch, Catch::Contains("matmul"));
  CHECK_THAT(batch, Catch::Contains("[2, 2, 2]"));
  CHECK_THAT(batch, Catch::Contains("[3, 2, 2]"));
  CHECK_THAT(batch, Catch::Contains("batch dimensions [2] and [3]"));
}

TEST_CASE("square-matrix ops reject non-square and rank-1 input", "[linalg][errors]") {
  const std::string inv = message_of<InvalidArgument>([] { matrix_inverse(zeros({2, 3})); });
  CHECK_THAT(inv, Catch::Contains("matrix_inverse"));
  CHECK_THAT(inv, Catch::Contains("[2, 3]"));
  CHECK_THAT(inv, Catch::Contains("square"));
  const std::string det = message_of<InvalidArgument>([] { matrix_determinant(zeros({4, 2, 3})); });
  CHECK_THAT(det, Catch::Contains("matrix_determinant"));
  CHECK_THAT(det, Catch::Contains("[4, 2, 3]"));
  const std::string chol = message_of<InvalidArgument>([] { cholesky(zeros({3, 2})); });
  CHECK_THAT(chol, Catch::Contains("cholesky"));
  CHECK_THAT(chol, Catch::Contains("[3, 2]"));
  const std::string vec = message_of<InvalidArgument>([] { matrix_inverse(zeros({3})); });
  CHECK_THAT(vec, Catch::Contains("[3]"));
  const std::string ints = message_of<InvalidArgument>([] {
    matrix_determinant(zeros({2, 2}, DType::Int64));
  });
  CHECK_THAT(ints, Catch::Contains("matrix_determinant"));
  CHECK_THAT(ints, Catch::Contains("int64"));
}

TEST_CASE("matrix_inverse and solve reject singular matrices", "[linalg][errors]") {
  const std::string inv = message_of<InvalidArgument>([] {
    matrix_inverse(constant({{1, 2}, {2, 4}}));
  });
  CHECK_THAT(inv, Catch::Contains("matrix_inverse"));
  CHECK_THAT(inv, Catch::Contains("[2, 2]"));
  CHECK_THAT(inv, Catch::Contains("singular"));
  // The second matrix of a batch is singular: the message says which.
  const std::string batch = message_of<InvalidArgument>([] {
    matrix_inverse(from_values({1, 0, 0, 1, 0, 0, 0, 1}, {2, 2, 2}));
  });
  CHECK_THAT(batch, Catch::Contains("batch matrix 1"));
  const std::string sol = message_of<InvalidArgument>([] {
    solve(constant({{1, 2}, {2, 4}}), zeros({2, 1}));
  });
  CHECK_THAT(sol, Catch::Contains("solve"));
  CHECK_THAT(sol, Catch::Contains("singular"));
}

TEST_CASE("solve rejects mismatched shapes and dtypes", "[linalg][errors]") {
  const std::string rows = message_of<InvalidArgument>([] { solve(zeros({2, 2}), zeros({3, 1})); });
  CHECK_THAT(rows, Catch::Contains("solve"));
  CHECK_THAT(rows, Catch::Contains("a has shape [2, 2]"));
  CHECK_THAT(rows, Catch::Contains("b has shape [3, 1]"));
  const std::string batch = message_of<InvalidArgument>([] {
    solve(zeros({2, 2, 2}), zeros({3, 2, 1}));
  });
  CHECK_THAT(batch, Catch::Contains("batch dimensions differ"));
  const std::string vector_b = message_of<InvalidArgument>([] {
    solve(zeros({2, 2}), zeros({2}));
  });
  CHECK_THAT(vector_b, Catch::Contains("b has shape [2]"));
  const std::string dtypes = message_of<InvalidArgument>([] {
    solve(zeros({2, 2}), zeros({2, 1}, DType::Float32));
  });
  CHECK_THAT(dtypes, Catch::Contains("float32"));
  CHECK_THAT(dtypes, Catch::Contains("dtypes differ"));
}

TEST_CASE("cholesky rejects a matrix that is not positive definite", "[linalg][errors]") {
  const std::string msg = message_of<InvalidArgument>([] { cholesky(constant({{1, 2}, {2, 1}})); });
  CHECK_THAT(msg, Catch::Contains("cholesky"));
  CHECK_THAT(msg, Catch::Contains("[2, 2]"));
  CHECK_THAT(msg, Catch::Contains("positive definite"));
}

TEST_CASE("square-matrix ops accept empty matrices and empty batches", "[linalg][empty]") {
  CHECK(matrix_inverse(zeros({0, 0})).shape() == Shape{0, 0});
  require_close(matrix_determinant(zeros({0, 0})), {}, {1});
  CHECK(cholesky(zeros({3, 0, 0})).shape() == Shape{3, 0, 0});
  CHECK(solve(zeros({0, 2, 2}), zeros({0, 2, 1})).shape() == Shape{0, 2, 1});
  CHECK(matrix_determinant(zeros({0, 2, 2})).shape() == Shape{0});
}
