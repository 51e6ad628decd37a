#include "runtime/vspace.hpp"

#include <map>
#include <utility>

#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {
namespace {

// Only tensors up to this many elements are cached, and at most kMaxEntries of them, so the
// cache stays small whatever shapes a program uses.
constexpr std::size_t kMaxCachedElements = 1 << 14;
constexpr std::size_t kMaxEntries = 256;

Tensor cached_fill(const Shape& shape, DType dtype, double value) {
  if (num_elements(shape) > kMaxCachedElements) return fill(shape, value, dtype);
  thread_local std::map<std::pair<DType, Shape>, Tensor> cache[2];
  auto& c = cache[value == 0.0 ? 0 : 1];
  auto key = std::make_pair(dtype, shape);
  auto it = c.find(key);
  if (it != c.end()) return it->second;
  Tensor t = fill(shape, value, dtype);
  if (c.size() < kMaxEntries) c.emplace(std::move(key), t);
  return t;
}

}  // namespace

Tensor vspace_zeros(const Shape& shape, DType dtype) { return cached_fill(shape, dtype, 0.0); }
Tensor vspace_ones(const Shape& shape, DType dtype) { return cached_fill(shape, dtype, 1.0); }

GradientValue aggregate(std::vector<GradientValue>& grads) {
  if (grads.empty()) return GradientValue();
  if (grads.size() == 1) return std::move(grads.front());
  bool all_sparse = true;
  for (const auto& g : grads) all_sparse = all_sparse && g.is_sparse();
  if (all_sparse) {
    std::vector<IndexedSlices> parts;
    parts.reserve(grads.size());
    for (const auto& g : grads) parts.push_back(g.sparse());
    return GradientValue(concat_slices(parts));
  }
  Tensor sum = grads.front().to_dense();
  for (std::size_t i = 1; i < grads.size(); ++i) sum = add(sum, grads[i].to_dense());
  return GradientValue(std::move(sum));
}

}  // namespace tapegrad::detail

namespace tapegrad {

const Tensor& GradientValue::dense() const {
  if (sparse_) throw InvalidArgument("GradientValue::dense: the gradient is an IndexedSlices; call to_dense()");
  return dense_;
}

const IndexedSlices& GradientValue::sparse() const {
  if (!sparse_) throw InvalidArgument("GradientValue::sparse: the gradient is dense");
  return *sparse_;
}

Tensor GradientValue::to_dense() const {
  if (sparse_) return tapegrad::to_dense(*sparse_);
  return dense_;
}

}  // namespace tapegrad
