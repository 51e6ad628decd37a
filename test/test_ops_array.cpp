// Array ops: forward values, gradients (first and second order) and bad input.
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// [[1, 2, 3], [4, 5, 6], [7, 8, 9]] in the requested dtype.
Tensor grid(DType dtype = DType::Float64) {
  return from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, dtype);
}

Tensor ints(const std::vector<double>& v, DType dtype = DType::Int32) {
  return from_values(v, {v.size()}, dtype);
}

// f's output weighted by a fixed random tensor and squared, so the second derivative of
// every linear op is exercised through a nonlinear use of its output.
Fn squared(const std::function<Tensor(const std::vector<Tensor>&)>& op) {
  return [op](const std::vector<Tensor>& a) {
    const Tensor y = op(a);
    return y * y;
  };
}

}  // namespace

// ---- identity, stop_gradient, reshape, transpose, broadcast_to -------------------------

TEST_CASE("identity, stop_gradient, reshape, transpose, broadcast_to", "[array]") {
  const Tensor x = grid();
  require_close(identity(x), {3, 3}, values(x));
  CHECK(identity(x).id() != x.id());
  require_close(reshape(x, {9}), {9}, values(x));
  require_close(reshape(x, {-1, 9}), {1, 9}, values(x));
  require_close(transpose(x), {3, 3}, {1, 4, 7, 2, 5, 8, 3, 6, 9});
  require_close(transpose(from_values({1, 2, 3, 4, 5, 6}, {1, 2, 3}), {2, 0, 1}), {3, 1, 2},
                {1, 4, 2, 5, 3, 6});
  require_close(broadcast_to(constant({1.0, 2.0}), {2, 2}), {2, 2}, {1, 2, 1, 2});
  require_close(unbroadcast(ones({2, 3}), {1, 3}), {1, 3}, {2, 2, 2});
  // Same rank (summed with kept axes) and fewer axes (summed, then reshaped).
  require_close(unbroadcast(grid(), {3, 1}), {3, 1}, {6, 15, 24});
  require_close(unbroadcast(grid(), {1, 1}), {1, 1}, {45});
  require_close(unbroadcast(grid(), {3}), {3}, {12, 15, 18});
  require_close(unbroadcast(grid(), {1}), {1}, {45});
  require_close(unbroadcast(grid(), {}), {}, {45});
  require_close(unbroadcast(grid(), {3, 3}), {3, 3}, values(grid()));

  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(stop_gradient(x) * x);
  require_close(tape.gradient(y, x), {3, 3}, values(x));  // stop_gradient's side is a constant
}

TEST_CASE("transpose of the last two axes, tiled, matches the index formula across tile edges",
          "[array]") {
  // 37 x 21 and 40 x 19 are not multiples of the kernel's tile, so partial tiles are covered.
  for (const Shape& shape : {Shape{40, 19}, Shape{2, 37, 21}}) {
    const std::size_t batch = shape.size() == 3 ? shape[0] : 1;
    const std::size_t rows = shape[shape.size() - 2], cols = shape[shape.size() - 1];
    std::vector<double> in(batch * rows * cols), expected(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i) * 0.5 - 3;
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j)
          expected[b * rows * cols + j * rows + i] = in[b * rows * cols + i * cols + j];
    const Tensor x = from_values(in, shape, DType::Float64);
    const Tensor t = shape.size() == 3 ? transpose(x, {0, 2, 1}) : transpose(x);
    Shape out_shape = shape;
    std::swap(out_shape[shape.size() - 2], out_shape[shape.size() - 1]);
    require_close(t, out_shape, expected, 0.0);
  }
}

TEST_CASE("transposes copied through SSE blocks and element by element give the same elements",
          "[array]") {
  // Float and double tiles move in 16-byte register blocks, but where the copy's rows are a
  // multiple of 4 KiB apart (1024 float32 rows, 512 float64 ones) element by element; odd
  // sizes leave partial blocks and tiles on both sides.
  const std::vector<Shape> shapes{{16, 1024},  {1024, 16}, {512, 24}, {3, 5}, {17, 1000},
                                  {2, 513, 7}, {4, 64, 9}, {1, 1},    {6, 2}, {5, 4096}};
  for (const DType dtype : {DType::Float32, DType::Float64, DType::Int32}) {
    for (const Shape& shape : shapes) {
      const std::size_t batch = shape.size() == 3 ? shape[0] : 1;
      const std::size_t rows = shape[shape.size() - 2], cols = shape[shape.size() - 1];
      std::vector<double> in(batch * rows * cols), expected(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i % 4093) - 7;
      for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t j = 0; j < cols; ++j)
            expected[b * rows * cols + j * rows + i] = in[b * rows * cols + i * cols + j];
      const Tensor x = from_values(in, shape, dtype);
      const Tensor t = shape.size() == 3 ? transpose(x, {0, 2, 1}) : transpose(x);
      INFO(dtype_name(dtype) << " " << shape_to_string(shape));
      CHECK(values(t) == expected);
    }
  }
}

