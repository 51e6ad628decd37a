// The decompositions of 0.2: slogdet, logdet, eigh, svd, qr. Identities (u diag(s) v^T = a,
// a v = v diag(l), q r = a, orthonormal factors), slogdet against matrix_determinant and where
// det overflows, first- and second-order checks of gauge-invariant functions, behaviour at
// repeated eigen/singular values, float32 and float64, batches, and bad input.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "linalg_test_support.hpp"
#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr DType kAllFloat[] = {DType::Float32, DType::Float64};

// Identities hold to this (absolute, on entries of size ~1).
double tolerance_for(DType dtype) { return dtype == DType::Float32 ? 1e-4 : 1e-11; }

bool all_finite(const Tensor& t) {
  for (double v : values(t)) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// The gradient of f at a, from a tape of its own.
template <class F>
Tensor gradient_at(const Tensor& a, F f) {
  GradientTape tape;
  tape.watch(a);
  const Tensor y = f(a);
  return tape.gradient(y, a, UnconnectedGradients::Zero);
}

Tensor symmetric(const Tensor& x) {
  return multiply(add(x, transpose_last_two(x)), scalar(0.5, x.dtype()));
}

// |x^T x - I| for a batch of matrices with orthonormal columns.
double orthonormality_error(const Tensor& x) {
  const std::size_t k = x.shape().back();
  std::vector<double> eye(k * k, 0.0);
  for (std::size_t d = 0; d < k; ++d) eye[d * k + d] = 1.0;
  return max_abs(subtract(matmul(x, x, true, false), from_values(eye, {k, k}, x.dtype())));
}

}  // namespace

// ---- slogdet, logdet ------------------------------------------------------------------------

TEST_CASE("slogdet agrees with matrix_determinant: signs, a batch, a singular matrix",
          "[decompositions][slogdet]") {
  for (DType dtype : kAllFloat) {
    INFO(dtype_name(dtype));
    // det = -2, 6 (a row swap), and a singular one.
    const Tensor a = from_values({1, 2, 3, 4, 0, 2, 3, 0, 1, 2, 2, 4}, {3, 2, 2}, dtype);
    const auto [sign, log_abs_det] = slogdet(a);
    REQUIRE(sign.dtype() == dtype);
    require_close(sign, {3}, {-1, -1, 0});
    const auto lad = values(log_abs_det);
    CHECK(lad[0] == Approx(std::log(2.0)).margin(1e-6));
    CHECK(lad[1] == Approx(std::log(6.0)).margin(1e-6));
    CHECK((std::isinf(lad[2]) && lad[2] < 0));
    const Tensor b = random_tensor({4, 5, 5}, 1);
    const auto [s, l] = slogdet(b);
    const auto det = values(matrix_determinant(b));
    const auto sv = values(s), lv = values(l);
    for (std::size_t i = 0; i < det.size(); ++i) {
      CHECK(sv[i] * std::exp(lv[i]) == Approx(det[i]).margin(1e-12));
    }
  }
}

TEST_CASE("slogdet and logdet stay finite where det overflows double (200 x 200)",
          "[decompositions][slogdet][logdet]") {
  // Lower triangular with 40 on the diagonal, its first two rows swapped: det = -40^200
  // (about 1e320, beyond double's range).
  const std::size_t n = 200;
  auto v = values(random_tensor({n, n}, 2));
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < n; ++c) {
      if (c > r) v[r * n + c] = 0.0;
      if (c == r) v[r * n + c] = 40.0;
    }
  }
  for (std::size_t c = 0; c < n; ++c) std::swap(v[c], v[n + c]);
  const Tensor a = from_values(v, {n, n});
  CHECK(std::isinf(matrix_determinant(a).item<double>()));
  const auto [sign, log_abs_det] = slogdet(a);
  CHECK(sign.item<double>() == -1.0);
  CHECK(log_abs_det.item<double>() == Approx(200.0 * std::log(40.0)).epsilon(1e-12));
  // SPD: 30 I + x x^T / n has det >= 30^200.
  const Tensor x = random_tensor({n, n}, 3);
  auto s = values(multiply(matmul(x, x, false, true), scalar(1.0 / n, DType::Float64)));
  for (std::size_t d = 0; d < n; ++d) s[d * n + d] += 30.0;
  const Tensor p = from_values(s, {n, n});
  const double ld = logdet(p).item<double>();
  CHECK(ld > 200.0 * std::log(30.0));
  CHECK(ld == Approx(slogdet(p).log_abs_det.item<double>()).epsilon(1e-12));
}

