// GradientTape::explain on each reason a gradient is or is not defined.
#include <thread>

#include <catch2/catch.hpp>

#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::message_of;

namespace {
const std::string kHeader = "explain: target (shape [2], float64), source (shape [2], float64)\n";

// y = x + 1 computed outside tapegrad ops and recorded as `op_type`.
Tensor plus_one(const Tensor& x, const std::string& op_type) {
  Tensor y = Tensor(xt::xarray<double>(x.array<double>() + 1.0));
  record_operation(op_type, {x}, {y});
  return y;
}
}  // namespace

TEST_CASE("explain: a gradient flows, with the ops on the path", "[explain]") {
  const Tensor x = constant({{0.5, -1.0}});
  const Tensor w = constant({{1.0, 2.0}, {3.0, 4.0}});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(tanh(matmul(x, w)));
  CHECK(tape.explain(y, x) ==
        "explain: target (shape [], float64), source (shape [1, 2], float64)\n"
        "a gradient flows: target <- 'Sum' (op 2) <- 'Tanh' (op 1) <- 'MatMul' (op 0) <- source\n");
  // explain records nothing and leaves the tape usable.
  CHECK(tape.gradient(y, x).defined());
}

TEST_CASE("explain: the source was never watched", "[explain]") {
  const Tensor x = constant({1.0, 2.0});
  const Tensor z = constant({3.0, 4.0});
  GradientTape tape;
  tape.watch(z);
  const Tensor y = multiply(x, z);
  CHECK(tape.explain(y, x) ==
        kHeader +
            "no gradient: the source is not watched by this tape and no op the tape recorded "
            "produced it; call tape.watch(source) (or read it as a trainable Variable) before "
            "computing the target from it\n");
}

TEST_CASE("explain: the target was computed before the watch", "[explain]") {
  const Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  const Tensor y = multiply(x, x);
  tape.watch(x);
  CHECK(tape.explain(y, x) ==
        kHeader +
            "no gradient: the tape never recorded the target; it was computed before the source "
            "was watched, while the tape was not recording (stop_recording, a custom_gradient "
            "forward), or only from tensors this tape does not watch\n");
}

TEST_CASE("explain: integer dtypes", "[explain]") {
  const Tensor x = constant({1.0, 2.0});
  const Tensor k = from_values({1, 2}, {2}, DType::Int32);
  GradientTape tape;
  tape.watch(x);
  CHECK(tape.explain(x, k) ==
        "explain: target (shape [2], float64), source (shape [2], int32)\n"
        "no gradient: the source has dtype int32; integer and bool tensors are never "
        "differentiated\n");
  // Through an integer cast and back: the integer tensor is never recorded, so neither is y.
  const Tensor y =
      multiply(cast(cast(x, DType::Int32), DType::Float64), scalar(2.0, DType::Float64));
  CHECK(tape.explain(y, x).find("no gradient: the tape never recorded the target") !=
        std::string::npos);
  CHECK_FALSE(tape.gradient(y, x).defined());
}

TEST_CASE("explain: a path cut by a not-differentiable op or one without a gradient", "[explain]") {
  static const bool registered = [] {
    not_differentiable("ExplainRound");
    return true;
  }();
  (void)registered;
  const Tensor x = constant({1.0, 2.0});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor rounded = multiply(plus_one(x, "ExplainRound"), x);  // also direct: flows
  CHECK(tape.explain(rounded, x).find("a gradient flows: target <- 'Mul' (op 1) <- source") !=
        std::string::npos);
  const Tensor only_rounded = exp(plus_one(x, "ExplainRound"));
  CHECK(tape.explain(only_rounded, x) ==
        kHeader +
            "no gradient: the target depends on the source only through\n"
            "  'ExplainRound' (op 2): not differentiable\n"
            "path: target <- 'Exp' (op 3) <- 'ExplainRound' (op 2) <- source\n");
  const Tensor unregistered = exp(plus_one(x, "ExplainNeverRegistered"));
  CHECK(tape.explain(unregistered, x) ==
        kHeader +
            "no gradient: the target depends on the source only through\n"
            "  'ExplainNeverRegistered' (op 4): no gradient is registered for it (gradient() "
            "throws LookupError)\n"
            "path: target <- 'Exp' (op 5) <- 'ExplainNeverRegistered' (op 4) <- source\n");
  auto stop = tape.stop_recording();
  CHECK_FALSE(tape.gradient(only_rounded, x).defined());
}

TEST_CASE("explain: a value that left the tape", "[explain]") {
  const Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = tanh(x);
  const Tensor rebuilt = Tensor(xt::xarray<double>(y.array<double>()));  // off the tape
  const Tensor also_watched = constant({5.0, 6.0});
  tape.watch(also_watched);
  const Tensor z = multiply(rebuilt, also_watched);
  CHECK(tape.explain(z, x) ==
        kHeader +
            "no gradient: the target does not depend on the source on this tape; it depends on 1 "
            "other watched tensor(s); its recorded ops read 1 tensor(s) that no recorded op "
            "produced and that are not watched: constants, or values that left the tape (a "
            "Tensor rebuilt from array() cuts the path)\n");
}

TEST_CASE("explain: target is source, and misuse", "[explain]") {
  const Tensor x = constant({1.0, 2.0});
  GradientTape tape;
  tape.watch(x);
  CHECK(tape.explain(x, x) == kHeader + "the target is the source: its gradient is ones\n");
  CHECK(message_of<InvalidArgument>([&] { (void)tape.explain(Tensor(), x); }) ==
        "GradientTape::explain: the target is undefined");
  std::string other_thread;
  std::thread([&] {
    try {
      (void)tape.explain(x, x);
    } catch (const TapeError& e) {
      other_thread = e.what();
    }
  }).join();
  CHECK(other_thread.rfind("GradientTape::explain: called on another thread", 0) == 0);
  const Tensor y = square(x);
  (void)tape.gradient(y, x);
  CHECK(message_of<TapeError>([&] {
          (void)tape.explain(y, x);
        }).rfind("GradientTape::explain: this non-persistent tape was already used", 0) == 0);
}
