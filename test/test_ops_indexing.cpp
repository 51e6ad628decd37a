// one_hot, range, eye, linspace, pad, gather_nd, scatter_nd, tensor_scatter_nd_add/update,
// boolean_mask: exact values (TF's documented examples among them), gradients by hand and
// numerically to second order, no gradient for indices and builders, and bad input.
#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor ints(const std::vector<double>& v, const Shape& shape, DType dtype = DType::Int64) {
  return from_values(v, shape, dtype);
}

Fn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& a) { return f(a[0]); };
}

}  // namespace

TEST_CASE("one_hot, range, eye, linspace: values and dtypes", "[create]") {
  const Tensor h = one_hot(ints({0, 2, -1, 1}, {2, 2}, DType::Int32), 3);
  CHECK(h.dtype() == DType::Float64);
  require_close(h, {2, 2, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});  // -1: an all-off row
  const Tensor hi = one_hot(ints({1, 5}, {2}), 2, DType::Int32);
  CHECK(hi.dtype() == DType::Int32);
  require_close(hi, {2, 2}, {0, 1, 0, 0});
  require_close(range(3, 18, 3), {5}, {3, 6, 9, 12, 15});
  require_close(range(3, 1, -0.5), {4}, {3, 2.5, 2, 1.5});
  require_close(range(0, 5, 1, DType::Int32), {5}, {0, 1, 2, 3, 4});
  CHECK(range(0, 5, 1, DType::Int32).dtype() == DType::Int32);
  CHECK(range(5, 0, 1).shape() == Shape{0});
  require_close(eye(3), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(eye(2, DType::Float32).dtype() == DType::Float32);
  require_close(linspace(10, 12, 3), {3}, {10, 11, 12});
  require_close(linspace(0, 1, 5), {5}, {0, 0.25, 0.5, 0.75, 1});
  require_close(linspace(4, 9, 1), {1}, {4});
  CHECK(values(linspace(0.1, 0.7, 7)).back() == 0.7);  // the end exactly
}

TEST_CASE("pad: constant, reflect and symmetric match TF's examples", "[pad]") {
  const Tensor x = constant({{1, 2, 3}, {4, 5, 6}});
  require_close(pad(x, {{1, 1}, {2, 2}}), {4, 7}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0,
                                                   0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  require_close(
      pad(x, {{1, 1}, {2, 2}}, PadMode::Reflect), {4, 7},
      {6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1});
  require_close(
      pad(x, {{1, 1}, {2, 2}}, PadMode::Symmetric), {4, 7},
      {2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5, 6, 6, 5, 5, 4, 4, 5, 6, 6, 5});
  require_close(pad(constant({1, 2, 3}), {{2, 0}}, PadMode::Constant, 9), {5}, {9, 9, 1, 2, 3});
  const Tensor i = pad(ints({1, 2}, {2}, DType::Int32), {{1, 2}}, PadMode::Symmetric);
  CHECK(i.dtype() == DType::Int32);
  require_close(i, {5}, {1, 1, 2, 2, 1});
  require_close(pad(constant(5.0), {}), {}, {5});
}

TEST_CASE("pad of bool: constant mode only, as documented", "[pad][bool]") {
  const Tensor b = cast(constant({1.0, 0.0, 1.0}), DType::Bool);
  const Tensor padded = pad(b, {{1, 2}}, PadMode::Constant, 1);
  CHECK(padded.dtype() == DType::Bool);
  require_close(padded, {6}, {1, 1, 0, 1, 1, 1});
  require_close(pad(b, {{2, 0}}), {5}, {0, 0, 1, 0, 1});
  CHECK(message_of<InvalidArgument>([&] {
          pad(b, {{1, 1}}, PadMode::Reflect);
        }) ==
        "pad: x has shape [3] and dtype bool: paddings [[1, 1]] (mode reflect) need a numeric "
        "dtype: bool is padded only in constant mode");
  CHECK(message_of<InvalidArgument>([&] {
          pad(b, {{0, 2}}, PadMode::Symmetric);
        }) ==
        "pad: x has shape [3] and dtype bool: paddings [[0, 2]] (mode symmetric) need a numeric "
        "dtype: bool is padded only in constant mode");
}

TEST_CASE("pad gradients: the window back, mirrored copies added", "[pad][gradient]") {
  const Tensor x = constant({1, 2, 3});
  for (auto [mode, expected] :
       std::vector<std::pair<PadMode, std::vector<double>>>{{PadMode::Constant, {1, 1, 1}},
                                                            {PadMode::Reflect, {2, 3, 1}},
                                                            {PadMode::Symmetric, {2, 2, 2}}}) {
    GradientTape tape;
    tape.watch(x);
    // (1, 2): reflect reads [2 1 2 3 2 1], symmetric [1 1 2 3 3 2]
    const Tensor g = tape.gradient(reduce_sum(pad(x, {{1, 2}}, mode, 7)), x);
    require_close(g, {3}, expected);
  }
  const Tensor r = random_tensor({3, 4}, 1);
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Symmetric}) {
    INFO("mode " << static_cast<int>(mode));
    verify_gradients(unary([=](const Tensor& v) {
                       return square(pad(v, {{1, 2}, {2, 0}}, mode, 0.5));
                     }),
                     {r});
  }
}

