// The GradBench tool's evals on their smallest workloads, without GradBench itself: every
// derivative against central differences (GradBench lets NaN through, and ode's reference
// gradient underflows to zeros, so the tool's answers are checked here), every primal
// against a plain loop written from the eval's formula.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "captured_stderr.hpp"
#include "evals/evals.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::gradbench;
using tapegrad::testing::random_tensor;
using tapegrad::testing::require_gradient_matches;
using tapegrad::testing::values;

namespace {

// Sets the tool's variant for the scope.
class FunctionVariant {
 public:
  explicit FunctionVariant(bool on) : previous_(function_variant()) { set_function_variant(on); }
  ~FunctionVariant() { set_function_variant(previous_); }
  FunctionVariant(const FunctionVariant&) = delete;
  FunctionVariant& operator=(const FunctionVariant&) = delete;

 private:
  bool previous_;
};

// The eager tool's answer, checked equal to the function variant's after `function_calls`
// calls (a trace, then replays: a Function replays the eager kernels, so the same JSON to the
// last bit). The variant's trace must replay: no eval function of it may fall back to eager
// calls, except saddle's and particle's, which pass fewer calls: their solvers' loops read
// values, so their Functions run eagerly at every call, and each call costs seconds.
json run(const std::string& eval, const std::string& function, const json& input,
         int function_calls = 2) {
  const Prepare& prepare = all_evals().at(eval).at(function);
  json eager;
  {
    const FunctionVariant variant(false);
    eager = run_function(prepare, input).output;
  }
  if (function_calls == 0) return eager;
  const FunctionVariant variant(true);
  Output output;
  std::string warnings;
  {
    const tapegrad::testing::CapturedStderr capture;
    const Compute compute = prepare(input);
    for (int call = 0; call < function_calls; ++call) output = compute();
    warnings = capture.text();
  }
  if (eval != "saddle" && eval != "particle") {
    INFO(eval << " " << function << ": the function variant's warnings: " << warnings);
    CHECK(warnings.find("cannot be replayed") == std::string::npos);
  }
  INFO(eval << " " << function << ": the function variant's answer differs from the eager tool's");
  REQUIRE(output() == eager);
  return eager;
}

std::vector<std::vector<double>> rows_of(const Tensor& t) {
  std::vector<std::vector<double>> rows(t.shape()[0]);
  const auto v = values(t);
  const std::size_t columns = t.shape()[1];
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i].assign(v.begin() + static_cast<std::ptrdiff_t>(i * columns),
                   v.begin() + static_cast<std::ptrdiff_t>((i + 1) * columns));
  return rows;
}

}  // namespace

TEST_CASE("gradbench hello: x squared and 2x through the tool's table") {
  CHECK(run("hello", "square", json(3.0)).get<double>() == 9.0);
  CHECK(run("hello", "double", json(3.0)).get<double>() == 6.0);
}

namespace {
// llsq with the Vandermonde matrix by a broadcast pow (correctly rounded powers): the reference
// for the eval's cumprod form.
Tensor llsq_by_pow(const Tensor& x, std::size_t n) {
  const std::size_t m = x.size();
  std::vector<double> t(n), s(n), powers(m);
  for (std::size_t i = 0; i < n; ++i) {
    t[i] = -1.0 + static_cast<double>(i) * 2.0 / (static_cast<double>(n) - 1.0);
    s[i] = static_cast<double>((0.0 < t[i]) - (t[i] < 0.0));
  }
  for (std::size_t j = 0; j < m; ++j) powers[j] = static_cast<double>(j);
  const Tensor vandermonde =
      pow(from_values(t, {n, 1}, DType::Float64), from_values(powers, {1, m}, DType::Float64));
  const Tensor residual =
      from_values(s, {n, 1}, DType::Float64) - matmul(vandermonde, reshape(x, {-1, 1}));
  return 0.5 * reduce_sum(square(residual));
}
}  // namespace

TEST_CASE(
    "gradbench llsq: the cumprod Vandermonde form agrees with the pow form at GradBench's m = "
    "128") {
  const std::size_t n = 1024;
  const Tensor x = random_tensor({128}, 12, 0.0, 1.0);  // GradBench's x: uniform in [0, 1)
  const double expected = llsq_by_pow(x, n).item<double>();
  CHECK(llsq_primal(x, n).item<double>() == Approx(expected).epsilon(1e-13));
  GradientTape by_pow, by_cumprod;
  by_pow.watch(x);
  by_cumprod.watch(x);
  const auto reference = values(by_pow.gradient(llsq_by_pow(x, n), x));
  const auto gradient = values(by_cumprod.gradient(llsq_primal(x, n), x));
  REQUIRE(gradient.size() == 128);
  for (std::size_t j = 0; j < 128; ++j) CHECK(gradient[j] == Approx(reference[j]).epsilon(1e-13));
}