TEST_CASE("logdet of small SPD matrices, a batch, float32", "[decompositions][logdet]") {
  for (DType dtype : kAllFloat) {
    const Tensor a = cast(symmetric_positive_definite({3, 4, 4}, 4), dtype);
    const auto dets = values(matrix_determinant(a));
    const auto got = values(logdet(a));
    for (std::size_t i = 0; i < dets.size(); ++i) {
      CHECK(got[i] == Approx(std::log(dets[i])).epsilon(dtype == DType::Float32 ? 1e-5 : 1e-12));
    }
  }
}

TEST_CASE("slogdet and logdet gradients: inverse transpose, first and second order",
          "[decompositions][slogdet][logdet][grad]") {
  const Tensor a = random_tensor({2, 3, 3}, 5);
  verify_gradients([](const std::vector<Tensor>& x) { return slogdet(x[0]).log_abs_det; }, {a});
  // By hand: d log|det a| / da = inv(a)^T; the sign's derivative is 0.
  const Tensor grad =
      gradient_at(a, [](const Tensor& x) { return reduce_sum(slogdet(x).log_abs_det); });
  CHECK(max_abs(subtract(grad, transpose_last_two(matrix_inverse(a)))) < 1e-12);
  require_close(gradient_at(a, [](const Tensor& x) { return reduce_sum(slogdet(x).sign); }),
                a.shape(), std::vector<double>(18, 0.0));
  verify_gradients([](const std::vector<Tensor>& x) { return logdet(symmetric(x[0])); },
                   {symmetric_positive_definite({2, 3, 3}, 6)});
}

// ---- eigh -----------------------------------------------------------------------------------

TEST_CASE("eigh: a v = v diag(l), orthonormal v, ascending, lower triangle only",
          "[decompositions][eigh]") {
  // By hand: [[2, 1], [1, 2]] has eigenvalues 1 and 3.
  const auto [l2, v2] = eigh(from_values({2, 1, 1, 2}, {2, 2}));
  require_close(l2, {2}, {1, 3});
  CHECK(std::abs(values(v2)[0]) == Approx(std::sqrt(0.5)));
  for (DType dtype : kAllFloat) {
    INFO(dtype_name(dtype));
    const Tensor a = cast(symmetric(random_tensor({3, 5, 5}, 7)), dtype);
    const auto [l, v] = eigh(a);
    REQUIRE(l.shape() == Shape{3, 5});
    REQUIRE(v.shape() == Shape{3, 5, 5});
    REQUIRE(v.dtype() == dtype);
    const Tensor av = matmul(a, v);
    const Tensor vl = multiply(v, expand_dims(l, -2));
    CHECK(max_abs(subtract(av, vl)) < tolerance_for(dtype));
    CHECK(orthonormality_error(v) < tolerance_for(dtype));
    const auto lv = values(l);
    for (std::size_t i = 0; i < lv.size(); ++i) {
      if (i % 5 != 0) CHECK(lv[i - 1] <= lv[i]);
    }
    // What is above the diagonal is not read.
    const Tensor junk = band_part(random_tensor({3, 5, 5}, 8), 0, -1);
    const Tensor lower_only =
        cast(add(band_part(cast(a, DType::Float64), -1, 0), subtract(junk, band_part(junk, 0, 0))),
             dtype);
    CHECK(max_abs(subtract(eigh(lower_only).eigenvalues, l)) == 0.0);
  }
}

