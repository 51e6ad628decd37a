// Comparisons (Bool results, broadcasting, every dtype, never recorded) and where (three-way
// broadcasting, gradients routed by cond and summed back to each operand's shape).
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);

struct ComparisonCase {
  const char* name;
  BinaryOp op;
  std::vector<double> expected;  // for x = [1, 2, 3], y = [2, 2, 2]
};

const std::vector<ComparisonCase>& comparison_cases() {
  static const std::vector<ComparisonCase> cases = {
      {"equal", equal, {0, 1, 0}},     {"not_equal", not_equal, {1, 0, 1}},
      {"less", less, {1, 0, 0}},       {"less_equal", less_equal, {1, 1, 0}},
      {"greater", greater, {0, 0, 1}}, {"greater_equal", greater_equal, {0, 1, 1}},
  };
  return cases;
}

Tensor bools(const std::vector<double>& v, const Shape& s) {
  return from_values(v, s, DType::Bool);
}

}  // namespace

TEST_CASE("comparisons give Bool results in every numeric dtype", "[compare]") {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Int32, DType::Int64}) {
    const Tensor x = from_values({1, 2, 3}, {3}, dtype);
    const Tensor y = from_values({2, 2, 2}, {3}, dtype);
    for (const auto& c : comparison_cases()) {
      INFO(c.name << " on " << dtype_name(dtype));
      const Tensor r = c.op(x, y);
      CHECK(r.dtype() == DType::Bool);
      require_close(r, {3}, c.expected);
    }
  }
}

TEST_CASE("equal and not_equal accept Bool operands", "[compare]") {
  const Tensor a = bools({1, 0, 1}, {3});
  const Tensor b = bools({1, 1, 0}, {3});
  require_close(equal(a, b), {3}, {1, 0, 0});
  require_close(not_equal(a, b), {3}, {0, 1, 1});
  const std::string msg = message_of<InvalidArgument>([&] { less(a, b); });
  CHECK_THAT(msg, Catch::Contains("less") && Catch::Contains("bool"));
}

TEST_CASE("comparisons broadcast: leading 1s, scalars, size-0", "[compare]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  const Tensor y = from_values({2, 5}, {2, 1});
  require_close(less(x, y), {1, 2, 3}, {1, 0, 0, 1, 0, 0});
  require_close(greater_equal(x, constant(3.0)), {1, 2, 3}, {0, 0, 1, 1, 1, 1});
  CHECK(equal(zeros({0, 3}), ones({3})).shape() == Shape{0, 3});
  CHECK(equal(constant(1.0), constant(1.0)).item<bool>());
}

TEST_CASE("comparisons are never recorded: a tape sees no path through them", "[compare]") {
  const Tensor x = constant({1, 2, 3});
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor c = greater(x, constant(1.5));
    // Only where's value path connects x to the result; the Bool mask adds nothing.
    require_close(tape.gradient(where(c, x * x, x), x), {3}, {1, 4, 6});
  }
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor c = greater(x, constant(1.5));
    CHECK_FALSE(tape.gradient(reduce_sum(where(c, ones({3}), zeros({3}))), x).defined());
  }
}

TEST_CASE("comparisons reject mixed dtypes and shapes that do not broadcast", "[compare][errors]") {
  for (const auto& c : comparison_cases()) {
    INFO(c.name);
    const std::string dt = message_of<InvalidArgument>([&] {
      c.op(ones({2, 3}), ones({3}, DType::Int32));
    });
    CHECK_THAT(dt, Catch::Contains(c.name) && Catch::Contains("[2, 3]") && Catch::Contains("[3]") &&
                       Catch::Contains("float64") && Catch::Contains("int32"));
    const std::string sh = message_of<InvalidArgument>([&] { c.op(ones({2, 3}), ones({2})); });
    CHECK_THAT(sh, Catch::Contains(c.name) && Catch::Contains("[2, 3]") && Catch::Contains("[2]") &&
                       Catch::Contains("broadcast"));
  }
}

