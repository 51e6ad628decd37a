// The public GradientTape: scope, watch, and the gradient entry points.
#include "tapegrad/tape.hpp"

#include <algorithm>

#include "runtime/imperative_grad.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape_stack.hpp"
#include "runtime/unconnected_check.hpp"
#include "runtime/warn.hpp"

namespace tapegrad {
namespace {

const char* const kUsedTape =
    "A non-persistent GradientTape can only be used to compute one set of gradients (or "
    "jacobians)";

// `what` and `index` name the tensor in an error: "target 1".
detail::TensorMeta meta_of(const Tensor& t, const char* what, std::size_t index) {
  if (!t.defined()) {
    throw InvalidArgument(std::string("GradientTape::gradient: ") + what + " " +
                          std::to_string(index) + " is undefined");
  }
  return detail::TensorMeta{t.id(), t.dtype(), t.shape()};
}

}  // namespace

GradientTape::RecordingGuard::RecordingGuard(RecordingGuard&& other) noexcept
    : state_(std::move(other.state_)), restore_recording_(other.restore_recording_) {}

GradientTape::RecordingGuard::~RecordingGuard() {
  detail::TapeState* s = state_.get();
  // A guard that outlived its tape, or dies on a foreign thread, has nothing it may restore.
  // Nor one of a tape whose recording has ended for good.
  if (s == nullptr || !s->on_owner_thread() || s->destroyed.load() || !s->impl || s->consumed ||
      s->ended) {
    return;
  }
  if (s->recording.load() != restore_recording_) detail::set_recording(*s, restore_recording_);
}

GradientTape::GradientTape(bool persistent, bool watch_accessed_variables)
    : state_(detail::register_tape(
          std::make_shared<detail::TapeImpl>(persistent, watch_accessed_variables))),
      persistent_(persistent),
      watch_accessed_variables_(watch_accessed_variables) {}

GradientTape::~GradientTape() {
  if (state_->on_owner_thread()) {
    detail::unregister_tape(*state_);
  } else {
    detail::abandon_tape(*state_);
  }
}

void GradientTape::check_thread(const char* what) const {
  if (!state_->on_owner_thread()) {
    throw TapeError(std::string("GradientTape::") + what +
                    ": called on another thread than the one that created the tape; a tape "
                    "belongs to the thread that created it (it records only that thread's "
                    "ops, and is used there)");
  }
}

detail::TapeImpl& GradientTape::live_tape(const char* what) {
  check_thread(what);
  if (!state_->impl || state_->consumed) {
    throw TapeError(std::string("GradientTape::") + what + ": " + kUsedTape);
  }
  return *state_->impl;
}

bool GradientTape::recording() const { return state_->recording.load(std::memory_order_relaxed); }

void GradientTape::watch(const Tensor& tensor) {
  check_thread("watch");
  if (!tensor.defined()) throw InvalidArgument("GradientTape::watch: the tensor is undefined");
  live_tape("watch").watch(tensor);
}

void GradientTape::watch(const std::vector<Tensor>& tensors) {
  for (const auto& t : tensors) watch(t);
}

void GradientTape::watch(const Variable& variable) { live_tape("watch").watch_variable(variable); }

void GradientTape::watch(const std::vector<Variable>& variables) {
  for (const auto& v : variables) watch(v);
}

GradientTape::RecordingGuard GradientTape::stop_recording() {
  check_thread("stop_recording");
  if (!state_->impl || state_->consumed || !state_->recording.load()) {
    throw TapeError(
        "GradientTape::stop_recording: Trying to stop recording a tape which is not "
        "recording.");
  }
  detail::set_recording(*state_, false);
  return RecordingGuard(state_, /*restore_recording=*/true);
}

void GradientTape::end_recording() {
  check_thread("end_recording");
  state_->ended = true;
  if (state_->recording.load()) detail::set_recording(*state_, false);
}

GradientTape::RecordingGuard GradientTape::record() {
  live_tape("record");
  if (state_->ended) {
    throw TapeError(
        "GradientTape::record: the tape's recording was ended by end_recording(); "
        "it records nothing more (use a new tape, or stop_recording()'s guard to "
        "pause and resume)");
  }
  if (state_->recording.load()) {
    throw TapeError(
        "GradientTape::record: Tape is still recording, This can happen if you try "
        "to re-enter an already-active tape.");
  }
  detail::set_recording(*state_, true);
  return RecordingGuard(state_, /*restore_recording=*/false);
}

void GradientTape::reset() {
  detail::TapeImpl& tape = live_tape("reset");
  if (state_->backward_depth > 0) {
    throw TapeError(
        "GradientTape::reset: reset() inside this tape's own gradient computation "
        "(called from a gradient function or custom_gradient backward while this "
        "tape's gradient/jacobian runs) would free the records the walk is using; "
        "reset the tape after the gradient call returns");
  }
  tape.clear();
}

std::vector<Variable> GradientTape::watched_variables() const {
  check_thread("watched_variables");
  return state_->impl && !state_->consumed ? state_->impl->watched_variables() : watched_when_used_;
}

std::size_t GradientTape::bytes_held() const {
  check_thread("bytes_held");
  return state_->impl ? state_->impl->bytes_held() : 0;
}

HookHandle GradientTape::register_hook(const Tensor& t,
                                       std::function<Tensor(const Tensor& grad)> hook) {
  if (!t.defined()) {
    throw InvalidArgument("GradientTape::register_hook: the tensor is undefined");
  }
  if (!hook) throw InvalidArgument("GradientTape::register_hook: the hook function is empty");
  detail::TapeImpl& tape = live_tape("register_hook");
  const std::uint64_t id = tape.shared_hooks()->add(t.id(), std::move(hook));
  return HookHandle(tape.shared_hooks(), id);
}

HookHandle GradientTape::register_hook(const Variable& v,
                                       std::function<Tensor(const Tensor& grad)> hook) {
  return register_hook(v.handle(), std::move(hook));
}

GradientTape::BackwardScope::BackwardScope(GradientTape& tape) : state(tape.state_) {
  ++state->backward_depth;
}

GradientTape::BackwardScope::~BackwardScope() {
  --state->backward_depth;
  // A used tape's records go now (the walk has released what it could); the thread's list
  // no longer counts it as recording.
  if (state->consumed) state->impl.reset();
}

std::vector<GradientValue> GradientTape::run_gradient(const std::vector<Tensor>& targets,
                                                      const std::vector<Tensor>& sources,
                                                      const std::vector<Tensor>& output_gradients,
                                                      UnconnectedGradients unconnected,
                                                      const std::vector<Tensor>& stop_gradients) {
  check_thread("gradient");
  detail::require_valid_unconnected("GradientTape::gradient", unconnected);
  std::vector<detail::TensorMeta> metas;
  metas.reserve(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    metas.push_back(meta_of(sources[i], "source", i));
  }
  for (std::size_t i = 0; i < targets.size(); ++i) meta_of(targets[i], "target", i);
  if (!output_gradients.empty() && output_gradients.size() != targets.size()) {
    throw InvalidArgument("GradientTape::gradient: " + std::to_string(output_gradients.size()) +
                          " output_gradients for " + std::to_string(targets.size()) + " targets");
  }
  for (std::size_t i = 0; i < output_gradients.size(); ++i) {
    const Tensor& g = output_gradients[i];
    if (g.defined() && (g.shape() != targets[i].shape() || g.dtype() != targets[i].dtype())) {
      throw InvalidArgument("GradientTape::gradient: output_gradients[" + std::to_string(i) +
                            "] has shape " + shape_to_string(g.shape()) + " and dtype " +
                            dtype_name(g.dtype()) + ", but target " + std::to_string(i) +
                            " has shape " + shape_to_string(targets[i].shape()) + " and dtype " +
                            dtype_name(targets[i].dtype()));
    }
  }

  std::vector<std::uint64_t> stop_ids;
  stop_ids.reserve(stop_gradients.size());
  for (std::size_t i = 0; i < stop_gradients.size(); ++i) {
    if (!stop_gradients[i].defined()) {
      throw InvalidArgument("GradientTape::gradient: stop_gradients[" + std::to_string(i) +
                            "] is undefined");
    }
    stop_ids.push_back(stop_gradients[i].id());
  }
  std::sort(stop_ids.begin(), stop_ids.end());

  std::shared_ptr<detail::TapeImpl> tape = begin_backward("gradient");
  BackwardScope scope{*this};
  return detail::imperative_grad(*tape, targets, metas, output_gradients, unconnected,
                                 detail::default_vspace(), stop_ids);
}

std::shared_ptr<detail::TapeImpl> GradientTape::begin_backward(const char* what) {
  check_thread(what);
  std::shared_ptr<detail::TapeImpl> tape = state_->impl;
  if (!tape || state_->consumed) {
    throw TapeError(std::string("GradientTape::") + what + ": " + kUsedTape);
  }
  if (state_->recording.load()) {
    if (!persistent_) {
      detail::set_recording(*state_, false);
    } else {
      detail::warn_once("persistent-recording-gradient",
                        "Calling GradientTape::gradient on a persistent tape that is still "
                        "recording records the gradient computation on that tape too, which "
                        "costs time and memory. Do it only to compute higher-order derivatives.");
    }
  }
  if (!persistent_) {
    state_->consumed = true;
    watched_when_used_ = tape->watched_variables();
  }
  return tape;
}

std::vector<GradientValue> GradientTape::gradient_values(
    const std::vector<Tensor>& targets, const std::vector<Tensor>& sources,
    const std::vector<Tensor>& output_gradients, UnconnectedGradients unconnected) {
  return run_gradient(targets, sources, output_gradients, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets,
                                           const std::vector<Tensor>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  std::vector<GradientValue> values = run_gradient(targets, sources, output_gradients, unconnected);
  std::vector<Tensor> result;
  result.reserve(values.size());
  for (auto& v : values) result.push_back(std::move(v).to_dense());
  return result;
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets,
                                           const std::vector<Tensor>& sources,
                                           const GradientOptions& options) {
  std::vector<GradientValue> values = run_gradient(targets, sources, options.output_gradients,
                                                   options.unconnected, options.stop_gradients);
  std::vector<Tensor> result;
  result.reserve(values.size());
  for (auto& v : values) result.push_back(std::move(v).to_dense());
  return result;
}

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source,
                              UnconnectedGradients unconnected) {
  return gradient(std::vector<Tensor>{target}, std::vector<Tensor>{source}, {}, unconnected)[0];
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           UnconnectedGradients unconnected) {
  return gradient(std::vector<Tensor>{target}, sources, {}, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           const std::vector<Variable>& sources,
                                           UnconnectedGradients unconnected) {
  detail::require_valid_unconnected("GradientTape::gradient", unconnected);
  std::vector<Tensor> handles;
  handles.reserve(sources.size());
  for (const auto& v : sources) handles.push_back(v.handle());
  std::vector<Tensor> grads =
      gradient(std::vector<Tensor>{target}, handles, {}, UnconnectedGradients::None);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() && unconnected == UnconnectedGradients::Zero) {
      grads[i] = zeros(sources[i].shape(), sources[i].dtype());
    }
  }
  return grads;
}

Tensor GradientTape::gradient(const Tensor& target, const Variable& source,
                              UnconnectedGradients unconnected) {
  return gradient(target, std::vector<Variable>{source}, unconnected)[0];
}

}  // namespace tapegrad