TEST_CASE("eigh gradients of gauge-invariant functions: first and second order",
          "[decompositions][eigh][grad]") {
  const Tensor a = symmetric(random_tensor({2, 4, 4}, 9));
  // Eigenvalues only.
  verify_gradients([](const std::vector<Tensor>& x) { return square(eigh(x[0]).eigenvalues); },
                   {a});
  // Eigenvectors, squared elementwise (independent of each vector's sign).
  const Tensor w = random_tensor({4, 4}, 10);
  verify_gradients(
      [w](const std::vector<Tensor>& x) {
        const Tensor v = eigh(x[0]).eigenvectors;
        return reduce_sum(multiply(w, multiply(v, v)));
      },
      {a});
  // By hand: sum(l^2) = |A|_F^2; on the lower triangle that eigh reads the gradient is
  // 2 a_ii on the diagonal and 4 a_ij below it.
  GradientTape tape;
  tape.watch(a);
  const Tensor y = reduce_sum(square(eigh(a).eigenvalues));
  const Tensor grad = tape.gradient(y, a);
  const Tensor expected = add(multiply(band_part(a, -1, 0), scalar(4.0, DType::Float64)),
                              multiply(band_part(a, 0, 0), scalar(-2.0, DType::Float64)));
  CHECK(max_abs(subtract(grad, expected)) < 1e-12);
}

TEST_CASE("eigh at a repeated eigenvalue: finite gradients (TF's safe reciprocal)",
          "[decompositions][eigh][degenerate]") {
  // Q diag(1, 1, 3) Q^T: a repeated eigenvalue.
  const Tensor q = qr(random_tensor({3, 3}, 11)).q;
  const Tensor a = matmul(q, matmul(diag(from_values({1, 1, 3}, {3})), q, false, true));
  require_close(eigh(a).eigenvalues, {3}, {1, 1, 3}, 1e-12);
  // Functions of the eigenvalues: exact (here sum(l^2) = |A|_F^2 as above).
  const Tensor grad =
      gradient_at(a, [](const Tensor& x) { return reduce_sum(square(eigh(x).eigenvalues)); });
  const Tensor expected = add(multiply(band_part(a, -1, 0), scalar(4.0, DType::Float64)),
                              multiply(band_part(a, 0, 0), scalar(-2.0, DType::Float64)));
  CHECK(max_abs(subtract(grad, expected)) < 1e-12);
  // Functions of the eigenvectors: finite (the repeated pair's term is dropped), not NaN.
  const Tensor vector_grad = gradient_at(a, [](const Tensor& x) {
    const Tensor v = eigh(x).eigenvectors;
    return reduce_sum(multiply(v, slice(v, {0, 0}, {-1, 1})));
  });
  CHECK(all_finite(vector_grad));
}

// ---- svd ------------------------------------------------------------------------------------

TEST_CASE("svd: u diag(s) v^T = a, orthonormal factors, descending s, square, tall, wide",
          "[decompositions][svd]") {
  // By hand: diag(3, -2) has singular values 3, 2.
  require_close(svd(from_values({3, 0, 0, -2}, {2, 2})).s, {2}, {3, 2});
  for (DType dtype : kAllFloat) {
    for (const Shape& shape : {Shape{4, 4}, Shape{2, 5, 3}, Shape{2, 3, 5}, Shape{1, 6}}) {
      INFO(dtype_name(dtype) << " " << shape_to_string(shape));
      const Tensor a = cast(random_tensor(shape, 12), dtype);
      const auto [s, u, v] = svd(a);
      const std::size_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      REQUIRE(s.shape().back() == k);
      REQUIRE(u.shape()[u.rank() - 2] == m);
      REQUIRE(u.shape().back() == k);
      REQUIRE(v.shape()[v.rank() - 2] == n);
      REQUIRE(v.shape().back() == k);
      const Tensor rebuilt = matmul(multiply(u, expand_dims(s, -2)), v, false, true);
      CHECK(max_abs(subtract(rebuilt, a)) < tolerance_for(dtype));
      CHECK(orthonormality_error(u) < tolerance_for(dtype));
      CHECK(orthonormality_error(v) < tolerance_for(dtype));
      const auto sv = values(s);
      for (std::size_t i = 0; i < sv.size(); ++i) {
        CHECK(sv[i] >= 0);
        if (i % k != 0) CHECK(sv[i - 1] >= sv[i]);
      }
      // Full matrices: square orthogonal u and v, the same s, and u[:, :k] s v[:, :k]^T = a.
      const auto full = svd(a, true);
      REQUIRE(full.u.shape().back() == m);
      REQUIRE(full.v.shape().back() == n);
      CHECK(orthonormality_error(full.u) < tolerance_for(dtype));
      CHECK(orthonormality_error(full.v) < tolerance_for(dtype));
      CHECK(max_abs(subtract(full.s, s)) < tolerance_for(dtype));
    }
  }
  // Against eigh: s^2 are the eigenvalues of a^T a.
  const Tensor a = random_tensor({5, 3}, 13);
  const Tensor s = svd(a).s;
  const Tensor l = eigh(matmul(a, a, true, false)).eigenvalues;
  auto descending = values(l);
  std::reverse(descending.begin(), descending.end());
  require_close(square(s), {3}, descending, 1e-12);
}

