// Digamma and polygamma: shift the argument up with the recurrence
// psi^(n)(x) = psi^(n)(x + 1) + (-1)^(n+1) n! / x^(n+1) until it is large enough for the
// asymptotic (Bernoulli) series to converge to double precision, and reflect negative
// arguments through psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x).
#include "kernels/special_functions.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace tapegrad::detail {

namespace {

constexpr double kPi = 3.14159265358979323846264338327950288;
constexpr int kTerms = 10;

// B_2k for k = 1 .. kTerms.
constexpr std::array<double, kTerms> kBernoulli = {
    1.0 / 6,       -1.0 / 30, 1.0 / 42,      -1.0 / 30,     5.0 / 66,
    -691.0 / 2730, 7.0 / 6,   -3617.0 / 510, 43867.0 / 798, -174611.0 / 330};

double factorial(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

// B_2k / (2k)!, k = 1 .. kTerms.
const std::array<double, kTerms>& bernoulli_over_factorial() {
  static const std::array<double, kTerms> table = [] {
    std::array<double, kTerms> t{};
    for (int k = 1; k <= kTerms; ++k) t[k - 1] = kBernoulli[k - 1] / factorial(2 * k);
    return t;
  }();
  return table;
}

double integer_power(double x, int n) {
  double r = 1;
  for (int i = 0; i < n; ++i) r *= x;
  return r;
}

// The asymptotic series is accurate to double precision from this argument on: its k-th term
// relative to the first is about 2 (2k+n-1)! / ((n-1)! (2 pi x)^2k), below 1e-17 at k = 10.
double asymptotic_threshold(int n) { return 10.0 + n; }

bool is_pole(double x) { return x <= 0 && x == std::floor(x); }

// cot(pi x) reduced exactly to |r| <= 1/2 first, so large arguments keep their accuracy.
double cot_pi(double x) {
  const double r = x - std::nearbyint(x);
  return std::cos(kPi * r) / std::sin(kPi * r);
}

// The polynomial P_n with d^n/du^n cot(u) = P_n(cot u): P_0(c) = c and, as
// d/du cot = -(1 + cot^2), P_{k+1}(c) = -(1 + c^2) P_k'(c). Coefficients by power of c.
std::vector<double> cot_derivative_polynomial(int n) {
  std::vector<double> p = {0.0, 1.0};
  for (int k = 0; k < n; ++k) {
    std::vector<double> next(p.size() + 1, 0.0);
    for (std::size_t j = 1; j < p.size(); ++j) {
      const double dj = static_cast<double>(j) * p[j];  // coefficient of c^(j-1) in P'
      next[j - 1] -= dj;
      next[j + 1] -= dj;
    }
    p = std::move(next);
  }
  return p;
}

double evaluate_polynomial(const std::vector<double>& p, double c) {
  double r = 0;
  for (std::size_t j = p.size(); j-- > 0;) r = r * c + p[j];
  return r;
}

double digamma_positive(double x) {
  double shift = 0;
  for (; x < asymptotic_threshold(0); x += 1) shift -= 1 / x;
  const double inverse_square = 1 / (x * x);
  double series = 0;
  double power = 1;
  for (int k = 1; k <= kTerms; ++k) {
    power *= inverse_square;
    series += kBernoulli[k - 1] / (2 * k) * power;
  }
  return shift + std::log(x) - 0.5 / x - series;
}

// n >= 1, x > 0.
double polygamma_positive(int n, double x) {
  double shift = 0;  // sum of 1 / (x + i)^(n+1) over the shifted steps
  for (; x < asymptotic_threshold(n); x += 1) shift += 1 / integer_power(x, n + 1);
  // (n-1)! / x^n (1 + n / (2x) + sum_k B_2k/(2k)! n (n+1) ... (2k+n-1) / x^2k)
  const double inverse_square = 1 / (x * x);
  double bracket = 1 + n / (2 * x);
  double rising = 1;  // n (n+1) ... (2k+n-1)
  double power = 1;
  for (int k = 1; k <= kTerms; ++k) {
    rising *= static_cast<double>(2 * k + n - 2) * static_cast<double>(2 * k + n - 1);
    power *= inverse_square;
    bracket += bernoulli_over_factorial()[k - 1] * rising * power;
  }
  const double total = factorial(n) * shift + factorial(n - 1) / integer_power(x, n) * bracket;
  return n % 2 == 1 ? total : -total;
}

}  // namespace

double digamma_value(double x) {
  if (is_pole(x)) return std::numeric_limits<double>::quiet_NaN();
  if (x < 0) return digamma_positive(1 - x) - kPi * cot_pi(x);
  return digamma_positive(x);
}

double polygamma_value(int n, double x) {
  if (n == 0) return digamma_value(x);
  if (std::isnan(x) || (std::isinf(x) && x < 0)) return std::numeric_limits<double>::quiet_NaN();
  if (is_pole(x)) {
    return n % 2 == 1 ? std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::quiet_NaN();
  }
  if (x < 0) {
    const double reflected = polygamma_positive(n, 1 - x);
    const double cot_term =
        std::pow(kPi, n + 1) * evaluate_polynomial(cot_derivative_polynomial(n), cot_pi(x));
    return (n % 2 == 0 ? reflected : -reflected) - cot_term;
  }
  return polygamma_positive(n, x);
}

}  // namespace tapegrad::detail
