// The registry of built-in ops: every op defined in the sources is registered from the start,
// has a gradient unless it is marked not differentiable, and cannot be replaced by a user.
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/op_registry.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::message_of;
using tapegrad::testing::values;

// First in the file, so that it runs before this process has run any op.
TEST_CASE("built-in ops are registered before any of them runs", "[registry]") {
  CHECK(is_registered("Mul"));
  CHECK(is_registered("MatMul"));
  CHECK(is_registered("ReadVariableOp"));
  CHECK_FALSE(is_registered("NoSuchOpAnywhere"));
}

// Each TAPEGRAD_BUILTIN_OP registers its definition; the registry lists them once, by name,
// and finds each by its name.
TEST_CASE("built-in ops are listed once, by name, and found by name", "[registry]") {
  const auto& builtins = detail::builtin_ops();
  REQUIRE(builtins.size() >= 130);
  std::set<std::string> names;
  for (std::size_t i = 0; i < builtins.size(); ++i) {
    const std::string name = builtins[i]->name;
    INFO(name);
    CHECK(names.insert(name).second);
    if (i > 0) CHECK(std::string(builtins[i - 1]->name) < name);
    CHECK(&detail::op_named(name) == builtins[i]);
  }
  std::vector<std::string> listed;
  for (const auto& op : registered_ops()) listed.push_back(op.name);
  CHECK(listed == std::vector<std::string>(names.begin(), names.end()));
  // One op of every family folder, including those a program reaches only by name.
  for (const char* name : {"Tan", "Svd", "Conv2D", "MirrorPad", "Dropout", "ReadVariableOp",
                           "Cumprod", "Polygamma", "Max", "Cholesky"}) {
    INFO(name);
    CHECK(is_registered(name));
    CHECK(detail::op_named(name).kind != detail::GradientKind::Registered);
  }
}

TEST_CASE("every built-in op has a gradient or is marked not differentiable", "[registry]") {
  for (const auto& op : registered_ops()) {
    INFO(op.name);
    CHECK(is_registered(op.name));
    CHECK(op.has_gradient == op.differentiable);
  }
}

// Differentiable built-in ops whose forward mode is the generic fallback (the transpose of
// their gradient) on purpose. Empty: every differentiable built-in op has its own rule. An
// entry needs a reason here (e.g. a rule no cheaper than the fallback).
const std::set<std::string> kForwardFallbackOnPurpose = {};

TEST_CASE("every differentiable built-in op has a forward rule, or uses the fallback on purpose",
          "[registry][forward]") {
  std::size_t with_rule = 0;
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    INFO(op->name);
    // Identity-gradient ops pass the tangent on as it is; not-differentiable ones give none.
    if (op->kind != detail::GradientKind::Rule) {
      CHECK(op->forward_rule == nullptr);
      continue;
    }
    const bool on_purpose = kForwardFallbackOnPurpose.count(op->name) == 1;
    CHECK((op->forward_rule != nullptr) != on_purpose);
    if (op->forward_rule != nullptr) ++with_rule;
  }
  CHECK(with_rule >= 50);
}

// Built-in ops vectorized_map loops over on purpose (no batching rule). Empty: every built-in
// op, differentiable or not, has one. An entry needs a reason here.
const std::set<std::string> kNoBatchingRuleOnPurpose = {};

TEST_CASE("every built-in op has a batching rule, or loops on purpose", "[registry][vectorize]") {
  std::size_t with_rule = 0;
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    INFO(op->name);
    const bool on_purpose = kNoBatchingRuleOnPurpose.count(op->name) == 1;
    CHECK((op->batching_rule != nullptr) != on_purpose);
    if (op->batching_rule != nullptr) ++with_rule;
  }
  CHECK(with_rule >= 70);
}

// Built-in ops a Function cannot replay (no replay rule): a trace that holds one runs fn
// eagerly. Where: the count of positions depends on the mask's values. Dropout: each call
// draws a new mask.
const std::set<std::string> kNoReplayRuleOnPurpose = {"Where", "Dropout"};

TEST_CASE("every built-in op has a replay rule, or makes a Function run eagerly on purpose",
          "[registry][function]") {
  std::size_t with_rule = 0;
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    INFO(op->name);
    const bool on_purpose = kNoReplayRuleOnPurpose.count(op->name) == 1;
    CHECK((op->replay_rule != nullptr) != on_purpose);
    if (op->replay_rule != nullptr) ++with_rule;
  }
  CHECK(with_rule + kNoReplayRuleOnPurpose.size() == detail::builtin_ops().size());
}

// The ops a diagonal batch of the vectorized Jacobian passes through (a structure rule): the
// linear ops of a backward walk, and MatMul of a constant matrix with a diagonal column or row.
// test_op_samples checks each rule against the op's forward, row by row.
const std::set<std::string> kStructured = {
    "Identity",     "Reshape",   "Neg",      "Add",          "Sub",
    "Mul",          "RealDiv",   "TanhGrad", "SigmoidGrad",  "ReluGrad",
    "SoftplusGrad", "EluGrad",   "GeluGrad", "GeluTanhGrad", "ReciprocalGrad",
    "SqrtGrad",     "RsqrtGrad", "MatMul"};

TEST_CASE("exactly the linear ops the vectorized Jacobian keeps diagonal have a structure rule",
          "[registry][vectorize]") {
  REQUIRE(kStructured.size() == 18);
  std::set<std::string> with_rule;
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    if (op->structure_rule == nullptr) continue;
    with_rule.insert(op->name);
    // The batching rule runs whenever the structure rule declines.
    CHECK(op->batching_rule != nullptr);
  }
  CHECK(with_rule == kStructured);
  for (const std::string& name : kStructured) {
    INFO(name);
    CHECK(detail::op_named(name).structure_rule != nullptr);
  }
  // BatchMatMulV2 shares MatMul's forward but not its structure rule (batched products stay
  // dense).
  CHECK(detail::op_named("BatchMatMulV2").structure_rule == nullptr);
}

TEST_CASE("a built-in op's gradient cannot be replaced or removed", "[registry]") {
  const auto identity_gradient = [](const OpContext&, const std::vector<Tensor>& g) { return g; };
  const std::string message =
      message_of<InvalidArgument>([&] { register_gradient("Mul", identity_gradient); });
  CHECK(message == "register_gradient: 'Mul' is a built-in op; its gradient cannot be replaced");
  CHECK_THROWS_AS(not_differentiable("MatMul"), InvalidArgument);
  CHECK_THROWS_AS(register_sparse_gradient("GatherV2",
                                           [](const OpContext&, const std::vector<Tensor>& g) {
                                             return std::vector<GradientValue>(g.begin(), g.end());
                                           }),
                  InvalidArgument);

  // Mul still differentiates as Mul: d(x*y)/dx = y.
  const Tensor x = constant({2.0, 3.0});
  const Tensor y = constant({5.0, 7.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor z = multiply(x, y);
  CHECK(values(tape.gradient(z, x)) == std::vector<double>{5.0, 7.0});
}

TEST_CASE("record_operation with a built-in name uses the built-in gradient", "[registry]") {
  const Tensor x = constant({1.5, -2.0});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = constant({2.25, 4.0});  // computed outside: x squared
  record_operation("Square", {x}, {y});
  CHECK(values(tape.gradient(y, x)) == std::vector<double>{3.0, -4.0});
}
