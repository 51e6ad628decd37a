// HookHandle: the registration of a gradient hook (GradientTape::register_hook); removing it
// or destroying it unregisters the hook (PyTorch: RemovableHandle).
#pragma once

#include <cstdint>
#include <memory>

namespace tapegrad {

namespace detail {
class GradientHooks;
}

/// Owns one hook registered on a tape. Movable, not copyable. The hook (and everything its
/// function captured) is destroyed by remove(), by the handle's destructor, or when its tape
/// is destroyed, whichever comes first. The handle does not keep the tape alive.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  HookHandle(HookHandle&& other) noexcept;
  HookHandle& operator=(HookHandle&& other) noexcept;
  ~HookHandle();

  /// Unregisters the hook; later backward walks no longer call it. Idempotent.
  void remove() noexcept;
  /// True while the hook is registered on a live tape.
  bool active() const noexcept;

 private:
  friend class GradientTape;
  HookHandle(std::weak_ptr<detail::GradientHooks> hooks, std::uint64_t id)
      : hooks_(std::move(hooks)), id_(id) {}
  std::weak_ptr<detail::GradientHooks> hooks_;
  std::uint64_t id_ = 0;
};

}  // namespace tapegrad
