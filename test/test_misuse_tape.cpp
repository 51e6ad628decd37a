// The misuse catalogue of the tape runtime: GradientTape, its guards and threads, Variable,
// custom_gradient, recompute_grad, grad_pass_through, register_gradient, check_gradient and
// the functional forms. Every case checks the exception type, that the message names the
// entry point and the offending shapes/dtypes/values, and that the thread is clean after.
#include "misuse_support.hpp"
#include "support.hpp"

#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include <xtensor/xarray.hpp>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

const char* const kOtherThread = "a tape belongs to the thread that created it";

// Runs f on a new thread and rethrows, on this one, whatever it threw.
void on_other_thread(const std::function<void()>& f) {
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error) std::rethrow_exception(error);
}

// A user primitive: y = 2x computed outside tapegrad, recorded under `op_type`.
Tensor user_double(const std::string& op_type, const Tensor& x) {
  Tensor y(xt::xarray<double>(x.array<double>() * 2.0));
  record_operation(op_type, {x}, {y});
  return y;
}

// Registers, once per process, the user ops whose gradient functions misbehave.
void register_bad_gradients() {
  static const bool registered = [] {
    register_gradient("MisuseTwoGradients", [](const OpContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0] * 2.0, g[0]};
    });
    register_gradient("MisuseWrongShape", [](const OpContext&, const std::vector<Tensor>&) {
      return std::vector<Tensor>{constant({1.0, 2.0, 3.0})};
    });
    register_gradient("MisuseWrongDtype", [](const OpContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{cast(g[0], DType::Float32)};
    });
    register_gradient("MisuseThrowsInvalid", [](const OpContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0] * constant({1.0, 2.0, 3.0})};  // [2] * [3]: broadcast error
    });
    register_gradient("MisuseThrowsLookup",
                      [](const OpContext&, const std::vector<Tensor>&) -> std::vector<Tensor> {
                        throw LookupError("user lookup failed for key 7");
                      });
    register_gradient("MisuseThrowsStd",
                      [](const OpContext&, const std::vector<Tensor>&) -> std::vector<Tensor> {
                        throw std::out_of_range("user index 9 out of range");
                      });
    return true;
  }();
  (void)registered;
}

// Differentiates a user op through a fresh tape, at x = [1, 2].
void differentiate_user_op(const std::string& op_type) {
  register_bad_gradients();
  Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = user_double(op_type, x);
  tape.gradient(y, x);
}

// A custom_gradient op on [3] whose backward returns `g(dy)`.
template <class G>
Tensor custom_op(const Tensor& x, G g, const std::string& name = "MisuseCustom") {
  auto f = custom_gradient([g](const Tensor& in) { return std::make_pair(in * 2.0, g); }, name);
  return f(x);
}

template <class G>
void differentiate_custom(G g, const std::string& name = "MisuseCustom") {
  Tensor x = constant({1.0, 2.0, 3.0});
  GradientTape tape;
  tape.watch(x);
  Tensor y = custom_op(x, g, name);
  tape.gradient(y, x);
}

}  // namespace

// ---------------------------------------------------------------- GradientTape: one thread

TEST_CASE("misuse: GradientTape::watch", "[misuse][tape]") {
  expect_defined("watch of an int32 tensor: no gradient, no error", [] {
    Tensor i = from_values({1, 2}, {2}, DType::Int32);
    GradientTape tape;
    tape.watch(i);
    Tensor y = i * 3;
    CHECK_FALSE(tape.gradient(y, i).defined());
  });
  expect_defined("watch of a bool tensor: zeros with UnconnectedGradients::Zero", [] {
    Tensor b = from_values({1, 0}, {2}, DType::Bool);
    GradientTape tape;
    tape.watch(b);
    Tensor g = tape.gradient(constant(1.0), b, UnconnectedGradients::Zero);
    REQUIRE(g.defined());
    CHECK(g.dtype() == DType::Bool);
    CHECK(g.shape() == Shape{2});
  });
  expect_misuse<InvalidArgument>("watch of an undefined tensor",
                                 [] {
                                   GradientTape tape;
                                   tape.watch(Tensor());
                                 },
                                 {"GradientTape::watch", "undefined"});
  expect_misuse<TapeError>("watch on a used non-persistent tape",
                           [] {
                             Tensor x = constant(1.0);
                             GradientTape tape;
                             tape.watch(x);
                             tape.gradient(x * x, x);
                             tape.watch(x);
                           },
                           {"GradientTape::watch", "non-persistent"});
  expect_misuse<TapeError>("watch of a variable on a used non-persistent tape",
                           [] {
                             Variable v(constant(1.0), true, "w");
                             GradientTape tape;
                             Tensor y = v.value() * 2.0;
                             tape.gradient(y, v);
                             tape.watch(v);
                           },
                           {"GradientTape::watch", "non-persistent"});
}

TEST_CASE("misuse: a used non-persistent tape", "[misuse][tape]") {
  auto used = [](const std::function<void(GradientTape&, const Tensor&, const Tensor&)>& again) {
    Tensor x = constant({1.0, 2.0});
    GradientTape tape;
    tape.watch(x);
    Tensor y = x * x;
    tape.gradient(y, x);
    again(tape, y, x);
  };
  expect_misuse<TapeError>(
      "gradient twice",
      [&] { used([](GradientTape& t, const Tensor& y, const Tensor& x) { t.gradient(y, x); }); },
      {"GradientTape::gradient", "non-persistent GradientTape can only be used to compute one"});
  expect_misuse<TapeError>("gradient_values after gradient",
                           [&] {
                             used([](GradientTape& t, const Tensor& y, const Tensor& x) {
                               t.gradient_values({y}, {x});
                             });
                           },
                           {"GradientTape::gradient", "non-persistent"});
  expect_misuse<TapeError>(
      "jacobian after gradient",
      [&] { used([](GradientTape& t, const Tensor& y, const Tensor& x) { t.jacobian(y, x); }); },
      {"GradientTape::jacobian", "non-persistent"});
  expect_misuse<TapeError>("batch_jacobian after gradient",
                           [&] {
                             used([](GradientTape& t, const Tensor&, const Tensor&) {
                               Tensor m = constant({{1.0, 2.0}, {3.0, 4.0}});
                               t.batch_jacobian(m, m);
                             });
                           },
                           {"GradientTape::batch_jacobian", "non-persistent"});
  expect_misuse<TapeError>(
      "record after gradient",
      [&] { used([](GradientTape& t, const Tensor&, const Tensor&) { auto g = t.record(); }); },
      {"GradientTape::record", "non-persistent"});
  expect_misuse<TapeError>(
      "reset after gradient",
      [&] { used([](GradientTape& t, const Tensor&, const Tensor&) { t.reset(); }); },
      {"GradientTape::reset", "non-persistent"});
  expect_misuse<TapeError>(
      "stop_recording after gradient",
      [&] {
        used([](GradientTape& t, const Tensor&, const Tensor&) { auto g = t.stop_recording(); });
      },
      {"GradientTape::stop_recording", "not recording"});
  expect_defined("watched_variables and bytes_held after use", [] {
    Variable v(constant(2.0), true, "kept");
    GradientTape tape;
    Tensor y = v.value() * v.value();
    CHECK(tape.gradient(y, v).item<double>() == 4.0);
    REQUIRE(tape.watched_variables().size() == 1);
    CHECK(tape.watched_variables()[0].name() == "kept");
    CHECK(tape.bytes_held() == 0);
  });
}

