// minimize_lbfgs: L-BFGS (Nocedal & Wright, Numerical Optimization, 2nd ed., Algorithm 7.5)
// with the two-loop recursion (Algorithm 7.4) and a strong Wolfe line search
// (line_search.cpp). The iterate lives in one float64 vector, the variables' elements in
// order; every evaluation assigns it to the variables and runs the loss under a tape.
#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include "optim/line_search.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/optim.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace {

constexpr const char* kOp = "minimize_lbfgs";
using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// max |a_i|; NaN when any element is NaN (so that no tolerance test passes on NaN).
double max_abs(const Vec& a) {
  double m = 0.0;
  for (double v : a) {
    if (std::isnan(v)) return v;
    m = std::max(m, std::abs(v));
  }
  return m;
}

// The loss and its gradient at one point.
struct Point {
  Vec x;
  double f = 0.0;
  Vec g;
  Tensor loss;
};

// The variables as one vector, and the counted evaluations of the loss.
class Problem {
 public:
  Problem(const std::function<Tensor()>& loss, const std::vector<Variable>& variables)
      : loss_(loss), variables_(variables) {
    std::unordered_set<std::uint64_t> seen;
    for (const Variable& v : variables_) {
      if (!is_floating(v.dtype())) {
        throw InvalidArgument(std::string(kOp) + ": variable '" + v.name() + "' has dtype " +
                              dtype_name(v.dtype()) +
                              "; only float32 and float64 variables "
                              "can be minimized over");
      }
      if (!seen.insert(v.id()).second) {
        throw InvalidArgument(std::string(kOp) + ": variable '" + v.name() +
                              "' is listed more than once");
      }
    }
  }

  Vec current() const {
    Vec x;
    for (const Variable& v : variables_) append(x, v.peek());
    return x;
  }

  void assign(const Vec& x) {
    std::size_t offset = 0;
    for (Variable& v : variables_) {
      // from_values rounds each double to a float32 variable's dtype, as the iterate's copy
      // in the variable's dtype should be.
      const auto first = x.begin() + static_cast<std::ptrdiff_t>(offset);
      const std::size_t n = v.peek().size();
      v.assign(
          from_values(Vec(first, first + static_cast<std::ptrdiff_t>(n)), v.shape(), v.dtype()));
      offset += n;
    }
  }

  Point evaluate(const Vec& x) {
    assign(x);
    ++evaluations_;
    GradientTape tape(/*persistent=*/false, /*watch_accessed_variables=*/false);
    tape.watch(variables_);
    Point p;
    p.x = x;
    p.loss = loss_();
    if (!p.loss.defined()) {
      throw InvalidArgument(std::string(kOp) + ": the loss function returned an undefined tensor");
    }
    if (p.loss.rank() != 0 || !is_floating(p.loss.dtype())) {
      throw InvalidArgument(std::string(kOp) +
                            ": the loss must be a float32 or float64 scalar "
                            "(shape []), got shape " +
                            shape_to_string(p.loss.shape()) + " and dtype " +
                            dtype_name(p.loss.dtype()));
    }
    const std::vector<Tensor> grads = tape.gradient(p.loss, variables_, UnconnectedGradients::Zero);
    p.f = cast(p.loss, DType::Float64).item<double>();  // read after the tape has stopped
    for (const Tensor& g : grads) append(p.g, g);
    return p;
  }

  int evaluations() const { return evaluations_; }

 private:
  static void append(Vec& out, const Tensor& t) {
    const Tensor as_double = cast(t, DType::Float64);
    const auto& values = as_double.array<double>();
    out.insert(out.end(), values.begin(), values.end());
  }

  const std::function<Tensor()>& loss_;
  std::vector<Variable> variables_;
  int evaluations_ = 0;
};

// The (s, y) pairs of the last iterations and the two-loop recursion over them.
class History {
 public:
  explicit History(std::size_t size) : size_(size) {}

  // Keeps the pair only when y.s > 1e-10 |y| |s| (the estimate stays positive definite; the
  // test is relative so that the small steps near a minimum still count).
  void add(Vec s, Vec y) {
    const double ys = dot(y, s);
    if (!(ys > 1e-10 * std::sqrt(dot(y, y)) * std::sqrt(dot(s, s)))) return;
    if (s_.size() == size_) {
      s_.pop_front();
      y_.pop_front();
      rho_.pop_front();
    }
    s_.push_back(std::move(s));
    y_.push_back(std::move(y));
    rho_.push_back(1.0 / ys);
  }

