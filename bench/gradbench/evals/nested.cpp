// saddle and particle: derivatives of functions that themselves take derivatives, through
// GradBench's gradient-descent solver. Only reverse-over-reverse ("rr") exists until tapegrad
// has forward mode; the other mode pairs answer with an error that says so.
#include <cmath>
#include <stdexcept>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

namespace {

using Objective = std::function<Tensor(const Tensor&)>;  // [n] -> scalar

// Reverse mode: one tape. Under an outer tape the result stays differentiable.
Tensor reverse_gradient(const Objective& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.gradient(y, x, UnconnectedGradients::Zero);
}

double norm_of(const Tensor& v) { return std::sqrt(reduce_sum(square(v)).item<double>()); }

// GradBench's solver: gradient descent whose step doubles after ten accepted steps and halves
// after a rejected one. Every value is a tensor, so an outer tape records the whole descent.
Tensor argmin(const Objective& f, const Tensor& start) {
  // A tensor of its own: the start is a value, and the same handle may also stand for the
  // outer variable (saddle starts both descents from one point).
  Tensor x = Tensor(start.array<double>());
  Tensor fx = f(x);
  Tensor gx = reverse_gradient(f, x);
  int accepted = 0;
  double eta = 1e-5;
  while (true) {
    if (norm_of(gx) <= 1e-5) return x;
    if (accepted == 10) {
      eta *= 2;
      accepted = 0;
      continue;
    }
    const Tensor candidate = x - eta * gx;
    if (norm_of(x - candidate) <= 1e-5) return x;
    const Tensor f_candidate = f(candidate);
    if (f_candidate.item<double>() < fx.item<double>()) {
      x = candidate;
      fx = f_candidate;
      gx = reverse_gradient(f, x);
      ++accepted;
    } else {
      eta /= 2;
      accepted = 0;
    }
  }
}

Tensor argmax(const Objective& f, const Tensor& start) {
  return argmin([&f](const Tensor& x) { return negative(f(x)); }, start);
}

Tensor saddle_objective(const Tensor& p, const Tensor& q) {
  return reduce_sum(square(p)) - reduce_sum(square(q));
}

std::vector<double> saddle_rr(const Tensor& start) {
  // The max over q of f(p, q), itself found by the solver: its gradient in p goes through
  // the inner descent.
  const Objective max_over_q = [&start](const Tensor& p) {
    const Objective inner = [&p](const Tensor& q) { return saddle_objective(p, q); };
    return inner(argmax(inner, start));
  };
  const Tensor p_star = argmin(max_over_q, start);
  const Tensor q_star = argmax([&p_star](const Tensor& q) { return saddle_objective(p_star, q); }, start);
  std::vector<double> out = to_vector(p_star);
  const auto q_values = to_vector(q_star);
  out.insert(out.end(), q_values.begin(), q_values.end());
  return out;
}

// The particle's final x² where it hits y = 0, falling through the potential of two charges,
// (10, 10 − w) and (10, 0), integrated with Euler steps; the acceleration is −∇p (inner AD).
Tensor particle_final_x_squared(const Tensor& w) {
  const Tensor charge_a = concat({constant({10.0}), 10.0 - w}, 0);
  const Tensor charge_b = constant({10.0, 0.0});
  const Objective potential = [&](const Tensor& x) {
    return reciprocal(sqrt(reduce_sum(square(x - charge_a)))) +
           reciprocal(sqrt(reduce_sum(square(x - charge_b))));
  };
  const double dt = 0.1;
  Tensor x = constant({0.0, 8.0});
  Tensor velocity = constant({0.75, 0.0});
  while (true) {
    const Tensor acceleration = negative(reverse_gradient(potential, x));
    const Tensor x_new = x + dt * velocity;
    if (x_new.array<double>()(1) <= 0) break;
    x = x_new;
    velocity = velocity + dt * acceleration;
  }
  const Tensor x_y = slice(x, {1}, {1});
  const Tensor v_y = slice(velocity, {1}, {1});
  const Tensor time_to_ground = negative(x_y) / v_y;
  const Tensor x_final = slice(x, {0}, {1}) + time_to_ground * slice(velocity, {0}, {1});
  return reduce_sum(square(x_final));
}

// The table of an eval that has only `rr`: the forward mode pairs answer with an error.
EvalFunctions reverse_over_reverse_only(const std::string& eval, Prepare rr) {
  EvalFunctions functions{{"rr", std::move(rr)}};
  for (const std::string mode : {"ff", "fr", "rf"}) {
    functions[mode] = [eval, mode](const json&) -> Compute {
      throw std::runtime_error(eval + " " + mode +
                               ": forward mode is not in tapegrad yet; only rr (reverse over reverse) runs");
    };
  }
  return functions;
}

}  // namespace

EvalFunctions saddle_functions() {
  return reverse_over_reverse_only(
      "saddle", make_function([](const json& input) { return vector_from_json(input["start"]); },
                              [](const Tensor& start) -> Output {
                                const auto result = saddle_rr(start);
                                return [result] { return json(result); };
                              }));
}

EvalFunctions particle_functions() {
  return reverse_over_reverse_only(
      "particle", make_function([](const json& input) { return constant({input["w"].get<double>()}); },
                                [](const Tensor& w0) -> Output {
                                  const Tensor w = argmin(particle_final_x_squared, w0);
                                  return [w] { return json(to_vector(w)[0]); };
                                }));
}

}  // namespace tapegrad::gradbench
