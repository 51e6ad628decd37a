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
// f(y)_0 = x_0, f(y)_i = x_i y_{i-1}: x times y shifted down by one with a leading 1.
Tensor ode_rate(const Tensor& x, const Tensor& y, const Tensor& one) {
  const auto n = static_cast<std::int64_t>(y.size());
  return x * concat({one, slice(y, {0}, {n - 1})}, 0);
}
}  // namespace

Tensor ode_primal(const Tensor& x, std::size_t steps) {
  const double h = 2.0 / static_cast<double>(steps);
  const Tensor one = ones({1});
  Tensor y = zeros({x.size()});
  for (std::size_t step = 0; step < steps; ++step) {
    const Tensor k1 = ode_rate(x, y, one);
    const Tensor k2 = ode_rate(x, y + (h / 2) * k1, one);
    const Tensor k3 = ode_rate(x, y + (h / 2) * k2, one);
    const Tensor k4 = ode_rate(x, y + h * k3, one);
    y = y + (h / 6) * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
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
