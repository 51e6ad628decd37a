// What the ported-program benchmarks (attention.cpp, resnet_block.cpp) share: reproducible
// float32 weights that tapegrad and LibTorch both start from, and the check that their
// gradients agree before anything is timed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace ported {

// Reproducible values in [-scale / 2, scale / 2).
inline std::vector<float> values(std::size_t n, unsigned seed, float scale) {
  std::vector<float> v(n);
  unsigned state = seed * 2654435761U + 1;
  for (float& x : v) {
    state = state * 1664525U + 1013904223U;
    x = scale * (static_cast<float>(state >> 8) / 16777216.0F - 0.5F);
  }
  return v;
}

// A model's parameters: each one's values and shape, in the order the program uses them.
struct Weights {
  std::vector<std::vector<float>> data;
  std::vector<std::vector<std::size_t>> shapes;
  void add(std::vector<std::size_t> shape, unsigned seed, float scale) {
    std::size_t n = 1;
    for (std::size_t e : shape) n *= e;
    data.push_back(values(n, seed, scale));
    shapes.push_back(std::move(shape));
  }
  std::vector<tapegrad::Tensor> tensors() const;
};

inline tapegrad::Tensor float32_tensor(const std::vector<float>& v, const tapegrad::Shape& shape) {
  return tapegrad::from_values(std::vector<double>(v.begin(), v.end()), shape,
                               tapegrad::DType::Float32);
}

inline std::vector<tapegrad::Tensor> Weights::tensors() const {
  std::vector<tapegrad::Tensor> t;
  for (std::size_t i = 0; i < data.size(); ++i) {
    t.push_back(float32_tensor(data[i], tapegrad::Shape(shapes[i].begin(), shapes[i].end())));
  }
  return t;
}

// Aborts naming the program and the parameter unless ours (float32) and theirs (as many
// values, the same layout) agree to `tolerance` relative (root mean square).
inline void require_same_gradient(const char* program, std::size_t parameter,
                                  const tapegrad::Tensor& ours, const float* theirs,
                                  double tolerance) {
  const auto& a = ours.array<float>();
  double difference = 0, size = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const double d = a.flat(j) - theirs[j];
    difference += d * d;
    size += static_cast<double>(a.flat(j)) * a.flat(j);
  }
  if (!(std::sqrt(difference / size) < tolerance)) {
    std::fprintf(stderr, "%s: parameter %zu's gradient differs from LibTorch's (relative %g)\n",
                 program, parameter, std::sqrt(difference / size));
    std::abort();
  }
}

}  // namespace ported
