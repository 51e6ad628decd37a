// Gradient hooks: storage and the call the backward walk makes once a tensor's gradient is
// complete.
#include "runtime/gradient_hooks.hpp"

#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/hook_handle.hpp"

namespace tapegrad {
namespace detail {

std::uint64_t GradientHooks::add(std::uint64_t tensor_id, Hook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t id = next_id_++;
  by_tensor_[tensor_id].push_back(Entry{id, std::make_shared<const Hook>(std::move(hook))});
  tensor_of_hook_.emplace(id, tensor_id);
  count_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void GradientHooks::remove(std::uint64_t hook_id) noexcept {
  // Declared before the lock, so destroyed after it is released: a capture's destructor may
  // do anything, even remove another hook.
  std::shared_ptr<const Hook> doomed;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto tensor = tensor_of_hook_.find(hook_id);
  if (tensor == tensor_of_hook_.end()) return;
  auto list = by_tensor_.find(tensor->second);
  tensor_of_hook_.erase(tensor);
  auto& entries = list->second;
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->id == hook_id) {
      doomed = std::move(it->hook);
      entries.erase(it);
      break;
    }
  }
  if (entries.empty()) by_tensor_.erase(list);
  count_.fetch_sub(1, std::memory_order_relaxed);
}

bool GradientHooks::contains(std::uint64_t hook_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tensor_of_hook_.count(hook_id) != 0;
}

bool GradientHooks::run(std::uint64_t tensor_id, GradientValue& grad) const {
  // The hooks are copied out first: a hook may register or remove hooks while it runs.
  std::vector<std::shared_ptr<const Hook>> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = by_tensor_.find(tensor_id);
    if (it == by_tensor_.end()) return false;
    for (const auto& e : it->second) hooks.push_back(e.hook);
  }
  Tensor g = grad.to_dense();
  for (const auto& hook : hooks) {
    Tensor next = (*hook)(g);
    if (!next.defined() || next.dtype() != g.dtype() || next.shape() != g.shape()) {
      throw InvalidArgument("GradientTape::register_hook: a hook on tensor " +
                            std::to_string(tensor_id) + " returned " +
                            (next.defined() ? "shape " + shape_to_string(next.shape()) +
                                                  " and dtype " + dtype_name(next.dtype())
                                            : std::string("an undefined tensor")) +
                            ", but the gradient it was given has shape " +
                            shape_to_string(g.shape()) + " and dtype " + dtype_name(g.dtype()));
    }
    g = std::move(next);
  }
  grad = GradientValue(std::move(g));
  return true;
}

}  // namespace detail

HookHandle::HookHandle(HookHandle&& other) noexcept
    : hooks_(std::move(other.hooks_)), id_(other.id_) {
  other.hooks_.reset();
}

HookHandle& HookHandle::operator=(HookHandle&& other) noexcept {
  if (this != &other) {
    remove();
    hooks_ = std::move(other.hooks_);
    id_ = other.id_;
    other.hooks_.reset();
  }
  return *this;
}

HookHandle::~HookHandle() { remove(); }

void HookHandle::remove() noexcept {
  if (auto hooks = hooks_.lock()) hooks->remove(id_);
  hooks_.reset();
}

bool HookHandle::active() const noexcept {
  const auto hooks = hooks_.lock();
  return hooks != nullptr && hooks->contains(id_);
}

}  // namespace tapegrad
