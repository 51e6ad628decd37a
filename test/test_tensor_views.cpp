// Views (docs/guide.md "Memory", docs/design.md "Tensors"): reshape, expand_dims, squeeze,
// identity, stop_gradient, transpose, slice, split and reverse share their input's buffer;
// array<T>() of a strided view is a contiguous copy built once; view<T>() never copies; a
// shared buffer is counted once; and immutability holds (a view never sees a later
// Variable::assign, and the walk's in-place sums never write a buffer someone else can read).
// That every op takes strided inputs is checked op by op in test_op_samples.cpp.
#include "support.hpp"

#include <cstdint>
#include <vector>

using namespace tapegrad;
using tapegrad::testing::random_tensor;
using tapegrad::testing::values;

namespace {

// 0, 1, 2, ... as float64 of `shape`.
Tensor iota(const Shape& shape) {
  std::vector<double> v(num_elements(shape));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return from_values(v, shape);
}

// The elements view<double>() reads, in row-major order.
std::vector<double> viewed(const Tensor& t) {
  std::vector<double> out;
  for (double v : t.view<double>()) out.push_back(v);
  return out;
}

const double* buffer_start(const Tensor& t) { return t.array<double>().data(); }

}  // namespace

TEST_CASE("shape ops return views of their input's buffer, with the expected elements", "[views]") {
  const Tensor x = iota({2, 3, 4});
  const MemoryStats before = memory_stats();

  const Tensor r = reshape(x, {4, 6});
  const Tensor e = expand_dims(x, 1);
  const Tensor s = squeeze(e, {1});
  const Tensor i = identity(x);
  const Tensor g = stop_gradient(x);
  const Tensor t = transpose(x, {2, 0, 1});
  const Tensor sl = slice(x, {1, 1, 2}, {1, 2, 2});
  const std::vector<Tensor> parts = split(x, 2, 2);
  const Tensor rv = reverse(x, {0, 2});

  // No element buffer was allocated for any of them.
  CHECK(memory_stats().bytes_in_use == before.bytes_in_use);
  for (const Tensor& v : {r, e, s, i, g, t, sl, parts[0], parts[1], rv}) {
    CHECK(shares_storage(v, x));
    CHECK(v.id() != x.id());
  }
  CHECK(shares_storage(t, sl));  // two views of one base
  CHECK_FALSE(shares_storage(x, iota({2, 3, 4})));
  CHECK_FALSE(shares_storage(x, Tensor()));

  CHECK(r.shape() == Shape{4, 6});
  CHECK(values(r) == values(x));
  CHECK(e.shape() == Shape{2, 1, 3, 4});
  CHECK(s.shape() == Shape{2, 3, 4});
  CHECK(values(i) == values(x));
  CHECK(values(g) == values(x));
  CHECK(t.shape() == Shape{4, 2, 3});
  // t[a, b, c] = x[b, c, a] = 12 b + 4 c + a.
  std::vector<double> expected_t;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) expected_t.push_back(12 * b + 4 * c + a);
  CHECK(values(t) == expected_t);
  CHECK(viewed(t) == expected_t);
  // x[1, 1:3, 2:4] = 12 + {4, 8} + {2, 3}.
  CHECK(sl.shape() == Shape{1, 2, 2});
  CHECK(values(sl) == std::vector<double>{18, 19, 22, 23});
  CHECK(parts[1].shape() == Shape{2, 3, 2});
  CHECK(values(parts[1]) == std::vector<double>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23});
  // reverse of axes 0 and 2: rv[a, b, c] = x[1 - a, b, 3 - c].
  std::vector<double> expected_rv;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) expected_rv.push_back(12 * (1 - a) + 4 * b + (3 - c));
  CHECK(values(rv) == expected_rv);
  CHECK(viewed(rv) == expected_rv);
}

