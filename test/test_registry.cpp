// User primitives, the registry, what the tape keeps, and when it lets go.
#include "support.hpp"

#include <optional>

using namespace tapegrad;
using tapegrad::testing::message_of;
using tapegrad::testing::require_close;

namespace {

// cube(x) computed with xtensor by the user, recorded as "TestCube".
Tensor user_cube(const Tensor& x) {
  xt::xarray<double> out = x.array<double>() * x.array<double>() * x.array<double>();
  Tensor y(std::move(out));
  record_operation("TestCube", {x}, {y});
  return y;
}

}  // namespace

TEST_CASE("a user primitive with a registered gradient, written in tapegrad ops") {
  static const bool registered = [] {
    register_gradient("TestCube", [](const OpContext& ctx, const std::vector<Tensor>& g) {
      const Tensor& x = ctx.inputs()[0];
      CHECK(ctx.op_type() == "TestCube");
      CHECK(ctx.needs_gradient(0));
      return std::vector<Tensor>{g[0] * 3.0 * x * x};
    });
    return true;
  }();
  CHECK(registered);
  CHECK(is_registered("TestCube"));
  Tensor x = constant({1.0, 2.0});
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = user_cube(x);
    require_close(tape.gradient(y, x), {2}, {3, 12});
  }
  // Its gradient is differentiable: second derivative 6x.
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(user_cube(x), x);
  }
  require_close(outer.gradient(g, x), {2}, {6, 12});
  const auto msg = message_of<InvalidArgument>([] {
    register_gradient("TestCube", [](const OpContext&, const std::vector<Tensor>& g) { return g; });
  });
  CHECK_THAT(msg, Catch::Contains("TestCube"));
}

TEST_CASE("a recorded op without a gradient raises LookupError naming it at gradient() time") {
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = Tensor(xt::xarray<double>(x.array<double>() + 1.0));
  record_operation("TestNoGradientOp", {x}, {y});
  const auto msg = message_of<LookupError>([&] { tape.gradient(y, x); });
  CHECK_THAT(msg, Catch::Contains("No gradient defined for operation 'TestNoGradientOp'"));
}

TEST_CASE("not_differentiable gives undefined gradients") {
  static const bool registered = [] {
    not_differentiable("TestStopOp");
    return true;
  }();
  CHECK(registered);
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = Tensor(xt::xarray<double>(x.array<double>() * 2.0));
  record_operation("TestStopOp", {x}, {y});
  Tensor z = y + x;
  CHECK(tape.gradient(z, x).item<double>() == 1.0);  // only the direct path
}

TEST_CASE("record_operation is a no-op without a tape watching an input") {
  Tensor x = constant(2.0);
  Tensor y = constant(3.0);
  record_operation("TestNoGradientOp", {x}, {y});  // no tape at all
  GradientTape tape;
  record_operation("TestNoGradientOp", {x}, {y});  // a tape that does not watch x
  tape.watch(y);
  CHECK(tape.gradient(y, x, UnconnectedGradients::Zero).item<double>() == 0.0);
}

TEST_CASE("attrs reach the gradient function, wrong attr types throw") {
  static const bool registered = [] {
    register_gradient(
        "TestScaleOp",
        [](const OpContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{g[0] * ctx.attrs().get_double("factor")};
        },
        Keep::none(), Keep::none());
    return true;
  }();
  CHECK(registered);
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = Tensor(xt::xarray<double>(x.array<double>() * 7.0));
  record_operation("TestScaleOp", {x}, {y}, Attrs().set("factor", 7.0));
  CHECK(tape.gradient(y, x).item<double>() == 7.0);
  Attrs a;
  a.set("n", std::int64_t{3}).set("flag", true).set("axes", std::vector<std::int64_t>{0, -1});
  CHECK(a.get_int("n") == 3);
  CHECK(a.get_bool("flag"));
  CHECK(a.get_ints("axes") == std::vector<std::int64_t>{0, -1});
  CHECK_THAT(message_of<InvalidArgument>([&] { a.get_double("n"); }), Catch::Contains("'n'"));
  CHECK_THAT(message_of<InvalidArgument>([&] { a.get_int("missing"); }),
             Catch::Contains("'missing'"));
}

