// The gradient hooks registered on one tape (GradientTape::register_hook).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tapegrad/indexed_slices.hpp"

namespace tapegrad::detail {

class GradientHooks {
 public:
  using Hook = std::function<Tensor(const Tensor& grad)>;

  // Returns the hook's id, for remove().
  std::uint64_t add(std::uint64_t tensor_id, Hook hook);
  void remove(std::uint64_t hook_id) noexcept;
  bool contains(std::uint64_t hook_id) const;
  // One relaxed load: the walk asks this before anything else.
  bool empty() const noexcept { return count_.load(std::memory_order_relaxed) == 0; }

  // Passes `grad` through the hooks of `tensor_id`, in registration order. A row-sparse
  // gradient reaches a hook densified. InvalidArgument when a hook returns an undefined
  // tensor or one whose shape or dtype is not the gradient's. False (grad untouched) when
  // no hook is on tensor_id.
  bool run(std::uint64_t tensor_id, GradientValue& grad) const;

 private:
  struct Entry {
    std::uint64_t id;
    std::shared_ptr<const Hook> hook;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::vector<Entry>> by_tensor_;
  std::unordered_map<std::uint64_t, std::uint64_t> tensor_of_hook_;
  std::uint64_t next_id_ = 1;
  std::atomic<std::size_t> count_{0};
};

}  // namespace tapegrad::detail