TEST_CASE("misuse: gradient arguments", "[misuse][tape]") {
  auto with_tape = [](const std::function<void(GradientTape&, const Tensor&, const Tensor&)>& f) {
    Tensor x = constant({1.0, 2.0, 3.0});
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor y = x * x;
    auto paused = tape.stop_recording();
    f(tape, y, x);
  };
  expect_misuse<InvalidArgument>("output_gradients: two for one target",
                                 [&] {
                                   with_tape([](GradientTape& t, const Tensor& y, const Tensor& x) {
                                     t.gradient({y}, {x}, {ones({3}), ones({3})});
                                   });
                                 },
                                 {"GradientTape::gradient", "2 output_gradients for 1 targets"});
  expect_misuse<InvalidArgument>("output_gradients: wrong shape",
                                 [&] {
                                   with_tape([](GradientTape& t, const Tensor& y, const Tensor& x) {
                                     t.gradient({y}, {x}, {ones({2})});
                                   });
                                 },
                                 {"GradientTape::gradient", "output_gradients[0]", "[2]", "[3]"});
  expect_misuse<InvalidArgument>(
      "output_gradients: wrong dtype",
      [&] {
        with_tape([](GradientTape& t, const Tensor& y, const Tensor& x) {
          t.gradient({y}, {x}, {ones({3}, DType::Float32)});
        });
      },
      {"GradientTape::gradient", "output_gradients[0]", "float32", "float64"});
  expect_misuse<InvalidArgument>(
      "undefined target",
      [&] {
        with_tape([](GradientTape& t, const Tensor&, const Tensor& x) { t.gradient(Tensor(), x); });
      },
      {"GradientTape::gradient", "target 0 is undefined"});
  expect_misuse<InvalidArgument>("an undefined target in a list",
                                 [&] {
                                   with_tape([](GradientTape& t, const Tensor& y, const Tensor& x) {
                                     t.gradient(std::vector<Tensor>{y, Tensor()}, {x});
                                   });
                                 },
                                 {"GradientTape::gradient", "target 1 is undefined"});
  expect_misuse<InvalidArgument>(
      "undefined source",
      [&] {
        with_tape([](GradientTape& t, const Tensor& y, const Tensor&) { t.gradient(y, Tensor()); });
      },
      {"GradientTape::gradient", "source 0 is undefined"});
  expect_misuse<InvalidArgument>(
      "jacobian of an undefined target",
      [&] {
        with_tape([](GradientTape& t, const Tensor&, const Tensor& x) { t.jacobian(Tensor(), x); });
      },
      {"GradientTape::jacobian", "undefined"});
  expect_misuse<InvalidArgument>("batch_jacobian: rank-1 target",
                                 [&] {
                                   with_tape([](GradientTape& t, const Tensor& y, const Tensor& x) {
                                     t.batch_jacobian(y, x);
                                   });
                                 },
                                 {"GradientTape::batch_jacobian", "[3]", "rank 2"});
  expect_misuse<InvalidArgument>("batch_jacobian: batch sizes differ",
                                 [] {
                                   Tensor x = random_tensor({2, 3}, 1);
                                   GradientTape tape;
                                   tape.watch(x);
                                   Tensor y = reshape(x, {3, 2});
                                   tape.batch_jacobian(y, x);
                                 },
                                 {"GradientTape::batch_jacobian", "[3, 2]", "[2, 3]", "batch"});
  expect_misuse<InvalidArgument>("batch_jacobian: rank-1 source",
                                 [] {
                                   Tensor x = constant({1.0, 2.0});
                                   GradientTape tape;
                                   tape.watch(x);
                                   Tensor y = reshape(x * x, {2, 1});
                                   tape.batch_jacobian(y, x);
                                 },
                                 {"GradientTape::batch_jacobian", "[2, 1]", "[2]"});
  expect_defined("gradient of a target that is a source is ones", [] {
    Tensor x = constant({1.0, 2.0});
    GradientTape tape;
    tape.watch(x);
    require_close(tape.gradient(x, x), {2}, {1.0, 1.0});
  });
}

TEST_CASE("misuse: stop_recording and record", "[misuse][tape]") {
  expect_misuse<TapeError>(
      "stop_recording when not recording",
      [] {
        GradientTape tape;
        auto paused = tape.stop_recording();
        auto again = tape.stop_recording();
      },
      {"GradientTape::stop_recording", "Trying to stop recording a tape which is not recording"});
  expect_misuse<TapeError>("record when recording",
                           [] {
                             GradientTape tape;
                             auto again = tape.record();
                           },
                           {"GradientTape::record", "Tape is still recording"});
  expect_misuse<TapeError>("record inside record",
                           [] {
                             GradientTape tape;
                             auto paused = tape.stop_recording();
                             auto resumed = tape.record();
                             auto again = tape.record();
                           },
                           {"GradientTape::record", "still recording"});
  expect_defined("guards restore out of order", [] {
    Tensor x = constant(2.0);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    std::optional<GradientTape::RecordingGuard> paused(tape.stop_recording());
    std::optional<GradientTape::RecordingGuard> resumed(tape.record());
    Tensor y = x * x;  // recorded
    paused.reset();    // restores "recording": already so
    CHECK(tape.recording());
    resumed.reset();  // restores "not recording"
    CHECK_FALSE(tape.recording());
    Tensor z = x * x * x;  // not recorded
    CHECK(tape.gradient(y, x).item<double>() == 4.0);
    CHECK_FALSE(tape.gradient(z, x).defined());
  });
  expect_defined("a moved guard restores once", [] {
    Tensor x = constant(2.0);
    GradientTape tape;
    tape.watch(x);
    {
      auto paused = tape.stop_recording();
      auto moved = std::move(paused);
      CHECK_FALSE(tape.recording());
    }
    CHECK(tape.recording());
    CHECK(tape.gradient(x * x, x).item<double>() == 4.0);
  });
}

