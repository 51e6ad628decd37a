// DetectAnomaly: the first NaN or infinity of a forward op or of a gradient rule, named.
#include <catch2/catch.hpp>

#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::message_of;
using tapegrad::testing::values;

TEST_CASE("DetectAnomaly names the forward op that made a NaN", "[anomaly]") {
  const Tensor x = constant({1.0, -1.0});
  DetectAnomaly scope;
  CHECK(message_of<AnomalyError>([&] { (void)log(x); }) ==
        "DetectAnomaly: the forward of 'Log' produced NaN in output 0 (outputs [[2] float64], "
        "inputs [[2] float64], every input finite); no tape records it");
  // Ops on finite values pass.
  CHECK(values(exp(x)) == std::vector<double>{std::exp(1.0), std::exp(-1.0)});
}

TEST_CASE("DetectAnomaly gives the op's position on the recording tape", "[anomaly]") {
  const Tensor x = constant({2.0, 3.0});
  DetectAnomaly scope;
  GradientTape tape;
  tape.watch(x);
  const Tensor a = multiply(x, x);                            // op 0
  const Tensor b = subtract(scalar(1.0, DType::Float64), a);  // op 1: negative
  CHECK(message_of<AnomalyError>([&] { (void)sqrt(b); }) ==
        "DetectAnomaly: the forward of 'Sqrt' produced NaN in output 0 (outputs [[2] float64], "
        "inputs [[2] float64], every input finite); it would be op 2 on the tape, after 'Sub' "
        "(op 1), 'Mul' (op 0)");
}

TEST_CASE("DetectAnomaly names the gradient rule that made an infinity", "[anomaly]") {
  const Tensor x = constant({0.0, 4.0});
  DetectAnomaly scope;
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(sqrt(x));  // finite forward; d sqrt / dx at 0 is infinite
  CHECK(message_of<AnomalyError>([&] { (void)tape.gradient(y, x); }) ==
        "DetectAnomaly: the backward of 'Sqrt' produced an infinity in the gradient for input 0 "
        "(inputs [[2] float64], output gradients [[2] float64], every output gradient finite); "
        "op 0 on the tape, its first op");
}

TEST_CASE("DetectAnomaly checks NaN and infinity separately, and only while alive", "[anomaly]") {
  const Tensor zero = constant({0.0});
  const Tensor negative = constant({-1.0});
  {
    DetectAnomaly only_inf(/*nan=*/false, /*inf=*/true);
    CHECK(message_of<AnomalyError>([&] {
            (void)log(zero);
          }).rfind("DetectAnomaly: the forward of 'Log' produced an infinity in output 0", 0) == 0);
    CHECK(std::isnan(values(log(negative))[0]));  // NaN is not looked for
    {
      DetectAnomaly only_nan(/*nan=*/true, /*inf=*/false);
      CHECK(std::isinf(values(log(zero))[0]));
      CHECK_THROWS_AS(log(negative), AnomalyError);
    }
    CHECK_THROWS_AS(log(zero), AnomalyError);  // the outer scope's settings are back
  }
  // No scope: values pass through, gradients too.
  CHECK(std::isinf(values(log(zero))[0]));
  GradientTape tape;
  tape.watch(zero);
  const Tensor y = reduce_sum(sqrt(zero));
  CHECK(std::isinf(values(tape.gradient(y, zero))[0]));
}

TEST_CASE("DetectAnomaly ignores integer tensors and checks float32", "[anomaly]") {
  DetectAnomaly scope;
  const Tensor i = from_values({1, 2}, {2}, DType::Int32);
  CHECK(values(multiply(i, i)) == std::vector<double>{1.0, 4.0});
  const Tensor f = from_values({-1.0}, {1}, DType::Float32);
  CHECK(message_of<AnomalyError>([&] { (void)sqrt(f); }) ==
        "DetectAnomaly: the forward of 'Sqrt' produced NaN in output 0 (outputs [[1] float32], "
        "inputs [[1] float32], every input finite); no tape records it");
}

TEST_CASE("DetectAnomaly says when an input already held the value", "[anomaly]") {
  const Tensor x = constant({std::nan(""), 1.0});
  DetectAnomaly scope;
  CHECK(message_of<AnomalyError>([&] { (void)exp(x); }).find("an input already holds one") !=
        std::string::npos);
}

namespace {

// log(-1) under the current thread's scopes: "throws" (AnomalyError), "nan" (no check), or
// what else happened. Never lets an exception out (it may run on a std::thread).
std::string log_of_minus_one() {
  try {
    const double v = values(log(constant({-1.0})))[0];
    return std::isnan(v) ? "nan" : "value " + std::to_string(v);
  } catch (const AnomalyError&) {
    return "throws";
  } catch (const std::exception& e) {
    return std::string("other error: ") + e.what();
  }
}

}  // namespace

