// Variables on tapes: handles, auto-watching, watched_variables, assign checks, gradients
// w.r.t. variables, and implicit_value_and_gradients.
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

TEST_CASE("a Variable is a shared handle with a name and a trainable flag", "[variable]") {
  Variable v(constant({1.0, 2.0}), /*trainable=*/false, "weights");
  Variable copy = v;
  copy.assign(constant({5.0, 6.0}));
  require_close(v.value(), {2}, {5.0, 6.0});
  CHECK(copy == v);
  CHECK(copy.id() == v.id());
  CHECK_FALSE(v.trainable());
  CHECK(v.name() == "weights");
  Variable other(constant(1.0));
  CHECK(other != v);
  CHECK(other.trainable());
  CHECK(other.id() > v.id());
}

TEST_CASE("the variable keeps its own copy of the initial value and of assigned values",
          "[variable]") {
  Tensor init = constant({1.0, 2.0});
  Variable v(init);
  CHECK(v.peek().id() != init.id());
  Tensor next = constant({3.0, 4.0});
  v.assign(next);
  CHECK(v.peek().id() != next.id());
  v.assign_add(constant({1.0, 1.0}));
  require_close(v.peek(), {2}, {4.0, 5.0});
  v.assign_sub(constant({0.5, 2.0}));
  require_close(v.peek(), {2}, {3.5, 3.0});
}

TEST_CASE("assign, assign_add and assign_sub check shape and dtype", "[variable]") {
  Variable v(constant({1.0, 2.0}), true, "w");
  auto msg = message_of<InvalidArgument>([&] { v.assign(constant({1.0, 2.0, 3.0})); });
  CHECK_THAT(msg, Catch::Contains("assign") && Catch::Contains("'w'") && Catch::Contains("[2]") &&
                      Catch::Contains("[3]"));
  msg = message_of<InvalidArgument>([&] { v.assign_add(zeros({2}, DType::Float32)); });
  CHECK_THAT(msg, Catch::Contains("assign_add") && Catch::Contains("float64") &&
                      Catch::Contains("float32"));
  msg = message_of<InvalidArgument>([&] { v.assign_sub(constant(1.0)); });
  CHECK_THAT(msg, Catch::Contains("assign_sub") && Catch::Contains("[]"));
  require_close(v.peek(), {2}, {1.0, 2.0});  // unchanged by the failed calls
}

TEST_CASE("reading a variable under a tape watches it, gradient(target, variable)",
          "[variable][tape]") {
  Variable w(constant({1.0, -2.0}), true, "w");
  GradientTape tape;
  Tensor y = reduce_sum(w.value() * w.value() * 3.0);  // 3 * sum(w^2)
  Tensor g = tape.gradient(y, w);
  require_close(g, {2}, {6.0, -12.0});
}

TEST_CASE("gradient(target, vector<Variable>) and an unconnected variable", "[variable][tape]") {
  Variable a(constant(2.0), true, "a");
  Variable b(constant(5.0), true, "b");
  Variable unused(constant(1.0), true, "unused");
  GradientTape tape(/*persistent=*/true);
  Tensor y = a * b + a;  // conversions to Tensor are reads
  (void)unused.value();
  auto grads = tape.gradient(y, std::vector<Variable>{a, b, unused});
  require_close(grads[0], {}, {6.0});
  require_close(grads[1], {}, {2.0});
  CHECK_FALSE(grads[2].defined());
  auto zeros_for_unused =
      tape.gradient(y, std::vector<Variable>{unused}, UnconnectedGradients::Zero);
  require_close(zeros_for_unused[0], {}, {0.0});
}

TEST_CASE("every tape that auto-watches sees the read, with it off only watch() counts",
          "[variable][tape]") {
  Variable v(constant(3.0), true, "v");
  GradientTape auto_tape(/*persistent=*/true);
  GradientTape manual_tape(/*persistent=*/true, /*watch_accessed_variables=*/false);
  GradientTape auto_tape2(/*persistent=*/true);
  Tensor y = square(v.value());
  CHECK(auto_tape.watched_variables().size() == 1);
  CHECK(auto_tape2.watched_variables().size() == 1);
  CHECK(manual_tape.watched_variables().empty());
  require_close(auto_tape.gradient(y, v), {}, {6.0});
  require_close(auto_tape2.gradient(y, v), {}, {6.0});
  CHECK_FALSE(manual_tape.gradient(y, v).defined());

  manual_tape.watch(v);
  Tensor z = square(v.value()) * 2.0;
  require_close(manual_tape.gradient(z, v), {}, {12.0});
  CHECK(manual_tape.watched_variables().size() == 1);
}