TEST_CASE("misuse: a RecordingGuard outliving its tape", "[misuse][tape]") {
  expect_defined("stop_recording guard outlives the tape", [] {
    Tensor x = constant(3.0);
    std::optional<GradientTape::RecordingGuard> guard;
    {
      auto tape = std::make_unique<GradientTape>();
      tape->watch(x);
      guard.emplace(tape->stop_recording());
    }
    CHECK(tapes_on_this_thread() == 0);
    guard.reset();  // nothing to restore: no tape comes back
    CHECK(tapes_on_this_thread() == 0);
    CHECK_FALSE(should_record({x}));
  });
  expect_defined("record guard outlives the tape", [] {
    Tensor x = constant(3.0);
    std::optional<GradientTape::RecordingGuard> guard;
    {
      GradientTape tape;
      tape.watch(x);
      auto paused = tape.stop_recording();
      guard.emplace(tape.record());
    }
    guard.reset();
    CHECK_FALSE(should_record({x}));
  });
  expect_defined("guard of a used tape outlives it", [] {
    Tensor x = constant(3.0);
    std::optional<GradientTape::RecordingGuard> guard;
    {
      GradientTape tape(/*persistent=*/true);
      tape.watch(x);
      guard.emplace(tape.stop_recording());
      CHECK_FALSE(tape.gradient(x * x, x).defined());  // x * x was not recorded
    }
    guard.reset();
  });
}

TEST_CASE("misuse: reset inside the tape's own gradient computation", "[misuse][tape]") {
  // The same misuse through gradient() and through jacobian().
  for (const bool through_jacobian : {false, true}) {
    const std::string name = through_jacobian ? "ResetsItsTapeInJacobian" : "ResetsItsTape";
    expect_misuse<TapeError>(through_jacobian ? "reset from a jacobian's custom backward"
                                              : "reset from a custom_gradient backward",
                             [&] {
                               Tensor x = constant({1.0, 2.0, 3.0});
                               GradientTape tape(/*persistent=*/true);
                               tape.watch(x);
                               GradientTape* self = &tape;
                               Tensor y = custom_op(
                                   x,
                                   [self](const Tensor& dy) {
                                     self->reset();
                                     return dy * 2.0;
                                   },
                                   name);
                               auto paused = tape.stop_recording();
                               if (through_jacobian) {
                                 tape.jacobian(y, x);
                               } else {
                                 tape.gradient(y, x);
                               }
                             },
                             {"gradient of " + name, "GradientTape::reset",
                              "reset() inside this tape's own gradient computation"});
  }
  expect_defined("reset of another tape from a backward is fine", [] {
    Tensor x = constant({1.0, 2.0, 3.0});
    GradientTape other(/*persistent=*/true);
    GradientTape tape;
    tape.watch(x);
    GradientTape* other_tape = &other;
    Tensor y = custom_op(
        x,
        [other_tape](const Tensor& dy) {
          other_tape->reset();
          return dy * 2.0;
        },
        "ResetsAnotherTape");
    require_close(tape.gradient(y, x), {3}, {2.0, 2.0, 2.0});
  });
  expect_defined("reset after the gradient call returned", [] {
    Tensor x = constant(2.0);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor y = x * x;
    CHECK(tape.gradient(y, x).item<double>() == 4.0);
    tape.reset();
    CHECK_FALSE(tape.gradient(y, x).defined());
  });
}

// ---------------------------------------------------------------- GradientTape: threads

TEST_CASE("misuse: a tape used on another thread", "[misuse][tape][threads]") {
  auto foreign = [](const std::function<void(GradientTape&, const Tensor&, const Tensor&)>& f) {
    Tensor x = constant({1.0, 2.0});
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor y = reshape(x * x, {2, 1});
    on_other_thread([&] { f(tape, y, x); });
  };
  expect_misuse<TapeError>(
      "watch on another thread",
      [&] { foreign([](GradientTape& t, const Tensor&, const Tensor& x) { t.watch(x); }); },
      {"GradientTape::watch", kOtherThread});
  expect_misuse<TapeError>("watch of a variable on another thread",
                           [&] {
                             foreign([](GradientTape& t, const Tensor&, const Tensor&) {
                               t.watch(Variable(constant(1.0)));
                             });
                           },
                           {"GradientTape::watch", kOtherThread});
  expect_misuse<TapeError>(
      "gradient on another thread",
      [&] { foreign([](GradientTape& t, const Tensor& y, const Tensor& x) { t.gradient(y, x); }); },
      {"GradientTape::gradient", kOtherThread});
  expect_misuse<TapeError>("gradient_values on another thread",
                           [&] {
                             foreign([](GradientTape& t, const Tensor& y, const Tensor& x) {
                               t.gradient_values({y}, {x});
                             });
                           },
                           {"GradientTape::gradient", kOtherThread});
  expect_misuse<TapeError>(
      "jacobian on another thread",
      [&] { foreign([](GradientTape& t, const Tensor& y, const Tensor& x) { t.jacobian(y, x); }); },
      {"GradientTape::jacobian", kOtherThread});
  expect_misuse<TapeError>("batch_jacobian on another thread",
                           [&] {
                             foreign([](GradientTape& t, const Tensor& y, const Tensor& x) {
                               t.batch_jacobian(y, reshape(x, {2, 1}));
                             });
                           },
                           {"GradientTape::batch_jacobian", kOtherThread});
  expect_misuse<TapeError>(
      "stop_recording on another thread",
      [&] {
        foreign([](GradientTape& t, const Tensor&, const Tensor&) { auto g = t.stop_recording(); });
      },
      {"GradientTape::stop_recording", kOtherThread});
  expect_misuse<TapeError>(
      "record on another thread",
      [&] { foreign([](GradientTape& t, const Tensor&, const Tensor&) { auto g = t.record(); }); },
      {"GradientTape::record", kOtherThread});
  expect_misuse<TapeError>(
      "reset on another thread",
      [&] { foreign([](GradientTape& t, const Tensor&, const Tensor&) { t.reset(); }); },
      {"GradientTape::reset", kOtherThread});
  expect_misuse<TapeError>(
      "watched_variables on another thread",
      [&] {
        foreign([](GradientTape& t, const Tensor&, const Tensor&) { (void)t.watched_variables(); });
      },
      {"GradientTape::watched_variables", kOtherThread});
  expect_misuse<TapeError>(
      "bytes_held on another thread",
      [&] { foreign([](GradientTape& t, const Tensor&, const Tensor&) { (void)t.bytes_held(); }); },
      {"GradientTape::bytes_held", kOtherThread});
  expect_defined("persistent() and recording() may be asked from any thread", [&] {
    foreign([](GradientTape& t, const Tensor&, const Tensor&) {
      CHECK(t.persistent());
      CHECK(t.recording());
    });
  });
  expect_misuse<TapeError>("a tape made on another thread records nothing here: watch throws",
                           [] {
                             std::unique_ptr<GradientTape> tape;
                             on_other_thread([&] { tape = std::make_unique<GradientTape>(); });
                             CHECK(tapes_on_this_thread() == 0);
                             tape->watch(constant(1.0));
                           },
                           {"GradientTape::watch", kOtherThread});
  expect_misuse<TapeError>("a tape made on another thread: gradient throws",
                           [] {
                             std::unique_ptr<GradientTape> tape;
                             Tensor x = constant(1.0);
                             on_other_thread([&] {
                               tape = std::make_unique<GradientTape>();
                               tape->watch(x);
                             });
                             Tensor y = x * x;  // run here: not recorded on the other thread's tape
                             tape->gradient(y, x);
                           },
                           {"GradientTape::gradient", kOtherThread});
}

