// Reproducible random inputs shared by the benchmarks.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace random_inputs {

// Uniform in [-1, 1) / sqrt(scale): a rows x cols float64 matrix, the same for a given seed
// (scale the entries of a square weight matrix of size `scale` so that W x stays O(1)).
inline tapegrad::Tensor matrix(std::size_t rows, std::size_t cols, unsigned seed,
                               std::size_t scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(rows * cols);
  for (auto& x : v) x = dist(gen) / std::sqrt(static_cast<double>(scale));
  return tapegrad::from_values(v, {rows, cols});
}

}  // namespace random_inputs
