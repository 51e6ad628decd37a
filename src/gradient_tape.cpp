// The public GradientTape: scope, watch, and the gradient entry points.
#include "tapegrad/tape.hpp"

#include "detail/imperative_grad.hpp"
#include "detail/recording.hpp"
#include "detail/tape_impl.hpp"
#include "detail/unconnected_check.hpp"
#include "detail/warn.hpp"

namespace tapegrad {
namespace {

const char* const kUsedTape =
    "A non-persistent GradientTape can only be used to compute one set of gradients (or "
    "jacobians)";

detail::TensorMeta meta_of(const Tensor& t, const char* what) {
  if (!t.defined()) {
    throw InvalidArgument(std::string("GradientTape::gradient: ") + what + " is undefined");
  }
  return detail::TensorMeta{t.id(), t.dtype(), t.shape()};
}

}  // namespace

GradientTape::RecordingGuard::RecordingGuard(RecordingGuard&& other) noexcept
    : tape_(other.tape_), restore_recording_(other.restore_recording_) {
  other.tape_ = nullptr;
}

GradientTape::RecordingGuard::~RecordingGuard() {
  if (tape_ == nullptr || !tape_->tape_ || tape_->consumed_) return;
  if (restore_recording_ && !tape_->recording_) tape_->push();
  if (!restore_recording_ && tape_->recording_) tape_->pop();
}

GradientTape::GradientTape(bool persistent, bool watch_accessed_variables)
    : tape_(std::make_shared<detail::TapeImpl>(persistent, watch_accessed_variables)),
      persistent_(persistent),
      watch_accessed_variables_(watch_accessed_variables) {
  push();
}

GradientTape::~GradientTape() {
  if (recording_ && tape_) detail::pop_tape(tape_.get());
}

void GradientTape::push() {
  detail::push_tape(tape_.get());
  recording_ = true;
}

void GradientTape::pop() {
  detail::pop_tape(tape_.get());
  recording_ = false;
}

detail::TapeImpl& GradientTape::live_tape(const char* what) {
  if (!tape_ || consumed_) throw TapeError(std::string("GradientTape::") + what + ": " + kUsedTape);
  return *tape_;
}

void GradientTape::watch(const Tensor& tensor) {
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
  if (!tape_ || consumed_ || !recording_) {
    throw TapeError("GradientTape::stop_recording: Trying to stop recording a tape which is not "
                    "recording.");
  }
  pop();
  return RecordingGuard(this, /*restore_recording=*/true);
}

GradientTape::RecordingGuard GradientTape::record() {
  live_tape("record");
  if (recording_) {
    throw TapeError("GradientTape::record: Tape is still recording, This can happen if you try "
                    "to re-enter an already-active tape.");
  }
  push();
  return RecordingGuard(this, /*restore_recording=*/false);
}

void GradientTape::reset() {
  live_tape("reset").clear();
}

std::vector<Variable> GradientTape::watched_variables() const {
  return tape_ && !consumed_ ? tape_->watched_variables() : watched_when_used_;
}

std::size_t GradientTape::bytes_held() const { return tape_ ? tape_->bytes_held() : 0; }


std::vector<GradientValue> GradientTape::run_gradient(const std::vector<Tensor>& targets,
                                                      const std::vector<Tensor>& sources,
                                                      const std::vector<Tensor>& output_gradients,
                                                      UnconnectedGradients unconnected) {
  detail::require_valid_unconnected("GradientTape::gradient", unconnected);
  std::vector<detail::TensorMeta> metas;
  metas.reserve(sources.size());
  for (const auto& s : sources) metas.push_back(meta_of(s, "a source"));
  for (const auto& t : targets) meta_of(t, "a target");
  if (!output_gradients.empty() && output_gradients.size() != targets.size()) {
    throw InvalidArgument("GradientTape::gradient: " + std::to_string(output_gradients.size()) +
                          " output_gradients for " + std::to_string(targets.size()) +
                          " targets");
  }
  for (std::size_t i = 0; i < output_gradients.size(); ++i) {
    const Tensor& g = output_gradients[i];
    if (g.defined() && (g.shape() != targets[i].shape() || g.dtype() != targets[i].dtype())) {
      throw InvalidArgument("GradientTape::gradient: output_gradients[" + std::to_string(i) +
                            "] has shape " + shape_to_string(g.shape()) + " and dtype " +
                            dtype_name(g.dtype()) + ", but target " + std::to_string(i) +
                            " has shape " + shape_to_string(targets[i].shape()) +
                            " and dtype " + dtype_name(targets[i].dtype()));
    }
  }

  std::shared_ptr<detail::TapeImpl> tape = begin_backward("gradient");
  BackwardScope scope{*this};
  return detail::imperative_grad(*tape, targets, metas, output_gradients, unconnected);
}

std::shared_ptr<detail::TapeImpl> GradientTape::begin_backward(const char* what) {
  std::shared_ptr<detail::TapeImpl> tape = tape_;
  if (!tape || consumed_) throw TapeError(std::string("GradientTape::") + what + ": " + kUsedTape);
  if (recording_) {
    if (!persistent_) {
      pop();
    } else {
      detail::warn_once("persistent-recording-gradient",
                        "Calling GradientTape::gradient on a persistent tape that is still "
                        "recording records the gradient computation on that tape too, which "
                        "costs time and memory. Do it only to compute higher-order derivatives.");
    }
  }
  if (!persistent_) {
    consumed_ = true;
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
  for (const auto& v : values) result.push_back(v.to_dense());
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
  std::vector<Tensor> grads = gradient(std::vector<Tensor>{target}, handles, {}, UnconnectedGradients::None);
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