TEST_CASE("misuse: a tape destroyed on another thread", "[misuse][tape][threads]") {
  expect_defined("destroyed on another thread while this one lives on", [] {
    Tensor x = constant(2.0);
    auto tape = std::make_unique<GradientTape>();
    tape->watch(x);
    Tensor y = x * x;
    CHECK(should_record({x}));
    on_other_thread([&] { tape.reset(); });
    // This thread drops it at its next tape operation or recorded op: nothing records now.
    CHECK_FALSE(should_record({x}));
    Tensor z = x * x;
    CHECK(tapes_on_this_thread() == 0);
    GradientTape fresh;
    fresh.watch(x);
    Tensor w = x * z;  // z = x * x was recorded nowhere: a constant 4 for `fresh`
    CHECK(fresh.gradient(w, x).item<double>() == 4.0);
  });
  expect_defined("destroyed on another thread while paused", [] {
    Tensor x = constant(2.0);
    auto tape = std::make_unique<GradientTape>();
    tape->watch(x);
    auto paused = tape->stop_recording();
    on_other_thread([&] { tape.reset(); });
    CHECK(tapes_on_this_thread() == 0);
  });  // `paused` outlives the tape: does nothing
  expect_defined("made on a thread that has exited, destroyed here", [] {
    std::unique_ptr<GradientTape> tape;
    on_other_thread([&] {
      tape = std::make_unique<GradientTape>(/*persistent=*/true);
      Tensor x = constant(3.0);
      tape->watch(x);
      Tensor y = x * x;
    });
    CHECK(tape->persistent());
    tape.reset();
  });
  expect_defined("destroyed on another thread inside a custom_gradient forward", [] {
    Tensor x = constant({1.0, 2.0, 3.0});
    auto doomed = std::make_unique<GradientTape>();
    doomed->watch(x);
    GradientTape tape;
    tape.watch(x);
    auto f = custom_gradient([&](const Tensor& in) {
      on_other_thread([&] { doomed.reset(); });
      return std::make_pair(in * 3.0, [](const Tensor& dy) { return dy * 3.0; });
    });
    require_close(tape.gradient(f(x), x), {3}, {3.0, 3.0, 3.0});
  });
  expect_defined("a guard destroyed on another thread does nothing", [] {
    Tensor x = constant(2.0);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    std::optional<GradientTape::RecordingGuard> paused(tape.stop_recording());
    on_other_thread([&] { paused.reset(); });
    CHECK_FALSE(tape.recording());  // still stopped: resume explicitly
    Tensor ignored = x * x;
    auto resumed = tape.record();
    Tensor y = x * x * x;
    CHECK_FALSE(tape.gradient(ignored, x).defined());
    CHECK(tape.gradient(y, x).item<double>() == 12.0);
  });
  expect_defined("tapes on two threads at once stay apart", [] {
    Tensor x = constant(2.0);
    GradientTape here;
    here.watch(x);
    on_other_thread([&] {
      CHECK_FALSE(should_record({x}));  // `here` does not record the other thread's ops
      GradientTape there;
      there.watch(x);
      CHECK(there.gradient(x * x * x, x).item<double>() == 12.0);
    });
    CHECK(here.gradient(x * x, x).item<double>() == 4.0);
  });
}

// ---------------------------------------------------------------- Variable

TEST_CASE("misuse: Variable", "[misuse][variable]") {
  expect_misuse<InvalidArgument>("assign with the wrong shape",
                                 [] {
                                   Variable v(constant({1.0, 2.0}), true, "weights");
                                   v.assign(constant({1.0, 2.0, 3.0}));
                                 },
                                 {"Variable::assign", "'weights'", "[2]", "[3]"});
  expect_misuse<InvalidArgument>("assign with the wrong dtype",
                                 [] {
                                   Variable v(constant({1.0, 2.0}), true, "weights");
                                   v.assign(from_values({1, 2}, {2}, DType::Float32));
                                 },
                                 {"Variable::assign", "'weights'", "float64", "float32"});
  expect_misuse<InvalidArgument>("assign_sub with the wrong shape",
                                 [] {
                                   Variable v(constant({1.0, 2.0}), true, "bias");
                                   v.assign_sub(constant(1.0));
                                 },
                                 {"Variable::assign_sub", "'bias'", "[2]", "[]"});
  expect_misuse<InvalidArgument>("assign_add with the wrong dtype",
                                 [] {
                                   Variable v(constant(1.0), true, "step");
                                   v.assign_add(from_values({1}, {}, DType::Int32));
                                 },
                                 {"Variable::assign_add", "'step'", "int32"});
  expect_misuse<InvalidArgument>("assign of an undefined tensor",
                                 [] {
                                   Variable v(constant(1.0));
                                   v.assign(Tensor());
                                 },
                                 {"Variable::assign", "undefined"});
  expect_misuse<InvalidArgument>("a variable from an undefined tensor",
                                 [] { Variable v{Tensor()}; },
                                 {"Variable", "initial value is undefined"});
  expect_defined("a failed assign leaves the value and the gradient as they were", [] {
    Variable v(constant({1.0, 2.0}), true, "kept");
    CHECK_THROWS_AS(v.assign(constant(5.0)), InvalidArgument);
    GradientTape tape;
    Tensor y = reduce_sum(v.value() * v.value());
    require_close(tape.gradient(y, v), {2}, {2.0, 4.0});
  });
}