TEST_CASE("reshape, transpose, broadcast_to gradients, first and second order",
          "[array][gradient]") {
  const Tensor x = random_tensor({2, 3}, 10);
  require_gradient_matches(
      [](const std::vector<Tensor>& a) {
        return reshape(a[0], {3, -1});
      },
      {x});
  require_second_order_matches(
      squared([](const std::vector<Tensor>& a) { return reshape(a[0], {6}); }), {x});
  require_gradient_matches([](const std::vector<Tensor>& a) { return transpose(a[0]); }, {x});
  require_second_order_matches(squared([](const std::vector<Tensor>& a) {
                                 return transpose(a[0], {1, 0});
                               }),
                               {x});
  const Tensor row = random_tensor({1, 3}, 11);
  require_gradient_matches(
      [](const std::vector<Tensor>& a) {
        return broadcast_to(a[0], {2, 4, 3});
      },
      {row});
  require_second_order_matches(squared([](const std::vector<Tensor>& a) {
                                 return broadcast_to(a[0], {4, 3});
                               }),
                               {row});
  require_second_order_matches(squared([](const std::vector<Tensor>& a) { return identity(a[0]); }),
                               {x});
}

TEST_CASE("reshape and transpose reject bad shapes", "[array][errors]") {
  const std::string bad_reshape = message_of<InvalidArgument>([] { reshape(grid(), {2, 4}); });
  CHECK_THAT(bad_reshape, Catch::Contains("reshape") && Catch::Contains("[3, 3]") &&
                              Catch::Contains("[2, 4]") && Catch::Contains("float64"));
  const std::string two_unknown = message_of<InvalidArgument>([] { reshape(grid(), {-1, -1}); });
  CHECK_THAT(two_unknown, Catch::Contains("reshape") && Catch::Contains("[3, 3]"));
  const std::string bad_perm = message_of<InvalidArgument>([] { transpose(grid(), {0, 0}); });
  CHECK_THAT(bad_perm, Catch::Contains("transpose") && Catch::Contains("[3, 3]"));
  const std::string bad_broadcast = message_of<InvalidArgument>([] {
    broadcast_to(grid(), {3, 2});
  });
  CHECK_THAT(bad_broadcast, Catch::Contains("broadcast_to") && Catch::Contains("[3, 3]") &&
                                Catch::Contains("[3, 2]"));
}

// ---- cast -------------------------------------------------------------------------------

TEST_CASE("cast converts between every dtype", "[array][cast]") {
  const Tensor x = constant({2.7, -2.7, 0.0, 1.0});
  const Tensor f32 = cast(x, DType::Float32);
  CHECK(f32.dtype() == DType::Float32);
  require_close(f32, {4}, {2.7, -2.7, 0, 1}, 1e-6);
  const Tensor i32 = cast(x, DType::Int32);
  CHECK(i32.dtype() == DType::Int32);
  require_close(i32, {4}, {2, -2, 0, 1});  // truncation toward zero, as TF
  require_close(cast(x, DType::Int64), {4}, {2, -2, 0, 1});
  const Tensor flags = cast(x, DType::Bool);
  CHECK(flags.dtype() == DType::Bool);
  require_close(flags, {4}, {1, 1, 0, 1});
  require_close(cast(flags, DType::Float64), {4}, {1, 1, 0, 1});
  require_close(cast(ints({3, -4}), DType::Float32), {2}, {3, -4});
  require_close(cast(ints({3, -4}, DType::Int64), DType::Int32), {2}, {3, -4});
  require_close(cast(zeros({0, 2}), DType::Int32), {0, 2}, {});
  require_close(cast(constant(1.5), DType::Float32), {}, {1.5});
  CHECK(cast(x, DType::Float64).id() == x.id());  // same dtype: the same immutable tensor
}

