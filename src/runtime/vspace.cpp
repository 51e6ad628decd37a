#include "runtime/vspace.hpp"

#include <algorithm>
#include <utility>

#include "kernels/dispatch.hpp"
#include "runtime/indexed_slices.hpp"
#include "runtime/recording.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {
namespace {

// sum += gradient in sum's own storage, when sum's handle is the only one and the two have one
// floating dtype and one shape; false (nothing done) otherwise.
bool add_in_place(const Tensor& sum, const Tensor& gradient) {
  if (TensorAccess::use_count(sum) != 1 || sum.dtype() != gradient.dtype() ||
      !is_floating(sum.dtype())) {
    return false;
  }
  const TensorImpl& target = impl_of(sum);
  const TensorImpl& source = impl_of(gradient);
  // A view's buffer is its base's, which others may read.
  if (!target.holds_elements || !source.holds_elements || target.is_view()) return false;
  const auto target_dims = target.dims_ref(), source_dims = source.dims_ref();
  if (target_dims.size != source_dims.size ||
      !std::equal(target_dims.data, target_dims.data + target_dims.size, source_dims.data)) {
    return false;
  }
  // The storage is immutable once others can see it; no one else can see this one.
  auto& storage = const_cast<TensorImpl&>(target).data;
  dispatch_floating("AddN", sum.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* out = std::get<storage_array<T>>(storage).data();
    const T* in = detail::kernel_data<T>(gradient);
    const std::size_t n = sum.size();
    for (std::size_t i = 0; i < n; ++i) out[i] += in[i];
  });
  return true;
}

class TensorVSpace final : public VSpace {
 public:
  Tensor ones(const Shape& shape, DType dtype) const override { return fill(shape, 1.0, dtype); }
  Tensor zeros(const Shape& shape, DType dtype) const override { return fill(shape, 0.0, dtype); }
  // The running sum of a tensor's gradients is added to in place when no one can tell: nothing
  // observes ops on this thread (no tape, accumulator, trace or anomaly scope would record the
  // add) and the caller's handle is the only one. A tensor used k times then costs k - 1 passes
  // over one buffer instead of k - 1 fresh arrays.
  Tensor add(const Tensor& sum, const Tensor& gradient) const override {
    if (!any_observer() && add_in_place(sum, gradient)) return sum;
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
    for (std::size_t i = 1; i < gradients.size(); ++i) sum = add(sum, gradients[i].to_dense());
    return GradientValue(std::move(sum));
  }
};

}  // namespace

const VSpace& default_vspace() {
  static const TensorVSpace vspace;  // stateless: shared by every thread
  return vspace;
}

}  // namespace tapegrad::detail
