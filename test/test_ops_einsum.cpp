// einsum against matmul / transpose / reduce_sum / multiply compositions (explicit and implicit
// outputs, "..." broadcasting, diagonals and traces, three operands), tensordot, norm (values,
// the zero subgradient), first and second derivatives, and bad input.
#include <cmath>
#include <limits>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

void require_same(const Tensor& got, const Tensor& expected, double tolerance = 1e-12) {
  require_close(got, expected.shape(), values(expected), tolerance);
}

Fn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& a) { return f(a[0]); };
}

}  // namespace

TEST_CASE("einsum of two operands equals the matmul composition", "[einsum][identity]") {
  const Tensor a = random_tensor({3, 4}, 1);
  const Tensor b = random_tensor({4, 5}, 2);
  const Tensor c = random_tensor({3, 4}, 3);
  require_same(einsum("ij,jk->ik", {a, b}), matmul(a, b));
  require_same(einsum("ij,jk", {a, b}), matmul(a, b));  // implicit output
  require_same(einsum("ij, jk -> ki", {a, b}), transpose(matmul(a, b)));
  const Tensor d = random_tensor({3, 5}, 4);
  require_same(einsum("ji,jk->ik", {c, d}), matmul(c, d, true, false));  // c^T d: a transpose flag
  require_same(einsum("ij,kj->ik", {a, c}), matmul(a, c, false, true));  // a b^T
  require_same(einsum("ij,ij->ij", {a, c}), multiply(a, c));
  require_same(einsum("ij,ij->", {a, c}), reduce_sum(multiply(a, c)));
  require_same(einsum("ij,ij", {a, c}), reduce_sum(multiply(a, c)));
  const Tensor u = random_tensor({3}, 5);
  const Tensor v = random_tensor({4}, 6);
  require_same(einsum("i,j->ij", {u, v}), matmul(reshape(u, {3, 1}), reshape(v, {1, 4})));
  require_same(einsum("i,i->", {v, v}), reduce_sum(square(v)));
  require_same(einsum("ij,j->i", {a, v}), reshape(matmul(a, reshape(v, {4, 1})), {3}));
  require_same(einsum("ij,k->ik", {a, u}),  // j summed on its own before the product
               multiply(reshape(reduce_sum(a, {1}), {3, 1}), reshape(u, {1, 3})));
}

