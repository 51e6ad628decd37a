// The vector space the backward walk works in (TF: imperative_grad's VSpace): what the walk
// asks of gradients besides the gradient rules themselves. An interface, so that the walk can
// be driven by a fake that counts and checks its calls (test/test_walk_stages.cpp);
// default_vspace() is the one every public entry point uses.
#pragma once

#include <vector>

#include "tapegrad/indexed_slices.hpp"

namespace tapegrad::detail {

class VSpace {
 public:
  virtual ~VSpace() = default;

  // The default output gradient of a target: ones of its shape and dtype.
  virtual Tensor ones(const Shape& shape, DType dtype) const = 0;
  // The output gradient of an op's output that received none, asked only when the op's rule
  // runs because another of its outputs did receive one.
  virtual Tensor zeros(const Shape& shape, DType dtype) const = 0;
  // `sum` + `gradient` (same shape and dtype): the walk keeps one running sum per tensor and
  // adds each dense gradient as it arrives, so a fan-in of n costs n - 1 calls.
  virtual Tensor add(const Tensor& sum, const Tensor& gradient) const = 0;
  // The sum of a list that holds at least one row-sparse gradient (and at least two
  // gradients): only-sparse lists concatenate into one IndexedSlices, a mixed list densifies.
  virtual GradientValue aggregate(std::vector<GradientValue>& gradients) const = 0;
};

// Built on tapegrad's differentiable ops, so that an outer tape records what the walk computes
// (higher-order derivatives). Its ones and zeros are new tensors on every call, never a cached
// one: they reach gradient rules, hooks and the caller, any of whom may watch them on a tape,
// and a tensor shared between calls would then carry that watch into every later walk.
const VSpace& default_vspace();

}  // namespace tapegrad::detail