TEST_CASE("views of views compose onto the first tensor's buffer", "[views]") {
  const Tensor x = iota({4, 6});
  // rows 1..2 of x^T reversed, then reshaped: each step a view of x.
  const Tensor a = reverse(slice(transpose(x), {1, 0}, {2, 4}), {1});
  CHECK(shares_storage(a, x));
  // a[i, j] = x^T[1 + i, 3 - j] = x[3 - j, 1 + i] = 6 (3 - j) + 1 + i.
  CHECK(values(a) == std::vector<double>{19, 13, 7, 1, 20, 14, 8, 2});
  // A contiguous view reshapes into another view of x; a strided one whose axes do not merge
  // evenly (a's strides are 1 and -6) reshapes its own copy.
  const Tensor rows = slice(x, {1, 0}, {2, 6});
  CHECK(shares_storage(reshape(rows, {3, 4}), x));
  CHECK(values(reshape(rows, {3, 4})) ==
        std::vector<double>{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
  const Tensor flat = reshape(a, {8});
  CHECK_FALSE(shares_storage(flat, x));
  CHECK(values(flat) == values(a));
}

TEST_CASE("a strided view reshapes into a strided view where its axes merge or split evenly",
          "[views]") {
  const Tensor x = iota({4, 5, 3});
  const Tensor t =
      transpose(x, {1, 2, 0});  // [5, 3, 4], strides (3, 1, 15): t[a, b, c] = x[c, a, b]
  const MemoryStats before = memory_stats();
  const Tensor merged = reshape(t, {15, 4});       // (a, b) merge: stride 1
  const Tensor split = reshape(t, {5, 3, 2, 2});   // c splits: strides (30, 15)
  const Tensor rv = reverse(iota({4, 6}), {0});    // strides (-6, 1)
  const Tensor rv_split = reshape(rv, {2, 2, 6});  // strides (-12, -6, 1)
  CHECK(memory_stats().bytes_in_use == before.bytes_in_use + 24 * sizeof(double));  // iota's
  CHECK(shares_storage(merged, x));
  CHECK(shares_storage(split, x));
  CHECK(shares_storage(rv_split, rv));
  std::vector<double> expected_merged;  // merged[r, c] = x[c, r / 3, r % 3] = 15 c + r
  for (int r = 0; r < 15; ++r)
    for (int c = 0; c < 4; ++c) expected_merged.push_back(15 * c + r);
  CHECK(viewed(merged) == expected_merged);
  CHECK(values(merged) == expected_merged);
  std::vector<double> expected_split;  // split[a, b, c1, c2] = x[2 c1 + c2, a, b]
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) expected_split.push_back(15 * c + 3 * a + b);
  CHECK(values(split) == expected_split);
  std::vector<double> expected_rv;  // rv[i, j] = 6 (3 - i) + j
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) expected_rv.push_back(6 * (3 - i) + j);
  CHECK(values(rv_split) == expected_rv);
  // (a, b) and c do not merge (1 != 15 * 4): a copy, with t's elements in order.
  const Tensor flat = reshape(transpose(x, {1, 2, 0}), {60});
  CHECK_FALSE(shares_storage(flat, x));
  std::vector<double> expected_flat;
  for (double v : expected_merged) expected_flat.push_back(v);
  CHECK(values(flat) == expected_flat);
}

TEST_CASE("concat reads strided parts where they lie, along every axis and for every dtype",
          "[views]") {
  // The parts: a transpose (strided, no copy built) and a contiguous tensor, along each axis;
  // the expected result joins a contiguous copy of the same transpose.
  for (DType dtype : {DType::Float64, DType::Int64, DType::Bool}) {
    for (int axis : {0, 1, 2}) {
      INFO(dtype_name(dtype) << ", axis " << axis);
      Shape other_shape = {6, 5, 4};
      other_shape[static_cast<std::size_t>(axis)] = 3;
      const auto strided = [&] { return transpose(cast(iota({5, 4, 6}), dtype), {2, 0, 1}); };
      const Tensor other = cast(iota(other_shape), dtype);
      const Tensor copy =
          cast(from_values(values(cast(strided(), DType::Float64)), {6, 5, 4}), dtype);
      const Tensor got = concat({strided(), other, strided()}, axis);
      const Tensor expected = concat({copy, other, copy}, axis);
      CHECK(got.shape() == expected.shape());
      CHECK(values(cast(got, DType::Float64)) == values(cast(expected, DType::Float64)));
    }
  }
  // A 1.2 MB transposed part: the concat takes its output and a chunk of at most 256 KiB, and
  // leaves the transpose without a copy (its array<T>() builds one afterwards).
  const Tensor big = transpose(iota({300, 512}));  // [512, 300]
  const Tensor column = iota({512, 4});
  const std::size_t output_bytes = 512 * 304 * sizeof(double);
  const MemoryStats before = memory_stats();
  reset_peak_memory();
  const Tensor joined = concat({column, big}, 1);
  const MemoryStats after = memory_stats();
  CHECK(after.bytes_in_use - before.bytes_in_use == output_bytes);
  CHECK(after.peak_bytes_in_use - before.bytes_in_use <= output_bytes + 300 * 1024);
  const auto& rows = joined.array<double>();
  CHECK(rows(7, 3) == 7 * 4 + 3);        // column[7, 3]
  CHECK(rows(7, 4 + 9) == 9 * 512 + 7);  // big[7, 9] = x[9, 7]
  CHECK(rows(511, 303) == 299 * 512 + 511);
  const std::size_t before_copy = memory_stats().bytes_in_use;
  (void)big.array<double>();
  CHECK(memory_stats().bytes_in_use == before_copy + 512 * 300 * sizeof(double));
}