TEST_CASE("gradbench llsq: primal against the sum, gradient against central differences") {
  const std::size_t n = 16;
  const Tensor x = random_tensor({8}, 11);
  const auto xs = values(x);
  double expected = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double t = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
    double inner = (t > 0) - (t < 0), power = 1;
    for (double xj : xs) {
      inner -= xj * power;
      power *= t;
    }
    expected += inner * inner / 2;
  }
  CHECK(llsq_primal(x, n).item<double>() == Approx(expected).epsilon(1e-12));
  require_gradient_matches([=](const std::vector<Tensor>& a) { return llsq_primal(a[0], n); }, {x});
  const json gradient =
      run("llsq", "gradient", {{"x", values(x)}, {"n", n}, {"min_runs", 1}, {"min_seconds", 0}});
  CHECK(gradient.size() == 8);
}

TEST_CASE("gradbench lse: primal is log-sum-exp, gradient is softmax") {
  const Tensor x = random_tensor({10}, 12, -3, 3);
  const auto xs = values(x);
  double sum = 0;
  for (double v : xs) sum += std::exp(v);
  CHECK(lse_primal(x).item<double>() == Approx(std::log(sum)).epsilon(1e-12));
  const json gradient = run("lse", "gradient", {{"x", xs}, {"min_runs", 1}, {"min_seconds", 0}});
  for (std::size_t i = 0; i < xs.size(); ++i)
    CHECK(gradient[i].get<double>() == Approx(std::exp(xs[i]) / sum).epsilon(1e-12));
}

TEST_CASE(
    "gradbench ode: RK4 primal against a loop, gradient of the last value against central "
    "differences") {
  const Tensor x = random_tensor({5}, 13, 0.5, 1.5);
  const std::size_t steps = 3;
  const auto xs = values(x);
  // The same RK4 integration on plain doubles.
  std::vector<double> y(5, 0.0);
  const double h = 2.0 / steps;
  const auto rate = [&](const std::vector<double>& v) {
    std::vector<double> z(5);
    z[0] = xs[0];
    for (std::size_t i = 1; i < 5; ++i) z[i] = xs[i] * v[i - 1];
    return z;
  };
  for (std::size_t s = 0; s < steps; ++s) {
    std::vector<double> tmp(5);
    const auto k1 = rate(y);
    for (std::size_t i = 0; i < 5; ++i) tmp[i] = y[i] + h * k1[i] / 2;
    const auto k2 = rate(tmp);
    for (std::size_t i = 0; i < 5; ++i) tmp[i] = y[i] + h * k2[i] / 2;
    const auto k3 = rate(tmp);
    for (std::size_t i = 0; i < 5; ++i) tmp[i] = y[i] + h * k3[i];
    const auto k4 = rate(tmp);
    for (std::size_t i = 0; i < 5; ++i) y[i] += h * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]) / 6;
  }
  tapegrad::testing::require_close(ode_primal(x, steps), {5}, y, 1e-12);
  require_gradient_matches(
      [=](const std::vector<Tensor>& a) { return slice(ode_primal(a[0], steps), {4}, {1}); }, {x});
  const json gradient =
      run("ode", "gradient", {{"x", xs}, {"s", steps}, {"min_runs", 1}, {"min_seconds", 0}});
  const GradientCheck check = check_gradient(
      [=](const std::vector<Tensor>& a) { return slice(ode_primal(a[0], steps), {4}, {1}); }, {x});
  const auto numerical = values(check.numerical);
  for (std::size_t i = 0; i < 5; ++i)
    CHECK(gradient[i].get<double>() == Approx(numerical[i]).margin(1e-6));
}