TEST_CASE("svd gradients of gauge-invariant functions: first and second order",
          "[decompositions][svd][grad]") {
  for (const Shape& shape : {Shape{3, 3}, Shape{2, 4, 3}, Shape{3, 5}}) {
    INFO(shape_to_string(shape));
    const Tensor a = random_tensor(shape, 14);
    verify_gradients([](const std::vector<Tensor>& x) { return svd(x[0]).s; }, {a});
    // u diag(s) v^T (= a: its Jacobian is the identity) reads u, s and v together.
    verify_gradients(
        [](const std::vector<Tensor>& x) {
          const auto [s, u, v] = svd(x[0]);
          return matmul(multiply(u, expand_dims(s, -2)), v, false, true);
        },
        {a});
    // The projectors u u^T and v v^T do not depend on the signs of the singular vectors.
    verify_gradients(
        [](const std::vector<Tensor>& x) {
          const auto [s, u, v] = svd(x[0]);
          return add(reduce_sum(square(matmul(u, u, false, true))),
                     reduce_sum(multiply(s, reduce_sum(square(v), {-2}))));
        },
        {a});
  }
  // Elementwise squares of u and v, weighted: depends on u and v beyond their projectors.
  const Tensor w = random_tensor({4, 3}, 15);
  verify_gradients(
      [w](const std::vector<Tensor>& x) {
        const auto [s, u, v] = svd(x[0]);
        return add(reduce_sum(multiply(w, square(u))), reduce_sum(square(v)));
      },
      {random_tensor({4, 3}, 16)});
  // full_matrices with |m - n| = 1 (TF's limit): the same checks on s and the rebuilt a.
  verify_gradients(
      [](const std::vector<Tensor>& x) {
        const auto [s, u, v] = svd(x[0], true);
        const Tensor u1 = slice(u, {0, 0}, {-1, 3});
        return add(reduce_sum(square(s)),
                   reduce_sum(square(matmul(multiply(u1, expand_dims(s, -2)), v, false, true))));
      },
      {random_tensor({4, 3}, 17)});
}

TEST_CASE("svd at repeated and zero singular values: finite gradients (TF's safe reciprocal)",
          "[decompositions][svd][degenerate]") {
  // 2 Q: every singular value is 2; d sum(s) / da = u v^T = Q.
  const Tensor q = qr(random_tensor({3, 3}, 18)).q;
  const Tensor a = multiply(q, scalar(2.0, DType::Float64));
  require_close(svd(a).s, {3}, {2, 2, 2}, 1e-12);
  CHECK(max_abs(subtract(gradient_at(a, [](const Tensor& x) { return reduce_sum(svd(x).s); }), q)) <
        1e-12);
  CHECK(all_finite(gradient_at(a, [](const Tensor& x) {
    const Tensor u = svd(x).u;
    return reduce_sum(multiply(u, slice(u, {0, 0}, {-1, 1})));
  })));
  // A rank-deficient tall matrix (a zero singular value): sum(s^2) = |a|_F^2, gradient 2a.
  const Tensor r = from_values({1, 2, 2, 4, 3, 6}, {3, 2});
  const Tensor grad = gradient_at(r, [](const Tensor& x) { return reduce_sum(square(svd(x).s)); });
  CHECK(max_abs(subtract(grad, multiply(r, scalar(2.0, DType::Float64)))) < 1e-12);
}