TEST_CASE("array<T>() of a view is a contiguous copy, built once and kept", "[views]") {
  const Tensor x = iota({3, 4});
  const Tensor t = transpose(x);
  const MemoryStats before = memory_stats();
  const auto& first = t.array<double>();
  CHECK(memory_stats().bytes_in_use >= before.bytes_in_use + 12 * sizeof(double));
  const MemoryStats built = memory_stats();
  const auto& second = t.array<double>();
  CHECK(&first == &second);  // cached on the view
  CHECK(memory_stats().bytes_in_use == built.bytes_in_use);
  CHECK(Shape(first.shape().begin(), first.shape().end()) == Shape{4, 3});
  CHECK(first(1, 2) == 9.0);  // x[2, 1]
  // The base keeps its own array.
  CHECK(buffer_start(x) != first.data());
}

TEST_CASE("shares_storage does not change when a read makes a strided view contiguous", "[views]") {
  // Views made after t.array() read t's copy: shares_storage(reshape(t), t) turned false then,
  // though both still read t's elements (and the base's, through t).
  const Tensor x = iota({2, 3});
  const Tensor t = transpose(x);
  const Tensor before = reshape(t, {3, 2, 1});  // strided, on x's buffer
  CHECK(t.array<double>()(2, 1) == 5.0);        // builds t's contiguous copy
  const Tensor after = reshape(t, {3, 2});
  const Tensor expanded = expand_dims(t, 0);
  for (const Tensor* view : {&before, &after, &expanded}) {
    CHECK(shares_storage(*view, t));
    CHECK(shares_storage(t, *view));
  }
  CHECK(shares_storage(t, x));
  CHECK(shares_storage(before, x));
  CHECK_FALSE(shares_storage(after, iota({2, 3})));
}

TEST_CASE("view<T>() reads the buffer in place, strides kept, for every kind of view", "[views]") {
  const Tensor x = iota({3, 4});
  const Tensor t = transpose(x);
  const Tensor r = reverse(x, {1});
  const Tensor s = slice(x, {1, 1}, {2, 2});
  const MemoryStats before = memory_stats();
  auto tv = t.view<double>();
  auto rv = r.view<double>();
  auto sv = s.view<double>();
  CHECK(memory_stats().bytes_in_use == before.bytes_in_use);
  CHECK(tv.shape()[0] == 4);
  CHECK(tv(1, 2) == 9.0);
  CHECK(&tv(1, 2) == buffer_start(x) + 9);
  CHECK(rv(0, 0) == 3.0);
  CHECK(&rv(2, 3) == buffer_start(x) + 8);
  CHECK(sv(1, 1) == 10.0);
  CHECK(&sv(0, 0) == buffer_start(x) + 5);
  // An xtensor expression over it.
  const xt::xarray<double> doubled = 2.0 * tv;
  CHECK(doubled(3, 0) == 6.0);
  // Wrong dtype: the same error as array<T>().
  CHECK_THROWS_AS(t.view<float>(), InvalidArgument);
  CHECK_THROWS_WITH(t.view<float>(), Catch::Contains("float64") && Catch::Contains("float32"));
  CHECK_THROWS_AS(Tensor().view<double>(), InvalidArgument);
}

