// Tape operations inside user code that the runtime runs: every action on an outer tape
// (stop_recording, record, gradient on a non-persistent or a persistent tape, destruction,
// a new tape) in every place (custom_gradient's forward, its backward, recompute_grad's
// forward and its rerun during the backward pass). Each combination must leave the tapes
// consistent: the witness tape's gradient is exact, the acted-on tape is in the state its
// own flags say, and nothing is left on the thread.
#include "support.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

enum class Action {
  StopRecording,
  RecordWhileStopped,
  GradientUsed,
  GradientPersistent,
  Destroy,
  NewTape
};
enum class Place { CustomForward, CustomBackward, RecomputeForward, RecomputeRerun };

const char* name_of(Action a) {
  switch (a) {
    case Action::StopRecording:
      return "stop_recording";
    case Action::RecordWhileStopped:
      return "record on a stopped tape";
    case Action::GradientUsed:
      return "gradient on a non-persistent tape";
    case Action::GradientPersistent:
      return "gradient on a persistent tape";
    case Action::Destroy:
      return "destruction";
    case Action::NewTape:
      return "a new tape";
  }
  return "";
}

const char* name_of(Place p) {
  switch (p) {
    case Place::CustomForward:
      return "custom_gradient forward";
    case Place::CustomBackward:
      return "custom_gradient backward";
    case Place::RecomputeForward:
      return "recompute_grad forward";
    case Place::RecomputeRerun:
      return "recompute_grad rerun";
  }
  return "";
}

// One scenario: x = 2; T is the acted-on tape (watching x, with `before` = x^2 recorded on
// it), W a persistent witness tape; y = op(x) = x^3 through the wrapper of `place`, whose
// body runs `action` on T once (in the forward or in the backward).
void run_scenario(Action action, Place place) {
  INFO("action: " << name_of(action) << ", place: " << name_of(place));
  const Tensor x = constant(2.0);
  const bool t_persistent = action != Action::GradientUsed;
  auto t = std::make_unique<GradientTape>(t_persistent);
  t->watch(x);
  const Tensor before = x * x;
  std::optional<GradientTape::RecordingGuard> t_stopped;
  if (action == Action::RecordWhileStopped) t_stopped.emplace(t->stop_recording());

  GradientTape w(/*persistent=*/true);
  w.watch(x);

  std::optional<double> seen;  // the value the action computed, if any
  bool done = false;
  auto act = [&] {
    if (done) return;
    done = true;
    switch (action) {
      case Action::StopRecording: {
        auto paused = t->stop_recording();
        CHECK_FALSE(t->recording());
        break;
      }
      case Action::RecordWhileStopped: {
        auto resumed = t->record();
        CHECK(t->recording());
        break;
      }
      case Action::GradientUsed:
      case Action::GradientPersistent:
        seen = t->gradient(before, x).item<double>();
        break;
      case Action::Destroy:
        t.reset();
        break;
      case Action::NewTape: {
        Tensor z = constant(5.0);
        GradientTape fresh;
        fresh.watch(z);
        seen = fresh.gradient(z * z * z, z).item<double>();
        break;
      }
    }
  };

  Tensor y;
  switch (place) {
    case Place::CustomForward:
    case Place::CustomBackward: {
      const bool in_forward = place == Place::CustomForward;
      auto cube = custom_gradient([&](const Tensor& in) {
        if (in_forward) act();
        auto grad = [&act, in, in_forward](const Tensor& dy) {
          if (!in_forward) act();
          return dy * 3.0 * in * in;
        };
        return std::make_pair(in * in * in, grad);
      });
      y = cube(x);
      break;
    }
    case Place::RecomputeForward:
    case Place::RecomputeRerun: {
      const bool in_forward = place == Place::RecomputeForward;
      auto calls = std::make_shared<int>(0);
      auto cube = recompute_grad([&act, calls, in_forward](const Tensor& in) {
        ++*calls;
        if (in_forward == (*calls == 1)) act();
        return in * in * in;
      });
      y = cube(x);
      break;
    }
  }
  CHECK(y.item<double>() == 8.0);

  {
    auto w_paused = w.stop_recording();
    CHECK(w.gradient(y, x).item<double>() == 12.0);  // 3 x^2, whatever the action did
  }
  REQUIRE(done);
  if (action == Action::GradientUsed || action == Action::GradientPersistent) {
    REQUIRE(seen.has_value());
    CHECK(*seen == 4.0);
  }
  if (action == Action::NewTape) {
    REQUIRE(seen.has_value());
    CHECK(*seen == 75.0);
  }

  // The acted-on tape is in the state its own flags say.
  switch (action) {
    case Action::StopRecording:
    case Action::GradientPersistent: {
      REQUIRE(t);
      CHECK(t->recording());
      auto paused = t->stop_recording();
      CHECK(t->gradient(y, x).item<double>() == 12.0);  // y was recorded on T
      CHECK(t->gradient(before, x).item<double>() == 4.0);
      break;
    }
    case Action::RecordWhileStopped:
      REQUIRE(t);
      CHECK_FALSE(t->recording());  // the outer guard still holds it stopped
      t_stopped.reset();
      CHECK(t->recording());
      {
        auto paused = t->stop_recording();
        CHECK_FALSE(t->gradient(y, x).defined());  // y happened while T was stopped
        CHECK(t->gradient(before, x).item<double>() == 4.0);
      }
      break;
    case Action::GradientUsed:
      REQUIRE(t);
      CHECK_FALSE(t->recording());
      CHECK_THROWS_AS(t->gradient(y, x), TapeError);
      break;
    case Action::Destroy:
      CHECK_FALSE(t);
      CHECK(tapes_on_this_thread() == 1);  // W only
      break;
    case Action::NewTape:
      REQUIRE(t);
      CHECK(t->recording());
      CHECK(t->gradient(y, x).item<double>() == 12.0);
      break;
  }
  t_stopped.reset();
  t.reset();
  CHECK(tapes_on_this_thread() == 1);
}

}  // namespace

