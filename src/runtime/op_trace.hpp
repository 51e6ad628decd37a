// Tracing for vectorized_map and Function: while a TraceScope lives, every op run on this thread
// that reads a traced value (one of the example's inputs, or an output of an op traced before) is
// appended to its OpTrace, whether or not it is differentiable, with its attributes and its
// outputs' shapes. What the traced values do not depend on (a weight, a zeros(), a value that came
// back from array() as a new Tensor) is a constant of the trace: kept by handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/id_map.hpp"
#include "runtime/inline_vector.hpp"
#include "runtime/op_definition.hpp"
#include "runtime/recording.hpp"
#include "runtime/segmented_vector.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {
class Generator;
}  // namespace tapegrad

namespace tapegrad::detail {

// Tracers alive on this thread: part of active_observer_count (recording.hpp).
extern thread_local std::size_t active_tracer_count;
inline bool any_tracer_active() noexcept { return active_tracer_count != 0; }

// vectorized_map of an empty batch has no example to run fn on: it traces fn once on
// placeholders, zeros shaped like an example that stand for no value. While such a trace lives
// on this thread, a read of one of its traced values from C++ throws, and kernels skip the
// checks of their inputs' values (a singular matrix, an integer division by zero, a NaN into
// a decomposition, DetectAnomaly): what they compute is never seen, only the ops and shapes.
extern thread_local std::size_t placeholder_trace_count;
inline bool computing_on_placeholders() noexcept { return placeholder_trace_count != 0; }

// One input of a traced op: a traced value (by index) or a constant.
struct TracedInput {
  static constexpr std::size_t kConstant = static_cast<std::size_t>(-1);
  std::size_t value = kConstant;
  Tensor constant;  // defined when value == kConstant (undefined inputs stay undefined)
};

// The shapes and dtypes of an op's outputs (one example's). A trace keeps one of each it meets
// and its ops point at them: the ops of a trace repeat a few signatures, and vectors of their
// own were most of what tracing an op allocated (and what freeing the trace freed).
struct OutputSignature {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
};

struct TracedOp {
  const OpDefinition* op = nullptr;
  std::shared_ptr<const Attrs> attrs;  // null when the op recorded none
  InlineVector<TracedInput, 3> inputs;
  InlineVector<std::size_t, 2> outputs;        // value indices
  const OutputSignature* signature = nullptr;  // owned by the trace
  const std::vector<Shape>& output_shapes() const { return signature->shapes; }
  const std::vector<DType>& output_dtypes() const { return signature->dtypes; }
};

// C++ code a Function replays as it is, on the replayed values of its inputs: an optimizer's
// update (run_host_step).
using HostStepBody = std::function<void(const std::vector<Tensor>& inputs)>;

// What a Function's trace also keeps, in order with its ops: a Variable read makes the value
// read an input of the trace (read afresh at each replay); an assignment, and a host step, is
// replayed.
struct TraceStep {
  enum class Kind : std::uint8_t { Read, Assign, AssignAdd, AssignSub, Host };
  Kind kind;
  std::optional<Variable> variable;  // all but Host
  TracedInput value;     // Read: the value read (a traced value); else what is assigned or added
  std::size_t position;  // the number of ops traced before it
  std::shared_ptr<const HostStepBody> host;  // Host
  std::vector<TracedInput> host_inputs;      // Host
  bool through_value = false;  // Read: by Variable::value() (a tape watches what it reads)
};

struct OpTrace {
  SegmentedVector<TracedOp> ops;
  bool placeholders = false;  // its inputs stand for no value (computing_on_placeholders)
  bool for_function = false;  // a Function's trace: it keeps steps
  std::vector<TraceStep> steps;
  // Tensor id -> value index, while tracing (32-bit: a trace of small ops holds about two cells
  // per value, and 16-byte cells were 2 MB of a 55,000-op trace's fresh pages).
  IdMap<std::uint32_t> value_of_id;
  // Reads of traced values from C++ (Tensor::array, item, Variable::assign), each described
  // ("Tensor::item() of a float64 value of shape [] ... in fn"). A read is a user primitive's
  // own kernel when a later op recorded with record_operation takes the value read as an
  // input (its outputs are then traced values, batched by its rule): it is absorbed. A trace
  // with a read that nothing absorbed is not replayed: what was read may have steered fn or
  // come back as a constant.
  struct ValueRead {
    std::size_t value;
    std::string description;
    bool absorbed = false;
  };
  std::vector<ValueRead> value_reads;