TEST_CASE(
    "gradbench kmeans: cost gradient against central differences, dir is the Newton step to the "
    "cluster mean") {
  const Tensor points = random_tensor({20, 3}, 14);
  const Tensor centroids = slice(points, {16, 0}, {4, 3});  // the last k points, as GradBench does
  require_gradient_matches([&](const std::vector<Tensor>& a) { return kmeans_cost(points, a[0]); },
                           {centroids});
  // Newton's step for a sum of squared distances: −(cluster mean − centroid).
  const auto p = values(points), c = values(centroids);
  std::vector<double> sums(12, 0.0), counts(4, 0.0);
  for (std::size_t i = 0; i < 20; ++i) {
    std::size_t best = 0;
    double best_distance = INFINITY;
    for (std::size_t j = 0; j < 4; ++j) {
      double d = 0;
      for (std::size_t l = 0; l < 3; ++l)
        d += (p[i * 3 + l] - c[j * 3 + l]) * (p[i * 3 + l] - c[j * 3 + l]);
      if (d < best_distance) best_distance = d, best = j;
    }
    counts[best] += 1;
    for (std::size_t l = 0; l < 3; ++l) sums[best * 3 + l] += p[i * 3 + l];
  }
  std::vector<double> expected(12);
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t l = 0; l < 3; ++l)
      expected[j * 3 + l] = -(sums[j * 3 + l] / counts[j] - c[j * 3 + l]);
  tapegrad::testing::require_close(kmeans_dir(points, centroids), {4, 3}, expected, 1e-9);
  const json dir = run("kmeans", "dir",
                       {{"points", rows_of(points)},
                        {"centroids", rows_of(centroids)},
                        {"min_runs", 1},
                        {"min_seconds", 0}});
  CHECK(dir[3][2].get<double>() == Approx(expected[11]).margin(1e-9));
}

namespace {
// kmeans as Σ_i min_j ‖p_i − c_j‖² through reduce_min on the tape (the eval's earlier form):
// the reference for the argmin + gather form.
Tensor kmeans_cost_by_min(const Tensor& points, const Tensor& centroids) {
  const Tensor point_norms = reduce_sum(square(points), {1}, true);
  const Tensor centroid_norms = reduce_sum(square(centroids), {1});
  return reduce_sum(
      reduce_min(point_norms + centroid_norms - matmul(points, 2.0 * centroids, false, true), {1}));
}
}  // namespace

TEST_CASE("gradbench kmeans: argmin + gather gives the reduce_min form's cost, gradient and dir") {
  const Tensor points = random_tensor({300, 8}, 15);
  const Tensor centroids =
      slice(points, {270, 0}, {30, 8});  // the last k points, as GradBench does
  CHECK(kmeans_cost(points, centroids).item<double>() ==
        Approx(kmeans_cost_by_min(points, centroids).item<double>()).epsilon(1e-12));
  GradientTape outer;
  outer.watch(centroids);
  Tensor gradient;
  {
    GradientTape inner;
    inner.watch(centroids);
    gradient = inner.gradient(kmeans_cost_by_min(points, centroids), centroids);
  }
  const Tensor hessian_diagonal = outer.gradient(reduce_sum(gradient), centroids);
  GradientTape tape;
  tape.watch(centroids);
  tapegrad::testing::require_close(tape.gradient(kmeans_cost(points, centroids), centroids),
                                   {30, 8}, values(gradient), 1e-12);
  tapegrad::testing::require_close(kmeans_dir(points, centroids), {30, 8},
                                   values(gradient / hessian_diagonal), 1e-12);
}

namespace {
// ADBench's GMM objective on plain doubles, from its formula.
double gmm_reference(int d, int k, int n, const std::vector<double>& alpha,
                     const std::vector<double>& mu, const std::vector<double>& q,
                     const std::vector<double>& l, const std::vector<double>& x, double gamma,
                     int m) {
  const auto logsumexp = [](const std::vector<double>& v) {
    double mx = v[0];
    for (double e : v) mx = std::max(mx, e);
    double s = 0;
    for (double e : v) s += std::exp(e - mx);
    return std::log(s) + mx;
  };
  const int lsize = d * (d - 1) / 2;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<double> terms(k);
    for (int c = 0; c < k; ++c) {
      std::vector<double> centred(d), transformed(d, 0.0);
      double sum_q = 0;
      for (int j = 0; j < d; ++j) {
        centred[j] = x[i * d + j] - mu[c * d + j];
        transformed[j] = std::exp(q[c * d + j]) * centred[j];
        sum_q += q[c * d + j];
      }
      int position = 0;
      for (int col = 0; col < d; ++col)
        for (int row = col + 1; row < d; ++row)
          transformed[row] += l[c * lsize + position++] * centred[col];
      double norm = 0;
      for (double t : transformed) norm += t * t;
      terms[c] = alpha[c] + sum_q - 0.5 * norm;
    }
    total += logsumexp(terms);
  }
  double value = -n * d * 0.5 * std::log(2 * M_PI) + total - n * logsumexp(alpha);
  const int wn = d + m + 1;
  double log_gamma_d = 0.25 * d * (d - 1) * std::log(M_PI);
  for (int j = 1; j <= d; ++j) log_gamma_d += std::lgamma(0.5 * wn + 0.5 * (1 - j));
  const double constant = wn * d * (std::log(gamma) - 0.5 * std::log(2.0)) - log_gamma_d;
  double prior = 0;
  for (int c = 0; c < k; ++c) {
    double frobenius = 0, sum_q = 0;
    for (int j = 0; j < d; ++j) frobenius += std::exp(2 * q[c * d + j]), sum_q += q[c * d + j];
    for (int j = 0; j < lsize; ++j) frobenius += l[c * lsize + j] * l[c * lsize + j];
    prior += 0.5 * gamma * gamma * frobenius - m * sum_q;
  }
  return value - prior + k * constant;
}
}  // namespace

