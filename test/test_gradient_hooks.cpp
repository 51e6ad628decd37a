// GradientTape::register_hook: values, summed gradients, removal, persistent and nested
// tapes, the order hooks fire in, and that a hook's captures die with its handle.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using tapegrad::testing::expect_misuse;
using tapegrad::testing::require_close;

namespace {

// Sets a flag when destroyed: a hook captures one to show when its captures die.
struct Sentinel {
  explicit Sentinel(bool* flag) : flag(flag) {}
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;
  ~Sentinel() { *flag = true; }
  bool* flag;
};

}  // namespace

TEST_CASE("a hook on an intermediate tensor replaces its gradient upstream", "[hooks]") {
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = multiply(x, x);  // dy/dx = 2x = 6
  Tensor seen;
  HookHandle h = tape.register_hook(y, [&](const Tensor& g) {
    seen = g;
    return (g * 5.0);
  });
  Tensor z = (y * 2.0);  // dz/dy = 2
  Tensor dx = tape.gradient(z, x);
  require_close(seen, {}, {2.0});
  require_close(dx, {}, {5.0 * 2.0 * 6.0});
}

TEST_CASE("a hook on a source sees the summed gradient once and sets the result", "[hooks]") {
  Tensor x = from_values({1.0, -2.0}, {2}, DType::Float64);
  GradientTape tape;
  tape.watch(x);
  int calls = 0;
  Tensor seen;
  HookHandle h = tape.register_hook(x, [&](const Tensor& g) {
    ++calls;
    seen = g;
    return negative(g);
  });
  // d/dx (3x + x*x) = 3 + 2x, reaching x from two ops.
  Tensor y = reduce_sum(add((x * 3.0), multiply(x, x)));
  Tensor dx = tape.gradient(y, x);
  CHECK(calls == 1);
  require_close(seen, {2}, {5.0, -1.0});
  require_close(dx, {2}, {-5.0, 1.0});
}

TEST_CASE("hooks on one tensor run in registration order", "[hooks]") {
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  std::vector<std::string> order;
  HookHandle a = tape.register_hook(x, [&](const Tensor& g) {
    order.push_back("a");
    return (g + 1.0);
  });
  HookHandle b = tape.register_hook(x, [&](const Tensor& g) {
    order.push_back("b");
    return (g * 10.0);
  });
  Tensor dx = tape.gradient((x * 4.0), x);
  REQUIRE(order == std::vector<std::string>{"a", "b"});
  require_close(dx, {}, {(4.0 + 1.0) * 10.0});
}

TEST_CASE("a removed or destroyed hook is not called", "[hooks]") {
  Tensor x = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = multiply(x, x);
  int calls = 0;
  HookHandle h = tape.register_hook(x, [&](const Tensor& g) {
    ++calls;
    return (g * 0.0);
  });
  REQUIRE(h.active());
  require_close(tape.gradient(y, x), {}, {0.0});
  CHECK(calls == 1);
  h.remove();
  CHECK_FALSE(h.active());
  h.remove();  // idempotent
  require_close(tape.gradient(y, x), {}, {6.0});
  CHECK(calls == 1);
  {
    HookHandle scoped = tape.register_hook(x, [&](const Tensor& g) {
      ++calls;
      return g;
    });
    tape.gradient(y, x);
    CHECK(calls == 2);
  }
  require_close(tape.gradient(y, x), {}, {6.0});
  CHECK(calls == 2);
}

TEST_CASE("a persistent tape calls its hooks on every gradient call", "[hooks]") {
  Tensor x = constant(1.5);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = multiply(multiply(x, x), x);  // 3x^2 = 6.75
  int calls = 0;
  HookHandle h = tape.register_hook(x, [&](const Tensor& g) {
    ++calls;
    return (g * 2.0);
  });
  require_close(tape.gradient(y, x), {}, {13.5});
  require_close(tape.gradient(y, x), {}, {13.5});
  const std::vector<Tensor> jac = tape.jacobian(y, std::vector<Tensor>{x});
  require_close(jac[0], {}, {13.5});
  CHECK(calls == 3);
}

TEST_CASE("a hook's result is differentiable by an outer tape", "[hooks]") {
  Tensor x = constant(2.0);
  GradientTape outer;
  outer.watch(x);
  Tensor dx;
  {
    GradientTape inner;
    inner.watch(x);
    Tensor y = multiply(multiply(x, x), x);  // x^3
    HookHandle h = inner.register_hook(x, [&](const Tensor& g) { return multiply(g, x); });
    dx = inner.gradient(y, x);  // 3x^2 * x = 3x^3 = 24
  }
  require_close(dx, {}, {24.0});
  Tensor d2x = outer.gradient(dx, x);  // 9x^2 = 36
  require_close(d2x, {}, {36.0});
}

