// What the Function and threaded random-graph tests compute from a graph: its value and
// gradient at a point, and the same mapped with vectorized_map over points near it.
#pragma once

#include <cstddef>
#include <vector>

#include "random_graph.hpp"

namespace tapegrad::fuzz {

// The graph's value and the gradient of sum(w * value) w.r.t. every input (zeros where
// unconnected), w = 1 + 0.01 i in the value's dtype.
inline std::vector<Tensor> value_and_gradient(const RandomGraph& graph,
                                              const std::vector<Tensor>& point) {
  GradientTape tape;
  tape.watch(point);
  const Tensor y = graph.evaluate(point);
  const Tensor w =
      cast(add(multiply(range(0.0, static_cast<double>(y.size())), scalar(0.01, DType::Float64)),
               scalar(1.0, DType::Float64)),
           y.dtype());
  std::vector<Tensor> results{y};
  for (const Tensor& g :
       tape.gradient(reduce_sum(multiply(y, w)), point, UnconnectedGradients::Zero)) {
    results.push_back(g);
  }
  return results;
}

// value_and_gradient mapped over `count` points near `point` (scaled by 1 + 0.001 k, k in
// -3..3), with no loop fallback.
inline std::vector<Tensor> mapped_value_and_gradient(const RandomGraph& graph,
                                                     const std::vector<Tensor>& point,
                                                     std::size_t count) {
  std::vector<double> scales(count);
  for (std::size_t b = 0; b < count; ++b) {
    scales[b] = 1.0 + 1e-3 * (static_cast<double>(b % 7) - 3.0);
  }
  std::vector<Tensor> batches;
  for (const Tensor& x : point) {
    Shape scale_shape{count};
    scale_shape.insert(scale_shape.end(), x.rank(), 1);
    batches.push_back(multiply(expand_dims(x, 0), from_values(scales, scale_shape, x.dtype())));
  }
  return vectorized_map(
      [&graph](const std::vector<Tensor>& p) { return value_and_gradient(graph, p); }, batches,
      /*fallback_to_loop=*/false);
}

}  // namespace tapegrad::fuzz