TEST_CASE(
    "gradbench gmm: objective against a loop, every parameter's gradient against central "
    "differences") {
  const int d = 3, k = 2, n = 5, m = 1;
  const double gamma = 1.5;
  GmmParameters p{random_tensor({2}, 21), random_tensor({2, 3}, 22),
                  random_tensor({2, 3}, 23, -0.5, 0.5), random_tensor({2, 3}, 24)};
  const GmmData data{random_tensor({5, 3}, 25), gamma, m};
  CHECK(gmm_objective(p, data).item<double>() ==
        Approx(gmm_reference(d, k, n, values(p.alpha), values(p.mu), values(p.q), values(p.l),
                             values(data.x), gamma, m))
            .epsilon(1e-12));
  const Fn f = [&data](const std::vector<Tensor>& a) {
    return gmm_objective(GmmParameters{a[0], a[1], a[2], a[3]}, data);
  };
  for (std::size_t arg = 0; arg < 4; ++arg)
    require_gradient_matches(f, {p.alpha, p.mu, p.q, p.l}, arg);
  const json jacobian = run("gmm", "jacobian",
                            {{"d", d},
                             {"k", k},
                             {"n", n},
                             {"m", m},
                             {"gamma", gamma},
                             {"x", rows_of(data.x)},
                             {"alpha", values(p.alpha)},
                             {"mu", rows_of(p.mu)},
                             {"q", rows_of(p.q)},
                             {"l", rows_of(p.l)},
                             {"min_runs", 1},
                             {"min_seconds", 0}});
  CHECK(jacobian["l"].size() == 2);
  CHECK(jacobian["l"][1].size() == 3);
}

TEST_CASE("gradbench lstm: objective against a loop, gradient against central differences") {
  const std::size_t layers = 2, bits = 3, chars = 4;
  const Tensor main_params = random_tensor({2 * layers, 4 * bits}, 31);
  const Tensor extra_params = random_tensor({3, bits}, 32);
  const LstmData data{random_tensor({2 * layers, bits}, 33),
                      random_tensor({chars, bits}, 34, 0, 1)};
  // The model on plain doubles.
  const auto w = values(main_params), e = values(extra_params), s0 = values(data.state),
             seq = values(data.sequence);
  std::vector<double> state = s0;
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double total = 0;
  for (std::size_t t = 0; t + 1 < chars; ++t) {
    std::vector<double> input(bits);
    for (std::size_t i = 0; i < bits; ++i) input[i] = seq[t * bits + i] * e[i];
    for (std::size_t layer = 0; layer < layers; ++layer) {
      const double* weight = &w[2 * layer * 4 * bits];
      const double* bias = &w[(2 * layer + 1) * 4 * bits];
      double* hidden = &state[2 * layer * bits];
      double* cell = &state[(2 * layer + 1) * bits];
      for (std::size_t i = 0; i < bits; ++i) {
        const double f = sig(input[i] * weight[i] + bias[i]);
        const double ig = sig(hidden[i] * weight[bits + i] + bias[bits + i]);
        const double o = sig(input[i] * weight[2 * bits + i] + bias[2 * bits + i]);
        const double g = std::tanh(hidden[i] * weight[3 * bits + i] + bias[3 * bits + i]);
        cell[i] = cell[i] * f + ig * g;
        hidden[i] = o * std::tanh(cell[i]);
      }
      input.assign(hidden, hidden + bits);
    }
    std::vector<double> y(bits);
    double sum = 0;
    for (std::size_t i = 0; i < bits; ++i)
      y[i] = input[i] * e[bits + i] + e[2 * bits + i], sum += std::exp(y[i]);
    const double lse = std::log(sum + 2);
    for (std::size_t i = 0; i < bits; ++i) total += seq[(t + 1) * bits + i] * (y[i] - lse);
  }
  const double expected = -total / static_cast<double>((chars - 1) * bits);
  CHECK(lstm_objective(main_params, extra_params, data).item<double>() ==
        Approx(expected).epsilon(1e-12));
  const Fn f = [&data](const std::vector<Tensor>& a) { return lstm_objective(a[0], a[1], data); };
  require_gradient_matches(f, {main_params, extra_params}, 0);
  require_gradient_matches(f, {main_params, extra_params}, 1);
  const json jacobian = run("lstm", "jacobian",
                            {{"main_params", rows_of(main_params)},
                             {"extra_params", rows_of(extra_params)},
                             {"state", rows_of(data.state)},
                             {"sequence", rows_of(data.sequence)},
                             {"min_runs", 1},
                             {"min_seconds", 0}});
  CHECK(jacobian.size() == 8 * layers * bits + 3 * bits);

  // GradBench's shape of model over 200 characters, where the function variant's plan writes
  // each layer's hidden states into their join's place in its arena and reads them again in
  // the gradient after the join is dead (a plan that gave the join's bytes to other values at
  // its release answered wrongly here, not on 4 characters). run() checks the replay against
  // the eager answer.
  const std::size_t long_bits = 7, long_chars = 200;
  const json long_jacobian =
      run("lstm", "jacobian",
          {{"main_params", rows_of(random_tensor({2 * layers, 4 * long_bits}, 41))},
           {"extra_params", rows_of(random_tensor({3, long_bits}, 42))},
           {"state", rows_of(random_tensor({2 * layers, long_bits}, 43))},
           {"sequence", rows_of(random_tensor({long_chars, long_bits}, 44, 0, 1))},
           {"min_runs", 1},
           {"min_seconds", 0}},
          3);
  CHECK(long_jacobian.size() == 8 * layers * long_bits + 3 * long_bits);
}