// ---------------------------------------------------------------- custom_gradient

TEST_CASE("misuse: custom_gradient's gradient function", "[misuse][custom_gradient]") {
  expect_misuse<InvalidArgument>(
      "two gradients for one input",
      [] {
        auto f = custom_gradient(
            [](const std::vector<Tensor>& in) {
              auto g = [](const std::vector<Tensor>& dys) {
                return std::vector<Tensor>{dys[0], dys[0]};
              };
              return std::make_pair(std::vector<Tensor>{in[0] * 2.0}, g);
            },
            "ArityOp");
        Tensor x = constant({1.0, 2.0, 3.0});
        GradientTape tape;
        tape.watch(x);
        tape.gradient(f({x})[0], x);
      },
      {"gradient of ArityOp", "custom_gradient('ArityOp')", "returned 2 gradients", "expected 1"});
  expect_misuse<InvalidArgument>(
      "a gradient of the wrong shape",
      [] {
        differentiate_custom([](const Tensor&) { return constant({1.0, 2.0}); }, "ShapeOp");
      },
      {"'ShapeOp'", "input 0", "[2]", "[3]"});
  expect_misuse<InvalidArgument>(
      "a gradient of the wrong dtype",
      [] {
        differentiate_custom([](const Tensor& dy) { return cast(dy, DType::Float32); }, "DtypeOp");
      },
      {"'DtypeOp'", "input 0", "float32", "float64"});
  expect_misuse<InvalidArgument>(
      "a tapegrad error inside the backward names the op first",
      [] {
        differentiate_custom([](const Tensor& dy) { return dy * constant({1.0, 2.0}); }, "BadMul");
      },
      {"gradient of BadMul: ", "[3]", "[2]"});
  expect_misuse<std::runtime_error>("a user exception from the backward keeps its type",
                                    [] {
                                      differentiate_custom([](const Tensor&) -> Tensor {
                                        throw std::runtime_error("user says 42");
                                      });
                                    },
                                    {"user says 42"});
  expect_defined("a user exception from the backward is not rewrapped", [] {
    try {
      differentiate_custom([](const Tensor&) -> Tensor { throw std::logic_error("exact text"); });
      FAIL("did not throw");
    } catch (const Error&) {
      FAIL("a user exception became a tapegrad error");
    } catch (const std::logic_error& e) {
      CHECK(std::string(e.what()) == "exact text");
    }
  });
  expect_defined("the backward returns an undefined tensor: no gradient", [] {
    Tensor x = constant({1.0, 2.0, 3.0});
    GradientTape tape;
    tape.watch(x);
    Tensor y = custom_op(x, [](const Tensor&) { return Tensor(); });
    CHECK_FALSE(tape.gradient(y, x).defined());  // an undefined gradient means "none"
  });
  expect_misuse<InvalidArgument>("the function reads a variable, the gradient does not take them",
                                 [] {
                                   Variable w(constant(2.0), true, "scale");
                                   auto f = custom_gradient(
                                       [&w](const Tensor& x) {
                                         return std::make_pair(x * w.value(),
                                                               [](const Tensor& dy) { return dy; });
                                       },
                                       "ReadsW");
                                   f(constant(1.0));
                                 },
                                 {"custom_gradient('ReadsW')", "'scale'"});
  expect_misuse<InvalidArgument>(
      "wrong number of variable gradients",
      [] {
        Variable w(constant(2.0), true, "scale");
        auto f = custom_gradient(
            [&w](const Tensor& x) {
              auto g = [](const Tensor& dy, const std::vector<Variable>&) {
                return std::make_pair(dy, std::vector<Tensor>{});
              };
              return std::make_pair(x * w.value(), g);
            },
            "ForgetsW");
        Tensor x = constant(1.0);
        GradientTape tape;
        tape.watch(x);
        tape.gradient(f(x), x);
      },
      {"custom_gradient('ForgetsW')", "0 gradients for the variables", "expected 1", "'scale'"});
  expect_misuse<InvalidArgument>("an undefined input",
                                 [] {
                                   custom_op(
                                       Tensor(), [](const Tensor& dy) { return dy; }, "NoInput");
                                 },
                                 {"custom_gradient('NoInput')", "input 0 is undefined"});
  expect_misuse<InvalidArgument>("an undefined output",
                                 [] {
                                   auto f = custom_gradient(
                                       [](const Tensor&) {
                                         return std::make_pair(Tensor(),
                                                               [](const Tensor& dy) { return dy; });
                                       },
                                       "NoOutput");
                                   f(constant(1.0));
                                 },
                                 {"custom_gradient('NoOutput')", "output 0 is undefined"});
}