TEST_CASE("gather_nd and scatter_nd: TF's examples, duplicates add", "[gather_nd]") {
  const Tensor p = constant({{1, 2}, {3, 4}});
  require_close(gather_nd(p, ints({0, 0, 1, 1}, {2, 2})), {2}, {1, 4});
  require_close(gather_nd(p, ints({1, 0}, {2, 1}, DType::Int32)), {2, 2}, {3, 4, 1, 2});
  require_close(gather_nd(p, ints({0, 1, 1, 0}, {2, 1, 2})), {2, 1}, {2, 3});
  const Tensor cube = reshape(range(0, 8, 1), {2, 2, 2});
  require_close(gather_nd(cube, ints({1, 0}, {1, 2})), {1, 2}, {4, 5});
  require_close(gather_nd(p, ints({}, {0})), {2, 2}, {1, 2, 3, 4});  // m = 0: all of params
  const Tensor s = scatter_nd(ints({4, 3, 1, 7}, {4, 1}), constant({9, 10, 11, 12}), {8});
  require_close(s, {8}, {0, 11, 0, 10, 9, 0, 0, 12});
  require_close(scatter_nd(ints({1, 1}, {2, 1}), constant({1, 2}), {3}), {3}, {0, 3, 0});
  const Tensor rows =
      scatter_nd(ints({0, 2}, {2, 1}, DType::Int32), constant({{5, 5}, {6, 7}}), {3, 2});
  require_close(rows, {3, 2}, {5, 5, 0, 0, 6, 7});
}

TEST_CASE("tensor_scatter_nd_add and _update: TF's examples", "[scatter]") {
  const Tensor t = range(1, 9, 1);
  const Tensor idx = ints({4, 3, 1, 7}, {4, 1});
  const Tensor upd = constant({9, 10, 11, 12});
  require_close(tensor_scatter_nd_add(t, idx, upd), {8}, {1, 13, 3, 14, 14, 6, 7, 20});
  require_close(tensor_scatter_nd_update(t, idx, upd), {8}, {1, 11, 3, 10, 9, 6, 7, 12});
  // A duplicate adds twice for add; for update the last one stays.
  require_close(tensor_scatter_nd_add(t, ints({0, 0}, {2, 1}), constant({1, 2})), {8},
                {4, 2, 3, 4, 5, 6, 7, 8});
  require_close(tensor_scatter_nd_update(t, ints({0, 0}, {2, 1}), constant({1, 2})), {8},
                {2, 2, 3, 4, 5, 6, 7, 8});
  const Tensor ti =
      tensor_scatter_nd_update(ints({1, 2, 3}, {3}), ints({1}, {1, 1}), ints({9}, {1}));
  require_close(ti, {3}, {1, 9, 3});
}