TEST_CASE("gradbench saddle: the saddle point of p² − q² from (1, 1) in all four mode pairs") {
  const json reference =
      run("saddle", "rr", {{"start", {1.0, 1.0}}, {"min_runs", 1}, {"min_seconds", 0}}, 1);
  REQUIRE(reference.size() == 4);
  // GradBench's reference: every coordinate ends at 8.2463e-06 (the solver's stopping point).
  for (const auto& v : reference) CHECK(v.get<double>() == Approx(8.2463e-06).epsilon(1e-3));
  for (const std::string mode : {"ff", "fr", "rf"}) {
    INFO("mode " << mode);
    const json out =
        run("saddle", mode, {{"start", {1.0, 1.0}}, {"min_runs", 1}, {"min_seconds", 0}}, 0);
    REQUIRE(out.size() == 4);
    for (std::size_t i = 0; i < 4; ++i)
      CHECK(out[i].get<double>() == Approx(reference[i].get<double>()).epsilon(1e-9));
  }
}

TEST_CASE(
    "gradbench saddle: the nested gradient through the inner descent, each mode pair against "
    "central differences") {
  // max_q (p² − q²) is p² minus the inner solver's small leftover; its gradient in p is 2p.
  const Tensor start = constant({1.0, 1.0});
  const Tensor p = constant({0.7, -0.4});
  for (const auto outer : {DiffMode::Reverse, DiffMode::Forward}) {
    for (const auto inner : {DiffMode::Reverse, DiffMode::Forward}) {
      INFO("outer forward " << (outer == DiffMode::Forward) << ", inner forward "
                            << (inner == DiffMode::Forward));
      const auto f = [&start, inner](const Tensor& x) {
        return saddle_max_over_q(x, start, inner);
      };
      const auto g = values(gradient_in_mode(outer, f, p));
      const auto centre = values(p);
      for (std::size_t i = 0; i < 2; ++i) {
        auto plus = centre, minus = centre;
        plus[i] += 1e-6, minus[i] -= 1e-6;
        const double numerical = (f(from_values(plus, {2}, DType::Float64)).item<double>() -
                                  f(from_values(minus, {2}, DType::Float64)).item<double>()) /
                                 2e-6;
        CHECK(g[i] == Approx(numerical).margin(1e-6));
        CHECK(g[i] == Approx(2 * centre[i]).margin(1e-6));
      }
    }
  }
}

TEST_CASE(
    "gradbench particle: the charge position that makes the particle land at x = 0, all four mode "
    "pairs") {
  for (const std::string mode : {"rr", "ff", "fr", "rf"}) {
    INFO("mode " << mode);
    const json out = run("particle", mode, {{"w", 0.0}, {"min_runs", 1}, {"min_seconds", 0}},
                         mode == "rr" ? 1 : 0);
    CHECK(out.get<double>() == Approx(0.2071918746486116).epsilon(1e-9));
  }
}

TEST_CASE(
    "gradbench particle: d(landing x²)/dw through the inner gradients, each mode pair against "
    "central differences") {
  const Tensor w = constant({0.1});
  for (const auto inner : {DiffMode::Reverse, DiffMode::Forward}) {
    const auto f = [inner](const Tensor& x) { return particle_final_x_squared(x, inner); };
    const double numerical =
        (f(constant({0.1 + 1e-6})).item<double>() - f(constant({0.1 - 1e-6})).item<double>()) /
        2e-6;
    REQUIRE(std::abs(numerical) > 1e-2);  // a slope the check can see
    for (const auto outer : {DiffMode::Reverse, DiffMode::Forward}) {
      INFO("outer forward " << (outer == DiffMode::Forward) << ", inner forward "
                            << (inner == DiffMode::Forward));
      CHECK(values(gradient_in_mode(outer, f, w))[0] == Approx(numerical).epsilon(1e-5));
    }
  }
}

