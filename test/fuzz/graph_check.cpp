#include "graph_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

namespace tapegrad::fuzz {

namespace {

std::vector<double> values_of(const Tensor& t) {
  const auto& a = t.array<double>();
  return std::vector<double>(a.begin(), a.end());
}

Tensor random_weights(const Shape& shape, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(num_elements(shape));
  for (auto& x : v) x = dist(rng);
  return from_values(v, shape);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<Tensor> with_shifted(const std::vector<Tensor>& inputs, std::size_t k, std::size_t j,
                                 double step) {
  std::vector<Tensor> out = inputs;
  std::vector<double> v = values_of(inputs[k]);
  v[j] += step;
  out[k] = from_values(v, inputs[k].shape());
  return out;
}

// The scalar the checks differentiate, and its gradient from the tape.
class Objective {
 public:
  Objective(const RandomGraph& graph, std::uint64_t weight_seed) : graph_(graph) {
    std::mt19937_64 rng(weight_seed);
    const Tensor out = graph.evaluate(graph.inputs());
    w_ = random_weights(out.shape(), rng);
    w_values_ = values_of(w_);
    for (const Tensor& x : graph.inputs()) v_.push_back(random_weights(x.shape(), rng));
    // The same weights cut into one output gradient per sink.
    std::size_t offset = 0;
    for (const Tensor& sink : graph.evaluate_sinks(graph.inputs())) {
      const auto begin = w_values_.begin() + static_cast<std::ptrdiff_t>(offset);
      sink_weights_.push_back(
          from_values({begin, begin + static_cast<std::ptrdiff_t>(sink.size())}, sink.shape()));
      offset += sink.size();
    }
    per_sink_targets_ = rng() % 2 == 0;
    persistent_ = rng() % 2 == 0;
  }

  // f(x) = sum(w * output(x)), in plain doubles.
  double first(const std::vector<Tensor>& x) const {
    return dot(w_values_, values_of(graph_.evaluate(x)));
  }

  // The tape's df/dx_k for every input (zeros where unconnected). Half the graphs take it as
  // the gradient of the scalar sum(w * output), half as the gradient of the sinks themselves
  // (several targets) with the weights as output gradients; half on a persistent tape.
  std::vector<Tensor> gradient(const std::vector<Tensor>& x) const {
    GradientTape tape(persistent_);
    tape.watch(x);
    if (per_sink_targets_) {
      return tape.gradient(graph_.evaluate_sinks(x), x, sink_weights_, UnconnectedGradients::Zero);
    }
    const Tensor f = reduce_sum(multiply(w_, graph_.evaluate(x)));
    return tape.gradient(f, x, UnconnectedGradients::Zero);
  }

  // d output / dx_k for every input, from tape.jacobian: [output size] ++ x_k's shape.
  std::vector<Tensor> jacobians(const std::vector<Tensor>& x) const {
    GradientTape tape;
    tape.watch(x);
    return tape.jacobian(graph_.evaluate(x), x, UnconnectedGradients::Zero);
  }
  const std::vector<double>& weights() const { return w_values_; }
  // The directions v_k of the second order, one per input.
  const std::vector<Tensor>& directions() const { return v_; }

  // g(x) = sum_k sum(v_k * df/dx_k), in plain doubles.
  double second(const std::vector<Tensor>& x) const {
    const std::vector<Tensor> grads = gradient(x);
    double s = 0.0;
    for (std::size_t k = 0; k < grads.size(); ++k) s += dot(values_of(v_[k]), values_of(grads[k]));
    return s;
  }

  // dg/dx_k through nested tapes.
  std::vector<Tensor> second_gradient(const std::vector<Tensor>& x) const {
    GradientTape outer;
    outer.watch(x);
    const std::vector<Tensor> grads = gradient(x);
    Tensor g = scalar(0.0, DType::Float64);
    for (std::size_t k = 0; k < grads.size(); ++k)
      g = add(g, reduce_sum(multiply(v_[k], grads[k])));
    return outer.gradient(g, x, UnconnectedGradients::Zero);
  }

 private:
  const RandomGraph& graph_;
  Tensor w_;
  std::vector<double> w_values_;
  std::vector<Tensor> v_;
  std::vector<Tensor> sink_weights_;
  bool per_sink_targets_ = false;
  bool persistent_ = false;
};

// Compares the analytic gradients of `scalar_fn` with its central differences.
template <class ScalarFn>
bool compare(const char* order, const std::vector<Tensor>& inputs,
             const std::vector<Tensor>& analytic, ScalarFn scalar_fn,
             const GraphCheckOptions& options, GraphCheckResult& result) {
  std::ostringstream why;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& g = analytic[k];
    if (!g.defined() || g.dtype() != DType::Float64 || g.shape() != inputs[k].shape()) {
      why << order << " gradient of input " << k
          << ": expected a float64 tensor of the input's shape, got " << g;
      result.failure = why.str();
      return false;
    }
    const std::vector<double> got = values_of(g);
    for (std::size_t j = 0; j < got.size(); ++j) {
      auto central = [&](double step) {
        const double plus = scalar_fn(with_shifted(inputs, k, j, step));
        const double minus = scalar_fn(with_shifted(inputs, k, j, -step));
        return (plus - minus) / (2 * step);
      };
      auto matches = [&](double numeric) {
        return std::abs(got[j] - numeric) <= options.tolerance * (1.0 + std::abs(numeric));
      };
      ++result.values_compared;
      const double numeric = central(options.delta);
      if (matches(numeric)) continue;
      // A steep function (a product of many factors inside sin) can leave the delta^2 term
      // of the central difference above the tolerance: retry with Richardson extrapolation
      // over delta and 2 delta, which cancels that term, before calling it a mismatch.
      const double extrapolated = (4 * numeric - central(2 * options.delta)) / 3;
      if (matches(extrapolated)) continue;
      // Rounding in f itself can swamp a small step: a log_softmax entry of -1e-8, computed
      // as the difference of two numbers near 28, leaves f an error near 1e-11 that a step of
      // 1e-6 turns into 1e-5. The same extrapolation over 100 and 1,000 times the step is
      // that much quieter, and its delta^4 term still small.
      bool wide_match = false;
      for (double factor : {100.0, 1000.0}) {
        const double wide = factor * options.delta;
        wide_match = wide_match || matches((4 * central(wide) - central(2 * wide)) / 3);
      }
      if (wide_match) continue;
      why.precision(12);
      why << order << " derivative w.r.t. input " << k << " element " << j
          << ": central difference " << numeric << " (extrapolated " << extrapolated << "), tape "
          << got[j];
      result.failure = why.str();
      return false;
    }
  }
  return true;
}

// Each Jacobian contracted with the output weights must be the (already checked) gradient.
bool compare_jacobians(const std::vector<Tensor>& inputs, const std::vector<Tensor>& gradients,
                       const std::vector<Tensor>& jacobians, const std::vector<double>& w,
                       const GraphCheckOptions& options, GraphCheckResult& result) {
  std::ostringstream why;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Shape expected_shape{w.size()};
    expected_shape.insert(expected_shape.end(), inputs[k].shape().begin(), inputs[k].shape().end());
    const Tensor& j = jacobians[k];
    if (!j.defined() || j.dtype() != DType::Float64 || j.shape() != expected_shape) {
      why << "jacobian w.r.t. input " << k << ": expected a float64 tensor of shape [" << w.size()
          << "] ++ the input's shape, got " << j;
      result.failure = why.str();
      return false;
    }
    const std::vector<double> jv = values_of(j), g = values_of(gradients[k]);
    const std::size_t n = inputs[k].size();
    for (std::size_t e = 0; e < n; ++e) {
      double contracted = 0.0;
      for (std::size_t i = 0; i < w.size(); ++i) contracted += w[i] * jv[i * n + e];
      ++result.values_compared;
      if (!(std::abs(contracted - g[e]) <= options.tolerance * (1.0 + std::abs(g[e])))) {
        why.precision(12);
        why << "jacobian w.r.t. input " << k << " element " << e << ": w . J = " << contracted
            << ", gradient " << g[e];
        result.failure = why.str();
        return false;
      }
    }
  }
  return true;
}

// x with its elements in reverse order when `reverse`, each moved by up to `jitter`: the same
// range of values in another pattern.
Tensor moved(const Tensor& x, std::mt19937_64& rng, bool reverse, double jitter) {
  std::uniform_real_distribution<double> dist(-jitter, jitter);
  std::vector<double> v = values_of(x);
  if (reverse) std::reverse(v.begin(), v.end());
  for (double& e : v) e += dist(rng);
  return from_values(v, x.shape());
}

// The largest magnitude in `tensors`, or infinity when one holds a NaN or an infinity.
double largest_magnitude(const std::vector<Tensor>& tensors) {
  double largest = 0.0;
  for (const Tensor& t : tensors) {
    for (double v : values_of(t)) {
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      largest = std::max(largest, std::abs(v));
    }
  }
  return largest;
}

// A point whose elements make another pattern than the base point's (other maxima, orders,
// signs and ties) and at which the graph behaves as it does at the base point. The generator
// conditions each op at the base point only: elsewhere a pow or a division can overflow, a
// log or a solve meet NaN, and then the loop and the vectorized map differ only in how they
// round or propagate those (0 * inf against a structural 0), which is not what the check is
// about. So a candidate is taken only when every node and every gradient there is finite and
// at most 1,000 times the base point's largest; the candidates: reversed and moved by up to
// 0.05, 0.01, then only moved by 0.05, 0.001; the base point itself when none qualifies.
std::vector<Tensor> moved_point(const RandomGraph& graph, const Objective& objective,
                                std::mt19937_64& rng) {
  const std::vector<Tensor>& x = graph.inputs();
  const double node_bound = 1e3 * std::max(1.0, largest_magnitude(graph.evaluate_nodes(x)));
  const double gradient_bound = 1e3 * std::max(1.0, largest_magnitude(objective.gradient(x)));
  const std::pair<bool, double> candidates[] = {
      {true, 0.05}, {true, 0.01}, {false, 0.05}, {false, 0.001}};
  for (const auto& [reverse, jitter] : candidates) {
    std::vector<Tensor> point;
    for (const Tensor& input : x) point.push_back(moved(input, rng, reverse, jitter));
    try {
      if (largest_magnitude(graph.evaluate_nodes(point)) <= node_bound &&
          largest_magnitude(objective.gradient(point)) <= gradient_bound) {
        return point;
      }
    } catch (const std::exception&) {
      // An op refused a value there (a solve of a matrix with a NaN): the next candidate.
    }
  }
  return x;
}

// Equal to rounding, NaN where the other is NaN.
bool same_values(const std::string& what, const Tensor& got, const Tensor& want,
                 const GraphCheckOptions& options, GraphCheckResult& result) {
  std::ostringstream why;
  if (!got.defined() || got.shape() != want.shape() || got.dtype() != want.dtype()) {
    why << what << ": got " << got << ", expected the shape and dtype of " << want;
    result.failure = why.str();
    return false;
  }
  const std::vector<double> a = values_of(got), b = values_of(want);
  for (std::size_t i = 0; i < a.size(); ++i) {
    ++result.values_compared;
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (both_nan || a[i] == b[i] ||
        std::abs(a[i] - b[i]) <= options.tolerance * 1e-3 * (1.0 + std::abs(b[i]))) {
      continue;
    }
    why.precision(17);
    why << what << " element " << i << ": " << a[i] << ", expected " << b[i];
    result.failure = why.str();
    return false;
  }
  return true;
}

bool compare_vectorized(const RandomGraph& graph, const Objective& objective,
                        const GraphCheckOptions& options, GraphCheckResult& result) {
  std::mt19937_64 rng(graph.seed() ^ 0x5bd1e995ULL);
  const std::vector<Tensor>& x = graph.inputs();
  const std::vector<Tensor> middle = moved_point(graph, objective, rng);
  std::vector<Tensor> batches;
  for (std::size_t k = 0; k < x.size(); ++k) batches.push_back(stack({x[k], middle[k], x[k]}, 0));
  const std::vector<Tensor> vectorized = vectorized_map(
      [&](const std::vector<Tensor>& point) { return objective.gradient(point); }, batches,
      /*fallback_to_loop=*/false);
  const std::vector<Tensor> at_base = objective.gradient(x);
  const std::vector<Tensor> at_middle = objective.gradient(middle);
  for (std::size_t k = 0; k < x.size(); ++k) {
    const Tensor looped = stack({at_base[k], at_middle[k], at_base[k]}, 0);
    if (!same_values("vectorized_map of the gradient w.r.t. input " + std::to_string(k),
                     vectorized[k], looped, options, result)) {
      return false;
    }
  }
  const auto jacobians_at = [&](bool vectorize) {
    GradientTape tape;
    tape.watch(middle);
    JacobianOptions jacobian_options;
    jacobian_options.unconnected = UnconnectedGradients::Zero;
    jacobian_options.vectorize = vectorize;
    return tape.jacobian(graph.evaluate(middle), middle, jacobian_options);
  };
  const std::vector<Tensor> fast = jacobians_at(true);
  const std::vector<Tensor> slow = jacobians_at(false);
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (!same_values("vectorized jacobian at the moved point w.r.t. input " + std::to_string(k),
                     fast[k], slow[k], options, result)) {
      return false;
    }
  }
  return true;
}

