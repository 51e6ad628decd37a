// GradientTape semantics, with TensorFlow's numbers.
#include "support.hpp"

#include <optional>
#include <thread>

using namespace tapegrad;
using tapegrad::testing::message_of;
using tapegrad::testing::require_close;

TEST_CASE("x*x at 3 has gradient 6 (TF)") {
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  Tensor g = tape.gradient(y, x);
  CHECK(g.dtype() == DType::Float64);
  CHECK(g.item<double>() == 6.0);
}

TEST_CASE("float32 works the same and keeps its dtype") {
  Tensor x = constant(3.0f);
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(x * x, x);
  CHECK(g.dtype() == DType::Float32);
  CHECK(g.item<float>() == 6.0f);
}

TEST_CASE("a persistent tape: z = (x^2)^2 gives 108, then y = x^2 gives 6 (TF)") {
  Tensor x = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor z = y * y;
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(z, x).item<double>() == 108.0);
  CHECK(tape.gradient(y, x).item<double>() == 6.0);
  CHECK(tape.persistent());
}

TEST_CASE("a non-persistent tape allows one gradient call") {
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  CHECK(tape.gradient(y, x).item<double>() == 6.0);
  const auto msg = message_of<TapeError>([&] { tape.gradient(y, x); });
  CHECK_THAT(msg, Catch::Contains("non-persistent GradientTape can only be used to compute one "
                                  "set of gradients"));
  CHECK_THROWS_AS(tape.watch(x), TapeError);
}

TEST_CASE("gradient on a non-persistent tape that is recording stops its recording") {
  Tensor x = constant(2.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  CHECK(tape.recording());
  CHECK(tape.gradient(y, x).item<double>() == 4.0);
  CHECK_FALSE(tape.recording());
  CHECK_FALSE(should_record({x}));
}

TEST_CASE("sources are not barriers: y = x^2, z = y^2 gives [108, 18] for [x, y] (TF)") {
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  Tensor z = y * y;
  auto grads = tape.gradient(z, std::vector<Tensor>{x, y});
  CHECK(grads[0].item<double>() == 108.0);
  CHECK(grads[1].item<double>() == 18.0);
}

TEST_CASE("a source that is also a target, and the same source twice") {
  Tensor x = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(x, x).item<double>() == 1.0);
  auto twice = tape.gradient(y, std::vector<Tensor>{x, x});
  CHECK(twice[0].item<double>() == 6.0);
  CHECK(twice[1].item<double>() == 6.0);
  // Targets are summed: d(y + x)/dx = 2x + 1.
  auto summed = tape.gradient(std::vector<Tensor>{y, x}, std::vector<Tensor>{x});
  CHECK(summed[0].item<double>() == 7.0);
}

