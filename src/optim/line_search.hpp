// A line search satisfying the strong Wolfe conditions (Nocedal & Wright, Numerical
// Optimization, 2nd ed., Algorithms 3.5 and 3.6), on phi(t) = f(x + t d) for t > 0.
#pragma once

#include <cstddef>
#include <functional>

namespace tapegrad::detail {

/// One evaluation of phi: the step t, phi(t), phi'(t), and the caller's index of the
/// evaluation (to find the full point again).
struct LinePoint {
  double t;
  double f;
  double slope;
  std::size_t index;
};

struct LineSearchResult {
  bool ok;          // false: no step with sufficient decrease was found
  LinePoint point;  // the step taken (when ok)
};

/// Searches from `start` (t = 0: phi(0) and phi'(0) < 0) with first trial step `t0`.
/// Accepts a step with phi(t) <= phi(0) + c1 t phi'(0) and |phi'(t)| <= -c2 phi'(0)
/// (c1 = 1e-4, c2 = 0.9); after `max_evaluations` calls of `phi` it returns the lowest
/// trial with sufficient decrease instead (ok = false if there is none). A bracket whose width
/// times `direction_scale` (max |d|) is <= `tolerance_change` ends the search the same way.
LineSearchResult strong_wolfe_search(const std::function<LinePoint(double)>& phi,
                                     const LinePoint& start, double t0, double direction_scale,
                                     double tolerance_change, int max_evaluations = 25);

}  // namespace tapegrad::detail
