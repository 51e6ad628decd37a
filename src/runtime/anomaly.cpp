// DetectAnomaly: the scope's thread-local settings and the checks, forward and backward.
#include "runtime/anomaly.hpp"

#include <cmath>
#include <string>

#include "kernels/dispatch.hpp"
#include "runtime/tape_stack.hpp"
#include "tapegrad/diagnostics.hpp"

namespace tapegrad::detail {

thread_local bool anomaly_scope_alive = false;

namespace {

struct AnomalySettings {
  bool nan = true;
  bool inf = true;
};

AnomalySettings& settings() {
  thread_local AnomalySettings s;
  return s;
}

thread_local int walks_running = 0;

enum class Finding { None, NaN, Infinity };

// The first value the scope looks for in t (floating tensors only).
Finding find_anomaly(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return Finding::None;
  const AnomalySettings& s = settings();
  return dispatch_floating("DetectAnomaly", t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (const T v : detail::kernel_array<T>(t)) {
      if (s.nan && std::isnan(v)) return Finding::NaN;
      if (s.inf && std::isinf(v)) return Finding::Infinity;
    }
    return Finding::None;
  });
}

const char* finding_name(Finding f) { return f == Finding::NaN ? "NaN" : "an infinity"; }

std::string tensor_text(const Tensor& t) {
  if (!t.defined()) return "none";
  return shape_to_string(t.shape()) + " " + dtype_name(t.dtype());
}

template <class List>
std::string list_text(const List& tensors, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? ", " : "") + tensor_text(tensors[i]);
  return "[" + out + "]";
}

// "op 7 on the tape, after 'Mul' (op 6), 'Add' (op 5), 'Tanh' (op 4)".
std::string position_text(const TapeImpl& tape, std::int64_t index) {
  std::string out = "op " + std::to_string(index) + " on the tape";
  std::string before;
  for (std::int64_t i = index - 1; i >= 0 && i >= index - 3; --i) {
    before += std::string(before.empty() ? "" : ", ") + "'" + tape.entry(i).op->name + "' (op " +
              std::to_string(i) + ")";
  }
  return out + (before.empty() ? ", its first op" : ", after " + before);
}

}  // namespace

AnomalyBackwardScope::AnomalyBackwardScope() noexcept { ++walks_running; }
AnomalyBackwardScope::~AnomalyBackwardScope() { --walks_running; }

void check_forward_outputs(const OpDefinition& op, OpInputs inputs, OpOutputs outputs) {
  if (walks_running > 0) return;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const Finding f = find_anomaly(outputs[j]);
    if (f == Finding::None) continue;
    std::vector<Tensor> in;
    for (std::size_t i = 0; i < inputs.size(); ++i) in.push_back(inputs[i]);
    bool inputs_clean = true;
    for (const Tensor& t : in) inputs_clean = inputs_clean && find_anomaly(t) == Finding::None;
    const std::vector<TapeImpl*>& tapes = tape_stack();
    const std::string where =
        tapes.empty() ? "no tape records it"
                      : "it would be " + position_text(*tapes.back(),
                                                       static_cast<std::int64_t>(tapes.back()->num_entries()));
    throw AnomalyError("DetectAnomaly: the forward of '" + std::string(op.name) + "' produced " +
                       finding_name(f) + " in output " + std::to_string(j) + " (outputs " +
                       list_text(outputs, outputs.size()) + ", inputs " + list_text(in, in.size()) +
                       (inputs_clean ? ", every input finite" : ", an input already holds one") +
                       "); " + where);
  }
}

void check_backward_gradients(const TapeImpl& tape, std::int64_t op_index,
                              const std::vector<GradientValue>& input_gradients,
                              const std::vector<Tensor>& output_gradients) {
  for (std::size_t i = 0; i < input_gradients.size(); ++i) {
    if (!input_gradients[i].defined()) continue;
    const Tensor dense = input_gradients[i].is_sparse() ? input_gradients[i].sparse().values
                                                        : input_gradients[i].dense();
    const Finding f = find_anomaly(dense);
    if (f == Finding::None) continue;
    bool upstream_clean = true;
    for (const Tensor& g : output_gradients) upstream_clean = upstream_clean && find_anomaly(g) == Finding::None;
    const OpEntry& e = tape.entry(op_index);
    std::string inputs;
    for (const auto& r : e.inputs()) {
      inputs += std::string(inputs.empty() ? "" : ", ") + shape_to_string(r.full_shape()) + " " +
                dtype_name(r.dtype());
    }
    throw AnomalyError("DetectAnomaly: the backward of '" + std::string(e.op->name) + "' produced " +
                       finding_name(f) + " in the gradient for input " + std::to_string(i) +
                       " (inputs [" + inputs + "], output gradients " +
                       list_text(output_gradients, output_gradients.size()) +
                       (upstream_clean ? ", every output gradient finite" : ", an output gradient already holds one") +
                       "); " + position_text(tape, op_index));
  }
}

}  // namespace tapegrad::detail

namespace tapegrad {

DetectAnomaly::DetectAnomaly(bool nan, bool inf) {
  auto& s = detail::settings();
  previous_nan_ = s.nan;
  previous_inf_ = s.inf;
  previous_active_ = detail::anomaly_scope_alive;
  s = {nan, inf};
  detail::anomaly_scope_alive = true;
  detail::refresh_observer_count();
}

DetectAnomaly::~DetectAnomaly() {
  detail::settings() = {previous_nan_, previous_inf_};
  detail::anomaly_scope_alive = previous_active_;
  detail::refresh_observer_count();
}

}  // namespace tapegrad