TEST_CASE(
    "gradbench det: expansion by minors equals the LU determinant, gradient is the cofactor "
    "matrix") {
  for (std::size_t ell : {1u, 2u, 3u, 5u}) {
    INFO("ell = " << ell);
    const Tensor a = random_tensor({ell, ell}, static_cast<unsigned>(40 + ell));
    const DeterminantPlan plan(ell);
    CHECK(det_by_minors(a, plan).item<double>() ==
          Approx(matrix_determinant(a).item<double>()).epsilon(1e-12));
    require_gradient_matches(
        [&plan](const std::vector<Tensor>& args) { return det_by_minors(args[0], plan); }, {a});
  }
  // d det / dA = det(A) A^{-T}.
  const Tensor a = random_tensor({4, 4}, 45);
  const json gradient =
      run("det", "gradient", {{"A", values(a)}, {"ell", 4}, {"min_runs", 1}, {"min_seconds", 0}});
  const auto cofactors = values(matrix_determinant(a) * transpose(matrix_inverse(a)));
  for (std::size_t i = 0; i < 16; ++i)
    CHECK(gradient[i].get<double>() == Approx(cofactors[i]).epsilon(1e-9));
}

namespace {
// A ba input of 2 cameras, 3 points and p observations (one camera, point and feature).
json small_ba_input(int p) {
  return {{"n", 2},
          {"m", 3},
          {"p", p},
          {"cam", {0.3, -0.2, 0.1, 0.5, -0.4, -5.0, 1.2, 0.01, -0.02, 0.05, -0.01}},
          {"x", {0.4, 0.3, 2.0}},
          {"w", 0.8},
          {"feat", {0.1, -0.2}},
          {"min_runs", 1},
          {"min_seconds", 0}};
}
}  // namespace

TEST_CASE(
    "gradbench ba: residuals against a loop, per-observation Jacobian blocks against central "
    "differences") {
  // p = 20: the CSR row pointers (3p + 1) outnumber the 31 entries GradBench compares.
  const json input = small_ba_input(20);
  const BaProblem problem(input);
  const Tensor inputs = problem.observation_inputs();
  REQUIRE(inputs.shape() == Shape{20, 15});
  // The projection on plain doubles, from the formula.
  const auto z = values(inputs);
  const auto r = values(ba_residuals(inputs, problem.features));
  for (std::size_t i = 0; i < 5; ++i) {
    const double* cam = &z[i * 15];
    const double* X = &z[i * 15 + 11];
    const double w = z[i * 15 + 14];
    double xo[3] = {X[0] - cam[3], X[1] - cam[4], X[2] - cam[5]};
    const double theta = std::sqrt(cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2]);
    const double k[3] = {cam[0] / theta, cam[1] / theta, cam[2] / theta};
    const double kx[3] = {k[1] * xo[2] - k[2] * xo[1], k[2] * xo[0] - k[0] * xo[2],
                          k[0] * xo[1] - k[1] * xo[0]};
    const double dot = (k[0] * xo[0] + k[1] * xo[1] + k[2] * xo[2]) * (1 - std::cos(theta));
    double xc[3];
    for (int j = 0; j < 3; ++j)
      xc[j] = xo[j] * std::cos(theta) + kx[j] * std::sin(theta) + k[j] * dot;
    double proj[2] = {xc[0] / xc[2], xc[1] / xc[2]};
    const double rsq = proj[0] * proj[0] + proj[1] * proj[1];
    const double distortion = 1 + cam[9] * rsq + cam[10] * rsq * rsq;
    CHECK(r[2 * i] == Approx(w * (proj[0] * distortion * cam[6] + cam[7] - 0.1)).epsilon(1e-12));
    CHECK(r[2 * i + 1] ==
          Approx(w * (proj[1] * distortion * cam[6] + cam[8] + 0.2)).epsilon(1e-12));
  }
  // The batch Jacobian's blocks are the Jacobian of each observation's two residuals.
  const Tensor one = slice(inputs, {3, 0}, {1, 15});
  const Tensor features = slice(problem.features, {3, 0}, {1, 2});
  require_gradient_matches(
      [&features](const std::vector<Tensor>& a) { return ba_residuals(a[0], features); }, {one});
  GradientTape tape;
  tape.watch(inputs);
  const Tensor blocks = tape.batch_jacobian(ba_residuals(inputs, problem.features), inputs);
  const GradientCheck check = check_gradient(
      [&features](const std::vector<Tensor>& a) { return ba_residuals(a[0], features); }, {one});
  const auto expected = values(check.theoretical),
             got = values(slice(blocks, {3, 0, 0}, {1, 2, 15}));
  for (std::size_t i = 0; i < 30; ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-12));
  // The tool's objective: observation 0's two residuals (its [1, p] rows' first elements) and
  // 1 - w^2, each repeated p times.
  const json objective = run("ba", "objective", input);
  CHECK(objective["reproj_error"]["elements"][0].get<double>() == r[0]);
  CHECK(objective["reproj_error"]["elements"][1].get<double>() == r[1]);
  CHECK(objective["reproj_error"]["repeated"].get<int>() == 20);
  CHECK(objective["w_err"]["element"].get<double>() == Approx(1.0 - 0.8 * 0.8).epsilon(1e-15));
  // The tool's CSR head: rows 0, 15, ..., cols of observation 0, values of its block, −2w last.
  const json jacobian = run("ba", "jacobian", input);
  CHECK(jacobian["rows"][1].get<int>() == 15);
  REQUIRE(jacobian["rows"].size() == 31);
  CHECK(jacobian["rows"][29].get<int>() == 29 * 15);
  CHECK(jacobian["rows"][30].get<int>() == 31 * 20);
  CHECK(jacobian["cols"][11].get<int>() == 11 * 2 + 0);
  CHECK(jacobian["cols"][30].get<int>() == 11 * 2 + 3 * 3 + 19);
  CHECK(jacobian["vals"][30].get<double>() == Approx(-1.6));
  // Its first 30 values are observation 0's block, row by row, as the batch Jacobian has it.
  const auto first_block = values(slice(blocks, {0, 0, 0}, {1, 2, 15}));
  for (std::size_t k = 0; k < 30; ++k)
    CHECK(jacobian["vals"][k].get<double>() == Approx(first_block[k]).margin(1e-12));
}