// ---- qr -------------------------------------------------------------------------------------

TEST_CASE("qr: q r = a, orthonormal q, upper-triangular r, square, tall, wide, batched",
          "[decompositions][qr]") {
  for (DType dtype : kAllFloat) {
    for (const Shape& shape : {Shape{4, 4}, Shape{2, 5, 3}, Shape{6, 1}, Shape{2, 3, 5}}) {
      INFO(dtype_name(dtype) << " " << shape_to_string(shape));
      const Tensor a = cast(random_tensor(shape, 19), dtype);
      const auto [q, r] = qr(a);
      const std::size_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      REQUIRE(q.shape()[q.rank() - 2] == m);
      REQUIRE(q.shape().back() == k);
      REQUIRE(r.shape()[r.rank() - 2] == k);
      REQUIRE(r.shape().back() == n);
      CHECK(max_abs(subtract(matmul(q, r), a)) < tolerance_for(dtype));
      CHECK(orthonormality_error(q) < tolerance_for(dtype));
      CHECK(max_abs(band_part(r, -1, 0)) == max_abs(band_part(r, 0, 0)));
      CHECK(max_abs(subtract(r, band_part(r, 0, -1))) == 0.0);
    }
  }
}

TEST_CASE("qr gradients: first and second order, each factor and both",
          "[decompositions][qr][grad]") {
  for (const Shape& shape : {Shape{3, 3}, Shape{2, 4, 2}, Shape{2, 2, 4}}) {
    INFO(shape_to_string(shape));
    const Tensor a = random_tensor(shape, 20);
    verify_gradients([](const std::vector<Tensor>& x) { return qr(x[0]).q; }, {a});
    verify_gradients([](const std::vector<Tensor>& x) { return qr(x[0]).r; }, {a});
    verify_gradients(
        [](const std::vector<Tensor>& x) {
          const auto [q, r] = qr(x[0]);
          return add(reduce_sum(square(q)), reduce_sum(multiply(r, r)));
        },
        {a});
  }
}

// ---- forward mode ---------------------------------------------------------------------------

TEST_CASE("forward-mode derivatives match central differences (wide and tall svd, eigh, qr)",
          "[decompositions][forward]") {
  const auto check = [](const Fn& f, const Tensor& a, unsigned seed) {
    const Tensor t = random_tensor(a.shape(), seed);
    const double h = 1e-6;
    const Tensor plus = f({add(a, multiply(t, scalar(h, DType::Float64)))});
    const Tensor minus = f({subtract(a, multiply(t, scalar(h, DType::Float64)))});
    const Tensor numeric = multiply(subtract(plus, minus), scalar(0.5 / h, DType::Float64));
    const Tensor tangent = jvp(f, {a}, {t}).second;
    CHECK(max_abs(subtract(tangent, numeric)) < 1e-7);
  };
  const Fn rebuilt_and_projectors = [](const std::vector<Tensor>& x) {
    const auto [s, u, v] = svd(x[0]);
    return add(reduce_sum(matmul(multiply(u, expand_dims(s, -2)), v, false, true)),
               add(reduce_sum(square(matmul(u, u, false, true))),
                   reduce_sum(multiply(reduce_sum(square(v), {-1}), reduce_sum(x[0], {-2})))));
  };
  check(rebuilt_and_projectors, random_tensor({3, 5}, 40), 41);
  check(rebuilt_and_projectors, random_tensor({2, 5, 3}, 42), 43);
  check([](const std::vector<Tensor>& x) { return svd(x[0]).s; }, random_tensor({3, 5}, 44), 45);
  check(
      [](const std::vector<Tensor>& x) {
        const auto [l, v] = eigh(x[0]);
        return add(reduce_sum(square(v), {-1}), l);
      },
      symmetric(random_tensor({4, 4}, 46)), 47);
  check(
      [](const std::vector<Tensor>& x) {
        const auto [q, r] = qr(x[0]);
        return add(reduce_sum(q), reduce_sum(r));
      },
      random_tensor({5, 3}, 48), 49);
  check(
      [](const std::vector<Tensor>& x) {
        const auto [q, r] = qr(x[0]);
        return add(reduce_sum(square(q)), reduce_sum(multiply(r, r)));
      },
      random_tensor({2, 3, 5}, 52), 53);
  check([](const std::vector<Tensor>& x) { return slogdet(x[0]).log_abs_det; },
        random_tensor({2, 3, 3}, 50), 51);
}