TEST_CASE("output_gradients weight the targets") {
  Tensor x = constant({1.0, 2.0, 3.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor w = x * 3.0;
  auto paused = tape.stop_recording();
  auto g = tape.gradient({y}, {x}, {constant({1.0, 10.0, 100.0})});
  require_close(g[0], {3}, {2, 40, 600});
  auto g2 = tape.gradient({y, w}, {x}, {constant({1.0, 0.0, 0.0}), constant({0.0, 1.0, 0.0})});
  require_close(g2[0], {3}, {2, 3, 0});
  // An undefined output gradient means ones.
  auto g3 = tape.gradient({y}, {x}, {Tensor()});
  require_close(g3[0], {3}, {2, 4, 6});
  const auto count_msg = message_of<InvalidArgument>([&] {
    tape.gradient({y, w}, {x}, {constant({1.0, 1.0, 1.0})});
  });
  CHECK_THAT(count_msg, Catch::Contains("1 output_gradients for 2 targets"));
  const auto shape_msg = message_of<InvalidArgument>([&] {
    tape.gradient({y}, {x}, {constant({1.0, 1.0})});
  });
  CHECK_THAT(shape_msg, Catch::Contains("[2]") && Catch::Contains("[3]"));
}

TEST_CASE("unconnected sources: None gives undefined, Zero gives zeros of the source's shape") {
  Tensor x = constant({1.0, 2.0});
  Tensor unused = constant({{1.0, 2.0, 3.0}});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(unused);
  Tensor y = reduce_sum(x * x);
  auto paused = tape.stop_recording();
  CHECK_FALSE(tape.gradient(y, unused).defined());
  require_close(tape.gradient(y, unused, UnconnectedGradients::Zero), {1, 3}, {0, 0, 0});
  // Never watched at all: the same.
  Tensor stranger = constant(5.0);
  CHECK_FALSE(tape.gradient(y, stranger).defined());
  require_close(tape.gradient(y, stranger, UnconnectedGradients::Zero), {}, {0});
}

TEST_CASE("integer tensors are never differentiated") {
  Tensor i = Tensor(xt::xarray<std::int32_t>{1, 2, 3});
  GradientTape tape(/*persistent=*/true);
  tape.watch(i);  // warns once, watches nothing
  Tensor y = i * i;
  CHECK(y.dtype() == DType::Int32);
  require_close(y, {3}, {1, 4, 9});
  auto paused = tape.stop_recording();
  CHECK_FALSE(tape.gradient(y, i).defined());
  Tensor x = constant(2.0);
  CHECK_FALSE(tape.gradient(x, i).defined());
}

TEST_CASE("stop_recording: ops inside are not recorded, misuse throws TapeError") {
  Tensor x = constant(4.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y;
  {
    auto paused = tape.stop_recording();
    CHECK_FALSE(tape.recording());
    y = x * x;
    const auto msg = message_of<TapeError>([&] { auto again = tape.stop_recording(); });
    CHECK_THAT(msg, Catch::Contains("Trying to stop recording a tape which is not recording"));
  }
  CHECK(tape.recording());
  Tensor z = x * 3.0;
  CHECK_FALSE(tape.gradient(y, x).defined());
}

TEST_CASE("stop_recording after the tape was used throws TapeError") {
  Tensor x = constant(1.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  tape.gradient(y, x);
  CHECK_THROWS_AS(tape.stop_recording(), TapeError);
}

TEST_CASE("re-entering a recording tape throws TapeError, a paused one can resume") {
  Tensor x = constant(2.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const auto msg = message_of<TapeError>([&] { auto again = tape.record(); });
  CHECK_THAT(msg, Catch::Contains("Tape is still recording"));
  Tensor y;
  {
    auto paused = tape.stop_recording();
    Tensor ignored = x * x;
    {
      auto resumed = tape.record();
      CHECK(tape.recording());
      y = x * x * x;
    }
    CHECK_FALSE(tape.recording());
  }
  CHECK(tape.recording());
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(y, x).item<double>() == 12.0);
}

TEST_CASE("reset forgets what was recorded and keeps recording") {
  Tensor x = constant(3.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  tape.reset();
  Tensor z = x * 5.0;  // x is no longer watched
  CHECK_FALSE(tape.gradient(y, x).defined());
  CHECK_FALSE(tape.gradient(z, x).defined());
  tape.watch(x);
  Tensor w = x * 5.0;
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(w, x).item<double>() == 5.0);
}

TEST_CASE("nested tapes: d2/dx2 x^3 at 2 is 12") {
  Tensor x = constant(2.0);
  GradientTape outer;
  outer.watch(x);
  Tensor dy_dx;
  {
    GradientTape inner;
    inner.watch(x);
    Tensor y = x * x * x;
    dy_dx = inner.gradient(y, x);
  }
  CHECK(dy_dx.item<double>() == 12.0);
  CHECK(outer.gradient(dy_dx, x).item<double>() == 12.0);
}

// As TF: once an op is recorded (one watched input suffices), every floating input of it is
// differentiable on that tape, watched or not.
TEST_CASE("an op is recorded only on the tapes that watch one of its inputs") {
  Tensor a = constant(2.0);
  Tensor b = constant(3.0);
  GradientTape ta(/*persistent=*/true);
  ta.watch(a);
  GradientTape tb(/*persistent=*/true);
  tb.watch(b);
  Tensor y = a * b;
  auto pa = ta.stop_recording();
  auto pb = tb.stop_recording();
  auto ga = ta.gradient(y, std::vector<Tensor>{a, b});
  auto gb = tb.gradient(y, std::vector<Tensor>{a, b});
  CHECK(ga[0].item<double>() == 3.0);
  CHECK(ga[1].item<double>() == 2.0);
  CHECK(gb[0].item<double>() == 3.0);
  CHECK(gb[1].item<double>() == 2.0);
  Tensor c = constant(4.0);
  {
    GradientTape only_a;
    only_a.watch(a);
    Tensor unrelated = b * c;  // no watched input: not recorded on only_a
    CHECK_FALSE(only_a.gradient(unrelated, b).defined());
  }
}

TEST_CASE("an exception inside a tape scope leaves the thread's tape stack as it was") {
  Tensor x = constant(1.0);
  Tensor outer_x = constant(2.0);
  GradientTape outer;
  outer.watch(outer_x);
  try {
    GradientTape inner;
    inner.watch(x);
    CHECK(should_record({x}));
    Tensor y = x * x;
    throw std::runtime_error("failure inside the scope");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(should_record({x}));
  CHECK(should_record({outer_x}));
  CHECK(outer.recording());
  Tensor y = outer_x * outer_x;
  CHECK(outer.gradient(y, outer_x).item<double>() == 4.0);
  CHECK_FALSE(should_record({outer_x}));
}

TEST_CASE("two threads run their own tapes at once with independent, correct results") {
  auto worker = [](double scale, std::vector<double>& out) {
    for (int i = 0; i < 300; ++i) {
      Tensor x = constant(scale + i);
      GradientTape tape;
      tape.watch(x);
      Tensor y = tanh(x * scale) + x * x * x;
      out.push_back(tape.gradient(y, x).item<double>());
    }
  };
  std::vector<double> a, b;
  std::thread ta(worker, 0.5, std::ref(a));
  std::thread tb(worker, -0.25, std::ref(b));
  ta.join();
  tb.join();
  REQUIRE(a.size() == 300);
  REQUIRE(b.size() == 300);
  for (int i = 0; i < 300; ++i) {
    for (auto [scale, got] : {std::pair{0.5, a[i]}, std::pair{-0.25, b[i]}}) {
      const double x = scale + i;
      const double t = std::tanh(x * scale);
      CHECK(got == Approx(scale * (1 - t * t) + 3 * x * x).epsilon(1e-12));
    }
  }
  CHECK_FALSE(should_record({constant(1.0)}));
}

TEST_CASE("watch checks its argument, gradient checks targets and sources") {
  GradientTape tape(/*persistent=*/true);
  CHECK_THROWS_AS(tape.watch(Tensor()), InvalidArgument);
  Tensor x = constant(1.0);
  tape.watch(x);
  Tensor y = x * x;
  auto paused = tape.stop_recording();
  const auto msg = message_of<InvalidArgument>([&] { tape.gradient(Tensor(), x); });
  CHECK_THAT(msg, Catch::Contains("target"));
  const auto msg2 = message_of<InvalidArgument>([&] { tape.gradient(y, Tensor()); });
  CHECK_THAT(msg2, Catch::Contains("source"));
}

TEST_CASE("a chain of 200,000 ops walks back without recursion") {
  Tensor x = constant(1.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = y * 1.0;
  CHECK(tape.gradient(y, x).item<double>() == 1.0);
}

TEST_CASE("a recording made on one thread can be used and released on another") {
  std::optional<std::pair<Tensor, VJP>> result;
  std::thread maker([&] {
    Fn f = [](const std::vector<Tensor>& a) { return reduce_sum(tanh(a[0]) * a[0]); };
    result.emplace(make_vjp(f, {constant({0.5, -1.0, 2.0})}));
  });
  maker.join();
  REQUIRE(result.has_value());
  const auto grads = result->second();  // on this thread, after the maker has exited
  for (std::size_t i = 0; i < 3; ++i) {
    const double x = std::vector<double>{0.5, -1.0, 2.0}[i];
    const double t = std::tanh(x);
    CHECK(tapegrad::testing::values(grads[0])[i] == Approx(t + x * (1 - t * t)).epsilon(1e-12));
  }
  result.reset();  // the tape's memory goes back on this thread
  CHECK_FALSE(should_record({constant(1.0)}));
}