  // Each Generator fn drew from while traced, with its counter before the first draw: a
  // vectorized_map that falls back to a loop after tracing rewinds them, so that the loop
  // draws what a loop alone would have drawn.
  struct GeneratorStart {
    Generator* generator;
    std::uint64_t counter;
  };
  std::vector<GeneratorStart> generator_starts;

  // The first read that no user primitive absorbed, or null.
  const ValueRead* unabsorbed_read() const;

  // How many values the trace holds; value indices run from 0 to num_values() - 1.
  std::size_t num_values() const { return values_.size(); }
  // A new traced value for tensor `t` (the trace's inputs, then op outputs).
  std::size_t add_value(const Tensor& t);
  // A new traced value for `t`, output `output` of an op whose outputs have `signature`.
  std::size_t add_value(const Tensor& t, const OutputSignature& signature, std::size_t output);
  // The traced value of `t`, or TracedInput::kConstant.
  std::size_t value_of(const Tensor& t) const;
  // Each traced value's shape and dtype, by index (a Function's fused loops read them).
  const Shape& value_shape(std::size_t value) const {
    return values_[value].signature->shapes[values_[value].output];
  }
  DType value_dtype(std::size_t value) const {
    return values_[value].signature->dtypes[values_[value].output];
  }
  // The signature of `outputs`, kept by this trace for its life.
  const OutputSignature& signature_of(OpOutputs outputs);

  OpTrace() = default;
  // Ops point at the trace's signatures: a trace moves, it is never copied.
  OpTrace(OpTrace&&) = default;
  OpTrace& operator=(OpTrace&&) = default;
  OpTrace(const OpTrace&) = delete;
  OpTrace& operator=(const OpTrace&) = delete;

 private:
  struct ValueSource {
    const OutputSignature* signature;
    std::size_t output;
  };
  SegmentedVector<ValueSource, 12> values_;
  std::vector<std::unique_ptr<OutputSignature>> signatures_;
  // A signature's hash -> the signatures with that hash.
  std::unordered_multimap<std::size_t, const OutputSignature*> signature_by_hash_;
  const OutputSignature* last_signature_ = nullptr;
};

// Traces into `trace` for its lifetime (nested scopes each trace; the innermost is not
// special: every live one sees every op).
class TraceScope {
 public:
  explicit TraceScope(OpTrace& trace);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  OpTrace& trace_;
};

// Who runs C++ code while a trace is live, so that a value read can be blamed on it: fn itself
// (none set), or a gradient function of a user's op that a tape inside fn calls. RAII, nests.
class ValueReaderScope {
 public:
  explicit ValueReaderScope(std::string reader);
  ~ValueReaderScope();
  ValueReaderScope(const ValueReaderScope&) = delete;
  ValueReaderScope& operator=(const ValueReaderScope&) = delete;

 private:
  std::string previous_;
};

// The recording hook (record_on_tapes): appends the op to every live trace one of whose
// values it reads. An op whose outputs are all traced already (custom_gradient's record of a
// body whose ops were traced one by one) adds nothing.
void trace_op(const OpDefinition& op, OpInputs inputs, OpOutputs outputs, const Attrs* attrs);

// Variable's hooks, called when live_trace_count is not 0 (variable.cpp). A read adds `value`
// to every live Function trace that does not trace it yet. A write is a step of every live
// Function trace, and a value read of every other trace that traces `value` or, for
// assign_add/assign_sub, the `replaced` value (a side effect that outlives the call:
// vectorized_map would store slice 0's). A Variable constructed from
// a traced value is a value read of every trace (a Function replays no construction).
void note_variable_read(const Variable& variable, const Tensor& value, bool through_value);
void note_variable_write(const Variable& variable, TraceStep::Kind kind, const Tensor& value,
                         const Tensor& replaced, const char* accessor);
void note_variable_created(const Tensor& initial);
// Runs `body` on `inputs` now and, in every live Function trace of this thread, as a step that
// each replay runs again on the replayed inputs. While it runs, Function traces see nothing
// of it (its ops, reads and writes are the step's own); vectorized_map's traces see it all,
// as any code.
void run_host_step(const std::vector<Tensor>& inputs, HostStepBody body);

// A random op drew from `generator`, starting at counter `start`: a value read of every live
// Function trace (a replay would repeat the numbers drawn while tracing; the eager call draws
// new ones), and a generator start of every live trace that had not drawn from it yet.
void note_generator_draw(const char* op, Generator& generator, std::uint64_t start);
// fn did what only an eager call does (`why` says what, e.g. a DetectAnomaly scope, whose
// checks a replay would skip): every live Function trace of this thread is refused.
void note_eager_only(const std::string& why);

}  // namespace tapegrad::detail
