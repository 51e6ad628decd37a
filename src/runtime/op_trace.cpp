#include "runtime/op_trace.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

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

// Empty: fn.
std::string& current_reader() {
  thread_local std::string reader;
  return reader;
}

void append(OpTrace& trace, const OpDefinition& op, OpInputs inputs, OpOutputs outputs,
            const Attrs* attrs) {
  bool reads_traced = false;
  for (std::size_t i = 0; i < inputs.size() && !reads_traced; ++i) {
    reads_traced = inputs[i].defined() && trace.value_of(inputs[i]) != TracedInput::kConstant;
  }
  if (!reads_traced) return;
  bool all_outputs_traced = outputs.size() != 0;
  for (std::size_t j = 0; j < outputs.size() && all_outputs_traced; ++j) {
    all_outputs_traced =
        outputs[j].defined() && trace.value_of(outputs[j]) != TracedInput::kConstant;
  }
  if (all_outputs_traced) return;

  TracedOp traced;
  traced.op = &op;
  if (attrs != nullptr) traced.attrs = std::make_shared<const Attrs>(*attrs);
  traced.inputs.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const std::size_t v = trace.value_of(inputs[i]);
    traced.inputs[i].value = v;
    if (v == TracedInput::kConstant) traced.inputs[i].constant = inputs[i];
  }
  if (op.kind == GradientKind::Registered) {
    for (OpTrace::ValueRead& read : trace.value_reads) {
      for (const TracedInput& in : traced.inputs) read.absorbed = read.absorbed || in.value == read.value;
    }
  }
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    traced.outputs.push_back(trace.add_value(outputs[j]));
    traced.output_shapes.push_back(outputs[j].shape());
    traced.output_dtypes.push_back(outputs[j].dtype());
  }
  trace.ops.push_back(std::move(traced));
}

}  // namespace

std::size_t OpTrace::add_value(const Tensor& t) {
  const std::size_t v = num_values++;
  value_of_id[t.id()] = v;
  return v;
}

std::size_t OpTrace::value_of(const Tensor& t) const {
  auto it = value_of_id.find(t.id());
  return it == value_of_id.end() ? TracedInput::kConstant : it->second;
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

void note_value_read(const Tensor& t, const char* accessor) {
  if (!t.defined()) return;
  for (OpTrace* trace : live_traces()) {
    const std::size_t value = trace->value_of(t);
    if (value == TracedInput::kConstant) continue;
    const std::string& reader = current_reader();
    const std::string what = std::string(accessor) == "array" || std::string(accessor) == "item"
                                 ? "Tensor::" + std::string(accessor) + "()"
                                 : std::string(accessor);
    if (trace->placeholders) {
      throw InvalidArgument(what + " of a " + dtype_name(t.dtype()) + " placeholder of shape " +
                            shape_to_string(t.shape()) + " in " +
                            (reader.empty() ? std::string("fn") : reader) +
                            ": a placeholder has no value to read");
    }
    trace->value_reads.push_back(
        {value, what + " of a " + dtype_name(t.dtype()) + " value of shape " +
                    shape_to_string(t.shape()) + " that depends on the slice, in " +
                    (reader.empty() ? std::string("fn") : reader)});
  }
}

void trace_op(const OpDefinition& op, OpInputs inputs, OpOutputs outputs, const Attrs* attrs) {
  for (OpTrace* trace : live_traces()) append(*trace, op, inputs, outputs, attrs);
}

}  // namespace tapegrad::detail
