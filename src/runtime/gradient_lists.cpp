#include "runtime/gradient_lists.hpp"

#include "runtime/gradient_hooks.hpp"

namespace tapegrad::detail {

void GradientList::push_sparse(GradientValue&& g) {
  if (!sparse_) sparse_ = std::make_unique<std::vector<GradientValue>>();
  sparse_->push_back(std::move(g));
}

void GradientList::aggregate_into_one(const VSpace& vspace) {
  if (!dense_.defined() && sparse_->size() == 1) return;  // already one
  std::vector<GradientValue> all;
  all.reserve(sparse_->size() + 1);
  if (dense_.defined()) all.emplace_back(std::move(dense_));
  for (auto& g : *sparse_) all.push_back(std::move(g));
  clear();
  GradientValue total = vspace.aggregate(all);
  if (total.is_sparse()) {
    push_sparse(std::move(total));
  } else {
    dense_ = std::move(total).to_dense();
  }
}

Tensor GradientList::take_dense(const VSpace& vspace) {
  bool parts_first = false;
  if (sparse_ && sparse_->size() > 1) {
    const std::size_t dense_elements = num_elements(sparse_->front().sparse().dense_shape);
    std::size_t value_elements = 0;
    for (const GradientValue& g : *sparse_) value_elements += g.sparse().values.size();
    parts_first = value_elements / sparse_->size() >= dense_elements;
  }
  if (!parts_first) return take(vspace).to_dense();
  Tensor total = std::move(dense_);
  for (const GradientValue& g : *sparse_) {
    Tensor part = g.to_dense();
    total = total.defined() ? vspace.add(total, part) : std::move(part);
  }
  clear();
  return total;
}

GradientValue hooked_sum(const GradientHooks& hooks, std::uint64_t id, GradientList& list,
                         const VSpace& vspace) {
  GradientValue g = list.sum(vspace);
  if (hooks.run(id, g)) {
    list.clear();
    list.push(GradientValue(g), vspace);
  }
  return g;
}

}  // namespace tapegrad::detail
