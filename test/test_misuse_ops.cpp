// The misuse catalogue's cases that belong to no op: tensor creation (scalar, fill,
// from_values, zeros, ones) fed values their dtype cannot hold and shapes past 2^63, and the
// tapes' options out of range. Each case is an expected exception (type + what the message
// names) or a defined result checked by value; the harness checks the thread is clean after
// each. Every op's own misuse cases are declared with its samples (test/samples/) and run by
// test_op_samples.
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

struct Case {
  std::string name;
  std::function<void()> run;
};
using Table = std::vector<Case>;

template <class E = InvalidArgument>
void misuse(Table& t, const std::string& name, std::function<void()> body,
            std::vector<std::string> mentions) {
  t.push_back({name, [=] { expect_misuse<E>(name, body, mentions); }});
}

void defined(Table& t, const std::string& name, std::function<void()> body) {
  t.push_back({name, [=] { expect_defined(name, body); }});
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Float64);
}
Tensor f64(const std::vector<double>& v) { return f64(v, {v.size()}); }

template <class T>
std::vector<T> elements(const Tensor& t) {
  const auto& a = t.array<T>();
  return std::vector<T>(a.begin(), a.end());
}

// ---- tensor creation ---------------------------------------------------------------------

Table creation_cases() {
  Table t;
  defined(t, "scalar: 1.0 as bool is exact", [] {
    const Tensor s = scalar(1.0, DType::Bool);
    REQUIRE(s.item<bool>());
  });
  misuse(t, "scalar: 0.5 as int32", [] { scalar(0.5, DType::Int32); }, {"scalar", "0.5", "int32"});
  misuse(t, "scalar: 2 as bool", [] { scalar(2.0, DType::Bool); }, {"scalar", "2", "bool"});
  misuse(t, "fill: 0.5 into int32", [] { fill({2}, 0.5, DType::Int32); },
         {"fill", "0.5", "int32", "[2]"});
  misuse(t, "fill: 3e9 into int32", [] { fill({2}, 3e9, DType::Int32); }, {"fill", "int32", "[2]"});
  misuse(t, "fill: NaN into int64", [] { fill({1}, kNaN, DType::Int64); },
         {"fill", "nan", "int64"});
  misuse(t, "fill: 2 into bool", [] { fill({1}, 2.0, DType::Bool); }, {"fill", "2", "bool"});
  misuse(t, "from_values: 1.5 as int32", [] { from_values({1.5}, {1}, DType::Int32); },
         {"from_values", "1.5", "int32", "[1]"});
  defined(t, "fill: -3 into int32 and 1 into bool are exact", [] {
    REQUIRE(elements<std::int32_t>(fill({2}, -3.0, DType::Int32)) ==
            std::vector<std::int32_t>{-3, -3});
    REQUIRE(elements<bool>(fill({1}, 1.0, DType::Bool)) == std::vector<bool>{true});
  });
  misuse(t, "zeros: [2^40, 2^40] overflows the element count",
         [] {
           zeros({std::size_t{1} << 40, std::size_t{1} << 40});
         },
         {"zeros", "[1099511627776, 1099511627776]", "2^63"});
  misuse(t, "ones: a dimension past 2^63 - 1",
         [] {
           ones({std::size_t{1} << 63, 0});
         },
         {"ones", "[9223372036854775808, 0]"});
  misuse(t, "fill: 2^62 float64 elements exceed addressable bytes",
         [] { fill({std::size_t{1} << 62}, 1.0); },
         {"fill", "[4611686018427387904]", "float64", "bytes"});
  misuse<ResourceExhausted>(t, "zeros: 2^60 bytes cannot be allocated",
                            [] {
                              zeros({std::size_t{1} << 30, std::size_t{1} << 27});
                            },
                            {"zeros", "[1073741824, 134217728]", "float64", "out of memory"});
  misuse(t, "zeros: [0, 2^40, 2^40] is empty but its non-zero dimensions overflow",
         [] {
           zeros({0, std::size_t{1} << 40, std::size_t{1} << 40});
         },
         {"zeros", "[0, 1099511627776, 1099511627776]", "2^63"});
  defined(t, "zeros: [2^40, 0] is a valid empty tensor", [] {
    REQUIRE(zeros({std::size_t{1} << 40, 0}).size() == 0);
  });
  return t;
}

// ---- the tapes' options -----------------------------------------------------------------

