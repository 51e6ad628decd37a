// The runtime's forward-rule hook (OpDefinition::forward_rule), tested on ops defined here,
// below the public API: a rule, when set, is what an accumulator uses (not the generic
// fallback), it sees the op's inputs, outputs and attributes, and a rule returning tangents
// that do not fit the outputs is an InvalidArgument naming the op.
#include "support.hpp"

#include "runtime/forward_context.hpp"
#include "runtime/op_definition.hpp"
#include "runtime/recording.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

std::vector<GradientValue> scale_gradient(const OpContext& ctx, const std::vector<Tensor>& dys) {
  return {GradientValue(dys[0] * ctx.attrs().get_double("scale"))};
}

// Deliberately 10 times the true tangent: a result that can only come from this rule.
std::vector<Tensor> marked_scale_tangent(const detail::ForwardContext& ctx,
                                         const std::vector<Tensor>& tangents) {
  REQUIRE(std::string(ctx.op.name) == "ForwardRuleTestScale");
  REQUIRE(ctx.inputs.size() == 1);
  REQUIRE(ctx.outputs.size() == 1);
  REQUIRE(ctx.recorded_attrs != nullptr);
  REQUIRE(ctx.outputs[0].shape() == ctx.inputs[0].shape());
  return {tangents[0] * (10.0 * ctx.attrs().get_double("scale"))};
}

std::vector<Tensor> misshapen_tangent(const detail::ForwardContext&,
                                      const std::vector<Tensor>& tangents) {
  return {reduce_sum(tangents[0])};
}

constexpr detail::OpDefinition kScale{"ForwardRuleTestScale",  detail::GradientKind::Rule,
                                      scale_gradient,          detail::KeepSet::none(),
                                      detail::KeepSet::none(), marked_scale_tangent};
constexpr detail::OpDefinition kScaleWithoutRule =
    detail::differentiable_op("ForwardRuleTestScaleFallback", scale_gradient,
                              detail::KeepSet::none(), detail::KeepSet::none());
constexpr detail::OpDefinition kMisshapen{
    "ForwardRuleTestMisshapen", detail::GradientKind::Rule, scale_gradient,
    detail::KeepSet::none(),    detail::KeepSet::none(),    misshapen_tangent};

// y = scale * x, computed eagerly and recorded as `op`.
Tensor scaled(const detail::OpDefinition& op, const Tensor& x, double scale) {
  Tensor y(xt::xarray<double>(x.array<double>() * scale));
  detail::record(op, {&x}, y, [&] { return Attrs().set("scale", scale); });
  return y;
}

}  // namespace

TEST_CASE("an op's forward rule gives its tangents, without one the fallback does", "[forward]") {
  const Tensor x = constant({1.0, -2.0});
  ForwardAccumulator acc(x, constant({1.0, 0.5}));
  require_close(acc.jvp(scaled(kScale, x, 3.0)), {2}, {30.0, 15.0});
  require_close(acc.jvp(scaled(kScaleWithoutRule, x, 3.0)), {2}, {3.0, 1.5});
  {
    // Forced, the fallback runs even where a rule exists (how test_op_samples compares).
    detail::ForceGenericForwardFallback force;
    require_close(acc.jvp(scaled(kScale, x, 3.0)), {2}, {3.0, 1.5});
  }
  require_close(acc.jvp(scaled(kScale, x, 3.0)), {2}, {30.0, 15.0});
  // The gradient is the gradient rule's either way.
  GradientTape tape;
  tape.watch(x);
  require_close(tape.gradient(scaled(kScale, x, 3.0), x), {2}, {3.0, 3.0});
}

TEST_CASE("a forward rule whose tangent does not fit the output is an InvalidArgument",
          "[forward][misuse]") {
  const Tensor x = constant({1.0, -2.0});
  ForwardAccumulator acc(x, constant({1.0, 0.5}));
  const std::string message = message_of<InvalidArgument>([&] { scaled(kMisshapen, x, 2.0); });
  CHECK(message.find("'ForwardRuleTestMisshapen'") != std::string::npos);
  CHECK(message.find("shape []") != std::string::npos);
  CHECK(message.find("[2]") != std::string::npos);
}
