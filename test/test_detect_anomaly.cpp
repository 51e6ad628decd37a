// DetectAnomaly: the first NaN or infinity of a forward op or of a gradient rule, named.
#include <catch2/catch.hpp>

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
  const Tensor a = multiply(x, x);                        // op 0
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
    CHECK(message_of<AnomalyError>([&] { (void)log(zero); })
              .rfind("DetectAnomaly: the forward of 'Log' produced an infinity in output 0", 0) == 0);
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