// ---- bad input ------------------------------------------------------------------------------

TEST_CASE("decompositions reject bad input, naming op and shapes", "[decompositions][errors]") {
  const Tensor m23 = random_tensor({2, 3}, 30);
  const Tensor v3 = random_tensor({3}, 31);
  for (const char* op : {"slogdet", "logdet", "eigh"}) {
    const std::string name = op;
    const auto call = [name](const Tensor& x) {
      if (name == "slogdet")
        slogdet(x);
      else if (name == "logdet")
        logdet(x);
      else
        eigh(x);
    };
    expect_misuse<InvalidArgument>(name + " of a non-square matrix", [&] { call(m23); },
                                   {name, "[2, 3]", "square"});
    expect_misuse<InvalidArgument>(name + " of a vector", [&] { call(v3); }, {name, "[3]"});
    expect_misuse<InvalidArgument>(name + " of int32",
                                   [&] {
                                     call(from_values({1, 0, 0, 1}, {2, 2}, DType::Int32));
                                   },
                                   {name, "int32"});
  }
  expect_misuse<InvalidArgument>("svd of a vector", [&] { svd(v3); }, {"svd", "[3]", "rank >= 2"});
  expect_misuse<InvalidArgument>("qr of a vector", [&] { qr(v3); }, {"qr", "[3]", "rank >= 2"});
  expect_misuse<InvalidArgument>("logdet of an indefinite matrix",
                                 [] {
                                   logdet(from_values({1, 2, 2, 1}, {2, 2}));
                                 },
                                 {"logdet", "[2, 2]", "not symmetric positive definite"});
  expect_misuse<InvalidArgument>("eigh of a matrix with NaN",
                                 [] {
                                   eigh(from_values({1, 0, std::nan(""), 1}, {2, 2}));
                                 },
                                 {"eigh", "[2, 2]", "NaN or infinite"});
  expect_misuse<InvalidArgument>("svd of a matrix with inf",
                                 [] {
                                   svd(from_values({1, 0, INFINITY, 1}, {2, 2}));
                                 },
                                 {"svd", "[2, 2]", "NaN or infinite"});
  expect_misuse<InvalidArgument>("svd gradient with full_matrices and |m - n| > 1",
                                 [] {
                                   const Tensor a = random_tensor({5, 2}, 32);
                                   GradientTape tape;
                                   tape.watch(a);
                                   const Tensor y = reduce_sum(svd(a, true).s);
                                   tape.gradient(y, a);
                                 },
                                 {"svd", "[5, 2]", "float64", "full_matrices=true", "gradient"});
  expect_misuse<InvalidArgument>(
      "svd forward-mode derivative with full_matrices and m != n",
      [] {
        const Tensor a = cast(random_tensor({4, 3}, 33), DType::Float32);
        ForwardAccumulator accumulator(a, cast(random_tensor({4, 3}, 34), DType::Float32));
        svd(a, true);
      },
      {"svd", "[4, 3]", "float32", "full_matrices=true", "forward-mode"});
  expect_misuse<InvalidArgument>("slogdet gradient of a singular matrix",
                                 [] {
                                   const Tensor a = from_values({1, 2, 2, 4}, {2, 2});
                                   GradientTape tape;
                                   tape.watch(a);
                                   const Tensor y = slogdet(a).log_abs_det;
                                   tape.gradient(y, a);
                                 },
                                 {"matrix_inverse", "[2, 2]", "singular"});
}