TEST_CASE("cast is differentiable between float dtypes only", "[array][cast][gradient]") {
  const Tensor x = constant({1.5, -2.0});
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = cast(x, DType::Float32);
    const Tensor g = tape.gradient(reduce_sum(y * y), x);
    CHECK(g.dtype() == DType::Float64);
    require_close(g, {2}, {3.0, -4.0}, 1e-6);
  }
  {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    const Tensor through_int = reduce_sum(cast(cast(x, DType::Int32), DType::Float64));
    const Tensor through_bool = reduce_sum(cast(cast(x, DType::Bool), DType::Float64));
    const Tensor direct = reduce_sum(cast(x, DType::Float32));
    auto paused = tape.stop_recording();
    CHECK_FALSE(tape.gradient(through_int, x).defined());
    CHECK_FALSE(tape.gradient(through_bool, x).defined());
    const Tensor g = tape.gradient(direct, x);
    CHECK(g.dtype() == DType::Float64);
    require_close(g, {2}, {1, 1});
  }
  // Second order through a float32 round trip: d2/dx2 sum(x^3) = 6x. A larger step keeps
  // the float32 rounding small against the differences.
  Fn cube = [](const std::vector<Tensor>& a) {
    const Tensor y = cast(a[0], DType::Float32);
    return cast(y * y * y, DType::Float64);
  };
  Fn gradient_of_cube = [cube](const std::vector<Tensor>& a) {
    std::vector<Tensor> inputs = a;
    GradientTape tape;
    tape.watch(inputs[0]);
    return tape.gradient(cube(inputs), inputs[0]);
  };
  const GradientCheck second =
      check_gradient(gradient_of_cube, {constant({0.5, -1.25, 2.0})}, 0, 1e-3);
  CHECK(second.max_error < 1e-2);
  require_close(second.theoretical, {3, 3}, {3, 0, 0, 0, -7.5, 0, 0, 0, 12}, 1e-5);
}

TEST_CASE("cast gradient value with an integer detour", "[array][cast][gradient]") {
  const Tensor x = constant({1.5, -2.5});
  GradientTape tape;
  tape.watch(x);
  const Tensor truncated = cast(cast(x, DType::Int64), DType::Float64);  // [1, -2], a constant
  require_close(tape.gradient(reduce_sum(truncated * x), x), {2}, {1, -2});
}

// ---- expand_dims, squeeze ---------------------------------------------------------------