TEST_CASE("misuse: custom_gradient's forward", "[misuse][custom_gradient]") {
  expect_misuse<InvalidArgument>("a tapegrad error in the forward propagates as is",
                                 [] {
                                   Tensor x = constant({1.0, 2.0});
                                   GradientTape tape;
                                   tape.watch(x);
                                   auto f = custom_gradient([](const Tensor& in) {
                                     return std::make_pair(in + constant({1.0, 2.0, 3.0}),
                                                           [](const Tensor& dy) { return dy; });
                                   });
                                   f(x);
                                 },
                                 {"add", "[2]", "[3]"});
  expect_misuse<std::runtime_error>(
      "a user exception in the forward keeps its type",
      [] {
        Tensor x = constant(1.0);
        GradientTape outer;
        outer.watch(x);
        auto f = custom_gradient(
            [](const Tensor&) -> std::pair<Tensor, std::function<Tensor(const Tensor&)>> {
              throw std::runtime_error("forward failed at step 3");
            });
        f(x);
      },
      {"forward failed at step 3"});
  expect_defined("after a forward threw, the tapes record again", [] {
    Tensor x = constant(2.0);
    GradientTape tape;
    tape.watch(x);
    auto f = custom_gradient(
        [](const Tensor&) -> std::pair<Tensor, std::function<Tensor(const Tensor&)>> {
          throw std::runtime_error("no");
        });
    CHECK_THROWS_AS(f(x), std::runtime_error);
    CHECK(should_record({x}));
    CHECK(tape.gradient(x * x, x).item<double>() == 4.0);
  });
  expect_defined("a tape destroyed inside the forward", [] {
    Tensor x = constant({1.0, 2.0, 3.0});
    auto doomed = std::make_unique<GradientTape>();
    doomed->watch(x);
    GradientTape tape;
    tape.watch(x);
    auto f = custom_gradient([&doomed](const Tensor& in) {
      doomed.reset();
      return std::make_pair(in * 3.0, [](const Tensor& dy) { return dy * 3.0; });
    });
    Tensor y = f(x);
    CHECK(tapes_on_this_thread() == 1);
    require_close(tape.gradient(y, x), {3}, {3.0, 3.0, 3.0});
  });
  expect_defined("stop_recording of an outer tape inside the forward", [] {
    Tensor x = constant(2.0);
    GradientTape tape;
    tape.watch(x);
    auto f = custom_gradient([&tape](const Tensor& in) {
      auto paused = tape.stop_recording();
      CHECK_FALSE(tape.recording());
      return std::make_pair(in * in, [in](const Tensor& dy) { return dy * 2.0 * in; });
    });
    Tensor y = f(x);  // the guard restored recording before the op was recorded
    CHECK(tape.recording());
    CHECK(tape.gradient(y, x).item<double>() == 4.0);
  });
  expect_defined("a stop_recording guard that escapes the forward", [] {
    Tensor x = constant(2.0);
    GradientTape tape;
    tape.watch(x);
    std::optional<GradientTape::RecordingGuard> escaped;
    auto f = custom_gradient([&](const Tensor& in) {
      escaped.emplace(tape.stop_recording());
      return std::make_pair(in * in, [in](const Tensor& dy) { return dy * 2.0 * in; });
    });
    Tensor y = f(x);  // the tape is stopped: not recorded
    escaped.reset();
    Tensor z = x * 5.0;
    CHECK(tape.gradient({y, z}, {x})[0].item<double>() == 5.0);  // y is not on the tape
  });
  expect_defined("record() of a stopped outer tape inside the forward: still paused there", [] {
    Tensor x = constant(2.0);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    auto paused = tape.stop_recording();
    Tensor inner;
    auto f = custom_gradient([&](const Tensor& in) {
      auto resumed = tape.record();
      CHECK(tape.recording());
      inner = in * in;  // the forward is paused: not recorded
      return std::make_pair(in * 3.0, [](const Tensor& dy) { return dy * 3.0; });
    });
    Tensor y = f(x);  // the tape is stopped again: the op is not recorded either
    CHECK_FALSE(tape.recording());
    CHECK_FALSE(tape.gradient(inner, x).defined());
    CHECK_FALSE(tape.gradient(y, x).defined());
  });
  expect_misuse<TapeError>("record() of a recording outer tape inside the forward",
                           [] {
                             Tensor x = constant(2.0);
                             GradientTape tape;
                             tape.watch(x);
                             auto f = custom_gradient([&](const Tensor& in) {
                               auto again = tape.record();
                               return std::make_pair(in, [](const Tensor& dy) { return dy; });
                             });
                             f(x);
                           },
                           {"GradientTape::record", "still recording"});
  expect_defined("gradient() of an outer non-persistent tape inside the forward", [] {
    Tensor x = constant(2.0);
    GradientTape tape;
    tape.watch(x);
    Tensor before = x * x * x;
    Tensor inside;
    auto f = custom_gradient([&](const Tensor& in) {
      inside = tape.gradient(before, x);
      return std::make_pair(in * 2.0, [](const Tensor& dy) { return dy * 2.0; });
    });
    Tensor y = f(x);
    CHECK(inside.item<double>() == 12.0);
    CHECK_THROWS_AS(tape.gradient(y, x), TapeError);
    CHECK(tapes_on_this_thread() == 1);
  });
  expect_defined("gradient() of an outer persistent tape inside the forward", [] {
    Tensor x = constant(2.0);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor before = x * x * x;
    Tensor inside;
    auto f = custom_gradient([&](const Tensor& in) {
      inside = tape.gradient(before, x);  // paused: the walk is not recorded on the tape
      return std::make_pair(in * 2.0, [](const Tensor& dy) { return dy * 2.0; });
    });
    Tensor y = f(x);
    auto paused = tape.stop_recording();
    CHECK(inside.item<double>() == 12.0);
    CHECK_FALSE(tape.gradient(inside, x).defined());
    CHECK(tape.gradient(y, x).item<double>() == 2.0);
  });
  expect_defined("a tape created inside the forward records there", [] {
    Tensor x = constant(3.0);
    GradientTape outer;
    outer.watch(x);
    Tensor inner_grad;
    auto f = custom_gradient([&](const Tensor& in) {
      GradientTape inner;
      inner.watch(in);
      inner_grad = inner.gradient(in * in, in);
      return std::make_pair(in * 4.0, [](const Tensor& dy) { return dy * 4.0; });
    });
    Tensor y = f(x);
    CHECK(inner_grad.item<double>() == 6.0);
    CHECK(outer.gradient(y, x).item<double>() == 4.0);
  });
  expect_defined("a custom_gradient inside a custom_gradient forward", [] {
    Tensor x = constant(3.0);
    GradientTape tape;
    tape.watch(x);
    auto inner = custom_gradient([](const Tensor& in) {
      return std::make_pair(in * 5.0, [](const Tensor& dy) { return dy * 100.0; });
    });
    auto outer = custom_gradient([&](const Tensor& in) {
      return std::make_pair(inner(in), [](const Tensor& dy) { return dy * 7.0; });
    });
    Tensor y = outer(x);
    CHECK(y.item<double>() == 15.0);
    CHECK(tape.gradient(y, x).item<double>() == 7.0);  // the inner op is not on the tape
  });
}

