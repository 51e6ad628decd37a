#include "runtime/op_trace.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <utility>

#include "runtime/tensor_impl.hpp"
#include "tapegrad/errors.hpp"

namespace tapegrad::detail {

thread_local std::size_t active_tracer_count = 0;
thread_local std::size_t placeholder_trace_count = 0;
std::atomic<std::size_t> live_trace_count{0};

namespace {

std::vector<OpTrace*>& live_traces() {
  thread_local std::vector<OpTrace*> traces;
  return traces;
}

// Inside run_host_step's body: Function traces see nothing.
thread_local std::size_t host_step_depth = 0;

// Whether `trace` sees what this thread does now.
bool sees(const OpTrace& trace) { return !trace.for_function || host_step_depth == 0; }

// Empty: fn.
std::string& current_reader() {
  thread_local std::string reader;
  return reader;
}

void append(OpTrace& trace, const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
            const Attrs* attrs) {
  // The first input that is a traced value: an op that reads none is not traced. The inputs
  // before it are constants, so each input is looked up once.
  std::size_t first_traced = inputs.size();
  std::size_t first_value = TracedInput::kConstant;
  for (std::size_t i = 0; i < inputs.size() && first_traced == inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    first_value = trace.value_of(inputs[i]);
    if (first_value != TracedInput::kConstant) first_traced = i;
  }
  if (first_traced == inputs.size()) return;
  bool all_outputs_traced = outputs.size() != 0;
  for (std::size_t j = 0; j < outputs.size() && all_outputs_traced; ++j) {
    all_outputs_traced =
        outputs[j].defined() && trace.value_of(outputs[j]) != TracedInput::kConstant;
  }
  if (all_outputs_traced) return;

  // Built in place: a traced op is 152 bytes, with no temporary to move in.
  TracedOp& traced = trace.ops.emplace_back();
  traced.op = &op;
  if (attrs != nullptr) traced.attrs = std::make_shared<const Attrs>(*attrs);
  traced.inputs.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TracedInput& in = traced.inputs.emplace_back();
    if (!inputs[i].defined()) continue;
    if (i == first_traced) {
      in.value = first_value;
    } else if (i > first_traced) {
      in.value = trace.value_of(inputs[i]);
    }
    if (in.value == TracedInput::kConstant) in.constant = inputs[i];
  }
  if (op.kind == GradientKind::Registered) {
    for (OpTrace::ValueRead& read : trace.value_reads) {
      for (const TracedInput& in : traced.inputs)
        read.absorbed = read.absorbed || in.value == read.value;
    }
  }
  const OutputSignature& signature = trace.signature_of(outputs);
  traced.signature = &signature;
  traced.outputs.reserve(outputs.size());
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    traced.outputs.push_back(trace.add_value(outputs[j], signature, j));
  }
}

// Mixes `value` into `hash`. A signature's hash mixes in the output count, then each output's
// dtype, rank and dimensions.
std::size_t mixed(std::size_t hash, std::size_t value) {
  return hash ^ (value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2));
}

}  // namespace

const OutputSignature& OpTrace::signature_of(OpOutputs outputs) {
  const auto matches = [&](const OutputSignature& signature) {
    if (signature.shapes.size() != outputs.size()) return false;
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      const TensorImpl& impl = impl_of(outputs[j]);
      const TensorImpl::DimsRef dims = impl.dims_ref();
      const Shape& shape = signature.shapes[j];
      if (signature.dtypes[j] != impl.dtype || shape.size() != dims.size ||
          !std::equal(shape.begin(), shape.end(), dims.data)) {
        return false;
      }
    }
    return true;
  };
  // Consecutive ops mostly make outputs of one signature: no hash for those.
  if (last_signature_ != nullptr && matches(*last_signature_)) return *last_signature_;
  std::size_t hash = outputs.size();
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const TensorImpl& impl = impl_of(outputs[j]);
    const TensorImpl::DimsRef dims = impl.dims_ref();
    hash = mixed(mixed(hash, static_cast<std::size_t>(impl.dtype)), dims.size);
    for (std::size_t d = 0; d < dims.size; ++d) hash = mixed(hash, dims.data[d]);
  }
  const auto [first, last] = signature_by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (matches(*it->second)) {
      last_signature_ = it->second;
      return *it->second;
    }
  }
  auto signature = std::make_unique<OutputSignature>();
  signature->shapes.reserve(outputs.size());
  signature->dtypes.reserve(outputs.size());
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const TensorImpl& impl = impl_of(outputs[j]);
    const TensorImpl::DimsRef dims = impl.dims_ref();
    signature->shapes.emplace_back(dims.data, dims.data + dims.size);
    signature->dtypes.push_back(impl.dtype);
  }
  signatures_.push_back(std::move(signature));
  signature_by_hash_.emplace(hash, signatures_.back().get());
  last_signature_ = signatures_.back().get();
  return *last_signature_;
}