TEST_CASE("DetectAnomaly stays on while any scope is alive, whatever order they end in",
          "[anomaly][scopes]") {
  for (const bool first_dies_first : {true, false}) {
    INFO((first_dies_first ? "a reset before b" : "b reset before a"));
    auto a = std::make_unique<DetectAnomaly>();
    auto b = std::make_unique<DetectAnomaly>();
    CHECK(log_of_minus_one() == "throws");
    (first_dies_first ? a : b).reset();
    CHECK(log_of_minus_one() == "throws");  // the other scope is still alive
    (first_dies_first ? b : a).reset();
    CHECK(log_of_minus_one() == "nan");
  }
}

TEST_CASE("DetectAnomaly's settings are the newest live scope's, out of order too",
          "[anomaly][scopes]") {
  const Tensor zero = constant({0.0});
  auto only_nan = std::make_unique<DetectAnomaly>(/*nan=*/true, /*inf=*/false);
  auto only_inf = std::make_unique<DetectAnomaly>(/*nan=*/false, /*inf=*/true);
  CHECK(log_of_minus_one() == "nan");  // only_inf applies
  CHECK_THROWS_AS(log(zero), AnomalyError);
  only_nan.reset();  // the older scope ends first: only_inf still applies
  CHECK(log_of_minus_one() == "nan");
  CHECK_THROWS_AS(log(zero), AnomalyError);
  {
    DetectAnomaly nested(/*nan=*/true, /*inf=*/false);
    CHECK(log_of_minus_one() == "throws");
    CHECK(std::isinf(values(log(zero))[0]));
  }
  CHECK(log_of_minus_one() == "nan");  // back to only_inf
  only_inf.reset();
  CHECK(std::isinf(values(log(zero))[0]));
  CHECK(log_of_minus_one() == "nan");
}

TEST_CASE("DetectAnomaly belongs to its thread, and may be destroyed on another one",
          "[anomaly][scopes][threads]") {
  SECTION("a scope made on a std::thread checks that thread only, and ends with the thread") {
    std::string inside, after_reset;
    std::unique_ptr<DetectAnomaly> handed;
    std::thread worker([&] {
      auto scope = std::make_unique<DetectAnomaly>();
      inside = log_of_minus_one();
      scope.reset();
      after_reset = log_of_minus_one();
      handed = std::make_unique<DetectAnomaly>();  // outlives its thread
    });
    worker.join();
    CHECK(inside == "throws");
    CHECK(after_reset == "nan");
    CHECK(log_of_minus_one() == "nan");  // the main thread never had a scope
    handed.reset();                      // its thread is gone: nothing to corrupt
    CHECK(log_of_minus_one() == "nan");
  }
  SECTION("a main-thread scope destroyed on a worker turns the main thread's checks off") {
    auto outer = std::make_unique<DetectAnomaly>();
    auto moved = std::make_unique<DetectAnomaly>();
    std::string worker_before, worker_after;
    std::thread worker([&] {
      worker_before = log_of_minus_one();
      moved.reset();
      worker_after = log_of_minus_one();
    });
    worker.join();
    CHECK(worker_before == "nan");  // the main thread's scopes never checked the worker
    CHECK(worker_after == "nan");
    CHECK(log_of_minus_one() == "throws");  // outer is still alive
    std::thread second([&] { outer.reset(); });
    second.join();
    CHECK(log_of_minus_one() == "nan");
    // And a new scope on the main thread works as before.
    DetectAnomaly again;
    CHECK(log_of_minus_one() == "throws");
  }
  SECTION("a worker's scope destroyed by the main thread while the worker still runs") {
    std::promise<std::unique_ptr<DetectAnomaly>> give;
    std::promise<void> destroyed;
    std::promise<std::pair<std::string, std::string>> report;
    std::thread worker([&] {
      auto scope = std::make_unique<DetectAnomaly>();
      const std::string before = log_of_minus_one();
      give.set_value(std::move(scope));
      destroyed.get_future().wait();
      report.set_value({before, log_of_minus_one()});
    });
    std::unique_ptr<DetectAnomaly> scope = give.get_future().get();
    CHECK(log_of_minus_one() == "nan");
    scope.reset();
    destroyed.set_value();
    const auto [before, after] = report.get_future().get();
    worker.join();
    CHECK(before == "throws");
    CHECK(after == "nan");
    CHECK(log_of_minus_one() == "nan");
  }
}
