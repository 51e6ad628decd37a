// The linear algebra family's samples (src/ops/linalg/): matrix products, inverses,
// determinants, solves, the decompositions (Cholesky, QR, SVD, the symmetric eigenproblem) and
// the structure ops (diag, band_part, cross).
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {
namespace {

// ---- samples: well-conditioned matrices (the identity plus a bit), a symmetric positive
// definite one for cholesky ----------------------------------------------------------------------

std::vector<OpSample> op_samples() {
  const Tensor a = random_tensor({2, 3}, 1);
  const Tensor b = random_tensor({2, 3}, 2);
  const Tensor eye3 = from_values({1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0}, {3, 3});
  const Tensor m = add(eye3, multiply(random_tensor({3, 3}, 9), scalar(0.3, DType::Float64)));
  const Tensor batch = random_tensor({2, 3, 3}, 10);
  const std::string linear = "linear: its second derivative is zero";
  std::vector<OpSample> s;
  // linalg.cpp, linalg_lapack.cpp
  s.push_back(sample("MatMul", {a, random_tensor({2, 4}, 11)},
                     [](const auto& in) { return Outputs{matmul(in[0], in[1], true, false)}; }));
  s.push_back(sample("BatchMatMulV2", {batch, m},
                     [](const auto& in) { return Outputs{matmul(in[0], in[1], false, true)}; }));
  s.push_back(unary_sample("MatrixInverse", tapegrad::matrix_inverse, m));
  s.push_back(unary_sample("MatrixDeterminant", tapegrad::matrix_determinant, m));
  s.push_back(binary_sample("MatrixSolve", tapegrad::solve, m, random_tensor({3, 2}, 12)));
  // cholesky reads one triangle, and its gradient is symmetrized (TF): the sample symmetrizes
  // its input first, so that every entry of it moves the result as the gradient says.
  s.push_back(sample("Cholesky", {add(matmul(m, m, false, true), eye3)}, [](const auto& in) {
    // integers straight to cholesky, so that its own dtype check rejects them (0.5 would not be
    // representable in an integer dtype)
    if (!is_floating(in[0].dtype())) return Outputs{cholesky(in[0])};
    const Tensor half = scalar(0.5, in[0].dtype());
    return Outputs{cholesky(multiply(add(in[0], transpose(in[0])), half))};
  }));
  // linalg_structure.cpp, linalg_solve.cpp, linalg_decompose.cpp, linalg_svd.cpp (the
  // multi-output ops give every output).
  s.push_back(
      with_integers(no_second_order(unary_sample("MatrixDiag", tapegrad::diag, a), linear)));
  s.push_back(with_integers(no_second_order(
      unary_sample("MatrixDiagPart", tapegrad::diag_part, random_tensor({2, 4, 3}, 13)), linear)));
  s.push_back(with_integers(
      no_second_order(sample("MatrixBandPart", {batch},
                             [](const auto& in) { return Outputs{band_part(in[0], 1, 0)}; }),
                      linear)));
  s.push_back(with_integers(binary_sample("Cross", tapegrad::cross, a, b)));
  s.push_back(sample("MatrixTriangularSolve", {m, random_tensor({3, 2}, 14)}, [](const auto& in) {
    return Outputs{triangular_solve(in[0], in[1], true, true)};
  }));
  s.push_back(sample("LogMatrixDeterminant", {m}, [](const auto& in) {
    const auto r = slogdet(in[0]);
    return Outputs{r.sign, r.log_abs_det};
  }));
  s.push_back(sample("SelfAdjointEigV2", {add(m, transpose(m))}, [](const auto& in) {
    const auto r = eigh(in[0]);
    return Outputs{r.eigenvalues, r.eigenvectors};
  }));
  s.push_back(sample("Svd", {random_tensor({4, 3}, 15)}, [](const auto& in) {
    const auto r = svd(in[0]);
    return Outputs{r.s, r.u, r.v};
  }));
  s.push_back(sample("Qr", {random_tensor({3, 4}, 16)}, [](const auto& in) {
    const auto r = qr(in[0]);
    return Outputs{r.q, r.r};
  }));
  return s;
}

// ---- batching ---------------------------------------------------------------------------------

// A symmetric, well-conditioned example matrix from x: x x^T + 3 I.
Tensor spd_of(const Tensor& x) {
  const std::size_t n = x.shape().back();
  return add(matmul(x, x, false, true), multiply(eye(n, x.dtype()), scalar(3.0, x.dtype())));
}

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> cases;
  const Tensor w = random_tensor({3, 4}, 53);
  const Tensor w3 = random_tensor({2, 3, 4}, 54);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const std::string flags = std::string(ta ? " ta" : "") + (tb ? " tb" : "");
      const Tensor b_fixed = tb ? transpose(w) : w;
      const Tensor a_fixed = ta ? random_tensor({3, 2}, 55) : random_tensor({2, 3}, 55);
      cases.push_back({"MatMul a batched" + flags,
                       {"MatMul"},
                       [b_fixed, ta, tb](const std::vector<Tensor>& in) {
                         return std::vector<Tensor>{matmul(in[0], b_fixed, ta, tb)};
                       },
                       {batch_of(ta ? Shape{3, 2} : Shape{2, 3}, 56)}});
      cases.push_back({"MatMul b batched" + flags,
                       {"MatMul"},
                       [a_fixed, ta, tb](const std::vector<Tensor>& in) {
                         return std::vector<Tensor>{matmul(a_fixed, in[0], ta, tb)};
                       },
                       {batch_of(tb ? Shape{4, 3} : Shape{3, 4}, 57)}});
      cases.push_back({"MatMul both batched" + flags,
                       {"MatMul"},
                       [ta, tb](const std::vector<Tensor>& in) {
                         return std::vector<Tensor>{matmul(in[0], in[1], ta, tb)};
                       },
                       {batch_of(ta ? Shape{3, 2} : Shape{2, 3}, 58),
                        batch_of(tb ? Shape{4, 3} : Shape{3, 4}, 59)}});
    }
  }
  cases.push_back({"BatchMatMulV2 with broadcast batch axes",
                   {"BatchMatMulV2"},
                   [w3](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         matmul(in[0], w3), matmul(in[1], in[0], false, true), matmul(w3, in[1])};
                   },
                   {batch_of({2, 5, 3}, 60), batch_of({1, 4, 3}, 61)}});

  const Tensor spd_shift = from_values({3, 0, 0, 0, 3, 0, 0, 0, 3}, {3, 3});
  const Tensor rhs = random_tensor({3, 2}, 62);
  cases.push_back({"linear algebra, matrix batched",
                   {"MatrixInverse", "MatrixDeterminant", "MatrixSolve", "Cholesky"},
                   [spd_shift, rhs](const std::vector<Tensor>& in) {
                     const Tensor a = add(matmul(in[0], in[0], false, true), spd_shift);
                     return std::vector<Tensor>{matrix_inverse(a), matrix_determinant(a),
                                                solve(a, rhs), cholesky(a)};
                   },
                   {batch_of({3, 3}, 63)}});
  const Tensor fixed_a =
      add(matmul(random_tensor({3, 3}, 64), random_tensor({3, 3}, 64), false, true), spd_shift);
  cases.push_back({"MatrixSolve, right-hand side batched",
                   {"MatrixSolve"},
                   [fixed_a](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{solve(fixed_a, in[0])};
                   },
                   {batch_of({3, 2}, 65)}});
  cases.push_back({"MatrixDiag, MatrixDiagPart, MatrixBandPart",
                   {"MatrixDiag", "MatrixDiagPart", "MatrixBandPart"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{diag(in[0]), diag_part(in[1]),
                                                band_part(in[1], 1, 0), band_part(in[1], -1, 2),
                                                diag(in[2])};
                   },
                   {batch_of({2, 3}, 111), batch_of({2, 3, 4}, 112), as_f32(batch_of({3}, 113))}});
  const Tensor v_fixed = random_tensor({2, 3}, 114);
  cases.push_back({"Cross",
                   {"Cross"},
                   [v_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{cross(in[0], v_fixed), cross(v_fixed, in[0]),
                                                cross(in[0], in[1])};
                   },
                   {batch_of({2, 3}, 115), batch_of({2, 3}, 116)}});
  for (const bool f32 : {false, true}) {
    const auto prepare = [f32](const Tensor& t) { return f32 ? as_f32(t) : t; };
    const std::string suffix = f32 ? " float32" : "";
    cases.push_back(
        {"LogMatrixDeterminant, SelfAdjointEigV2" + suffix,
         {"LogMatrixDeterminant", "SelfAdjointEigV2"},
         [](const std::vector<Tensor>& in) {
           const Tensor a = spd_of(in[0]);
           const SlogdetResult s =
               slogdet(add(in[0], multiply(eye(3, in[0].dtype()), scalar(2.0, in[0].dtype()))));
           const EighResult e = eigh(a);
           return std::vector<Tensor>{s.sign, s.log_abs_det, e.eigenvalues, e.eigenvectors};
         },
         {prepare(batch_of({3, 3}, 117))}});
    cases.push_back({"Qr, Svd" + suffix,
                     {"Qr", "Svd"},
                     [](const std::vector<Tensor>& in) {
                       const QrResult q = qr(in[0]);
                       const SvdResult s = svd(in[0]);
                       const SvdResult full = svd(in[0], true);
                       return std::vector<Tensor>{q.q, q.r, s.s, s.u, s.v, full.u, full.v};
                     },
                     {prepare(batch_of({4, 3}, 118))}});
  }
  const Tensor tri_fixed = add(band_part(random_tensor({3, 3}, 119), -1, 0),
                               multiply(eye(3), scalar(2.0, DType::Float64)));
  const Tensor rhs_fixed = random_tensor({3, 2}, 120);
  for (const bool lower : {false, true}) {
    for (const bool adjoint : {false, true}) {
      const std::string flags =
          std::string(lower ? " lower" : " upper") + (adjoint ? " adjoint" : "");
      cases.push_back({"MatrixTriangularSolve" + flags,
                       {"MatrixTriangularSolve"},
                       [=](const std::vector<Tensor>& in) {
                         const Tensor a = add(in[0], multiply(eye(3), scalar(3.0, DType::Float64)));
                         return std::vector<Tensor>{
                             triangular_solve(a, rhs_fixed, lower, adjoint),
                             triangular_solve(tri_fixed, in[1], lower, adjoint),
                             triangular_solve(a, in[1], lower, adjoint)};
                       },
                       {batch_of({3, 3}, 121), batch_of({3, 2}, 122)}});
    }
  }
  return cases;
}