TEST_CASE("where selects elementwise and broadcasts all three operands", "[where]") {
  const Tensor cond = bools({1, 0}, {2, 1});
  const Tensor a = constant({1, 2, 3});
  const Tensor b = constant(-1.0);
  require_close(where(cond, a, b), {2, 3}, {1, 2, 3, -1, -1, -1});
  const Tensor ints = where(bools({0, 1, 1}, {3}), from_values({1, 2, 3}, {3}, DType::Int32),
                            from_values({7}, {1, 1}, DType::Int32));
  CHECK(ints.dtype() == DType::Int32);
  require_close(ints, {1, 3}, {7, 2, 3});
  const Tensor f32 =
      where(bools({1, 0}, {2}), ones({2}, DType::Float32), zeros({2}, DType::Float32));
  CHECK(f32.dtype() == DType::Float32);
  require_close(f32, {2}, {1, 0});
  const Tensor picked = where(bools({1, 0}, {2}), bools({0, 0}, {2}), bools({1, 1}, {2}));
  require_close(picked, {2}, {0, 1});
  CHECK(where(bools({1}, {1}), zeros({0, 1}), ones({1})).shape() == Shape{0, 1});
  CHECK(where(bools({1}, {}), constant(2.0), constant(3.0)).item<double>() == 2.0);
}

TEST_CASE("where sends g to a where cond and to b elsewhere, unbroadcast", "[where][grad]") {
  const Tensor cond = bools({1, 0, 1, 0, 0, 1}, {2, 3});
  const Tensor a = constant({10, 20, 30});    // [3]
  const Tensor b = from_values({5}, {1, 1});  // [1, 1]
  GradientTape tape;
  tape.watch(a);
  tape.watch(b);
  const auto g = tape.gradient(where(cond, a, b), {a, b});
  require_close(g[0], {3}, {1, 0, 2});
  require_close(g[1], {1, 1}, {3});
}

TEST_CASE("where gradients match central differences over broadcast shapes", "[where][grad]") {
  const Tensor cond = bools({1, 0, 0, 1, 1, 0}, {2, 1, 3});
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 1, 3}, {2, 1, 3}}, {{3}, {2, 1}}, {{}, {1, 4, 3}}, {{1, 1, 1, 3}, {}}};
  unsigned seed = 61;
  for (const auto& [as, bs] : shapes) {
    INFO("a " << shape_to_string(as) << ", b " << shape_to_string(bs));
    const Fn f = [cond](const std::vector<Tensor>& v) { return where(cond, v[0], v[1]); };
    const std::vector<Tensor> args = {random_tensor(as, seed), random_tensor(bs, seed + 1)};
    seed += 2;
    require_gradient_matches(f, args, 0);
    require_gradient_matches(f, args, 1);
  }
}

TEST_CASE("where second derivatives: its gradient is itself differentiable", "[where][grad2]") {
  const Tensor cond = bools({1, 0, 1, 1, 0, 0}, {2, 3});
  // d2/da2 where(cond, a^3, b a) = 6a where cond, 0 elsewhere.
  const Fn f = [cond](const std::vector<Tensor>& v) {
    return where(cond, pow(v[0], 3.0), v[1] * v[0]);
  };
  const std::vector<Tensor> args = {random_tensor({2, 3}, 71), random_tensor({3}, 72)};
  require_second_order_matches(f, args, 0);
  require_second_order_matches(f, args, 1);
  const Fn plain = [cond](const std::vector<Tensor>& v) { return where(cond, v[0], v[1]); };
  require_second_order_matches(plain, args, 0);
  require_second_order_matches(plain, args, 1);
}

TEST_CASE("where rejects a non-Bool cond, mixed dtypes and shapes that do not broadcast",
          "[where][errors]") {
  const std::string c = message_of<InvalidArgument>([] { where(ones({2}), ones({2}), ones({2})); });
  CHECK_THAT(c, Catch::Contains("where") &&
                    Catch::Contains("cond has shape [2] and dtype float64") &&
                    Catch::Contains("bool"));
  const std::string d = message_of<InvalidArgument>([] {
    where(bools({1, 0}, {2}), ones({2}), ones({2, 2}, DType::Float32));
  });
  CHECK_THAT(d, Catch::Contains("where") && Catch::Contains("a has shape [2] and dtype float64") &&
                    Catch::Contains("b has shape [2, 2] and dtype float32"));
  const std::string s = message_of<InvalidArgument>([] {
    where(bools({1, 0, 1}, {3}), ones({2, 1}), ones({4}));
  });
  CHECK_THAT(s, Catch::Contains("where") && Catch::Contains("[3]") && Catch::Contains("[2, 1]") &&
                    Catch::Contains("[4]") && Catch::Contains("broadcast"));
}