TEST_CASE("float32 gradients of the decompositions (first order, loose tolerance)",
          "[decompositions][grad][float32]") {
  const VerifyOptions loose{1, 1e-2, 1e-2, 1e-2};
  const Tensor a = cast(random_tensor({3, 3}, 60), DType::Float32);
  verify_gradients([](const std::vector<Tensor>& x) { return slogdet(x[0]).log_abs_det; },
                   {cast(symmetric_positive_definite({3, 3}, 61), DType::Float32)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return logdet(symmetric(x[0])); },
                   {cast(symmetric_positive_definite({3, 3}, 62), DType::Float32)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return eigh(symmetric(x[0])).eigenvalues; },
                   {a}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return svd(x[0]).s; },
                   {cast(random_tensor({4, 3}, 63), DType::Float32)}, loose);
  verify_gradients([](const std::vector<Tensor>& x) { return qr(x[0]).r; }, {a}, loose);
}

TEST_CASE("every op that factorises, inverts or solves with a matrix rejects NaN and inf in it",
          "[decompositions][errors][nonfinite]") {
  // A batch of two symmetric positive definite 3x3 matrices; the bad entry is in the second
  // one (and off the lower triangle that cholesky and eigh read, for the NaN at (1, 0, 2)), so
  // the check reads every element of every batch matrix.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> spd = {4, 1, 0, 1, 3, 1, 0, 1, 2, 5, 2, 1, 2, 4, 0, 1, 0, 3};
  const Tensor b = random_tensor({2, 3, 2}, 70);
  using Call = std::function<void(const Tensor&)>;
  const std::vector<std::pair<std::string, Call>> ops = {
      {"matrix_inverse", [](const Tensor& a) { matrix_inverse(a); }},
      {"matrix_determinant", [](const Tensor& a) { matrix_determinant(a); }},
      {"solve", [&](const Tensor& a) { solve(a, cast(b, a.dtype())); }},
      {"cholesky", [](const Tensor& a) { cholesky(a); }},
      {"slogdet", [](const Tensor& a) { slogdet(a); }},
      {"logdet", [](const Tensor& a) { logdet(a); }},
      {"eigh", [](const Tensor& a) { eigh(a); }},
      {"svd", [](const Tensor& a) { svd(a); }},
      {"qr", [](const Tensor& a) { qr(a); }},
      {"triangular_solve", [&](const Tensor& a) { triangular_solve(a, cast(b, a.dtype())); }},
      {"cholesky_solve", [&](const Tensor& a) { cholesky_solve(a, cast(b, a.dtype())); }},
      {"lstsq", [&](const Tensor& a) { lstsq(a, cast(b, a.dtype())); }},
  };
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    for (const double bad : {nan, inf, -inf}) {
      for (const std::size_t where : {std::size_t{9 + 2}, std::size_t{9 + 3}}) {
        std::vector<double> v = spd;
        v[where] = bad;
        const Tensor a = from_values(v, {2, 3, 3}, dtype);
        for (const auto& [name, call] : ops) {
          const Call c = call;
          const std::string what = name + " of a " + dtype_name(dtype) + " batch holding " +
                                   std::to_string(bad) + " at flat " + std::to_string(where);
          expect_misuse<InvalidArgument>(
              what, [&] { c(a); },
              {name + ": ", "[2, 3, 3]", dtype_name(dtype), "has a NaN or infinite entry"});
        }
      }
    }
  }
  // The same matrices, finite, pass every op; a NaN only in a right-hand side comes out as NaN.
  const Tensor finite = from_values(spd, {2, 3, 3});
  for (const auto& [name, call] : ops) {
    INFO(name);
    CHECK_NOTHROW(call(finite));
  }
  std::vector<double> bad_rhs(6, 1.0);
  bad_rhs[0] = nan;
  const Tensor x =
      solve(from_values({2, 0, 0, 0, 4, 0, 0, 0, 8}, {3, 3}), from_values(bad_rhs, {3, 2}));
  const auto xv = values(x);
  CHECK(std::isnan(xv[0]));
  CHECK(xv[1] == 0.5);
  CHECK(xv[3] == 0.25);
}