// ---- structure: MatMul of a constant and a diagonal column or row -----------------------------

Attrs transposes(bool ta, bool tb) { return Attrs().set("transpose_a", ta).set("transpose_b", tb); }

void attach_structure_cases(std::vector<OpSample>& s) {
  const Tensor w = f64({1, 2, 3, 4, 5, 6}, {2, 3});    // [[1, 2, 3], [4, 5, 6]]
  const Tensor w_t = f64({1, 4, 2, 5, 3, 6}, {3, 2});  // its transpose, stored
  // op(W) times a diagonal column: row b is d[b] times column b of op(W) (dense [3, 2, 1]).
  attach(s, "MatMul",
         {{w, f64({0.5, -2, 3}, {3, 1})},
          {false, true},
          transposes(false, false),
          {2, 1},
          {0.5, 2, -4, -10, 9, 18}});
  attach(s, "MatMul",
         {{w_t, f64({0.5, -2, 3}, {1, 3})},
          {false, true},
          transposes(true, true),
          {2, 1},
          {0.5, 2, -4, -10, 9, 18}});
  // A diagonal row times op(W): row b is d[b] times row b of op(W) (dense [2, 1, 3]).
  attach(s, "MatMul",
         {{f64({0.5, -2}, {1, 2}), w},
          {true, false},
          transposes(false, false),
          {1, 3},
          {0.5, 1, 1.5, -8, -10, -12}});
  attach(s, "MatMul",
         {{f64({0.5, -2}, {2, 1}), w_t},
          {true, false},
          transposes(true, true),
          {1, 3},
          {0.5, 1, 1.5, -8, -10, -12}});
  // Declined: not a column.
  attach(s, "MatMul",
         {{w, f64({0.5, -2, 3, 1, 2, 4}, {3, 2})},
          {false, true},
          transposes(false, false),
          {2, 2},
          {}});
}