// Forward mode against reverse mode. The JVP of the output along the directions v_k (a
// ForwardAccumulator over the graph) equals sum_k J_k v_k from the tape's Jacobians; the JVP of
// the gradient along v (the accumulator around the tape: forward over reverse) equals the
// nested tapes' gradient of sum_k sum(v_k * gradient_k) (H v both ways: H is symmetric).
bool compare_forward(const RandomGraph& graph, const Objective& objective,
                     const GraphCheckOptions& options, GraphCheckResult& result) {
  const std::vector<Tensor>& x = graph.inputs();
  const std::vector<Tensor>& v = objective.directions();
  Tensor output_jvp;
  std::vector<Tensor> gradient_jvps;
  {
    ForwardAccumulator accumulator(x, v);
    output_jvp = accumulator.jvp(graph.evaluate(x), UnconnectedGradients::Zero);
    for (const Tensor& g : objective.gradient(x)) {
      gradient_jvps.push_back(accumulator.jvp(g, UnconnectedGradients::Zero));
    }
  }
  const std::vector<Tensor> jacobians = objective.jacobians(x);
  std::vector<double> expected(output_jvp.size(), 0.0);
  for (std::size_t k = 0; k < x.size(); ++k) {
    const std::vector<double> j = values_of(jacobians[k]), direction = values_of(v[k]);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      for (std::size_t e = 0; e < direction.size(); ++e) {
        expected[i] += j[i * direction.size() + e] * direction[e];
      }
    }
  }
  if (!same_values("forward-mode JVP of the output", output_jvp,
                   from_values(expected, output_jvp.shape()), options, result)) {
    return false;
  }
  const std::vector<Tensor> reverse_over_reverse = objective.second_gradient(x);
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (!same_values("forward-over-reverse H v w.r.t. input " + std::to_string(k), gradient_jvps[k],
                     reverse_over_reverse[k], options, result)) {
      return false;
    }
  }
  return true;
}

}  // namespace

GraphCheckResult check_graph(const RandomGraph& graph, const GraphCheckOptions& options) {
  GraphCheckResult result;
  try {
    const Objective objective(graph, graph.seed() ^ 0x9e3779b97f4a7c15ULL);
    const auto& x = graph.inputs();
    const std::vector<Tensor> gradients = objective.gradient(x);
    result.passed = compare(
        "first-order", x, gradients,
        [&](const std::vector<Tensor>& at) { return objective.first(at); }, options, result);
    if (result.passed && options.jacobian) {
      result.passed = compare_jacobians(x, gradients, objective.jacobians(x), objective.weights(),
                                        options, result);
    }
    if (result.passed && options.vectorized) {
      result.passed = compare_vectorized(graph, objective, options, result);
    }
    if (result.passed && options.forward) {
      result.passed = compare_forward(graph, objective, options, result);
    }
    if (result.passed && options.second_order) {
      result.passed = compare(
          "second-order", x, objective.second_gradient(x),
          [&](const std::vector<Tensor>& at) { return objective.second(at); }, options, result);
    }
  } catch (const std::exception& e) {
    result.passed = false;
    result.failure = std::string("exception: ") + e.what();
  }
  return result;
}

}  // namespace tapegrad::fuzz