TEST_CASE("gradbench ba: a zero angle-axis takes X + r x X, in one batch with nonzero ones") {
  const BaProblem problem(small_ba_input(6));
  const Tensor inputs = problem.observation_inputs();
  // Observation 2 without rotation: both branches of the rotation in one batch.
  std::vector<double> z = values(inputs);
  for (std::size_t c = 0; c < 3; ++c) z[2 * 15 + c] = 0.0;
  const Tensor mixed = from_values(z, {6, 15}, DType::Float64);
  const auto r = values(ba_residuals(mixed, problem.features));
  // Unrotated: the camera-frame point is X - C.
  const double* cam = &z[2 * 15];
  const double* X = &z[2 * 15 + 11];
  const double xc[3] = {X[0] - cam[3], X[1] - cam[4], X[2] - cam[5]};
  const double proj[2] = {xc[0] / xc[2], xc[1] / xc[2]};
  const double rsq = proj[0] * proj[0] + proj[1] * proj[1];
  const double distortion = 1 + cam[9] * rsq + cam[10] * rsq * rsq;
  CHECK(r[4] == Approx(0.8 * (proj[0] * distortion * cam[6] + cam[7] - 0.1)).epsilon(1e-12));
  CHECK(r[5] == Approx(0.8 * (proj[1] * distortion * cam[6] + cam[8] + 0.2)).epsilon(1e-12));
  // The other rows are those of the batch without a zero angle, bit for bit.
  const auto general = values(ba_residuals(inputs, problem.features));
  for (std::size_t i = 0; i < 12; ++i) {
    if (i / 2 != 2) CHECK(r[i] == general[i]);
  }
  // The zero row's block and a rotated row's against central differences.
  GradientTape tape;
  tape.watch(mixed);
  const Tensor blocks = tape.batch_jacobian(ba_residuals(mixed, problem.features), mixed);
  for (const std::int64_t row : {std::int64_t{2}, std::int64_t{3}}) {
    INFO("observation " << row);
    const Tensor one = slice(mixed, {row, 0}, {1, 15});
    const Tensor features = slice(problem.features, {row, 0}, {1, 2});
    const auto residuals_of = [&features](const std::vector<Tensor>& a) {
      return ba_residuals(a[0], features);
    };
    require_gradient_matches(residuals_of, {one});
    const GradientCheck check = check_gradient(residuals_of, {one});
    const auto expected = values(check.theoretical),
               got = values(slice(blocks, {row, 0, 0}, {1, 2, 15}));
    for (std::size_t i = 0; i < 30; ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-12));
  }
}