std::size_t OpTrace::add_value(const Tensor& t) { return add_value(t, signature_of(t), 0); }

std::size_t OpTrace::add_value(const Tensor& t, const OutputSignature& signature,
                               std::size_t output) {
  const std::size_t v = values_.size();
  if (v >= std::numeric_limits<std::uint32_t>::max()) {
    throw ResourceExhausted("tracing: more than 4,294,967,294 traced values in one trace");
  }
  value_of_id.assign(t.id(), static_cast<std::uint32_t>(v));
  values_.push_back({&signature, output});
  return v;
}

std::size_t OpTrace::value_of(const Tensor& t) const {
  const std::uint32_t* v = value_of_id.find(t.id());
  return v == nullptr ? TracedInput::kConstant : *v;
}

TraceScope::TraceScope(OpTrace& trace) : trace_(trace) {
  live_trace_count.fetch_add(1, std::memory_order_relaxed);
  live_traces().push_back(&trace_);
  active_tracer_count = live_traces().size();
  if (trace_.placeholders) ++placeholder_trace_count;
  refresh_observer_count();
}

TraceScope::~TraceScope() {
  auto& traces = live_traces();
  auto it = std::find(traces.rbegin(), traces.rend(), &trace_);
  if (it != traces.rend()) traces.erase(std::next(it).base());
  active_tracer_count = traces.size();
  if (trace_.placeholders) --placeholder_trace_count;
  refresh_observer_count();
  live_trace_count.fetch_sub(1, std::memory_order_relaxed);
}

ValueReaderScope::ValueReaderScope(std::string reader)
    : previous_(std::exchange(current_reader(), std::move(reader))) {}

ValueReaderScope::~ValueReaderScope() { current_reader() = std::move(previous_); }

const OpTrace::ValueRead* OpTrace::unabsorbed_read() const {
  for (const ValueRead& read : value_reads) {
    if (!read.absorbed) return &read;
  }
  return nullptr;
}

namespace {

std::string reader_name() {
  const std::string& reader = current_reader();
  return reader.empty() ? std::string("fn") : reader;
}

// What a value read that the trace cannot see through is called in its warnings.
void add_value_read(OpTrace& trace, std::size_t value, const std::string& what, const Tensor& t) {
  trace.value_reads.push_back(
      {value, what + " of a " + dtype_name(t.dtype()) + " value of shape " +
                  shape_to_string(t.shape()) +
                  (trace.for_function ? " that depends on the function's arguments, in "
                                      : " that depends on the slice, in ") +
                  reader_name()});
}

void note_read_in(OpTrace& trace, const Tensor& t, const std::string& what) {
  const std::size_t value = trace.value_of(t);
  if (value == TracedInput::kConstant) return;
  if (trace.placeholders) {
    throw InvalidArgument(what + " of a " + dtype_name(t.dtype()) + " placeholder of shape " +
                          shape_to_string(t.shape()) + " in " + reader_name() +
                          ": a placeholder has no value to read");
  }
  add_value_read(trace, value, what, t);
}

}  // namespace

void note_value_read(const Tensor& t, const char* accessor) {
  if (!t.defined()) return;
  const std::string what = std::string(accessor) == "array" || std::string(accessor) == "item"
                               ? "Tensor::" + std::string(accessor) + "()"
                               : std::string(accessor);
  for (OpTrace* trace : live_traces()) {
    if (sees(*trace)) note_read_in(*trace, t, what);
  }
}