TEST_CASE("scatter gradients: by hand, update zeroes the replaced slots", "[scatter][gradient]") {
  const Tensor t = random_tensor({5}, 2);
  const Tensor idx = ints({3, 0}, {2, 1});
  const Tensor upd = constant({1, 2});
  const Tensor w = constant({1, 2, 3, 4, 5});
  GradientTape tape(/*persistent=*/true);
  tape.watch(t);
  tape.watch(upd);
  const Tensor updated = reduce_sum(multiply(tensor_scatter_nd_update(t, idx, upd), w));
  const Tensor added = reduce_sum(multiply(tensor_scatter_nd_add(t, idx, upd), w));
  auto pause = tape.stop_recording();
  require_close(tape.gradient(updated, t), {5}, {0, 2, 3, 0, 5});
  require_close(tape.gradient(updated, upd), {2}, {4, 1});
  require_close(tape.gradient(added, t), {5}, {1, 2, 3, 4, 5});
  require_close(tape.gradient(added, upd), {2}, {4, 1});
}

TEST_CASE("tensor_scatter_nd_update: an overwritten duplicate's derivative is zero",
          "[scatter][gradient]") {
  // out = [u2, t1, t2, u1 then u3: u3, t4]: u1 is written and overwritten, so nothing depends
  // on it. TF gives it its slot's gradient; that is not the derivative of this forward pass.
  const Tensor t = random_tensor({5}, 7);
  const Tensor upd = constant({1, 2, 3});
  const Tensor idx = ints({3, 0, 3}, {3, 1});
  const Tensor w = constant({1, 2, 3, 4, 5});
  {
    GradientTape tape(/*persistent=*/true);
    tape.watch(t);
    tape.watch(upd);
    const Tensor out = tensor_scatter_nd_update(t, idx, upd);
    require_close(out, {5}, {2, values(t)[1], values(t)[2], 3, values(t)[4]});
    const Tensor loss = reduce_sum(multiply(out, w));
    auto pause = tape.stop_recording();
    require_close(tape.gradient(loss, t), {5}, {0, 2, 3, 0, 5});
    require_close(tape.gradient(loss, upd), {3}, {0, 1, 4});
    // d out / d upd, reverse and forward mode alike: out[3] = u3, out[0] = u2.
    const std::vector<double> expected = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    require_close(tape.jacobian(out, upd), {5, 3}, expected);
  }
  const auto scatter_into_t = [&](const Tensor& u) { return tensor_scatter_nd_update(t, idx, u); };
  require_close(jacobian_forward(scatter_into_t, upd), {5, 3},
                {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  // Rows of a matrix: row 1 written by updates 0 and 2, the last stays.
  const Tensor m = random_tensor({3, 2}, 8);
  const Tensor rows = random_tensor({3, 2}, 9);
  GradientTape tape;
  tape.watch(rows);
  const Tensor loss =
      reduce_sum(multiply(tensor_scatter_nd_update(m, ints({1, 0, 1}, {3, 1}), rows),
                          constant({{1, 2}, {3, 4}, {5, 6}})));
  require_close(tape.gradient(loss, rows), {3, 2}, {0, 0, 1, 2, 3, 4});
}

TEST_CASE("tensor_scatter_nd_update in a Function: the kept updates follow each call's indices",
          "[scatter][gradient][function]") {
  // The indices are an argument: a replay with other indices (duplicates or not) must give the
  // gradient of those, not of the traced ones.
  const Tensor t = random_tensor({4}, 10);
  const Tensor w = constant({1, 2, 3, 4});
  const Function gradient_of_updates = function([&](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch(args[1]);
    const Tensor loss = reduce_sum(multiply(tensor_scatter_nd_update(t, args[0], args[1]), w));
    return std::vector<Tensor>{tape.gradient(loss, args[1])};
  });
  const Tensor u = constant({5, 6, 7});
  require_close(gradient_of_updates({ints({3, 0, 1}, {3, 1}), u})[0], {3}, {4, 1, 2});
  require_close(gradient_of_updates({ints({3, 0, 3}, {3, 1}), u})[0], {3}, {0, 1, 4});
  require_close(gradient_of_updates({ints({2, 2, 2}, {3, 1}), u})[0], {3}, {0, 0, 3});
  require_close(gradient_of_updates({ints({0, 1, 2}, {3, 1}), u})[0], {3}, {1, 2, 3});
  CHECK(gradient_of_updates.trace_count() == 1);
}

TEST_CASE("gather_nd, scatter_nd, tensor scatters: first and second derivatives",
          "[scatter][gradient]") {
  const Tensor p = random_tensor({3, 2, 2}, 3);
  const Tensor idx = ints({2, 1, 0, 0, 2, 1}, {3, 2});  // (2, 0) twice: gathered twice
  const Tensor idx2 = ints({2, 0, 0, 0, 1, 1}, {3, 2});
  verify_gradients(unary([=](const Tensor& v) { return square(gather_nd(v, idx)); }), {p});
  verify_gradients(unary([=](const Tensor& u) {
                     return square(scatter_nd(idx, u, {3, 2, 2}));
                   }),
                   {random_tensor({3, 2}, 4)});
  const Fn update = [=](const std::vector<Tensor>& a) {
    return square(tensor_scatter_nd_update(a[0], idx2, a[1]));
  };
  verify_gradients(update, {p, random_tensor({3, 2}, 5)});
  const Fn add_fn = [=](const std::vector<Tensor>& a) {
    return multiply(tensor_scatter_nd_add(a[0], idx, a[1]), a[0]);
  };
  verify_gradients(add_fn, {p, random_tensor({3, 2}, 6)});
}

TEST_CASE("boolean_mask: rows where the mask is true, gradient scattered back", "[boolean_mask]") {
  const Tensor x = constant({{1, 2}, {3, 4}, {5, 6}});
  const Tensor rows = from_values({1, 0, 1}, {3}, DType::Bool);
  require_close(boolean_mask(x, rows), {2, 2}, {1, 2, 5, 6});
  const Tensor cells = from_values({0, 1, 1, 0, 0, 1}, {3, 2}, DType::Bool);
  require_close(boolean_mask(x, cells), {3}, {2, 3, 6});
  CHECK(boolean_mask(x, from_values({0, 0, 0}, {3}, DType::Bool)).shape() == Shape{0, 2});
  GradientTape tape;
  tape.watch(x);
  const Tensor g =
      tape.gradient(reduce_sum(multiply(boolean_mask(x, cells), constant({7, 8, 9}))), x);
  require_close(g, {3, 2}, {0, 7, 8, 0, 0, 9});
  verify_gradients(unary([=](const Tensor& v) { return square(boolean_mask(v, rows)); }),
                   {random_tensor({3, 2}, 7)});
}

TEST_CASE("indices and builders carry no gradient", "[indexing][gradient]") {
  const Tensor x = constant({0.5, 1.5});
  GradientTape tape;
  tape.watch(x);
  // The indices come from x through a cast: no gradient flows into integers (TF).
  const Tensor h = one_hot(cast(x, DType::Int32), 3);
  CHECK_FALSE(tape.gradient(reduce_sum(h), x).defined());
}

TEST_CASE("indexing misuse", "[indexing][misuse]") {
  const Tensor p = constant({{1, 2}, {3, 4}});
  expect_misuse<InvalidArgument>("one_hot with float indices", [&] { one_hot(constant({1.0}), 2); },
                                 {"one_hot", "indices", "float64", "int32 or int64"});
  expect_misuse<InvalidArgument>("one_hot with negative depth",
                                 [&] { one_hot(ints({1}, {1}), -2); }, {"one_hot", "depth -2"});
  expect_misuse<InvalidArgument>("range with delta 0", [&] { range(0, 4, 0); },
                                 {"range", "delta 0", "nonzero"});
  expect_misuse<InvalidArgument>("range with more values than a tensor holds",
                                 [&] { range(0, 1e30, 1); }, {"range", "limit", "exceed"});
  expect_misuse<InvalidArgument>("linspace with num 0", [&] { linspace(0, 1, 0); },
                                 {"linspace", "num 0"});
  expect_misuse<InvalidArgument>("linspace on int32", [&] { linspace(0, 1, 3, DType::Int32); },
                                 {"linspace", "int32"});
  expect_misuse<InvalidArgument>("pad: one pair per dimension",
                                 [&] {
                                   pad(p, {{1, 1}});
                                 },
                                 {"pad", "[2, 2]", "[[1, 1]]", "one (before, after) pair"});
  expect_misuse<InvalidArgument>("pad: negative padding",
                                 [&] {
                                   pad(p, {{0, 0}, {-1, 0}});
                                 },
                                 {"pad", "[[0, 0], [-1, 0]]", ">= 0"});
  expect_misuse<InvalidArgument>("pad: reflect wider than size - 1",
                                 [&] {
                                   pad(p, {{0, 0}, {2, 0}}, PadMode::Reflect);
                                 },
                                 {"pad", "reflect", "[[0, 0], [2, 0]]", "size 2"});
  expect_misuse<InvalidArgument>("pad: symmetric wider than size",
                                 [&] {
                                   pad(p, {{3, 0}, {0, 0}}, PadMode::Symmetric);
                                 },
                                 {"pad", "symmetric", "size 2"});
  expect_misuse<InvalidArgument>(
      "pad: a fill an int32 cannot hold",
      [&] {
        pad(ints({1}, {1}, DType::Int32), {{1, 1}}, PadMode::Constant, 0.5);
      },
      {"pad", "0.5", "int32"});
  expect_misuse<InvalidArgument>(
      "gather_nd index out of range",
      [&] {
        gather_nd(p, ints({0, 1, 2, 0}, {2, 2}));
      },
      {"gather_nd", "params has shape [2, 2]", "index [2, 0]", "row 1", "out of range"});
  expect_misuse<InvalidArgument>("gather_nd negative index",
                                 [&] {
                                   gather_nd(p, ints({-1}, {1, 1}, DType::Int32));
                                 },
                                 {"gather_nd", "index [-1]", "[2, 2]"});
  expect_misuse<InvalidArgument>("gather_nd index depth above the rank",
                                 [&] {
                                   gather_nd(p, ints({0, 0, 0}, {1, 3}));
                                 },
                                 {"gather_nd", "indices has shape [1, 3]", "at most 2"});
  expect_misuse<InvalidArgument>("gather_nd float indices",
                                 [&] {
                                   gather_nd(p, constant({0.0, 1.0}));
                                 },
                                 {"gather_nd", "int32 or int64"});
  expect_misuse<InvalidArgument>("scatter_nd updates of the wrong shape",
                                 [&] {
                                   scatter_nd(ints({0, 1}, {2, 1}), constant({1, 2, 3}), {4});
                                 },
                                 {"scatter_nd", "updates has shape [3]", "[2]", "shape [4]"});
  expect_misuse<InvalidArgument>("scatter_nd index out of range",
                                 [&] {
                                   scatter_nd(ints({4}, {1, 1}), constant({1}), {4});
                                 },
                                 {"scatter_nd", "index [4]", "shape [4]"});
  expect_misuse<InvalidArgument>(
      "tensor_scatter_nd_update dtype mismatch",
      [&] {
        tensor_scatter_nd_update(constant({1, 2}), ints({0}, {1, 1}), ints({1}, {1}));
      },
      {"tensor_scatter_nd_update", "float64", "int64", "same dtype"});
  expect_misuse<InvalidArgument>(
      "tensor_scatter_nd_add index out of range",
      [&] {
        tensor_scatter_nd_add(constant({1, 2}), ints({-3}, {1, 1}), constant({1}));
      },
      {"tensor_scatter_nd_add", "index [-3]", "[2]"});
  expect_misuse<InvalidArgument>("boolean_mask of the wrong shape",
                                 [&] {
                                   boolean_mask(p, from_values({1, 0, 1}, {3}, DType::Bool));
                                 },
                                 {"boolean_mask", "x has shape [2, 2]", "mask has shape [3]"});
  expect_misuse<InvalidArgument>("boolean_mask with a float mask",
                                 [&] {
                                   boolean_mask(p, constant({1, 0}));
                                 },
                                 {"boolean_mask", "mask", "float64", "bool"});
}