TEST_CASE("expand_dims and squeeze", "[array]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(expand_dims(x, 0).shape() == Shape{1, 2, 3});
  CHECK(expand_dims(x, 1).shape() == Shape{2, 1, 3});
  CHECK(expand_dims(x, 2).shape() == Shape{2, 3, 1});
  CHECK(expand_dims(x, -1).shape() == Shape{2, 3, 1});
  CHECK(expand_dims(x, -3).shape() == Shape{1, 2, 3});
  require_close(expand_dims(constant(4.0), 0), {1}, {4});
  require_close(expand_dims(x, 1), {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(expand_dims(ints({1, 2}), 0).dtype() == DType::Int32);

  const Tensor y = from_values({1, 2, 3, 4, 5, 6}, {1, 2, 1, 3});
  require_close(squeeze(y), {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(squeeze(y, {0}).shape() == Shape{2, 1, 3});
  CHECK(squeeze(y, {-2}).shape() == Shape{1, 2, 3});
  CHECK(squeeze(y, {0, 2}).shape() == Shape{2, 3});
  CHECK(squeeze(ones({1, 1})).shape() == Shape{});
  CHECK(squeeze(zeros({0, 1})).shape() == Shape{0});
}

TEST_CASE("expand_dims and squeeze gradients, first and second order", "[array][gradient]") {
  const Tensor x = random_tensor({2, 3}, 12);
  require_gradient_matches([](const std::vector<Tensor>& a) { return expand_dims(a[0], 1); }, {x});
  require_second_order_matches(
      squared([](const std::vector<Tensor>& a) { return expand_dims(a[0], -1); }), {x});
  const Tensor y = random_tensor({1, 3, 1}, 13);
  require_gradient_matches([](const std::vector<Tensor>& a) { return squeeze(a[0]); }, {y});
  require_second_order_matches(
      squared([](const std::vector<Tensor>& a) { return squeeze(a[0], {2}); }), {y});
}

TEST_CASE("expand_dims and squeeze reject bad axes", "[array][errors]") {
  const Tensor x = zeros({2, 3});
  const std::string expand = message_of<InvalidArgument>([&] { expand_dims(x, 3); });
  CHECK_THAT(expand, Catch::Contains("expand_dims") && Catch::Contains("axis 3") &&
                         Catch::Contains("[2, 3]"));
  const std::string expand_negative = message_of<InvalidArgument>([&] { expand_dims(x, -4); });
  CHECK_THAT(expand_negative, Catch::Contains("expand_dims") && Catch::Contains("axis -4"));
  const std::string not_one = message_of<InvalidArgument>([] { squeeze(zeros({1, 2, 1}), {1}); });
  CHECK_THAT(not_one, Catch::Contains("squeeze") && Catch::Contains("[1, 2, 1]") &&
                          Catch::Contains("size is 2") && Catch::Contains("float64"));
  const std::string out_of_range = message_of<InvalidArgument>([] { squeeze(zeros({1, 2}), {2}); });
  CHECK_THAT(out_of_range,
             Catch::Contains("squeeze") && Catch::Contains("axis 2") && Catch::Contains("[1, 2]"));
}

// ---- concat, stack, split ---------------------------------------------------------------

TEST_CASE("concat along every axis and dtype", "[array][concat]") {
  const Tensor a = constant({{1.0, 2.0}, {3.0, 4.0}});
  const Tensor b = constant({{5.0, 6.0}});
  require_close(concat({a, b}, 0), {3, 2}, {1, 2, 3, 4, 5, 6});
  require_close(concat({a, transpose(b)}, 1), {2, 3}, {1, 2, 5, 3, 4, 6});
  require_close(concat({a, a}, -1), {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4});
  require_close(concat({a}, 0), {2, 2}, {1, 2, 3, 4});
  require_close(concat({a, zeros({0, 2}), b}, 0), {3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor joined = concat({ints({1, 2}), ints({3})}, 0);
  CHECK(joined.dtype() == DType::Int32);
  require_close(joined, {3}, {1, 2, 3});
  const Tensor flags =
      concat({from_values({1}, {1}, DType::Bool), from_values({0}, {1}, DType::Bool)}, 0);
  require_close(flags, {2}, {1, 0});
  const Tensor f32 = concat(
      {from_values({1, 2}, {1, 2}, DType::Float32), from_values({3, 4}, {1, 2}, DType::Float32)},
      0);
  CHECK(f32.dtype() == DType::Float32);
  require_close(f32, {2, 2}, {1, 2, 3, 4});
  // Rank 3, middle axis.
  const Tensor c = from_values({1, 2, 3, 4}, {2, 1, 2});
  const Tensor d = from_values({5, 6, 7, 8}, {2, 1, 2});
  require_close(concat({c, d}, 1), {2, 2, 2}, {1, 2, 5, 6, 3, 4, 7, 8});
}

TEST_CASE("concat gradients are slices of the incoming gradient", "[array][concat][gradient]") {
  const Tensor a = random_tensor({2, 3}, 20);
  const Tensor b = random_tensor({2, 1}, 21);
  const Tensor c = random_tensor({2, 2}, 22);
  Fn f = [](const std::vector<Tensor>& v) { return concat({v[0], v[1], v[2]}, 1); };
  for (std::size_t i = 0; i < 3; ++i) {
    require_gradient_matches(f, {a, b, c}, i);
    require_second_order_matches(squared(f), {a, b, c}, i);
  }
  // The same tensor twice: both slices add up.
  GradientTape tape;
  tape.watch(a);
  require_close(tape.gradient(reduce_sum(concat({a, a}, 0)), a), {2, 3}, {2, 2, 2, 2, 2, 2});
}

TEST_CASE("concat of equal parts gets its gradient from one split, others from slices",
          "[array][concat][gradient]") {
  // Rank 3 along the middle axis: outer and inner blocks both larger than one element.
  const Tensor a = from_values({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  const Tensor b = from_values({7, 8, 9, 10, 11, 12}, {2, 1, 3});
  const Tensor c = from_values({13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}, {2, 2, 3});
  require_close(concat({a, b}, 1), {2, 2, 3}, {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12});
  require_close(concat({a, c, b}, 1), {2, 4, 3}, {1, 2, 3, 13, 14, 15, 16, 17, 18, 7,  8,  9,
                                                  4, 5, 6, 19, 20, 21, 22, 23, 24, 10, 11, 12});
  {
    // Weights 1..12 tell each element's gradient apart.
    const Tensor w = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
    GradientTape tape;
    tape.watch({a, b});
    const auto g = tape.gradient(reduce_sum(concat({a, b}, 1) * w), {a, b});
    require_close(g[0], {2, 1, 3}, {1, 2, 3, 7, 8, 9});
    require_close(g[1], {2, 1, 3}, {4, 5, 6, 10, 11, 12});
  }
  {
    // Only b is watched: a needs no gradient, so b's comes from a slice.
    const Tensor w = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
    GradientTape tape;
    tape.watch(b);
    require_close(tape.gradient(reduce_sum(concat({a, b}, 1) * w), b), {2, 1, 3},
                  {4, 5, 6, 10, 11, 12});
  }
  // Many equal steps, as a recurrence stacks them, and unequal parts: first and second order.
  const Tensor x = random_tensor({1, 3}, 26);
  const Tensor y = random_tensor({1, 3}, 27);
  const Tensor z = random_tensor({2, 3}, 28);
  Fn steps = [](const std::vector<Tensor>& v) {
    return concat({v[0], v[1] * v[0], v[1], exp(v[0])}, 0);
  };
  Fn mixed = [](const std::vector<Tensor>& v) { return concat({v[0], v[2], v[1]}, 0); };
  for (std::size_t i = 0; i < 2; ++i) {
    require_gradient_matches(steps, {x, y}, i);
    require_second_order_matches(squared(steps), {x, y}, i);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    require_gradient_matches(mixed, {x, y, z}, i);
    require_second_order_matches(squared(mixed), {x, y, z}, i);
  }
}

TEST_CASE("concat rejects mismatched inputs naming shapes and dtypes", "[array][concat][errors]") {
  const std::string dims = message_of<InvalidArgument>([] {
    concat({zeros({2, 3}), zeros({2, 4})}, 0);
  });
  CHECK_THAT(dims,
             Catch::Contains("concat") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  const std::string dtypes = message_of<InvalidArgument>([] {
    concat({zeros({2}), zeros({2}, DType::Float32)}, 0);
  });
  CHECK_THAT(dtypes,
             Catch::Contains("concat") && Catch::Contains("float64") && Catch::Contains("float32"));
  const std::string ranks = message_of<InvalidArgument>([] {
    concat({zeros({2}), zeros({2, 1})}, 0);
  });
  CHECK_THAT(ranks,
             Catch::Contains("concat") && Catch::Contains("[2]") && Catch::Contains("[2, 1]"));
  const std::string axis = message_of<InvalidArgument>([] { concat({zeros({2}), zeros({2})}, 1); });
  CHECK_THAT(axis,
             Catch::Contains("concat") && Catch::Contains("axis 1") && Catch::Contains("[2]"));
  const std::string empty = message_of<InvalidArgument>([] { concat({}, 0); });
  CHECK_THAT(empty, Catch::Contains("concat") && Catch::Contains("empty"));
  const std::string scalars = message_of<InvalidArgument>([] {
    concat({constant(1.0), constant(2.0)}, 0);
  });
  CHECK_THAT(scalars, Catch::Contains("concat") && Catch::Contains("scalar"));
}

TEST_CASE("stack along every axis", "[array][stack]") {
  const Tensor a = constant({1.0, 2.0});
  const Tensor b = constant({3.0, 4.0});
  require_close(stack({a, b}), {2, 2}, {1, 2, 3, 4});
  require_close(stack({a, b}, 1), {2, 2}, {1, 3, 2, 4});
  require_close(stack({a, b}, -1), {2, 2}, {1, 3, 2, 4});
  require_close(stack({a, b, a}, -2), {3, 2}, {1, 2, 3, 4, 1, 2});
  require_close(stack({constant(1.0), constant(2.0)}), {2}, {1, 2});
  require_close(stack({ints({1}), ints({2})}, 0), {2, 1}, {1, 2});

  const Tensor x = random_tensor({2, 3}, 23);
  const Tensor y = random_tensor({2, 3}, 24);
  Fn f = [](const std::vector<Tensor>& v) { return stack({v[0], v[1]}, 1); };
  for (std::size_t i = 0; i < 2; ++i) {
    require_gradient_matches(f, {x, y}, i);
    require_second_order_matches(squared(f), {x, y}, i);
  }

  const std::string shapes = message_of<InvalidArgument>([] { stack({zeros({2}), zeros({3})}); });
  CHECK_THAT(shapes, Catch::Contains("stack") && Catch::Contains("[2]") && Catch::Contains("[3]"));
  const std::string dtypes = message_of<InvalidArgument>([] {
    stack({zeros({2}), zeros({2}, DType::Int32)});
  });
  CHECK_THAT(dtypes,
             Catch::Contains("stack") && Catch::Contains("int32") && Catch::Contains("float64"));
  const std::string axis = message_of<InvalidArgument>([] { stack({zeros({2}), zeros({2})}, 2); });
  CHECK_THAT(axis, Catch::Contains("stack") && Catch::Contains("axis 2") && Catch::Contains("[2]"));
}

TEST_CASE("split into equal parts", "[array][split]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  const auto rows = split(x, 2);
  REQUIRE(rows.size() == 2);
  require_close(rows[0], {2, 2}, {1, 2, 3, 4});
  require_close(rows[1], {2, 2}, {5, 6, 7, 8});
  const auto columns = split(x, 2, -1);
  require_close(columns[0], {4, 1}, {1, 3, 5, 7});
  require_close(columns[1], {4, 1}, {2, 4, 6, 8});
  const auto one = split(x, 1, 1);
  require_close(one[0], {4, 2}, values(x));
  const auto int_parts = split(ints({1, 2, 3}), 3);
  require_close(int_parts[2], {1}, {3});
  CHECK(int_parts[2].dtype() == DType::Int32);
  const auto empty_parts = split(zeros({0, 2}), 2, 0);
  REQUIRE(empty_parts.size() == 2);
  CHECK(empty_parts[1].shape() == Shape{0, 2});
}

TEST_CASE("split along a middle axis copies every outer block", "[array][split]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  const auto parts = split(x, 3, 1);
  REQUIRE(parts.size() == 3);
  require_close(parts[0], {2, 1, 2}, {1, 2, 7, 8});
  require_close(parts[1], {2, 1, 2}, {3, 4, 9, 10});
  require_close(parts[2], {2, 1, 2}, {5, 6, 11, 12});
  const auto last = split(x, 2, 2);
  require_close(last[1], {2, 3, 1}, {2, 4, 6, 8, 10, 12});
  const auto flags = split(from_values({1, 0, 0, 1}, {2, 2}, DType::Bool), 2, 1);
  CHECK(flags[0].dtype() == DType::Bool);
  require_close(flags[0], {2, 1}, {1, 0});
  require_close(flags[1], {2, 1}, {0, 1});
  // split undoes concat, and concat undoes split.
  require_close(concat(parts, 1), {2, 3, 2}, values(x));
  Fn round_trip = [](const std::vector<Tensor>& v) { return concat(split(v[0], 3, 1), 1); };
  require_gradient_matches(round_trip, {random_tensor({2, 3, 2}, 29)});
}

TEST_CASE("split is one op whose unused outputs get zero gradients", "[array][split][gradient]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {3, 2});
  {
    GradientTape tape;
    tape.watch(x);
    const auto parts = split(x, 3);
    // Only the middle part is used: the other two outputs get zeros from the runtime.
    require_close(tape.gradient(reduce_sum(parts[1] * parts[1]), x), {3, 2}, {0, 0, 6, 8, 0, 0});
  }
  {
    GradientTape tape;
    tape.watch(x);
    const auto parts = split(x, 2, 1);
    require_close(tape.gradient(reduce_sum(parts[0] * parts[1]), x), {3, 2}, {2, 1, 4, 3, 6, 5});
  }
  const Tensor r = random_tensor({4, 3}, 25);
  Fn f = [](const std::vector<Tensor>& a) {
    const auto parts = split(a[0], 2, 0);
    return parts[0] * exp(parts[1]);
  };
  require_gradient_matches(f, {r});
  require_second_order_matches(f, {r});
  Fn only_last = [](const std::vector<Tensor>& a) { return split(a[0], 3, -1)[2]; };
  require_gradient_matches(only_last, {r});
  require_second_order_matches(squared(only_last), {r});
}

TEST_CASE("split rejects uneven parts", "[array][split][errors]") {
  const std::string uneven = message_of<InvalidArgument>([] { split(zeros({5, 2}), 2); });
  CHECK_THAT(uneven, Catch::Contains("split") && Catch::Contains("[5, 2]") &&
                         Catch::Contains("size 5") && Catch::Contains("2 equal parts"));
  const std::string zero_parts = message_of<InvalidArgument>([] { split(zeros({4}), 0); });
  CHECK_THAT(zero_parts, Catch::Contains("split") && Catch::Contains("[4]"));
  const std::string axis = message_of<InvalidArgument>([] { split(zeros({4}), 2, 1); });
  CHECK_THAT(axis, Catch::Contains("split") && Catch::Contains("axis 1") && Catch::Contains("[4]"));
}

// ---- slice, tile ------------------------------------------------------------------------

TEST_CASE("slice with explicit sizes and -1", "[array][slice]") {
  const Tensor x = grid();
  require_close(slice(x, {1, 0}, {2, -1}), {2, 3}, {4, 5, 6, 7, 8, 9});
  require_close(slice(x, {0, 1}, {3, 1}), {3, 1}, {2, 5, 8});
  require_close(slice(x, {2, 2}, {1, 1}), {1, 1}, {9});
  require_close(slice(x, {1, 1}, {-1, -1}), {2, 2}, {5, 6, 8, 9});
  require_close(slice(x, {3, 0}, {0, -1}), {0, 3}, {});
  require_close(slice(grid(DType::Int64), {0, 0}, {1, 2}), {1, 2}, {1, 2});
  require_close(slice(constant(3.0), {}, {}), {}, {3});
  const Tensor cube = from_values({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  require_close(slice(cube, {0, 1, 0}, {2, 1, 2}), {2, 1, 2}, {2, 3, 6, 7});
}

TEST_CASE("slice gradient pads into zeros, and its gradient slices again",
          "[array][slice][gradient]") {
  const Tensor x = grid();
  GradientTape tape;
  tape.watch(x);
  require_close(tape.gradient(reduce_sum(slice(x, {1, 0}, {2, 2})), x), {3, 3},
                {0, 0, 0, 1, 1, 0, 1, 1, 0});
  const Tensor r = random_tensor({3, 4}, 30);
  Fn f = [](const std::vector<Tensor>& a) { return slice(a[0], {1, 1}, {2, -1}); };
  require_gradient_matches(f, {r});
  require_second_order_matches(squared(f), {r});
  // Third order goes through the padding op's own gradient.
  Fn cubic = [](const std::vector<Tensor>& a) {
    const Tensor s = slice(a[0], {0, 2}, {-1, 2});
    return s * s * s;
  };
  require_second_order_matches(cubic, {r});
  Fn second = [cubic](const std::vector<Tensor>& a) {
    std::vector<Tensor> inputs = a;
    GradientTape inner;
    inner.watch(inputs[0]);
    return inner.gradient(cubic(inputs), inputs[0]);
  };
  require_second_order_matches(second, {r});
}

TEST_CASE("slice rejects windows that do not fit", "[array][slice][errors]") {
  const Tensor x = grid();
  const std::string too_big = message_of<InvalidArgument>([&] { slice(x, {1, 0}, {3, 1}); });
  CHECK_THAT(too_big, Catch::Contains("slice") && Catch::Contains("[3, 3]") &&
                          Catch::Contains("[1, 0]") && Catch::Contains("[3, 1]"));
  const std::string negative = message_of<InvalidArgument>([&] { slice(x, {-1, 0}, {1, 1}); });
  CHECK_THAT(negative, Catch::Contains("slice") && Catch::Contains("[-1, 0]"));
  const std::string rank = message_of<InvalidArgument>([&] { slice(x, {0}, {1}); });
  CHECK_THAT(rank,
             Catch::Contains("slice") && Catch::Contains("[3, 3]") && Catch::Contains("float64"));
}

TEST_CASE("tile repeats along every axis", "[array][tile]") {
  const Tensor x = constant({{1.0, 2.0}, {3.0, 4.0}});
  require_close(tile(x, {2, 3}), {4, 6},
                {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  require_close(tile(x, {1, 1}), {2, 2}, {1, 2, 3, 4});
  require_close(tile(constant({1.0, 2.0}), {3}), {6}, {1, 2, 1, 2, 1, 2});
  require_close(tile(x, {0, 2}), {0, 4}, {});
  require_close(tile(constant(5.0), {}), {}, {5});
  require_close(tile(ints({7, 8}), {2}), {4}, {7, 8, 7, 8});
  CHECK(tile(ints({7, 8}), {2}).dtype() == DType::Int32);

  const std::string rank = message_of<InvalidArgument>([&] { tile(x, {2}); });
  CHECK_THAT(rank, Catch::Contains("tile") && Catch::Contains("[2]") && Catch::Contains("[2, 2]"));
}

TEST_CASE("tile gradient sums the copies, first and second order", "[array][tile][gradient]") {
  const Tensor v = constant({1.0, 2.0});
  {
    GradientTape tape;
    tape.watch(v);
    require_close(tape.gradient(reduce_sum(tile(v, {3})), v), {2}, {3, 3});
  }
  {
    const Tensor x = constant({{1.0, 2.0}, {3.0, 4.0}});
    GradientTape tape;
    tape.watch(x);
    // Weighted copies: column block k of the [2, 6] tiling has weight k + 1.
    const Tensor w = from_values({1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, {2, 6});
    require_close(tape.gradient(reduce_sum(tile(x, {1, 3}) * w), x), {2, 2}, {6, 6, 6, 6});
  }
  const Tensor r = random_tensor({2, 3}, 31);
  Fn f = [](const std::vector<Tensor>& a) { return tile(a[0], {2, 2}); };
  require_gradient_matches(f, {r});
  require_second_order_matches(squared(f), {r});
  const Tensor r3 = random_tensor({2, 1, 2}, 32);
  require_second_order_matches(squared([](const std::vector<Tensor>& a) {
                                 return tile(a[0], {1, 3, 2});
                               }),
                               {r3});
}

// ---- gather, unsorted_segment_sum -------------------------------------------------------

TEST_CASE("gather along axes with index tensors of any shape", "[array][gather]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  require_close(gather(x, ints({3, 0, 3})), {3, 2}, {7, 8, 1, 2, 7, 8});
  require_close(gather(x, ints({1, 0}, DType::Int64), 1), {4, 2}, {2, 1, 4, 3, 6, 5, 8, 7});
  require_close(gather(x, ints({1}), -1), {4, 1}, {2, 4, 6, 8});
  require_close(gather(x, from_values({0, 1, 2, 3}, {2, 2}, DType::Int32)), {2, 2, 2},
                {1, 2, 3, 4, 5, 6, 7, 8});
  require_close(gather(x, from_values({2}, {}, DType::Int32)), {2}, {5, 6});
  require_close(gather(x, from_values({}, {0}, DType::Int32)), {0, 2}, {});
  require_close(gather(constant({5.0, 6.0, 7.0}), ints({2, 2})), {2}, {7, 7});
  const Tensor labels = gather(ints({10, 20, 30}), ints({2, 0}));
  CHECK(labels.dtype() == DType::Int32);
  require_close(labels, {2}, {30, 10});
  // Middle axis of a rank-3 tensor: shape [2] ++ [2] ++ [2].
  const Tensor cube = from_values({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  require_close(gather(cube, ints({2, 0}), 1), {2, 2, 2}, {4, 5, 0, 1, 10, 11, 6, 7});
}

TEST_CASE("gather gradients on every axis, first and second order", "[array][gather][gradient]") {
  const Tensor x = random_tensor({4, 3}, 40);
  const Tensor rows = from_values({2, 0, 2, 3}, {2, 2}, DType::Int32);
  Fn axis0 = [rows](const std::vector<Tensor>& a) { return gather(a[0], rows); };
  require_gradient_matches(axis0, {x});
  require_second_order_matches(squared(axis0), {x});
  const Tensor cols = ints({1, 1, 0}, DType::Int64);
  Fn axis1 = [cols](const std::vector<Tensor>& a) { return gather(a[0], cols, 1); };
  require_gradient_matches(axis1, {x});
  require_second_order_matches(squared(axis1), {x});
  const Tensor cube = random_tensor({2, 3, 2}, 41);
  Fn middle = [](const std::vector<Tensor>& a) { return gather(a[0], ints({2, 0, 2}), -2); };
  require_gradient_matches(middle, {cube});
  require_second_order_matches(squared(middle), {cube});

  // Axis 1 gives a dense gradient with repeated columns summed.
  const Tensor m = constant({{1.0, 2.0}, {3.0, 4.0}});
  GradientTape tape;
  tape.watch(m);
  const auto g = tape.gradient_values({reduce_sum(gather(m, ints({1, 1, 0}), 1))}, {m});
  CHECK_FALSE(g[0].is_sparse());
  require_close(g[0].dense(), {2, 2}, {1, 2, 1, 2});
}

TEST_CASE("gather rejects bad indices naming the index and the shape", "[array][gather][errors]") {
  const Tensor x = zeros({4, 2});
  const std::string high = message_of<InvalidArgument>([&] { gather(x, ints({1, 4})); });
  CHECK_THAT(high, Catch::Contains("gather") && Catch::Contains("index 4") &&
                       Catch::Contains("[4, 2]") && Catch::Contains("[0, 4)"));
  const std::string negative = message_of<InvalidArgument>([&] { gather(x, ints({-1}), 1); });
  CHECK_THAT(negative,
             Catch::Contains("gather") && Catch::Contains("index -1") && Catch::Contains("[4, 2]"));
  const std::string float_indices =
      message_of<InvalidArgument>([&] { gather(x, constant({1.0})); });
  CHECK_THAT(float_indices,
             Catch::Contains("gather") && Catch::Contains("float64") && Catch::Contains("int32"));
  const std::string axis = message_of<InvalidArgument>([&] { gather(x, ints({0}), 2); });
  CHECK_THAT(axis,
             Catch::Contains("gather") && Catch::Contains("axis 2") && Catch::Contains("[4, 2]"));
  const std::string scalar_params =
      message_of<InvalidArgument>([&] { gather(constant(1.0), ints({0})); });
  CHECK_THAT(scalar_params, Catch::Contains("gather") && Catch::Contains("rank"));
}

TEST_CASE("unsorted_segment_sum sums rows by id", "[array][segment]") {
  const Tensor data = constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}});
  require_close(unsorted_segment_sum(data, ints({0, 2, 0}), 3), {3, 2}, {6, 8, 0, 0, 3, 4});
  require_close(unsorted_segment_sum(data, ints({1, 1, 1}, DType::Int64), 2), {2, 2},
                {0, 0, 9, 12});
  require_close(unsorted_segment_sum(constant({1.0, 2.0, 3.0}), ints({1, 0, 1}), 2), {2}, {2, 4});
  require_close(unsorted_segment_sum(from_values({1, 2, 3}, {3}, DType::Int32), ints({0, 0, 0}), 1),
                {1}, {6});
  require_close(unsorted_segment_sum(zeros({0, 2}), ints({}), 2), {2, 2}, {0, 0, 0, 0});

  const Tensor r = random_tensor({4, 3}, 50);
  const Tensor ids = ints({2, 0, 2, 1});
  Fn f = [ids](const std::vector<Tensor>& a) { return unsorted_segment_sum(a[0], ids, 4); };
  require_gradient_matches(f, {r});
  require_second_order_matches(squared(f), {r});

  const std::string range = message_of<InvalidArgument>([&] {
    unsorted_segment_sum(data, ints({0, 3, 1}), 3);
  });
  CHECK_THAT(range, Catch::Contains("unsorted_segment_sum") && Catch::Contains("segment id 3") &&
                        Catch::Contains("[3, 2]"));
  const std::string shape = message_of<InvalidArgument>([&] {
    unsorted_segment_sum(data, ints({0, 1}), 3);
  });
  CHECK_THAT(shape, Catch::Contains("unsorted_segment_sum") && Catch::Contains("[3, 2]") &&
                        Catch::Contains("[2]"));
}