void note_variable_read(const Variable& variable, const Tensor& value, bool through_value) {
  for (OpTrace* trace : live_traces()) {
    if (!trace->for_function || !sees(*trace)) continue;
    const std::size_t traced = trace->value_of(value);
    if (traced != TracedInput::kConstant) {
      // Read again, now through value(): the replay reads it so (a peek() first, then value()).
      if (!through_value) continue;
      for (TraceStep& step : trace->steps) {
        if (step.kind == TraceStep::Kind::Read && step.value.value == traced) {
          step.through_value = true;
        }
      }
      continue;
    }
    const std::size_t v = trace->add_value(value);
    TraceStep step{TraceStep::Kind::Read, variable, {}, trace->ops.size(), nullptr, {}};
    step.value.value = v;
    step.through_value = through_value;
    trace->steps.push_back(std::move(step));
  }
}

void note_variable_write(const Variable& variable, TraceStep::Kind kind, const Tensor& value,
                         const Tensor& replaced, const char* accessor) {
  for (OpTrace* trace : live_traces()) {
    if (!sees(*trace)) continue;
    if (!trace->for_function) {
      note_read_in(*trace, value, accessor);
      if (kind != TraceStep::Kind::Assign) note_read_in(*trace, replaced, accessor);
      continue;
    }
    TraceStep step{kind, variable, {}, trace->ops.size(), nullptr, {}};
    step.value.value = trace->value_of(value);
    if (step.value.value == TracedInput::kConstant) step.value.constant = value;
    trace->steps.push_back(std::move(step));
  }
}

void note_variable_created(const Tensor& initial) {
  for (OpTrace* trace : live_traces()) {
    if (!sees(*trace)) continue;
    const std::size_t value = trace->value_of(initial);
    if (trace->for_function) {
      // A replay would not construct it: each call of fn makes a new Variable.
      trace->value_reads.push_back({value, "a Variable constructed in " + reader_name() +
                                               " (it would be one Variable for every call)"});
    } else {
      note_read_in(*trace, initial, "Variable's constructor");
    }
  }
}

void run_host_step(const std::vector<Tensor>& inputs, HostStepBody body) {
  auto shared = std::make_shared<const HostStepBody>(std::move(body));
  bool any = false;
  for (OpTrace* trace : live_traces()) {
    if (!trace->for_function || !sees(*trace)) continue;
    TraceStep step{TraceStep::Kind::Host, std::nullopt, {}, trace->ops.size(), shared, {}};
    for (const Tensor& t : inputs) {
      TracedInput in;
      if (t.defined()) in.value = trace->value_of(t);
      if (in.value == TracedInput::kConstant) in.constant = t;
      step.host_inputs.push_back(std::move(in));
    }
    trace->steps.push_back(std::move(step));
    any = true;
  }
  if (!any) {
    (*shared)(inputs);
    return;
  }
  struct Depth {
    Depth() { ++host_step_depth; }
    ~Depth() { --host_step_depth; }
  } depth;
  (*shared)(inputs);
}

void note_generator_draw(const char* op, Generator& generator, std::uint64_t start) {
  if (live_traces().empty()) return;
  for (OpTrace* trace : live_traces()) {
    if (!sees(*trace)) continue;
    auto& starts = trace->generator_starts;
    if (std::none_of(starts.begin(), starts.end(),
                     [&](const OpTrace::GeneratorStart& s) { return s.generator == &generator; })) {
      starts.push_back({&generator, start});
    }
  }
  note_eager_only(std::string(op) + " in " + reader_name() +
                  " (a Generator draws new numbers at every call)");
}

void note_eager_only(const std::string& why) {
  for (OpTrace* trace : live_traces()) {
    if (trace->for_function && sees(*trace)) {
      trace->value_reads.push_back({TracedInput::kConstant, why});
    }
  }
}

void trace_op(const OpDefinition& op, OpInputs inputs, OpOutputs outputs, const Attrs* attrs) {
  for (OpTrace* trace : live_traces()) {
    // A Function's trace with a value read is never replayed (its fn runs eagerly): the rest
    // of fn's ops need not be traced (a long value-dependent loop would cost the trace most).
    // An op without a replay rule is still traced: the warning names it.
    const bool refused =
        trace->for_function && !trace->value_reads.empty() && op.replay_rule != nullptr;
    if (sees(*trace) && !refused) append(*trace, op, inputs, outputs, attrs);
  }
}

}  // namespace tapegrad::detail
