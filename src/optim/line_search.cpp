// The strong Wolfe line search (see line_search.hpp): bracketing by extrapolation, then zoom
// by safeguarded cubic interpolation with bisection as the fallback.
#include "optim/line_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tapegrad::detail {
namespace {

constexpr double kC1 = 1e-4;
constexpr double kC2 = 0.9;

// The minimiser of the cubic through (a.t, a.f) and (b.t, b.f) with slopes a.slope and
// b.slope (Nocedal & Wright, eq. 3.59); NaN when the cubic has no real minimiser.
double cubic_minimizer(const LinePoint& a, const LinePoint& b) {
  const double d1 = a.slope + b.slope - 3.0 * (a.f - b.f) / (a.t - b.t);
  const double discriminant = d1 * d1 - a.slope * b.slope;
  if (!(discriminant >= 0.0)) return std::numeric_limits<double>::quiet_NaN();
  const double d2 = std::copysign(std::sqrt(discriminant), b.t - a.t);
  const double denominator = b.slope - a.slope + 2.0 * d2;
  if (denominator == 0.0) return std::numeric_limits<double>::quiet_NaN();
  return b.t - (b.t - a.t) * (b.slope + d2 - d1) / denominator;
}

bool sufficient_decrease(const LinePoint& start, const LinePoint& p) {
  return p.f <= start.f + kC1 * p.t * start.slope;  // false for NaN
}

bool curvature(const LinePoint& start, const LinePoint& p) {
  return std::abs(p.slope) <= -kC2 * start.slope;
}

}  // namespace

LineSearchResult strong_wolfe_search(const std::function<LinePoint(double)>& phi,
                                     const LinePoint& start, double t0, double direction_scale,
                                     double tolerance_change, int max_evaluations) {
  int evaluations = 0;
  LinePoint previous = start;
  LinePoint current = phi(t0);
  ++evaluations;
  LinePoint lo{}, hi{};
  // Bracketing (Algorithm 3.5): grow the step until the interval (previous, current) holds a
  // point satisfying the strong Wolfe conditions, or current satisfies them.
  for (;;) {
    if (!sufficient_decrease(start, current) || (previous.t > 0.0 && !(current.f < previous.f))) {
      lo = previous;
      hi = current;
      break;
    }
    if (curvature(start, current)) return {true, current};
    if (current.slope >= 0.0) {
      lo = current;
      hi = previous;
      break;
    }
    if (evaluations >= max_evaluations) return {true, current};  // decreased, not curved enough
    const double lower = current.t + 0.01 * (current.t - previous.t);
    const double upper = 10.0 * current.t;
    double next = cubic_minimizer(previous, current);
    next = std::isfinite(next) ? std::clamp(next, lower, upper) : upper;
    previous = current;
    current = phi(next);
    ++evaluations;
  }
  // Zoom (Algorithm 3.6): lo has sufficient decrease and the lowest value so far; the
  // interval between lo and hi holds a point satisfying the strong Wolfe conditions.
  while (evaluations < max_evaluations) {
    const double left = std::min(lo.t, hi.t), right = std::max(lo.t, hi.t);
    const double width = right - left;
    if (width * direction_scale <= tolerance_change ||
        width <= 4.0 * std::numeric_limits<double>::epsilon() * right) {
      break;
    }
    double t = cubic_minimizer(lo, hi);
    // Safeguard: a trial too close to either end (or none) is replaced by the midpoint, so
    // the bracket shrinks by at least a tenth every time.
    if (!std::isfinite(t) || t < left + 0.1 * width || t > right - 0.1 * width) {
      t = 0.5 * (left + right);
    }
    const LinePoint trial = phi(t);
    ++evaluations;
    if (!sufficient_decrease(start, trial) || !(trial.f < lo.f)) {
      hi = trial;
      continue;
    }
    if (curvature(start, trial)) return {true, trial};
    if (trial.slope * (hi.t - lo.t) >= 0.0) hi = lo;
    lo = trial;
  }
  return {lo.t > 0.0, lo};
}

}  // namespace tapegrad::detail