TEST_CASE("misuse: tape operations inside a custom backward", "[misuse][custom_gradient]") {
  expect_defined("stop_recording of the recording outer tape inside a backward", [] {
    Tensor x = constant(2.0);
    GradientTape outer;
    outer.watch(x);
    GradientTape* outer_tape = &outer;
    Tensor dy_dx;
    {
      GradientTape inner;
      inner.watch(x);
      auto cube = custom_gradient([outer_tape](const Tensor& in) {
        auto g = [in, outer_tape](const Tensor& dy) {
          auto paused = outer_tape->stop_recording();  // this backward is not recorded
          return dy * 3.0 * in * in;
        };
        return std::make_pair(in * in * in, g);
      });
      dy_dx = inner.gradient(cube(x), x);
    }
    CHECK(dy_dx.item<double>() == 12.0);
    CHECK(outer.recording());
    CHECK_FALSE(outer.gradient(dy_dx, x).defined());
  });
  expect_defined("the same backward without the pause gives the second derivative", [] {
    Tensor x = constant(2.0);
    GradientTape outer;
    outer.watch(x);
    Tensor dy_dx;
    {
      GradientTape inner;
      inner.watch(x);
      auto cube = custom_gradient([](const Tensor& in) {
        return std::make_pair(in * in * in, [in](const Tensor& dy) { return dy * 3.0 * in * in; });
      });
      dy_dx = inner.gradient(cube(x), x);
    }
    CHECK(outer.gradient(dy_dx, x).item<double>() == 12.0);
  });
}

// ---------------------------------------------------------------- recompute_grad

TEST_CASE("misuse: recompute_grad", "[misuse][recompute_grad]") {
  expect_misuse<InvalidArgument>("g fails in the forward",
                                 [] {
                                   auto f =
                                       recompute_grad([](const Tensor& x) { return matmul(x, x); });
                                   Tensor x = constant({1.0, 2.0, 3.0});
                                   GradientTape tape;
                                   tape.watch(x);
                                   f(x);
                                 },
                                 {"matmul", "[3]"});
  expect_misuse<InvalidArgument>("g fails only when rerun for the gradient",
                                 [] {
                                   auto calls = std::make_shared<int>(0);
                                   auto f = recompute_grad([calls](const Tensor& x) {
                                     return ++*calls == 1 ? x * 2.0 : x * constant({1.0, 2.0});
                                   });
                                   Tensor x = constant({1.0, 2.0, 3.0});
                                   GradientTape tape;
                                   tape.watch(x);
                                   tape.gradient(f(x), x);
                                 },
                                 {"gradient of RecomputeGrad: ", "multiply", "[3]", "[2]"});
  expect_misuse<std::runtime_error>("a user exception while rerunning keeps its type",
                                    [] {
                                      auto calls = std::make_shared<int>(0);
                                      auto f = recompute_grad([calls](const Tensor& x) {
                                        if (++*calls == 2)
                                          throw std::runtime_error("rerun refused");
                                        return x * 2.0;
                                      });
                                      Tensor x = constant(1.0);
                                      GradientTape tape;
                                      tape.watch(x);
                                      tape.gradient(f(x), x);
                                    },
                                    {"rerun refused"});
  expect_defined("g stops the outer tape in the forward and in the rerun", [] {
    Tensor x = constant(3.0);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    GradientTape* self = &tape;
    auto f = recompute_grad([self](const Tensor& in) {
      if (self->recording()) {
        auto paused = self->stop_recording();
        Tensor unused = in * 10.0;
      }
      return in * in;
    });
    Tensor y = f(x);
    auto paused = tape.stop_recording();
    CHECK(tape.gradient(y, x).item<double>() == 6.0);
    CHECK(tapes_on_this_thread() == 1);
  });
  expect_defined("g destroys a tape made before it", [] {
    Tensor x = constant(3.0);
    auto doomed = std::make_unique<GradientTape>();
    GradientTape tape;
    tape.watch(x);
    auto f = recompute_grad([&doomed](const Tensor& in) {
      doomed.reset();
      return in * in * in;
    });
    Tensor y = f(x);
    CHECK(tape.gradient(y, x).item<double>() == 27.0);
  });
  expect_defined("g asks an outer persistent tape for a gradient, in the forward and the rerun",
                 [] {
                   Tensor x = constant(2.0);
                   GradientTape tape(/*persistent=*/true);
                   tape.watch(x);
                   Tensor before = x * x;
                   auto paused = tape.stop_recording();
                   GradientTape* self = &tape;
                   std::vector<double> seen;
                   auto f = recompute_grad([self, before, x, &seen](const Tensor& in) {
                     seen.push_back(self->gradient(before, x).item<double>());
                     return in * 3.0;
                   });
                   auto resumed = tape.record();
                   Tensor y = f(x);
                   auto stopped = tape.stop_recording();
                   CHECK(tape.gradient(y, x).item<double>() == 3.0);
                   REQUIRE(seen.size() == 2);
                   CHECK(seen[0] == 4.0);
                   CHECK(seen[1] == 4.0);
                 });
  expect_defined("g creates and uses its own tape", [] {
    Tensor x = constant(2.0);
    GradientTape tape;
    tape.watch(x);
    auto f = recompute_grad([](const Tensor& in) {
      GradientTape own;
      own.watch(in);
      Tensor d = own.gradient(in * in * in, in);  // 3 in^2, recorded on the rerun's tape
      return d;
    });
    CHECK(tape.gradient(f(x), x).item<double>() == 12.0);  // 6x
  });
  expect_misuse<InvalidArgument>("recompute_grad of an undefined input",
                                 [] {
                                   auto f = recompute_grad([](const Tensor& x) { return x; });
                                   f(Tensor());
                                 },
                                 {"RecomputeGrad", "input 0 is undefined"});
}

// ---------------------------------------------------------------- grad_pass_through

TEST_CASE("misuse: grad_pass_through", "[misuse][custom_gradient]") {
  expect_misuse<InvalidArgument>("fewer outputs than inputs",
                                 [] {
                                   auto f = grad_pass_through([](const std::vector<Tensor>& in) {
                                     return std::vector<Tensor>{in[0] + in[1]};
                                   });
                                   f({constant(1.0), constant(2.0)});
                                 },
                                 {"grad_pass_through", "1 outputs for 2 inputs"});
  expect_misuse<InvalidArgument>(
      "an output of another shape than its input",
      [] {
        auto f = grad_pass_through([](const Tensor& x) { return reduce_sum(x); });
        Tensor x = constant({1.0, 2.0});
        GradientTape tape;
        tape.watch(x);
        tape.gradient(f(x), x);
      },
      {"GradPassThrough", "[]", "[2]"});
}

// ---------------------------------------------------------------- register_gradient