TEST_CASE("every tape action in every place the runtime runs user code", "[tape][pausing]") {
  for (Place place : {Place::CustomForward, Place::CustomBackward, Place::RecomputeForward,
                      Place::RecomputeRerun}) {
    for (Action action : {Action::StopRecording, Action::RecordWhileStopped, Action::GradientUsed,
                          Action::GradientPersistent, Action::Destroy, Action::NewTape}) {
      run_scenario(action, place);
      CHECK(tapes_on_this_thread() == 0);
      CHECK_FALSE(should_record({constant(1.0)}));
    }
  }
}

TEST_CASE("pauses nest: a custom_gradient inside a custom_gradient forward inside a tape",
          "[tape][pausing]") {
  Tensor x = constant(3.0);
  GradientTape outer;
  outer.watch(x);
  std::optional<double> inner_tape_gradient;
  auto inner = custom_gradient([&](const Tensor& in) {
    CHECK_FALSE(should_record({x}));  // both pauses stop `outer`
    return std::make_pair(in * 2.0, [](const Tensor& dy) { return dy * 2.0; });
  });
  auto middle = custom_gradient([&](const Tensor& in) {
    GradientTape mid_tape;  // created inside the first pause: records there
    mid_tape.watch(in);
    Tensor a = inner(in);  // the second pause stops mid_tape too; the op goes on it after
    inner_tape_gradient = mid_tape.gradient(a, in).item<double>();
    CHECK_FALSE(should_record({x}));  // the first pause still holds
    return std::make_pair(a * 5.0, [](const Tensor& dy) { return dy * 10.0; });
  });
  Tensor y = middle(x);
  CHECK(y.item<double>() == 30.0);
  REQUIRE(inner_tape_gradient.has_value());
  CHECK(*inner_tape_gradient == 2.0);
  CHECK(should_record({x}));
  CHECK(outer.gradient(y, x).item<double>() == 10.0);
}

TEST_CASE("a tape stopped by its own flag inside a pause records again once both have ended",
          "[tape][pausing]") {
  Tensor x = constant(2.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y;
  auto f = custom_gradient([&](const Tensor& in) {
    auto paused = tape.stop_recording();  // the tape's own flag, inside the pause
    CHECK_FALSE(should_record({x}));
    return std::make_pair(in * 7.0, [](const Tensor& dy) { return dy * 7.0; });
  });
  {
    y = f(x);
    CHECK(tape.recording());
    CHECK(should_record({x}));
  }
  auto paused = tape.stop_recording();
  CHECK(tape.gradient(y, x).item<double>() == 7.0);
}
