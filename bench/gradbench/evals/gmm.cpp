// gmm: ADBench's Gaussian mixture log-posterior, on whole arrays: one batched matmul for every
// Q_k x_i, less Q_k μ_k, logsumexp over the components.
#include <cmath>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

namespace {

// log Γ_d(a), the multivariate log-gamma function: a constant of the prior.
double log_multivariate_gamma(double a, int d) {
  double out = 0.25 * d * (d - 1) * std::log(M_PI);
  for (int j = 1; j <= d; ++j) out += std::lgamma(a + 0.5 * (1 - j));
  return out;
}

// For Q[row][column] (row-major d×d), the position + 1 of its entry in the padded l row
// [0, l_0, l_1, ...]: 0 (the padding zero) on and above the diagonal. l fills Q's strict
// lower triangle column by column.
Tensor lower_triangle_positions(std::size_t d) {
  std::vector<double> positions(d * d, 0.0);
  std::size_t next = 1;
  for (std::size_t column = 0; column < d; ++column)
    for (std::size_t row = column + 1; row < d; ++row)
      positions[row * d + column] = static_cast<double>(next++);
  return cast(from_values(positions, {d * d}, DType::Float64), DType::Int64);
}

Tensor identity_matrix(std::size_t d) {
  std::vector<double> values(d * d, 0.0);
  for (std::size_t i = 0; i < d; ++i) values[i * d + i] = 1.0;
  return from_values(values, {d, d}, DType::Float64);
}

}  // namespace

Tensor gmm_objective(const GmmParameters& p, const GmmData& data) {
  const std::size_t k = p.alpha.size();
  const std::size_t n = data.x.shape()[0];
  const std::size_t d = data.x.shape()[1];
  const auto k64 = static_cast<std::int64_t>(k);
  const auto d64 = static_cast<std::int64_t>(d);

  // Q_k = diag(exp q_k) + strict lower triangle from l_k: [k, d, d].
  const Tensor diagonal = exp(p.q);                         // [k, d]
  const Tensor padded_l = concat({zeros({k, 1}), p.l}, 1);  // [k, 1 + L]
  const Tensor lower = reshape(gather(padded_l, lower_triangle_positions(d), 1), {k64, d64, d64});
  const Tensor q_matrices = expand_dims(diagonal, 2) * identity_matrix(d) + lower;

  // β_ki = α_k + Σ_j q_kj − ½ ‖Q_k (x_i − μ_k)‖², with Q_k (x_i − μ_k) = Q_k x_i − Q_k μ_k: the
  // centred data would be one more [k, n, d] array (and its gradient another).
  const Tensor transformed_x = matmul(expand_dims(data.x, 0), q_matrices, false, true);  // [k,n,d]
  const Tensor transformed_mu = matmul(expand_dims(p.mu, 1), q_matrices, false, true);   // [k,1,d]
  const Tensor transformed = transformed_x - transformed_mu;                             // [k,n,d]
  const Tensor sum_q = reduce_sum(p.q, {1});                                             // [k]
  const Tensor beta = expand_dims(p.alpha + sum_q, 1) - 0.5 * reduce_sum(square(transformed), {2});

  const double nd = static_cast<double>(n) * static_cast<double>(d);
  const double constant_term = -nd * 0.5 * std::log(2 * M_PI);
  const Tensor data_term =
      reduce_sum(reduce_logsumexp(beta, {0})) - static_cast<double>(n) * reduce_logsumexp(p.alpha);

  // The Wishart prior.
  const int wishart_n = static_cast<int>(d) + data.m + 1;
  const double prior_constant =
      wishart_n * static_cast<double>(d) * (std::log(data.gamma) - 0.5 * std::log(2.0)) -
      log_multivariate_gamma(0.5 * wishart_n, static_cast<int>(d));
  const Tensor frobenius = reduce_sum(square(diagonal)) + reduce_sum(square(p.l));
  const Tensor prior =
      static_cast<double>(k) * prior_constant -
      (0.5 * data.gamma * data.gamma * frobenius - static_cast<double>(data.m) * reduce_sum(sum_q));
  return constant_term + data_term + prior;
}

EvalFunctions gmm_functions() {
  const auto parse = [](const json& input) {
    GmmParameters p{vector_from_json(input["alpha"]), matrix_from_json(input["mu"]),
                    matrix_from_json(input["q"]), matrix_from_json(input["l"])};
    // d = 1 has an empty l: keep its shape [k, 0].
    if (p.l.rank() != 2) p.l = zeros({p.alpha.size(), 0});
    GmmData data{matrix_from_json(input["x"]), input["gamma"].get<double>(), input["m"].get<int>()};
    return std::make_pair(p, data);
  };
  return {
      {"objective", make_function(parse,
                                  [](const auto& in) {
                                    return number_output(gmm_objective(in.first, in.second));
                                  })},
      {"jacobian", make_function(parse,
                                 [](const auto& in) -> Output {
                                   const GmmParameters& p = in.first;
                                   GradientTape tape;
                                   tape.watch({p.alpha, p.mu, p.q, p.l});
                                   const Tensor value = gmm_objective(p, in.second);
                                   return finish_output(
                                       tape.gradient(value, {p.alpha, p.mu, p.q, p.l}),
                                       [](const std::vector<Tensor>& g) -> Output {
                                         return [g] {
                                           return json{{"alpha", to_json(g[0])},
                                                       {"mu", to_json(g[1])},
                                                       {"q", to_json(g[2])},
                                                       {"l", to_json(g[3])}};
                                         };
                                       });
                                 })},
  };
}

}  // namespace tapegrad::gradbench