TEST_CASE("einsum of one operand: transpose, sums, diagonal, trace", "[einsum][identity]") {
  const Tensor x = random_tensor({2, 3, 4}, 7);
  require_same(einsum("ijk->kij", {x}), transpose(x, {2, 0, 1}));
  require_same(einsum("ijk->j", {x}), reduce_sum(x, {0, 2}));
  require_same(einsum("ijk->", {x}), reduce_sum(x));
  require_same(einsum("ijk", {x}), x);
  require_same(einsum("kji", {x}), transpose(x, {2, 1, 0}));  // implicit: alphabetical
  const Tensor m = constant({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
  require_close(einsum("ii->i", {m}), {3}, {1, 5, 9});
  require_close(einsum("ii", {m}), {}, {15});
  const double inf = std::numeric_limits<double>::infinity();
  require_close(einsum("ii", {constant({{1, inf}, {-inf, 2}})}), {}, {3});  // off-diagonal unread
  require_close(einsum("iii->i", {reshape(range(0, 8, 1), {2, 2, 2})}), {2}, {0, 7});
  require_close(einsum("iji->j", {reshape(range(0, 8, 1), {2, 2, 2})}), {2}, {0 + 5, 2 + 7});
  const Tensor batch = random_tensor({2, 3, 3}, 8);
  const Tensor traces = einsum("bii->b", {batch});
  const auto bv = values(batch);
  require_close(traces, {2}, {bv[0] + bv[4] + bv[8], bv[9] + bv[13] + bv[17]});
  require_same(einsum("ij,jj->i", {random_tensor({2, 3}, 9), m}),
               reshape(matmul(random_tensor({2, 3}, 9), from_values({1, 5, 9}, {3, 1})), {2}));
}

TEST_CASE("einsum with \"...\": batched and broadcast products", "[einsum][identity]") {
  const Tensor a = random_tensor({2, 3, 4}, 10);
  const Tensor b = random_tensor({2, 4, 5}, 11);
  require_same(einsum("bij,bjk->bik", {a, b}), matmul(a, b));
  require_same(einsum("...ij,...jk->...ik", {a, b}), matmul(a, b));
  require_same(einsum("...ij,...jk", {a, b}), matmul(a, b));
  const Tensor wide = random_tensor({3, 1, 3, 4}, 12);
  const Tensor narrow = random_tensor({2, 4, 5}, 13);
  require_same(einsum("...ij,...jk->...ik", {wide, narrow}), matmul(wide, narrow));  // [3, 2, 3, 5]
  require_same(einsum("...i->...", {a}), reduce_sum(a, {2}));
  require_same(einsum("i...->...i", {a}), transpose(a, {1, 2, 0}));
  require_same(einsum("bij->b", {a}), reduce_sum(a, {1, 2}));
}

TEST_CASE("einsum of three operands contracts left to right", "[einsum][identity]") {
  const Tensor a = random_tensor({2, 3}, 14);
  const Tensor b = random_tensor({3, 4}, 15);
  const Tensor c = random_tensor({4, 5}, 16);
  require_same(einsum("ij,jk,kl->il", {a, b, c}), matmul(matmul(a, b), c), 1e-12);
  require_same(einsum("ij,jk,kl", {a, b, c}), matmul(matmul(a, b), c), 1e-12);
  const Tensor v = random_tensor({3}, 17);
  // i survives the first contraction because the third operand still needs it.
  require_same(einsum("ij,jk,i->k", {a, b, random_tensor({2}, 18)}),
               reshape(matmul(matmul(reshape(random_tensor({2}, 18), {1, 2}), a), b), {4}), 1e-12);
  require_same(
      einsum("j,jk,k->", {v, b, random_tensor({4}, 19)}),
      reshape(matmul(matmul(reshape(v, {1, 3}), b), reshape(random_tensor({4}, 19), {4, 1})), {}),
      1e-12);
}

TEST_CASE("einsum float32 and empty dimensions", "[einsum]") {
  const Tensor a = cast(constant({{1, 2}, {3, 4}}), DType::Float32);
  const Tensor r = einsum("ij,jk->ik", {a, a});
  CHECK(r.dtype() == DType::Float32);
  require_close(r, {2, 2}, {7, 10, 15, 22});
  require_close(einsum("ij,jk->ik", {zeros({2, 0}), zeros({0, 3})}), {2, 3}, {0, 0, 0, 0, 0, 0});
  // A size-1 "..." dimension broadcasts against an empty one, as NumPy's broadcasting does.
  CHECK(einsum("...i,...i->...i", {zeros({1, 2}), zeros({0, 2})}).shape() == Shape{0, 2});
}

TEST_CASE("einsum: first and second derivatives through the lowering", "[einsum][gradient]") {
  const Tensor a = random_tensor({2, 3}, 20);
  const Tensor b = random_tensor({3, 2}, 21);
  const Tensor sq = random_tensor({3, 3}, 22);
  const Tensor batch = random_tensor({2, 2, 3}, 23);
  auto two = [](const std::string& eq) {
    return Fn([eq](const std::vector<Tensor>& x) { return square(einsum(eq, {x[0], x[1]})); });
  };
  verify_gradients(two("ij,jk->ik"), {a, b});
  verify_gradients(two("ij,kj->ki"), {a, transpose(b)});
  verify_gradients(two("ij,ij"), {a, random_tensor({2, 3}, 24)});
  verify_gradients(two("...ij,jk->...ik"), {batch, b});
  verify_gradients(unary([](const Tensor& x) { return square(einsum("ii->i", {x})); }), {sq});
  verify_gradients(unary([](const Tensor& x) { return square(einsum("ii", {x})); }), {sq});
  verify_gradients(unary([](const Tensor& x) { return einsum("ij,jk,ki->", {x, x, x}); }), {sq});
}

TEST_CASE("tensordot contracts the last axes of a with the first of b", "[tensordot]") {
  const Tensor a = random_tensor({2, 3, 4}, 25);
  const Tensor b = random_tensor({3, 4, 5}, 26);
  require_same(tensordot(a, b, 2), einsum("ijk,jkl->il", {a, b}));
  require_same(tensordot(random_tensor({2, 3}, 27), random_tensor({3, 4}, 28), 1),
               matmul(random_tensor({2, 3}, 27), random_tensor({3, 4}, 28)));
  require_same(tensordot(constant({1, 2}), constant({3, 4, 5}), 0),
               einsum("i,j->ij", {constant({1, 2}), constant({3, 4, 5})}));
  require_close(tensordot(a, a, 3), {}, {values(reduce_sum(square(a)))[0]});
  verify_gradients([](const std::vector<Tensor>& x) { return square(tensordot(x[0], x[1], 2)); },
                   {a, b});
}

TEST_CASE("norm: vector and matrix norms match their definitions", "[norm]") {
  const Tensor v = constant({3, -4});
  require_close(norm(v), {}, {5});
  require_close(norm(v, "1"), {}, {7});
  require_close(norm(v, "inf"), {}, {4});
  require_close(norm(v, "3"), {}, {std::cbrt(27.0 + 64.0)});
  require_close(norm(v, "1.5"), {}, {std::pow(std::pow(3.0, 1.5) + std::pow(4.0, 1.5), 1 / 1.5)});
  const Tensor m = constant({{1, -2}, {3, 4}});
  require_close(norm(m), {}, {std::sqrt(30.0)});  // all of it as one vector
  require_close(norm(m, "fro", {0, 1}), {}, {std::sqrt(30.0)});
  require_close(norm(m, "1", {0, 1}), {}, {6});    // largest column sum
  require_close(norm(m, "inf", {0, 1}), {}, {7});  // largest row sum
  require_close(norm(m, "1", {-1, -2}), {}, {7});  // rows and columns swapped
  require_close(norm(m, "euclidean", {1}), {2}, {std::sqrt(5.0), 5});
  require_close(norm(m, "inf", {0}), {2}, {3, 4});
  const Tensor batch = stack({m, multiply(m, scalar(2.0, DType::Float64))});
  require_close(norm(batch, "1", {1, 2}), {2}, {6, 12});
}

TEST_CASE("norm: a NaN in a group gives NaN for every ord, zero vectors 0", "[norm]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::Float64, DType::Float32}) {
    INFO(dtype_name(dtype));
    const Tensor v = cast(constant({nan, 1.0}), dtype);
    for (const std::string ord : {"euclidean", "1", "inf", "3", "1.5"}) {
      INFO("ord " << ord);
      CHECK(std::isnan(values(norm(v, ord))[0]));
    }
    // Rows: [NaN, 1] -> NaN, [3, 4] -> 5, [0, 0] -> 0; fro of a matrix holding a NaN.
    const Tensor rows = cast(constant({{nan, 1.0}, {3.0, 4.0}, {0.0, 0.0}}), dtype);
    const std::vector<double> row_norms = values(norm(rows, "euclidean", {1}));
    CHECK(std::isnan(row_norms[0]));
    CHECK(row_norms[1] == 5.0);
    CHECK(row_norms[2] == 0.0);
    CHECK(std::isnan(values(norm(rows, "fro", {0, 1}))[0]));
    CHECK(values(norm(cast(zeros({2, 2}), dtype), "3"))[0] == 0.0);
  }
}

TEST_CASE("norm: gradient 0 at a zero vector, exact elsewhere to second order",
          "[norm][gradient]") {
  const Tensor zero = zeros({3});
  for (const std::string ord : {"euclidean", "1", "inf", "3"}) {
    INFO("ord " << ord);
    GradientTape tape;
    tape.watch(zero);
    const Tensor g = tape.gradient(norm(zero, ord), zero);
    require_close(g, {3}, {0, 0, 0});
  }
  {
    const Tensor v = constant({3, -4});
    GradientTape tape;
    tape.watch(v);
    require_close(tape.gradient(norm(v), v), {2}, {0.6, -0.8});
  }
  const Tensor x = random_tensor({3, 4}, 29, 0.2, 1.0);
  for (const std::string ord : {"euclidean", "3", "1.5"}) {
    INFO("ord " << ord);
    verify_gradients(unary([=](const Tensor& t) { return norm(t, ord, {1}); }), {x});
    verify_gradients(unary([=](const Tensor& t) { return norm(t, ord); }), {x});
  }
  verify_gradients(unary([](const Tensor& t) {
                     return norm(t, "1", {0, 1});
                   }),
                   {x}, VerifyOptions{1});
  verify_gradients(unary([](const Tensor& t) { return norm(t, "fro", {0, 1}); }), {x});
}

TEST_CASE("einsum, tensordot, norm misuse", "[einsum][norm][misuse]") {
  const Tensor a = random_tensor({2, 3}, 30);
  const Tensor b = random_tensor({4, 5}, 31);
  expect_misuse<InvalidArgument>(
      "einsum: contracted sizes differ",
      [&] {
        einsum("ij,jk->ik", {a, b});
      },
      {"einsum", "ij,jk->ik", "[2, 3]", "[4, 5]", "label 'j'", "3", "4"});
  expect_misuse<InvalidArgument>("einsum: an empty dimension against a size-3 one",
                                 [&] {
                                   einsum("ij,jk->ik", {zeros({2, 0}), zeros({3, 2})});
                                 },
                                 {"einsum", "label 'j' has sizes 0 and 3"});
  expect_misuse<InvalidArgument>("einsum: too few operands", [&] { einsum("ij,jk->ik", {a}); },
                                 {"einsum", "names 2 operands, 1 given"});
  expect_misuse<InvalidArgument>("einsum: labels and rank differ", [&] { einsum("ijk->i", {a}); },
                                 {"einsum", "operand 0 has rank 2 but 3 labels"});
  expect_misuse<InvalidArgument>("einsum: a character that is no label",
                                 [&] { einsum("i1->i", {a}); }, {"einsum", "unexpected '1'"});
  expect_misuse<InvalidArgument>("einsum: output label in no operand",
                                 [&] { einsum("ij->k", {a}); },
                                 {"einsum", "output label 'k' is in no operand"});
  expect_misuse<InvalidArgument>("einsum: output label twice", [&] { einsum("ij->ii", {a}); },
                                 {"einsum", "'i' appears twice"});
  expect_misuse<InvalidArgument>(
      "einsum: a repeated label with two sizes",
      [&] {
        einsum("ii->i", {random_tensor({1, 3}, 3)});
      },
      {"einsum", "[1, 3]", "label 'i' repeats in operand 0", "sizes 1 and 3"});
  expect_misuse<InvalidArgument>("einsum: integer operands",
                                 [&] {
                                   einsum("i->i", {from_values({1, 2}, {2}, DType::Int32)});
                                 },
                                 {"einsum", "floating", "int32"});
  expect_misuse<InvalidArgument>("einsum: no operands", [&] { einsum("->", {}); },
                                 {"einsum", "at least one operand"});
  expect_misuse<InvalidArgument>(
      "einsum: \"...\" that do not broadcast",
      [&] {
        einsum("...i,...i->...", {random_tensor({2, 3}, 1), random_tensor({4, 3}, 2)});
      },
      {"einsum", "do not broadcast", "[2, 3]", "[4, 3]"});
  expect_misuse<InvalidArgument>(
      "tensordot: contracted dimensions differ", [&] { tensordot(a, b, 1); },
      {"tensordot", "a has shape [2, 3]", "b has shape [4, 5]", "axes 1"});
  expect_misuse<InvalidArgument>("tensordot: too many axes", [&] { tensordot(a, b, 3); },
                                 {"tensordot", "axes 3"});
  expect_misuse<InvalidArgument>("norm: unknown ord", [&] { norm(a, "max"); },
                                 {"norm", "[2, 3]", "ord \"max\""});
  expect_misuse<InvalidArgument>("norm: ord 0", [&] { norm(a, "0"); },
                                 {"norm", "ord \"0\"", "> 0"});
  expect_misuse<InvalidArgument>("norm: matrix 2-norm",
                                 [&] {
                                   norm(a, "2", {0, 1});
                                 },
                                 {"norm", "ord \"2\"", "[0, 1]", "matrix norms support"});
  expect_misuse<InvalidArgument>("norm: fro over one axis", [&] { norm(a, "fro", {1}); },
                                 {"norm", "fro", "two axes"});
  expect_misuse<InvalidArgument>("norm: axis out of range", [&] { norm(a, "euclidean", {2}); },
                                 {"norm", "[2, 3]", "2"});
  expect_misuse<InvalidArgument>("norm of integers",
                                 [&] {
                                   norm(from_values({1, 2}, {2}, DType::Int64));
                                 },
                                 {"norm", "int64", "float32 or float64"});
}

TEST_CASE("the guide's indexing example gives the gradient worked out by hand", "[einsum][guide]") {
  const Tensor logits = constant({{2.0, 0.5, 1.0}, {0.1, 3.0, 0.2}});
  GradientTape tape;
  tape.watch(logits);
  auto [best, where_best] = top_k(logits, 2);
  require_close(where_best, {2, 2}, {0, 2, 1, 2});
  const Tensor pairs = from_values({0, 1, 1, 0}, {2, 2}, DType::Int64);
  const Tensor picked = gather_nd(logits, pairs);
  require_close(picked, {2}, {0.5, 0.1});
  const Tensor running = cumsum(logits, 1, /*exclusive=*/true);
  const Tensor scores = einsum("bi,bj->bij", {logits, logits});
  const Tensor length = norm(logits, "euclidean", {1});
  const Tensor loss = reduce_sum(best) + reduce_sum(picked) + reduce_sum(running) +
                      reduce_sum(scores) + reduce_sum(length);
  const Tensor dlogits = tape.gradient(loss, logits);
  // top_k picks, gather_nd picks, exclusive cumsum counts later positions, the outer product
  // gives 2 * row sum, the norm x / |x|.
  const double n0 = std::sqrt(5.25), n1 = std::sqrt(9.05);
  require_close(dlogits, {2, 3},
                {1 + 0 + 2 + 7 + 2 / n0, 0 + 1 + 1 + 7 + 0.5 / n0, 1 + 0 + 0 + 7 + 1 / n0,
                 0 + 1 + 2 + 6.6 + 0.1 / n1, 1 + 0 + 1 + 6.6 + 3 / n1, 1 + 0 + 0 + 6.6 + 0.2 / n1});
}
