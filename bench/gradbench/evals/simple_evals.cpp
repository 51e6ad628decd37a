// hello, llsq, lse and ode: one array expression each, differentiated by one tape.
#include <cmath>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

namespace {

// Runs `f` under a tape watching `x` and returns d f / d x.
Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.gradient(y, x);
}

}  // namespace

EvalFunctions hello_functions() {
  const auto parse = [](const json& input) { return constant(input.get<double>()); };
  return {
      {"square", make_function(parse, [](const Tensor& x) { return number_output(x * x); })},
      {"double", make_function(parse,
                               [](const Tensor& x) {
                                 return number_output(
                                     gradient_of([](const Tensor& v) { return v * v; }, x));
                               })},
  };
}

Tensor llsq_primal(const Tensor& x, std::size_t n) {
  const std::size_t m = x.size();
  std::vector<double> t(n), s(n);
  for (std::size_t i = 0; i < n; ++i) {
    t[i] = -1.0 + static_cast<double>(i) * 2.0 / (static_cast<double>(n) - 1.0);
    s[i] = static_cast<double>((0.0 < t[i]) - (t[i] < 0.0));
  }
  // The Vandermonde matrix t_i^j, [n, m]: the exclusive running product of m copies of each
  // t_i (1, t, t², ...), n·m multiplications where a broadcast pow made n·m std::pow calls;
  // t^j is then within j/2 ulps of the correctly rounded power (tested against the pow form).
  const Tensor vandermonde = cumprod(tile(from_values(t, {n, 1}, DType::Float64), {1, m}), 1, true);
  const Tensor residual =
      from_values(s, {n, 1}, DType::Float64) - matmul(vandermonde, reshape(x, {-1, 1}));
  return 0.5 * reduce_sum(square(residual));
}

EvalFunctions llsq_functions() {
  const auto parse = [](const json& input) {
    return std::make_pair(vector_from_json(input["x"]), input["n"].get<std::size_t>());
  };
  return {
      {"primal",
       make_function(
           parse, [](const auto& in) { return number_output(llsq_primal(in.first, in.second)); })},
      {"gradient", make_function(parse,
                                 [](const auto& in) {
                                   const std::size_t n = in.second;
                                   return list_output(gradient_of(
                                       [n](const Tensor& v) { return llsq_primal(v, n); },
                                       in.first));
                                 })},
  };
}

Tensor lse_primal(const Tensor& x) {
  const Tensor a = reduce_max(x);
  return log(reduce_sum(exp(x - a))) + a;
}

EvalFunctions lse_functions() {
  const auto parse = [](const json& input) { return vector_from_json(input["x"]); };
  return {
      {"primal",
       make_function(parse, [](const Tensor& x) { return number_output(lse_primal(x)); })},
      {"gradient",
       make_function(parse,
                     [](const Tensor& x) { return list_output(gradient_of(lse_primal, x)); })},
  };
}

namespace {
// y shifted down by one with a leading 1: f(y) = x * shifted(y) is the ODE's rate.
Tensor shifted(const Tensor& y, const Tensor& one) {
  const auto n = static_cast<std::int64_t>(y.size());
  return concat({one, slice(y, {0}, {n - 1})}, 0);
}
}  // namespace

// RK4 with the rates k_i = x * s_i kept as the shifted states s_i: x scaled by h/2, h and h/6
// once, so that a stage is one product and one sum, and the step
// y + h/6 (k1 + 2 k2 + 2 k3 + k4) is y + (h/6) x ((s1 + s4) + 2 (s2 + s3)). Each op writes an
// n-element tensor the backward reads again, and at n = 10^5 they are what the time is.
Tensor ode_primal(const Tensor& x, std::size_t steps) {
  const double h = 2.0 / static_cast<double>(steps);
  const Tensor one = ones({1});
  const Tensor half_step_x = (h / 2) * x, step_x = h * x, sixth_step_x = (h / 6) * x;
  Tensor y = zeros({x.size()});
  for (std::size_t step = 0; step < steps; ++step) {
    const Tensor s1 = shifted(y, one);
    const Tensor s2 = shifted(y + half_step_x * s1, one);
    const Tensor s3 = shifted(y + half_step_x * s2, one);
    const Tensor s4 = shifted(y + step_x * s3, one);
    y = y + sixth_step_x * ((s1 + s4) + 2.0 * (s2 + s3));
  }
  return y;
}

EvalFunctions ode_functions() {
  const auto parse = [](const json& input) {
    return std::make_pair(vector_from_json(input["x"]), input["s"].get<std::size_t>());
  };
  return {
      {"primal",
       make_function(parse,
                     [](const auto& in) { return list_output(ode_primal(in.first, in.second)); })},
      {"gradient", make_function(parse,
                                 [](const auto& in) {
                                   const std::size_t s = in.second;
                                   return list_output(gradient_of(
                                       [s](const Tensor& v) {
                                         const Tensor y = ode_primal(v, s);
                                         return slice(y, {static_cast<std::int64_t>(y.size()) - 1},
                                                      {1});
                                       },
                                       in.first));
                                 })},
  };
}

}  // namespace tapegrad::gradbench