Table option_cases() {
  Table t;
  misuse(t, "gradient: UnconnectedGradients value 7",
         [] {
           Tensor x = constant(1.0);
           GradientTape tape;
           tape.watch(x);
           Tensor y = multiply(x, x);
           tape.gradient(y, x, static_cast<UnconnectedGradients>(7));
         },
         {"gradient", "unconnected_gradients", "7"});
  misuse(t, "gradient over variables: UnconnectedGradients value -1",
         [] {
           Variable v(constant(1.0));
           GradientTape tape;
           Tensor y = multiply(v.value(), v.value());
           tape.gradient(y, std::vector<Variable>{v}, static_cast<UnconnectedGradients>(-1));
         },
         {"gradient", "unconnected_gradients", "-1"});
  misuse(t, "jacobian: UnconnectedGradients value 2",
         [] {
           Tensor x = f64({1, 2});
           GradientTape tape;
           tape.watch(x);
           Tensor y = multiply(x, x);
           tape.jacobian(y, x, static_cast<UnconnectedGradients>(2));
         },
         {"jacobian", "unconnected_gradients", "2"});
  misuse(t, "batch_jacobian: UnconnectedGradients value 3",
         [] {
           Tensor x = f64({1, 2}, {2, 1});
           GradientTape tape;
           tape.watch(x);
           Tensor y = multiply(x, x);
           tape.batch_jacobian(y, x, static_cast<UnconnectedGradients>(3));
         },
         {"batch_jacobian", "unconnected_gradients", "3"});
  misuse(t, "hessian: a non-scalar function",
         [] {
           hessian([](const Tensor& x) { return multiply(x, x); }, f64({1, 2}));
         },
         {"hessian", "[2]", "scalar"});
  defined(t, "hessian: a size-1 function is accepted", [] {
    const Tensor h = hessian(
        [](const Tensor& x) { return reduce_sum(multiply(x, multiply(x, x))); }, f64({1, 2}));
    REQUIRE(elements<double>(h) == std::vector<double>{6, 0, 0, 12});
  });
  return t;
}

std::vector<Table> all_tables() { return {creation_cases(), option_cases()}; }

}  // namespace

TEST_CASE(
    "the misuse catalogue without an op: every case throws its documented error or gives its "
    "defined result") {
  const int before = misuse_cases_run();
  std::size_t listed = 0;
  for (const Table& table : all_tables()) {
    for (const Case& c : table) {
      c.run();
      ++listed;
    }
  }
  const int run = misuse_cases_run() - before;
  REQUIRE(static_cast<std::size_t>(run) == listed);
  std::cout << "misuse catalogue (creation, options): " << run << " cases run\n";
  REQUIRE(run >= 21);
}

// softmax_cross_entropy_with_logits for labels whose rows do not sum to 1: the exact
// derivative softmax * sum(labels) - labels, first and second order, against finite
// differences in both arguments (the mixed second derivative included).
TEST_CASE("softmax_cross_entropy_with_logits: exact derivatives for label rows not summing to 1") {
  const Tensor labels = f64({0.2, 0.9, 0.4, 1.5, 0.0, 0.3}, {2, 3});  // rows sum to 1.5 and 1.8
  const Tensor logits = f64({0.1, -0.7, 1.3, 2.0, 0.5, -1.1}, {2, 3});
  const Fn loss = [](const std::vector<Tensor>& a) {
    return reduce_sum(softmax_cross_entropy_with_logits(a[0], a[1]));
  };
  SECTION("the logits gradient is softmax * sum(labels) - labels") {
    GradientTape tape;
    tape.watch(logits);
    const Tensor y = reduce_sum(softmax_cross_entropy_with_logits(labels, logits));
    const Tensor g = tape.gradient(y, logits);
    const Tensor expected =
        subtract(multiply(softmax(logits), reduce_sum(labels, {-1}, true)), labels);
    require_close(g, {2, 3}, values(expected), 1e-12);
  }
  SECTION("first order, both arguments") {
    require_gradient_matches(loss, {labels, logits}, 0);
    require_gradient_matches(loss, {labels, logits}, 1);
  }
  SECTION("second order in logits and in labels") {
    require_second_order_matches(loss, {labels, logits}, 1);
    require_second_order_matches(loss, {labels, logits}, 0);
  }
  SECTION("the mixed second derivative d/dlabels (dloss/dlogits)") {
    const Fn logits_gradient_weighted = [](const std::vector<Tensor>& a) {
      Tensor x = a[1];
      GradientTape tape;
      tape.watch(x);
      const Tensor y = reduce_sum(softmax_cross_entropy_with_logits(a[0], x));
      const Tensor g = tape.gradient(y, x);
      return reduce_sum(multiply(g, f64({0.3, -1.2, 0.7, 0.5, 2.0, -0.4}, {2, 3})));
    };
    require_gradient_matches(logits_gradient_weighted, {labels, logits}, 0);
  }
}