  void clear() {
    s_.clear();
    y_.clear();
    rho_.clear();
  }

  bool empty() const { return s_.empty(); }

  // -H g, with H0 = (s.y / y.y) I from the newest pair (I without pairs).
  Vec direction(const Vec& g) const {
    Vec q = g;
    const std::size_t k = s_.size();
    Vec alpha(k);
    for (std::size_t j = k; j-- > 0;) {
      alpha[j] = rho_[j] * dot(s_[j], q);
      for (std::size_t i = 0; i < q.size(); ++i) q[i] -= alpha[j] * y_[j][i];
    }
    const double gamma = k == 0 ? 1.0 : dot(s_[k - 1], y_[k - 1]) / dot(y_[k - 1], y_[k - 1]);
    for (double& v : q) v *= gamma;
    for (std::size_t j = 0; j < k; ++j) {
      const double beta = rho_[j] * dot(y_[j], q);
      for (std::size_t i = 0; i < q.size(); ++i) q[i] += s_[j][i] * (alpha[j] - beta);
    }
    for (double& v : q) v = -v;
    return q;
  }

 private:
  std::size_t size_;
  std::deque<Vec> s_, y_;
  std::deque<double> rho_;
};

void check_options(const std::vector<Variable>& variables, const LBFGSOptions& options) {
  if (variables.empty()) {
    throw InvalidArgument(std::string(kOp) + ": no variables to minimize over");
  }
  if (options.max_iterations < 1) {
    throw InvalidArgument(std::string(kOp) + ": max_iterations must be >= 1, got " +
                          std::to_string(options.max_iterations));
  }
  if (options.history_size < 1) {
    throw InvalidArgument(std::string(kOp) + ": history_size must be >= 1, got " +
                          std::to_string(options.history_size));
  }
}

}  // namespace

LBFGSResult minimize_lbfgs(const std::function<Tensor()>& loss,
                           const std::vector<Variable>& variables, const LBFGSOptions& options) {
  check_options(variables, options);
  Problem problem(loss, variables);
  Point point = problem.evaluate(problem.current());
  History history(static_cast<std::size_t>(options.history_size));
  int iterations = 0;
  bool converged = max_abs(point.g) <= options.tolerance_grad;
  while (!converged && iterations < options.max_iterations) {
    ++iterations;
    Vec d = history.direction(point.g);
    double slope = dot(point.g, d);
    if (!(slope < 0.0) && !history.empty()) {
      // Rounding made -H g an ascent direction: start again from steepest descent.
      history.clear();
      d = history.direction(point.g);
      slope = dot(point.g, d);
    }
    if (!(slope < 0.0)) break;  // a zero or NaN gradient: no descent direction

    // Without curvature pairs the direction is -g: its first step has length 1.
    double t0 = 1.0;
    if (options.strong_wolfe && history.empty()) {
      t0 = std::min(1.0, 1.0 / std::sqrt(dot(point.g, point.g)));
    }
    const auto at = [&](double t) {
      Vec x = point.x;
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += t * d[i];
      return x;
    };
    Point next;
    if (options.strong_wolfe) {
      std::vector<Point> trials;
      const auto phi = [&](double t) {
        trials.push_back(problem.evaluate(at(t)));
        const Point& p = trials.back();
        return detail::LinePoint{t, p.f, dot(p.g, d), trials.size() - 1};
      };
      const detail::LinePoint start{0.0, point.f, slope, 0};
      const detail::LineSearchResult search =
          detail::strong_wolfe_search(phi, start, t0, max_abs(d), options.tolerance_change);
      if (!search.ok) break;  // no decrease along d: the variables go back to `point`
      next = std::move(trials[search.point.index]);
    } else {
      next = problem.evaluate(at(t0));
    }

    Vec s(next.x.size()), y(next.x.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      s[i] = next.x[i] - point.x[i];
      y[i] = next.g[i] - point.g[i];
    }
    const double loss_change = std::abs(next.f - point.f);
    const double step = max_abs(s);
    history.add(std::move(s), std::move(y));
    point = std::move(next);
    converged = max_abs(point.g) <= options.tolerance_grad ||
                loss_change <= options.tolerance_change || step <= options.tolerance_change;
  }
  problem.assign(point.x);
  return {point.loss, iterations, problem.evaluations(), converged};
}

}  // namespace tapegrad