TEST_CASE("gradients through views equal the analytic ones, first and second order", "[views]") {
  const Tensor x = random_tensor({3, 4}, 11);
  // f(x) = sum(transpose(x)[1:3, ::-1]^3 * reshape-broadcast weights): every view op on the path.
  const Fn f = [](const std::vector<Tensor>& in) {
    const Tensor v = reverse(slice(transpose(in[0]), {1, 0}, {2, 3}), {1});
    const Tensor w = reshape(iota({6}), {2, 3});
    return reduce_sum(multiply(pow(v, 3.0), w));
  };
  tapegrad::testing::require_gradient_matches(f, {x});
  tapegrad::testing::require_second_order_matches(f, {x});
  // Analytic: d/dx[r, c] = 3 x[r, c]^2 w[c - 1, 2 - r] for c in {1, 2}, 0 elsewhere.
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f({x});
  const Tensor g = tape.gradient(y, x);
  const auto xv = values(x);
  std::vector<double> expected(12, 0.0);
  for (int r = 0; r < 3; ++r)
    for (int c = 1; c < 3; ++c) {
      const double w = 3.0 * (c - 1) + (2 - r);
      expected[static_cast<std::size_t>(4 * r + c)] = 3.0 * xv[4 * r + c] * xv[4 * r + c] * w;
    }
  tapegrad::testing::require_close(g, {3, 4}, expected);
}

TEST_CASE("a view never sees a later Variable::assign", "[views][immutability]") {
  Variable v(iota({2, 3}));
  const Tensor read = v.value();
  const Tensor r = reshape(read, {3, 2});
  const Tensor t = transpose(read);
  v.assign(fill({2, 3}, 7.0));
  v.assign_add(ones({2, 3}));
  CHECK(values(v.value()) == std::vector<double>(6, 8.0));
  CHECK(values(r) == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(values(t) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(values(read) == std::vector<double>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("the walk's in-place sums never write a tensor someone else holds",
          "[views][immutability]") {
  // A gradient function that hands back a tensor the caller keeps: the walk sums it with the
  // other use's gradient. In place would change `held` (this fails if the handle-count check
  // in the walk's add is removed).
  const Tensor held = from_values({1, 2, 3}, {3});
  auto f = custom_gradient([held](const Tensor& x) {
    return std::make_pair(multiply(x, 2.0), [held](const Tensor&) { return held; });
  });
  const Tensor x = from_values({0.5, 0.5, 0.5}, {3});
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = add(f(x), f(x));
    CHECK(values(tape.gradient(y, x)) == std::vector<double>{2, 4, 6});
  }
  CHECK(values(held) == std::vector<double>{1, 2, 3});

  // The same with a fresh view of `big` as the first gradient: its handle is the only one, but
  // its buffer is big's (this fails if the walk's add may write a view).
  const Tensor big = from_values({1, 2, 3, 4, 5, 6}, {2, 3});
  auto g = custom_gradient([big](const Tensor& x) {
    return std::make_pair(multiply(x, 2.0), [big](const Tensor&) {
      return slice(big, {1, 0}, {1, 3});
    });
  });
  const Tensor row = from_values({0.5, 0.5, 0.5}, {1, 3});
  {
    GradientTape tape;
    tape.watch(row);
    const Tensor y = add(g(row), g(row));
    CHECK(values(tape.gradient(y, row)) == std::vector<double>{8, 10, 12});
  }
  CHECK(values(big) == std::vector<double>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("bytes_held counts a buffer its views share once", "[views][memory]") {
  const Tensor x = random_tensor({256, 256}, 5);  // 512 KiB
  const std::size_t buffer = 256 * 256 * sizeof(double);
  std::size_t base_only = 0, with_views = 0;
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = multiply(x, x);  // keeps x
    base_only = tape.bytes_held();
  }
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = multiply(x, x);
    // Three more ops that keep views of x (Mul keeps both inputs).
    const Tensor r = reshape(x, {65536});
    const Tensor z = multiply(r, r);
    const Tensor s = slice(x, {0, 0}, {128, 256});
    const Tensor w = multiply(s, s);
    const Tensor t = identity(x);
    const Tensor u = multiply(t, t);
    with_views = tape.bytes_held();
  }
  CHECK(with_views > base_only);
  // The views and the ops cost their blocks, not another buffer each.
  CHECK(with_views - base_only < buffer / 4);
}

TEST_CASE("view ops name the op and the shape in their errors", "[views]") {
  const Tensor x = iota({2, 3});
  CHECK_THROWS_WITH(transpose(x, {0, 0}),
                    Catch::Contains("transpose") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(slice(x, {0, 2}, {1, 2}),
                    Catch::Contains("slice") && Catch::Contains("do not fit"));
  CHECK_THROWS_WITH(reshape(x, {4}), Catch::Contains("reshape") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_AS(reverse(x, {1, 1}), InvalidArgument);
  CHECK_THROWS_AS(split(x, 4, 1), InvalidArgument);
}