// ---- misuse -----------------------------------------------------------------------------------

MisuseCases linalg_misuse() {
  MisuseCases t;
  const Tensor a23 = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor singular = f64({1, 2, 2, 4}, {2, 2});
  const Tensor indefinite = f64({1, 2, 2, 1}, {2, 2});
  misuse(t, "matmul: inner dimensions 3 and 2", [a23] { matmul(a23, a23); },
         {"matmul", "[2, 3]", "3 vs 2"});
  misuse(t, "matmul: a vector", [a23] { matmul(f64({1, 2}), a23); }, {"matmul", "[2]", "[2, 3]"});
  misuse(t, "matmul: dtypes differ", [a23] { matmul(a23, cast(transpose(a23), DType::Float32)); },
         {"matmul", "float64", "float32"});
  misuse(t, "matmul: int32",
         [] {
           matmul(i32({1, 2, 3, 4}, {2, 2}), i32({1, 2, 3, 4}, {2, 2}));
         },
         {"matmul", "int32", "[2, 2]"});
  misuse(t, "matmul: batch dimensions [2] and [3]",
         [] {
           matmul(zeros({2, 2, 2}), zeros({3, 2, 2}));
         },
         {"matmul", "[2, 2, 2]", "[3, 2, 2]"});
  misuse(t, "matmul: a variable handle", [a23] { matmul(variable_handle(), a23); },
         {"matmul", "variable handle"});
  misuse(t, "matmul: a product of 2^80 elements",
         [] {
           matmul(zeros({std::size_t{1} << 40, 0}), zeros({0, std::size_t{1} << 40}));
         },
         {"matmul", "[1099511627776, 0]", "[0, 1099511627776]"});
  defined(t, "matmul: [2, 0] x [0, 3] is zeros", [] {
    const Tensor c = matmul(zeros({2, 0}), zeros({0, 3}));
    REQUIRE(c.shape() == Shape{2, 3});
    REQUIRE(elements<double>(c) == std::vector<double>(6, 0.0));
  });
  defined(t, "matmul: NaN propagates", [] {
    REQUIRE(is_nan(matmul(f64({kNaN}, {1, 1}), f64({1}, {1, 1}))));
  });
  misuse(t, "matrix_inverse: singular", [singular] { matrix_inverse(singular); },
         {"matrix_inverse", "singular", "[2, 2]"});
  misuse(t, "matrix_inverse: not square", [a23] { matrix_inverse(a23); },
         {"matrix_inverse", "[2, 3]"});
  misuse(t, "matrix_inverse: int32",
         [] {
           matrix_inverse(i32({1}, {1, 1}));
         },
         {"matrix_inverse", "int32", "[1, 1]"});
  misuse(t, "matrix_inverse: singular second batch matrix",
         [] {
           matrix_inverse(f64({1, 0, 0, 1, 0, 0, 0, 0}, {2, 2, 2}));
         },
         {"matrix_inverse", "singular", "[2, 2, 2]", "batch matrix 1"});
  defined(t, "matrix_inverse: a 0 x 0 matrix and an empty batch", [] {
    REQUIRE(matrix_inverse(zeros({0, 0})).shape() == Shape{0, 0});
    REQUIRE(matrix_inverse(zeros({0, 3, 3})).shape() == Shape{0, 3, 3});
  });
  misuse(t, "matrix_determinant: not square", [a23] { matrix_determinant(a23); },
         {"matrix_determinant", "[2, 3]"});
  misuse(t, "matrix_determinant: bool", [] { matrix_determinant(b8({1})); },
         {"matrix_determinant", "bool", "[1]"});
  defined(t, "matrix_determinant: singular is 0, 0 x 0 is 1", [singular] {
    REQUIRE(matrix_determinant(singular).item<double>() == 0.0);
    REQUIRE(matrix_determinant(zeros({0, 0})).item<double>() == 1.0);
  });
  misuse(t, "solve: singular a",
         [singular] {
           solve(singular, f64({1, 2}, {2, 1}));
         },
         {"solve", "singular", "[2, 2]", "[2, 1]"});
  misuse(t, "solve: b rows do not match",
         [] {
           solve(f64({1, 0, 0, 1}, {2, 2}), f64({1, 2, 3}, {3, 1}));
         },
         {"solve", "[2, 2]", "[3, 1]"});
  misuse(t, "solve: dtypes differ",
         [] {
           solve(f64({1}, {1, 1}), cast(f64({1}, {1, 1}), DType::Float32));
         },
         {"solve", "float64", "float32"});
  misuse(t, "solve: a variable handle",
         [] {
           solve(variable_handle(), f64({1}, {1, 1}));
         },
         {"solve", "variable handle"});
  misuse(t, "cholesky: not positive definite", [indefinite] { cholesky(indefinite); },
         {"cholesky", "positive definite", "[2, 2]"});
  misuse(t, "cholesky: negative diagonal",
         [] {
           cholesky(f64({-1}, {1, 1}));
         },
         {"cholesky", "positive definite", "[1, 1]"});
  misuse(t, "cholesky: not square", [a23] { cholesky(a23); }, {"cholesky", "[2, 3]"});
  misuse(t, "cholesky: int64", [] { cholesky(i64({1}, {1, 1})); }, {"cholesky", "int64", "[1, 1]"});
  return t;
}

}  // namespace

std::vector<OpSample> linalg_samples() {
  std::vector<OpSample> s = op_samples();
  attach(s, batch_cases());
  attach_structure_cases(s);
  attach_by_function(s, linalg_misuse(),
                     {{"matmul", "MatMul"},
                      {"matrix_inverse", "MatrixInverse"},
                      {"matrix_determinant", "MatrixDeterminant"},
                      {"solve", "MatrixSolve"},
                      {"cholesky", "Cholesky"}});
  return s;
}

}  // namespace tapegrad::samples
