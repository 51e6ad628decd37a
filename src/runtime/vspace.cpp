#include "runtime/vspace.hpp"

#include <utility>

#include "runtime/indexed_slices.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {
namespace {

class TensorVSpace final : public VSpace {
 public:
  Tensor ones(const Shape& shape, DType dtype) const override { return fill(shape, 1.0, dtype); }
  Tensor zeros(const Shape& shape, DType dtype) const override { return fill(shape, 0.0, dtype); }
  Tensor add(const Tensor& sum, const Tensor& gradient) const override {
    return tapegrad::add(sum, gradient);
  }
  GradientValue aggregate(std::vector<GradientValue>& gradients) const override {
    if (gradients.empty()) return GradientValue();
    if (gradients.size() == 1) return std::move(gradients.front());
    bool all_sparse = true;
    for (const auto& g : gradients) all_sparse = all_sparse && g.is_sparse();
    if (all_sparse) {
      std::vector<IndexedSlices> parts;
      parts.reserve(gradients.size());
      for (const auto& g : gradients) parts.push_back(g.sparse());
      return GradientValue(concat_slices(parts));
    }
    Tensor sum = gradients.front().to_dense();
    for (std::size_t i = 1; i < gradients.size(); ++i) {
      sum = tapegrad::add(sum, gradients[i].to_dense());
    }
    return GradientValue(std::move(sum));
  }
};

}  // namespace

const VSpace& default_vspace() {
  static const TensorVSpace vspace;  // stateless: shared by every thread
  return vspace;
}

}  // namespace tapegrad::detail
