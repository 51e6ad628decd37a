// Checks a RandomGraph's first and second derivatives against central differences.
#pragma once

#include <cstdint>
#include <string>

#include "random_graph.hpp"

namespace tapegrad::fuzz {

struct GraphCheckOptions {
  double delta = 1e-6;      // central-difference step
  double tolerance = 1e-6;  // |analytic - numeric| <= tolerance * (1 + |numeric|)
  bool second_order = true;
  bool jacobian = true;  // tape.jacobian of the output, contracted with w, is the gradient
  // vectorized_map of the gradient over three points (the middle one moved) equals the loop,
  // and the vectorized Jacobian at the moved point equals the looped one
  bool vectorized = true;
  // forward mode: the JVP of the output equals the Jacobians applied to the directions, and
  // forward over reverse equals the nested tapes' H v
  bool forward = true;
};

struct GraphCheckResult {
  bool passed = true;
  std::string failure;  // the first mismatch: order, input, element, both values
  std::size_t values_compared = 0;
};

// First order: the gradient of sum(w * output) w.r.t. every input, w fixed random weights
// drawn from the graph's seed (taken either of that scalar or of the sinks as several
// targets with w as their output gradients), against central differences of that sum; each gradient
// must be a defined float64 tensor of its input's shape (empty inputs included). Second order: the
// gradient of sum_k sum(v_k * gradient_k) (nested tapes) against central differences of it.
// Jacobian: tape.jacobian of the output w.r.t. every input, contracted with w, equals the
// gradient. Vectorized: on a batch of three points, the base point at both ends and a moved
// one in the middle (its elements reversed and jittered, so maxima, orders, signs and ties
// differ there only; a milder move where that one leaves the graph's conditioning, as an
// overflowing pow would), vectorized_map of the gradient without its loop fallback equals the
// gradient at each point, and at the moved point tape.jacobian vectorized equals it looped
// (NaN where the other has NaN). Forward: a ForwardAccumulator's JVP of the output along
// directions v_k equals sum_k J_k v_k, and its JVP of the tape's gradient (forward over
// reverse) equals the second order's nested-tape gradient (both H v). An exception from the
// library is a failure too.
GraphCheckResult check_graph(const RandomGraph& graph, const GraphCheckOptions& options = {});

}  // namespace tapegrad::fuzz
