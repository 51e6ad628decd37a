// saddle and particle: derivatives of functions that themselves take derivatives, through
// GradBench's gradient-descent solver, in the four mode pairs GradBench names by two letters
// (outer, inner): rr, ff, fr, rf. A reverse-mode gradient is one tape; a forward-mode gradient
// is one jvp per coordinate (both functions here have one or two inputs). Tapes and forward
// accumulators nest either way, so an outer derivative sees through the inner ones.
#include <cmath>
#include <stdexcept>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

namespace {

using Objective = std::function<Tensor(const Tensor&)>;  // [n] -> scalar

// Reverse mode: one tape. Under an outer tape or accumulator the result stays differentiable.
Tensor reverse_gradient(const Objective& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.gradient(y, x, UnconnectedGradients::Zero);
}

// Forward mode: the directional derivative along each basis vector is one coordinate (x is [n]).
Tensor forward_gradient(const Objective& f, const Tensor& x) {
  const Fn call = [&f](const std::vector<Tensor>& args) { return f(args[0]); };
  const std::size_t n = x.size();
  std::vector<Tensor> coordinates;
  coordinates.reserve(n);
  std::vector<double> basis(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    basis[i] = 1.0;
    const Tensor direction = from_values(basis, x.shape(), DType::Float64);
    basis[i] = 0.0;
    coordinates.push_back(reshape(jvp(call, {x}, {direction}).second, {1}));
  }
  return concat(coordinates, 0);
}

double norm_of(const Tensor& v) { return std::sqrt(reduce_sum(square(v)).item<double>()); }

// GradBench's solver: gradient descent whose step doubles after ten accepted steps and halves
// after a rejected one. Every value is a tensor, so an outer tape or accumulator sees the whole
// descent.
Tensor argmin(const Objective& f, const Tensor& start, DiffMode mode) {
  // A tensor of its own: the start is a value, and the same handle may also stand for the
  // outer variable (saddle starts both descents from one point).
  Tensor x = Tensor(start.array<double>());
  Tensor fx = f(x);
  Tensor gx = gradient_in_mode(mode, f, x);
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
      gx = gradient_in_mode(mode, f, x);
      ++accepted;
    } else {
      eta /= 2;
      accepted = 0;
    }
  }
}

Tensor argmax(const Objective& f, const Tensor& start, DiffMode mode) {
  return argmin([&f](const Tensor& x) { return negative(f(x)); }, start, mode);
}

Tensor saddle_objective(const Tensor& p, const Tensor& q) {
  return reduce_sum(square(p)) - reduce_sum(square(q));
}

std::vector<double> saddle_point(const Tensor& start, DiffMode outer, DiffMode inner) {
  const Objective max_over_q = [&start, inner](const Tensor& p) {
    return saddle_max_over_q(p, start, inner);
  };
  const Tensor p_star = argmin(max_over_q, start, outer);
  const Tensor q_star =
      argmax([&p_star](const Tensor& q) { return saddle_objective(p_star, q); }, start, inner);
  std::vector<double> out = to_vector(p_star);
  const auto q_values = to_vector(q_star);
  out.insert(out.end(), q_values.begin(), q_values.end());
  return out;
}

// GradBench's mode names: the outer letter, then the inner one.
std::pair<DiffMode, DiffMode> modes_named(const std::string& name) {
  const auto mode = [](char letter) {
    return letter == 'f' ? DiffMode::Forward : DiffMode::Reverse;
  };
  return {mode(name[0]), mode(name[1])};
}

}  // namespace

Tensor gradient_in_mode(DiffMode mode, const std::function<Tensor(const Tensor&)>& f,
                        const Tensor& x) {
  return mode == DiffMode::Forward ? forward_gradient(f, x) : reverse_gradient(f, x);
}

Tensor saddle_max_over_q(const Tensor& p, const Tensor& start, DiffMode inner) {
  // The max over q of f(p, q), itself found by the solver: a derivative in p goes through the
  // inner descent.
  const Objective objective = [&p](const Tensor& q) { return saddle_objective(p, q); };
  return objective(argmax(objective, start, inner));
}

Tensor particle_final_x_squared(const Tensor& w, DiffMode inner) {
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
    const Tensor acceleration = negative(gradient_in_mode(inner, potential, x));
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

EvalFunctions saddle_functions() {
  EvalFunctions functions;
  for (const std::string name : {"rr", "ff", "fr", "rf"}) {
    const auto [outer, inner] = modes_named(name);
    functions[name] =
        make_function([](const json& input) { return vector_from_json(input["start"]); },
                      [outer = outer, inner = inner](const Tensor& start) -> Output {
                        const auto result = saddle_point(start, outer, inner);
                        // C++ numbers, not tensors (its loops read values).
                        return finish_output({}, [result](const std::vector<Tensor>&) -> Output {
                          return [result] { return json(result); };
                        });
                      });
  }
  return functions;
}

EvalFunctions particle_functions() {
  EvalFunctions functions;
  for (const std::string name : {"rr", "ff", "fr", "rf"}) {
    const auto [outer, inner] = modes_named(name);
    functions[name] =
        make_function([](const json& input) { return constant({input["w"].get<double>()}); },
                      [outer = outer, inner = inner](const Tensor& w0) -> Output {
                        const Objective landing = [inner](const Tensor& w) {
                          return particle_final_x_squared(w, inner);
                        };
                        return finish_output({argmin(landing, w0, outer)},
                                             [](const std::vector<Tensor>& t) -> Output {
                                               return [w = t[0]] { return json(to_vector(w)[0]); };
                                             });
                      });
  }
  return functions;
}

}  // namespace tapegrad::gradbench