TEST_CASE("non-trainable variables are not auto-watched", "[variable][tape]") {
  Variable frozen(constant(3.0), /*trainable=*/false, "frozen");
  GradientTape tape(/*persistent=*/true);
  Tensor y = square(frozen.value());
  CHECK(tape.watched_variables().empty());
  CHECK_FALSE(tape.gradient(y, frozen).defined());
  tape.watch(frozen);
  Tensor z = square(frozen.value());
  require_close(tape.gradient(z, frozen), {}, {6.0});
}

TEST_CASE("watched_variables lists variables in creation order", "[variable][tape]") {
  Variable first(constant(1.0), true, "first");
  Variable second(constant(2.0), true, "second");
  Variable third(constant(3.0), true, "third");
  GradientTape tape;
  Tensor y = third.value() + first.value() + second.value() + first.value();
  auto watched = tape.watched_variables();
  REQUIRE(watched.size() == 3);
  CHECK(watched[0].name() == "first");
  CHECK(watched[1].name() == "second");
  CHECK(watched[2].name() == "third");
}

TEST_CASE("a tape keeps the value it read: a later assign changes nothing recorded",
          "[variable][tape]") {
  Variable v(constant(2.0), true, "v");
  Variable scale(constant(10.0), true, "scale");
  GradientTape tape;
  Tensor y = v.value() * scale.value();  // dy/dv = 10 at the read value of scale
  scale.assign(constant(-1.0));
  v.assign(constant(100.0));
  require_close(y, {}, {20.0});
  auto grads = tape.gradient(y, std::vector<Variable>{v, scale});
  require_close(grads[0], {}, {10.0});
  require_close(grads[1], {}, {2.0});
}

TEST_CASE("a value read before an assign and the one after are separate paths",
          "[variable][tape]") {
  Variable v(constant(3.0), true, "v");
  GradientTape tape;
  Tensor before = v.value();
  v.assign(constant(5.0));
  Tensor after = v.value();
  Tensor y = before * after;  // both reads stand for v: dy/dv = after + before
  require_close(tape.gradient(y, v), {}, {8.0});
}

TEST_CASE("second derivative with respect to a variable through nested tapes", "[variable][tape]") {
  Variable x(constant(2.0), true, "x");
  GradientTape outer;
  Tensor dy;
  {
    GradientTape inner;
    Tensor y = x.value() * x.value() * x.value();
    dy = inner.gradient(y, x);
  }
  require_close(dy, {}, {12.0});
  require_close(outer.gradient(dy, x), {}, {12.0});  // d2/dx2 x^3 = 6x
}

TEST_CASE("implicit_value_and_gradients: trainable variables read, in creation order",
          "[variable][functional]") {
  Variable a(constant({1.0, 2.0}), true, "a");
  Variable frozen(constant(4.0), false, "frozen");
  Variable b(constant(3.0), true, "b");
  Variable read_but_unused(constant(7.0), true, "read_but_unused");
  Variable never_read(constant(9.0), true, "never_read");
  auto [value, grads] = implicit_value_and_gradients([&] {
    Tensor unused = read_but_unused.value() * 2.0;
    return reduce_sum(b.value() * a.value() * a.value()) * frozen.value();
  });
  require_close(value, {}, {4.0 * 3.0 * 5.0});
  REQUIRE(grads.size() == 3);
  CHECK(grads[0].second == a);
  CHECK(grads[1].second == b);
  CHECK(grads[2].second == read_but_unused);
  require_close(grads[0].first, {2}, {4.0 * 3.0 * 2.0, 4.0 * 3.0 * 4.0});
  require_close(grads[1].first, {}, {4.0 * 5.0});
  CHECK_FALSE(grads[2].first.defined());
  (void)never_read;
  auto only = implicit_gradients([&] { return b.value() * 2.0; });
  REQUIRE(only.size() == 1);
  require_close(only[0].first, {}, {2.0});
}

TEST_CASE("implicit_value_and_gradients without a trainable variable read",
          "[variable][functional]") {
  Variable frozen(constant(4.0), false, "frozen");
  Tensor x = constant(1.0);
  auto msg = message_of<InvalidArgument>(
      [&] { implicit_value_and_gradients([&] { return x * frozen.value(); }); });
  CHECK_THAT(msg, Catch::Contains("No trainable variables were accessed while the function was "
                                  "being computed."));
}

TEST_CASE("implicit_value_and_gradients nests inside an outer tape", "[variable][functional]") {
  Variable w(constant(3.0), true, "w");
  GradientTape outer;
  auto [value, grads] =
      implicit_value_and_gradients([&] { return w.value() * w.value() * w.value(); });
  require_close(value, {}, {27.0});
  require_close(grads[0].first, {}, {27.0});                     // 3 w^2
  require_close(outer.gradient(grads[0].first, w), {}, {18.0});  // 6 w
}