TEST_CASE("hooks on Variables fire last layer first", "[hooks]") {
  Variable w1(from_values({0.5, -1.0, 2.0, 1.5}, {2, 2}, DType::Float64), true, "w1");
  Variable w2(from_values({1.0, -0.5}, {2, 1}, DType::Float64), true, "w2");
  Tensor x = from_values({1.0, 2.0, -1.0, 0.5}, {2, 2}, DType::Float64);
  GradientTape tape;
  std::vector<std::string> order;
  std::vector<Tensor> seen(2);
  HookHandle h1 = tape.register_hook(w1, [&](const Tensor& g) {
    order.push_back("w1");
    seen[0] = g;
    return g;
  });
  HookHandle h2 = tape.register_hook(w2, [&](const Tensor& g) {
    order.push_back("w2");
    seen[1] = g;
    return g;
  });
  Tensor loss = reduce_sum(matmul(tanh(matmul(x, w1)), w2));
  const std::vector<Tensor> grads = tape.gradient(loss, std::vector<Variable>{w1, w2});
  REQUIRE(order == std::vector<std::string>{"w2", "w1"});
  require_close(seen[0], grads[0].shape(), tapegrad::testing::values(grads[0]), 0.0);
  require_close(seen[1], grads[1].shape(), tapegrad::testing::values(grads[1]), 0.0);
}

TEST_CASE("a hook's captures die with its handle, and with its tape", "[hooks]") {
  Tensor x = constant(3.0);
  bool destroyed = false;
  {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor y = multiply(x, x);
    auto sentinel = std::make_shared<Sentinel>(&destroyed);
    HookHandle h = tape.register_hook(y, [sentinel](const Tensor& g) { return g; });
    sentinel.reset();
    tape.gradient(y, x);
    CHECK_FALSE(destroyed);
    h = HookHandle();  // move-assigning removes the old hook
    CHECK(destroyed);
  }
  destroyed = false;
  HookHandle outlives_tape;
  {
    GradientTape tape;
    tape.watch(x);
    auto sentinel = std::make_shared<Sentinel>(&destroyed);
    outlives_tape = tape.register_hook(x, [sentinel](const Tensor& g) { return g; });
    sentinel.reset();
    Tensor y = multiply(x, x);
    // A tensor the hook captured does not keep the tape alive: the tape (and the hook) go
    // when the scope ends, while the handle is still held.
    HookHandle on_y = tape.register_hook(y, [y](const Tensor& g) { return g; });
    require_close(tape.gradient(y, x), {}, {6.0});
    CHECK(outlives_tape.active() == false);  // a used non-persistent tape is dropped
  }
  CHECK(destroyed);
  outlives_tape.remove();  // harmless once the tape is gone
}

TEST_CASE("register_hook misuse", "[hooks][misuse]") {
  expect_misuse<InvalidArgument>("a hook returning the wrong shape",
                                 [] {
                                   Tensor x = from_values({1.0, 2.0}, {2}, DType::Float64);
                                   GradientTape tape;
                                   tape.watch(x);
                                   HookHandle h = tape.register_hook(
                                       x, [](const Tensor&) { return constant(1.0); });
                                   tape.gradient(reduce_sum(multiply(x, x)), x);
                                 },
                                 {"register_hook", "[]", "[2]", "float64"});
  expect_misuse<InvalidArgument>("a hook returning the wrong dtype",
                                 [] {
                                   Tensor x = constant(1.0);
                                   GradientTape tape;
                                   tape.watch(x);
                                   HookHandle h = tape.register_hook(
                                       x, [](const Tensor& g) { return cast(g, DType::Float32); });
                                   tape.gradient(multiply(x, x), x);
                                 },
                                 {"register_hook", "float32", "float64"});
  expect_misuse<InvalidArgument>("a hook on an undefined tensor",
                                 [] {
                                   GradientTape tape;
                                   HookHandle h = tape.register_hook(
                                       Tensor(), [](const Tensor& g) { return g; });
                                 },
                                 {"register_hook", "undefined"});
  expect_misuse<TapeError>("a hook on a used non-persistent tape",
                           [] {
                             Tensor x = constant(1.0);
                             GradientTape tape;
                             tape.watch(x);
                             tape.gradient(multiply(x, x), x);
                             HookHandle h =
                                 tape.register_hook(x, [](const Tensor& g) { return g; });
                           },
                           {"register_hook", "non-persistent"});
}

TEST_CASE("a row-sparse gradient reaches a hook densified", "[hooks]") {
  Variable table(from_values({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {3, 2}, DType::Float64), true,
                 "table");
  GradientTape tape;
  Tensor seen;
  HookHandle h = tape.register_hook(table, [&](const Tensor& g) {
    seen = g;
    return g * 2.0;
  });
  // Rows 2 and 0, row 2 twice: d/dtable of the sum of the gathered rows counts each use.
  Tensor rows = gather(table, from_values({2.0, 0.0, 2.0}, {3}, DType::Int32));
  Tensor dtable = tape.gradient(reduce_sum(rows), table);
  require_close(seen, {3, 2}, {1, 1, 0, 0, 2, 2}, 0.0);
  require_close(dtable, {3, 2}, {2, 2, 0, 0, 4, 4}, 0.0);
}
