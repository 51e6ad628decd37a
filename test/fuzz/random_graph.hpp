// Seeded random op graphs for the gradient fuzz test (test_random_graphs.cpp).
//
// A RandomGraph is a DAG of 3..12 differentiable ops over 1..3 float64 (or float32) inputs of
// random broadcastable shapes (size-0 and size-1 dimensions included). The generator builds it
// eagerly at a base point: every op is run once there, and any constant that keeps the op
// away from a non-differentiable point (a shift away from 0 for abs/relu/reciprocal, a ramp
// that separates the candidates of a max, a positive transform before log/sqrt/pow, a
// diagonal that keeps a matrix well-conditioned) is chosen from those base-point values and
// then fixed. The graph is a pure function of its inputs, so it can be re-evaluated at
// perturbed inputs for central differences.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tapegrad/tapegrad.hpp>
#include <vector>

namespace tapegrad::fuzz {

// One op of the graph: reads nodes `args`, appends `outputs` nodes (split appends several).
struct GraphStep {
  std::string description;  // "softmax(axis=-2)", with the conditioning it applies
  std::vector<std::size_t> args;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> apply;
  std::size_t output_count = 1;
};

class RandomGraph {
 public:
  // The same seed gives the same graph and the same base-point inputs. Inputs, constants and
  // every node are of `dtype` (float64 or float32).
  static RandomGraph generate(std::uint64_t seed, DType dtype = DType::Float64);
  // The same with min_ops..max_ops ops (as many as the builder manages in 40 attempts per
  // op): long graphs, whose values' lifetimes interleave, for a Function's memory plan. The
  // environment's TAPEGRAD_FUZZ_OPS=<min>-<max> overrides both ranges (a longer search).
  static RandomGraph generate(std::uint64_t seed, DType dtype, int min_ops, int max_ops);

  std::uint64_t seed() const { return seed_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  std::size_t op_count() const { return steps_.size(); }
  // Each step's description, in order ("softmax(x, axis=-2)", ...).
  std::vector<std::string> op_descriptions() const;

  // Every node value, inputs first, then each step's outputs in order.
  std::vector<Tensor> evaluate_nodes(const std::vector<Tensor>& inputs) const;
  // The nodes no step reads (the graph's sinks), in node order.
  std::vector<Tensor> evaluate_sinks(const std::vector<Tensor>& inputs) const;
  // The graph's output: its sinks flattened and concatenated, so every op contributes to it.
  // 1-D; its length is fixed for the graph.
  Tensor evaluate(const std::vector<Tensor>& inputs) const;

  // Step `index` alone: a graph whose inputs are that step's arguments evaluated at this
  // graph's base point (one input per argument, repeats included). Localises a failure.
  RandomGraph isolate(std::size_t index) const;

  // "node 0 = input [2, 1, 3]" ... one line per node: op, argument nodes, shapes.
  std::string describe() const;

 private:
  std::uint64_t seed_ = 0;
  std::vector<Tensor> inputs_;
  std::vector<GraphStep> steps_;
  std::vector<std::size_t> sinks_;
  std::vector<Shape> node_shapes_;  // at the base point, for describe()
  friend class GraphBuilder;
};

}  // namespace tapegrad::fuzz