TEST_CASE("a gradient function returning the wrong count or shape is reported") {
  static const bool registered = [] {
    register_gradient("TestBadCount", [](const OpContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0], g[0]};
    });
    register_gradient("TestBadShape", [](const OpContext&, const std::vector<Tensor>&) {
      return std::vector<Tensor>{constant({1.0, 2.0, 3.0})};
    });
    return true;
  }();
  CHECK(registered);
  Tensor x = constant({1.0, 2.0});
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = identity(x);
    record_operation("TestBadCount", {x}, {y});
    const auto msg = message_of<InvalidArgument>([&] { tape.gradient(y, x); });
    CHECK_THAT(msg, Catch::Contains("TestBadCount") &&
                        Catch::Contains("returned 2 gradients, expected 1"));
  }
  {
    GradientTape tape;
    tape.watch(x);
    Tensor y = identity(x);
    record_operation("TestBadShape", {x}, {y});
    const auto msg = message_of<InvalidArgument>([&] { tape.gradient(y, x); });
    CHECK_THAT(msg,
               Catch::Contains("TestBadShape") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  }
}

TEST_CASE("the tape keeps only the tensors a gradient declares it reads") {
  Tensor x = ones({1000});
  Tensor c = ones({1000});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  // bytes_held() counts everything the tape owns. A first op takes the arena's first chunk;
  // after it, an op that keeps nothing adds a few dozen bytes inside that chunk, and a kept
  // 1000-element float64 tensor adds its 8000 bytes plus its storage block (< 1 KB).
  Tensor warm = x + c;
  const std::size_t base = tape.bytes_held();
  Tensor a = x + c;  // Add reads nothing
  const std::size_t after_add = tape.bytes_held();
  CHECK(after_add - base < 1000);
  Tensor e = exp(a);  // Exp reads its output only
  const std::size_t after_exp = tape.bytes_held();
  CHECK(after_exp - after_add >= 8000);
  CHECK(after_exp - after_add < 9000);
  Tensor m = e * c;  // Mul reads both inputs: e (already held) and c
  const std::size_t after_mul = tape.bytes_held();
  CHECK(after_mul - after_exp >= 8000);
  CHECK(after_mul - after_exp < 9000);
}

TEST_CASE("a non-persistent tape releases each entry's tensors as soon as the walk used it") {
  static std::vector<std::size_t> seen;
  static GradientTape* current = nullptr;
  static const bool registered = [] {
    register_gradient(
        "TestProbe",
        [](const OpContext&, const std::vector<Tensor>& g) {
          seen.push_back(current->bytes_held());
          return std::vector<Tensor>{g[0]};
        },
        Keep::all(), Keep::none());
    return true;
  }();
  CHECK(registered);
  auto probe = [](const Tensor& t) {
    Tensor out = Tensor(xt::xarray<double>(t.array<double>()));
    record_operation("TestProbe", {t}, {out});  // keeps its input: 8000 bytes
    return out;
  };
  for (bool persistent : {false, true}) {
    seen.clear();
    Tensor x = ones({1000});
    GradientTape tape(persistent);
    current = &tape;
    tape.watch(x);
    Tensor p1 = probe(x);  // keeps x
    Tensor e = exp(p1);    // keeps e
    Tensor p2 = probe(e);  // keeps e (the same tensor)
    std::optional<GradientTape::RecordingGuard> paused;
    if (persistent) paused.emplace(tape.stop_recording());
    REQUIRE(tape.gradient(p2, x).size() == 1000);
    REQUIRE(seen.size() == 2);
    // Between the calls exp and probe2 ran: a non-persistent tape has released e, and has
    // handed probe1's kept x to the running gradient function (8000 bytes each, plus their
    // storage blocks); a persistent one keeps everything.
    if (persistent) {
      CHECK(seen[1] == seen[0]);
    } else {
      CHECK(seen[0] - seen[1] >= 16000);
      CHECK(seen[0] - seen[1] < 18000);
    }
  }
}