TEST_CASE("misuse: registered gradient functions", "[misuse][registry]") {
  expect_misuse<InvalidArgument>("a gradient function returning two gradients for one input",
                                 [] { differentiate_user_op("MisuseTwoGradients"); },
                                 {"'MisuseTwoGradients'", "returned 2 gradients", "expected 1"});
  expect_misuse<InvalidArgument>("a gradient of the wrong shape",
                                 [] { differentiate_user_op("MisuseWrongShape"); },
                                 {"'MisuseWrongShape'", "input 0", "[3]", "[2]"});
  expect_misuse<InvalidArgument>("a gradient of the wrong dtype",
                                 [] { differentiate_user_op("MisuseWrongDtype"); },
                                 {"'MisuseWrongDtype'", "float32", "float64"});
  expect_misuse<InvalidArgument>("a tapegrad error inside names the op being differentiated",
                                 [] { differentiate_user_op("MisuseThrowsInvalid"); },
                                 {"gradient of MisuseThrowsInvalid: ", "multiply", "[2]", "[3]"});
  expect_misuse<LookupError>("a LookupError inside stays a LookupError",
                             [] { differentiate_user_op("MisuseThrowsLookup"); },
                             {"gradient of MisuseThrowsLookup: ", "user lookup failed for key 7"});
  expect_misuse<std::out_of_range>("a standard exception inside keeps its type and message",
                                   [] { differentiate_user_op("MisuseThrowsStd"); },
                                   {"user index 9 out of range"});
  expect_misuse<LookupError>(
      "an op with no gradient", [] { differentiate_user_op("MisuseNobodyRegisteredThis"); },
      {"No gradient defined for operation 'MisuseNobodyRegisteredThis'", "register_gradient"});
  expect_misuse<InvalidArgument>(
      "registering a gradient twice",
      [] {
        register_bad_gradients();
        register_gradient("MisuseTwoGradients",
                          [](const OpContext&, const std::vector<Tensor>& g) { return g; });
      },
      {"MisuseTwoGradients"});
  expect_misuse<InvalidArgument>(
      "a built-in gradient failing inside: determinant of a singular "
      "matrix",
      [] {
        Tensor a = constant({{1.0, 2.0}, {2.0, 4.0}});
        GradientTape tape;
        tape.watch(a);
        tape.gradient(matrix_determinant(a), a);
      },
      {"gradient of MatrixDeterminant: ", "singular"});
  expect_misuse<InvalidArgument>(
      "the prefixes nest: a failing gradient inside a rerun",
      [] {
        register_bad_gradients();
        auto f =
            recompute_grad([](const Tensor& x) { return user_double("MisuseThrowsInvalid", x); });
        Tensor x = constant({1.0, 2.0});
        GradientTape tape;
        tape.watch(x);
        tape.gradient(f(x), x);
      },
      {"gradient of RecomputeGrad: gradient of MisuseThrowsInvalid: multiply", "[2]", "[3]"});
}

// ---------------------------------------------------------------- check_gradient, functional

TEST_CASE("misuse: check_gradient and the functional forms", "[misuse][functional]") {
  Fn square = [](const std::vector<Tensor>& a) { return a[0] * a[0]; };
  expect_misuse<InvalidArgument>("check_gradient: arg_index out of range",
                                 [&] { check_gradient(square, {constant(1.0)}, 3); },
                                 {"check_gradient", "arg_index 3", "1"});
  expect_misuse<InvalidArgument>(
      "check_gradient: an integer argument",
      [&] { check_gradient(square, {from_values({2}, {1}, DType::Int32)}, 0); },
      {"check_gradient", "argument 0", "int32"});
  expect_misuse<InvalidArgument>(
      "check_gradient: f returns nothing",
      [] {
        check_gradient([](const std::vector<Tensor>&) { return Tensor(); }, {constant(1.0)}, 0);
      },
      {"check_gradient", "undefined"});
  expect_misuse<InvalidArgument>("value_and_gradients: an undefined argument",
                                 [&] { value_and_gradients(square, {Tensor()}); },
                                 {"value_and_gradients", "argument 0 is undefined"});
  expect_misuse<InvalidArgument>(
      "gradients: f returns nothing",
      [] { gradients([](const std::vector<Tensor>&) { return Tensor(); }, {constant(1.0)}); },
      {"value_and_gradients", "cannot differentiate a function that returns None"});
  expect_misuse<InvalidArgument>("make_vjp: dy of the wrong shape",
                                 [&] {
                                   auto [y, vjp] = make_vjp(square, {constant({1.0, 2.0})});
                                   vjp(constant({1.0, 2.0, 3.0}));
                                 },
                                 {"VJP", "[3]", "[2]"});
  expect_misuse<InvalidArgument>("make_vjp: dy of the wrong dtype",
                                 [&] {
                                   auto [y, vjp] = make_vjp(square, {constant({1.0, 2.0})});
                                   vjp(from_values({1, 2}, {2}, DType::Float32));
                                 },
                                 {"VJP", "float32", "float64"});
  expect_misuse<InvalidArgument>(
      "functional jacobian of an integer point",
      [] {
        jacobian([](const Tensor& x) { return x; }, from_values({1, 2}, {2}, DType::Int32));
      },
      {"jacobian", "int32"});
  expect_misuse<InvalidArgument>("hessian_vector_product: v of the wrong shape",
                                 [] {
                                   hessian_vector_product(
                                       [](const Tensor& x) { return reduce_sum(x * x); },
                                       constant({1.0, 2.0}), constant({1.0, 2.0, 3.0}));
                                 },
                                 {"hessian_vector_product", "[3]", "[2]"});
  expect_misuse<InvalidArgument>(
      "a functional form inside a tape, f failing",
      [] {
        Tensor x = constant(1.0);
        GradientTape outer;
        outer.watch(x);
        gradients(
            [](const std::vector<Tensor>& a) {
              return a[0] + constant({1.0, 2.0}) * a[0] + constant({1.0, 2.0, 3.0});
            },
            {x});
      },
      {"add", "[2]", "[3]"});
  expect_defined("make_vjp's recording ends with f, even when f throws", [] {
    Fn bad = [](const std::vector<Tensor>& a) -> Tensor {
      throw std::runtime_error("f broke");
      (void)a;
    };
    CHECK_THROWS_AS(make_vjp(bad, {constant(1.0)}), std::runtime_error);
    CHECK_FALSE(should_record({constant(1.0)}));
  });
}