namespace {
// A small synthetic hand: 22 bones in a chain-like tree, 7 vertices, 4 triangles, 5 points.
json synthetic_hand(bool complicated) {
  std::mt19937 gen(77);
  std::uniform_real_distribution<double> small(-0.2, 0.2), unit(0.0, 1.0);
  const auto near_identity = [&] {
    json m = json::array();
    for (int r = 0; r < 4; ++r) {
      json row = json::array();
      for (int c = 0; c < 4; ++c)
        row.push_back(r == 3 ? (c == 3 ? 1.0 : 0.0) : (r == c ? 1.0 : 0.0) + small(gen));
      m.push_back(row);
    }
    return m;
  };
  json relatives = json::array(), inverses = json::array(), parents = json::array(),
       names = json::array();
  for (int b = 0; b < 22; ++b) {
    relatives.push_back(near_identity());
    inverses.push_back(near_identity());
    parents.push_back(b == 0 ? -1 : (b % 4 == 2 ? 1 : b - 1));
    names.push_back("bone" + std::to_string(b));
  }
  json positions = json::array(), weights = json::array();
  for (int v = 0; v < 7; ++v) {
    positions.push_back({small(gen) * 5, small(gen) * 5, 1.0 + small(gen), 1.0});
    json w = json::array();
    for (int b = 0; b < 22; ++b) w.push_back(unit(gen) / 22);
    weights.push_back(w);
  }
  json theta = json::array();
  for (int i = 0; i < 26; ++i) theta.push_back(small(gen) * 3);
  json points = json::array(), us = json::array();
  for (int i = 0; i < 5; ++i) {
    points.push_back({small(gen), small(gen), 1.0 + small(gen)});
    if (complicated) us.push_back({0.2 + unit(gen) * 0.3, 0.1 + unit(gen) * 0.3});
  }
  const json triangles = {{0, 1, 2}, {2, 3, 4}, {4, 5, 6}, {6, 0, 3}};
  const json correspondences = complicated ? json{0, 1, 2, 3, 1} : json{0, 3, 6, 2, 5};
  return {{"theta", theta},
          {"us", us},
          {"min_runs", 1},
          {"min_seconds", 0},
          {"data",
           {{"correspondences", correspondences},
            {"points", points},
            {"model",
             {{"bone_count", 22},
              {"bone_names", names},
              {"parents", parents},
              {"base_relatives", relatives},
              {"inverse_base_absolutes", inverses},
              {"base_positions", positions},
              {"weights", weights},
              {"triangles", triangles},
              {"is_mirrored", true}}}}}};
}
}  // namespace

TEST_CASE(
    "gradbench ht: the tall Jacobian (forward mode, jacobian_forward) against central "
    "differences") {
  for (bool complicated : {false, true}) {
    INFO("complicated: " << complicated);
    const json input = synthetic_hand(complicated);
    const HandModel model(input);
    const Tensor theta = vector_from_json(input["theta"]);
    const Tensor jacobian = model.jacobian(theta);
    const std::size_t columns = complicated ? 28 : 26;
    REQUIRE(jacobian.shape() == Shape{15, columns});
    const auto got = values(jacobian);
    // θ columns against central differences of the residuals.
    const GradientCheck by_theta = check_gradient(
        [&model](const std::vector<Tensor>& a) {
          return reshape(model.residuals(a[0], model.us), {-1});
        },
        {theta});
    const auto numerical = values(by_theta.numerical);  // [15, 26]
    const std::size_t offset = complicated ? 2 : 0;
    for (std::size_t row = 0; row < 15; ++row)
      for (std::size_t c = 0; c < 26; ++c)
        CHECK(got[row * columns + offset + c] == Approx(numerical[row * 26 + c]).margin(1e-6));
    if (complicated) {
      const GradientCheck by_u = check_gradient(
          [&model, &theta](const std::vector<Tensor>& a) {
            return reshape(model.residuals(theta, a[0]), {-1});
          },
          {model.us});
      const auto du = values(by_u.numerical);  // [15, 10]: residual row, (point, u)
      for (std::size_t row = 0; row < 15; ++row)
        for (std::size_t k = 0; k < 2; ++k)
          CHECK(got[row * columns + k] == Approx(du[row * 10 + (row / 3) * 2 + k]).margin(1e-6));
    }
    // The tool writes the blocks' rows joined: the same numbers as the joined Jacobian.
    const json out = run("ht", "jacobian", input);
    REQUIRE(out.size() == 15);
    for (std::size_t row = 0; row < 15; ++row) {
      REQUIRE(out[row].size() == columns);
      for (std::size_t c = 0; c < columns; ++c)
        CHECK(out[row][c].get<double>() == got[row * columns + c]);
    }
  }
}
