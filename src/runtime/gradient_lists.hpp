// The walk's "sum" stage: the gradients that have reached each tensor on the path, summed
// when the tensor's producer is about to run (or, for a source, when the walk returns).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/vspace.hpp"

namespace tapegrad::detail {

class GradientHooks;

// The gradients that have reached one tensor. Dense ones are summed as they arrive (one
// VSpace::add per arrival after the first), so a tensor used 10^5 times holds one running sum,
// not 10^5 gradients; sparse ones (row slices) wait in a list until the sum is asked for and
// are then aggregated with the dense sum in one VSpace::aggregate call.
class GradientList {
 public:
  bool empty() const { return !dense_.defined() && !sparse_; }
  void push(GradientValue&& g, const VSpace& vspace) {
    if (g.is_sparse()) {
      push_sparse(std::move(g));
    } else if (dense_.defined()) {
      dense_ = vspace.add(dense_, g.dense());
    } else {
      dense_ = std::move(g).to_dense();
    }
  }
  // The sum, leaving the list holding just that sum.
  GradientValue sum(const VSpace& vspace) {
    if (sparse_) aggregate_into_one(vspace);
    if (sparse_) return sparse_->front();
    return GradientValue(dense_);
  }
  // The sum, leaving the list empty.
  GradientValue take(const VSpace& vspace) {
    if (sparse_) aggregate_into_one(vspace);
    GradientValue total = sparse_ ? std::move(sparse_->front()) : GradientValue(std::move(dense_));
    clear();
    return total;
  }
  // The sum as a dense tensor, leaving the list empty: for a rule that reads dense gradients.
  // Row-sparse parts are then densified one by one and added where that is less work than
  // concatenating them first: when their values hold at least as many elements as the dense
  // tensor times the parts (many gathers from a small tensor, as a determinant by minors does).
  Tensor take_dense(const VSpace& vspace);
  void clear() {
    dense_ = Tensor();
    sparse_.reset();
  }

 private:
  void push_sparse(GradientValue&& g);
  // Replaces the contents by their sum: dense_ alone, or one IndexedSlices in sparse_.
  void aggregate_into_one(const VSpace& vspace);

  Tensor dense_;                                        // the dense gradients' running sum
  std::unique_ptr<std::vector<GradientValue>> sparse_;  // sparse gradients, when any arrived
};

// The gradient lists of the slots that have one now: a slot holds an index into a pool whose
// freed lists are reused, so a long chain has a handful of lists, not one per tensor.
class GradientSlots {
 public:
  explicit GradientSlots(std::size_t n_slots) : index_(n_slots, kNone) {}
  // Null when no gradient has reached the slot (or it was dropped).
  GradientList* find(std::size_t slot) {
    const std::int32_t i = index_[slot];
    return i == kNone ? nullptr : &pool_[static_cast<std::size_t>(i)];
  }
  // The reference is valid until the next get(): nothing in between adds lists.
  GradientList& get(std::size_t slot) {
    if (index_[slot] == kNone) {
      if (free_.empty()) {
        index_[slot] = static_cast<std::int32_t>(pool_.size());
        pool_.emplace_back();
      } else {
        index_[slot] = free_.back();
        free_.pop_back();
      }
    }
    return pool_[static_cast<std::size_t>(index_[slot])];
  }
  // The slot's sum, its list returned to the pool.
  GradientValue take(std::size_t slot, const VSpace& vspace) {
    GradientValue total = list_of(slot).take(vspace);
    release(slot);
    return total;
  }
  // The slot's sum as a dense tensor (GradientList::take_dense), its list returned to the pool.
  Tensor take_dense(std::size_t slot, const VSpace& vspace) {
    Tensor total = list_of(slot).take_dense(vspace);
    release(slot);
    return total;
  }

 private:
  GradientList& list_of(std::size_t slot) { return pool_[static_cast<std::size_t>(index_[slot])]; }
  void release(std::size_t slot) {
    free_.push_back(index_[slot]);
    index_[slot] = kNone;
  }

  static constexpr std::int32_t kNone = -1;
  std::vector<std::int32_t> index_;
  std::vector<GradientList> pool_;
  std::vector<std::int32_t> free_;
};

// The sum of a complete list after the hooks on tensor `id` ran on it (GradientTape::
// register_hook); the list then holds that result.
GradientValue hooked_sum(const GradientHooks& hooks, std::uint64_t id, GradientList& list,
                         const VSpace& vspace);

}  // namespace tapegrad::detail
