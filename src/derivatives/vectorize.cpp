// vectorized_map's engine: trace fn on two slices, check the traces agree, replay the trace
// with the ops' batching rules (a loop when that cannot be done). See vectorize.hpp.
#include "derivatives/vectorize.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "derivatives/batched_fusion.hpp"
#include "derivatives/identity_rows.hpp"
#include "kernels/dispatch.hpp"
#include "runtime/batching_context.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/warn.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/random.hpp"

namespace tapegrad::detail {
namespace {

// One traced call of fn: its trace and where each of its outputs comes from.
struct TracedCall {
  OpTrace trace;
  std::vector<TracedInput> outputs;  // a traced value, a constant, or undefined
  std::vector<Tensor> results;       // what fn returned, when asked to keep it
};

std::vector<std::int64_t> signed_shape_of(const Tensor& t) {
  return std::vector<std::int64_t>(t.shape().begin(), t.shape().end());
}

Tensor index_scalar(std::size_t b) {
  return from_values({static_cast<double>(b)}, Shape{}, DType::Int64);
}

// Slice b of every elem (a recorded gather, so that tapes and outer traces see it).
std::vector<Tensor> slices_at(const std::vector<Tensor>& elems, std::size_t b) {
  const Tensor index = index_scalar(b);
  std::vector<Tensor> slices;
  slices.reserve(elems.size());
  for (const Tensor& e : elems) slices.push_back(gather(e, index, 0));
  return slices;
}

TracedCall trace_call(const BatchFunction& fn, const std::vector<Tensor>& slices,
                      bool keep_results = false, bool placeholders = false) {
  TracedCall call;
  call.trace.placeholders = placeholders;
  for (const Tensor& s : slices) call.trace.add_value(s);
  std::vector<Tensor> outputs;
  {
    TraceScope scope(call.trace);
    outputs = fn(slices);
  }
  for (const Tensor& out : outputs) {
    TracedInput where;
    if (out.defined()) {
      where.value = call.trace.value_of(out);
      if (where.value == TracedInput::kConstant) where.constant = out;
    }
    call.outputs.push_back(std::move(where));
  }
  if (keep_results) call.results = std::move(outputs);
  call.trace.value_of_id = IdMap<std::uint32_t>();
  return call;
}

bool same_values(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined() || a.id() == b.id()) return true;
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return dispatch_any(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // Bytes, not values: NaN constants are the same constant. The runtime's own read (an
    // outer trace's value seen twice), not fn's: not reported.
    return a.size() == 0 || std::memcmp(kernel_array<T>(a).data(), kernel_array<T>(b).data(),
                                        a.size() * sizeof(T)) == 0;
  });
}

bool same_input(const TracedInput& a, const TracedInput& b) {
  return a.value == b.value && same_values(a.constant, b.constant);
}

// Why the two traces disagree, or nothing when they agree.
std::optional<std::string> trace_difference(const TracedCall& first, const TracedCall& last) {
  const auto& a = first.trace.ops;
  const auto& b = last.trace.ops;
  const std::size_t common = std::min(a.size(), b.size());
  for (std::size_t k = 0; k < common; ++k) {
    const TracedOp& x = a[k];
    const TracedOp& y = b[k];
    const std::string at = "op " + std::to_string(k) + " ('" + x.op->name + "')";
    if (x.op != y.op) return at + " is '" + y.op->name + "' on the other slice";
    const bool attrs_equal = (x.attrs == nullptr) == (y.attrs == nullptr) &&
                             (x.attrs == nullptr || *x.attrs == *y.attrs);
    if (!attrs_equal) return at + " has other attributes on the other slice";
    if (x.inputs.size() != y.inputs.size()) return at + " has another number of inputs";
    for (std::size_t i = 0; i < x.inputs.size(); ++i) {
      if (!same_input(x.inputs[i], y.inputs[i])) {
        return at + ": its input " + std::to_string(i) + " differs between the slices";
      }
    }
    if (x.output_shapes() != y.output_shapes() || x.output_dtypes() != y.output_dtypes()) {
      return at + " has other output shapes on the other slice";
    }
  }
  if (a.size() != b.size()) {
    return "fn runs " + std::to_string(a.size()) + " ops on slice 0 but " +
           std::to_string(b.size()) + " on the last slice";
  }
  if (first.outputs.size() != last.outputs.size()) return std::string("fn's output count differs");
  for (std::size_t j = 0; j < first.outputs.size(); ++j) {
    if (!same_input(first.outputs[j], last.outputs[j])) {
      return "fn's output " + std::to_string(j) + " differs between the slices";
    }
  }
  return std::nullopt;
}

// Which traced ops the outputs need (the rest: dead code, e.g. an inner vectorized_map's trace).
std::vector<bool> needed_ops(const TracedCall& call) {
  std::vector<bool> needed_value(call.trace.num_values(), false);
  for (const TracedInput& out : call.outputs) {
    if (out.value != TracedInput::kConstant) needed_value[out.value] = true;
  }
  std::vector<bool> needed(call.trace.ops.size(), false);
  for (std::size_t k = call.trace.ops.size(); k-- > 0;) {
    const TracedOp& op = call.trace.ops[k];
    for (std::size_t v : op.outputs) needed[k] = needed[k] || needed_value[v];
    if (!needed[k]) continue;
    for (const TracedInput& in : op.inputs) {
      if (in.value != TracedInput::kConstant) needed_value[in.value] = true;
    }
  }
  return needed;
}

// t in `shape` (a copy only when its shape differs).
Tensor reshaped(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  return reshape(t, std::vector<std::int64_t>(shape.begin(), shape.end()));
}

// The replay's single elem when it is the identity [n] ++ example: never built unless an op
// needs it dense (its diagonal kept instead: runtime/batching_context.hpp).
struct IdentitySeed {
  Shape example;
  DType dtype;
};

// The trace run once on `elems` (each [batch, ...]) with the batching rules. With an
// identity seed instead of elems, its linear descendants stay diagonal while their ops allow
// it. With `final_shapes`, each output is returned in that shape (same element count), a
// diagonal one written once in it.
std::vector<Tensor> replay(const TracedCall& call, const std::vector<bool>& needed,
                           const std::vector<Tensor>& elems, const std::string& caller,
                           std::size_t batch, const IdentitySeed* identity = nullptr,
                           const std::vector<Shape>* final_shapes = nullptr) {
  // Each value's remaining uses, so that a batched intermediate dies after its last reader.
  std::vector<std::size_t> uses(call.trace.num_values(), 0);
  for (std::size_t k = 0; k < call.trace.ops.size(); ++k) {
    if (!needed[k]) continue;
    for (const TracedInput& in : call.trace.ops[k].inputs) {
      if (in.value != TracedInput::kConstant) ++uses[in.value];
    }
  }
  for (const TracedInput& out : call.outputs) {
    if (out.value != TracedInput::kConstant) ++uses[out.value];
  }
  std::vector<StructuredValue> values(call.trace.num_values());
  for (std::size_t i = 0; i < elems.size(); ++i) values[i].dense = elems[i];
  if (identity != nullptr) values[0].diagonal = ones(identity->example, identity->dtype);
  const auto dense = [&](StructuredValue& v) -> const Tensor& {
    if (!v.dense.defined()) v.dense = dense_of_diagonal(v.diagonal);
    return v.dense;
  };

  std::vector<Tensor> inputs;
  std::vector<bool> batched;
  std::vector<StructuredValue> structured;
  std::vector<Tensor> constants;
  const auto release_inputs = [&](const TracedOp& op) {
    for (const TracedInput& in : op.inputs) {
      if (in.value != TracedInput::kConstant && --uses[in.value] == 0) {
        values[in.value] = StructuredValue{};
      }
    }
  };
  const auto replay_op = [&](std::size_t k) {
    const TracedOp& op = call.trace.ops[k];
    // The op's structure rule runs on diagonal inputs mixed with constants only: a dense
    // batched input leaves no structure to keep.
    bool any_diagonal = false;
    bool any_dense = false;
    for (const TracedInput& in : op.inputs) {
      if (in.value == TracedInput::kConstant) continue;
      (values[in.value].is_diagonal() ? any_diagonal : any_dense) = true;
    }
    std::optional<std::vector<StructuredValue>> structured_outputs;
    const StructureRule structure_rule =
        any_diagonal && !any_dense ? structure_rule_of(*op.op) : nullptr;
    if (structure_rule != nullptr) {
      structured.clear();
      constants.clear();
      for (const TracedInput& in : op.inputs) {
        const bool is_value = in.value != TracedInput::kConstant;
        structured.push_back(is_value ? values[in.value] : StructuredValue{});
        constants.push_back(is_value ? Tensor() : in.constant);
      }
      const StructureContext context{
          {{*op.op, op.attrs.get()}, op.output_shapes(), op.output_dtypes()}};
      structured_outputs = structure_rule(context, structured, constants);
    }
    std::vector<Tensor> outputs;
    if (!structured_outputs) {
      inputs.clear();
      batched.clear();
      for (const TracedInput& in : op.inputs) {
        const bool is_value = in.value != TracedInput::kConstant;
        inputs.push_back(is_value ? dense(values[in.value]) : in.constant);
        batched.push_back(is_value);
      }
      const BatchingContext context{
          {*op.op, op.attrs.get()}, batched, batch, op.output_shapes(), op.output_dtypes()};
      outputs = batching_rule_of(*op.op)(context, inputs);
    }
    const char* rule = structured_outputs ? "structure" : "batching";
    const std::size_t count = structured_outputs ? structured_outputs->size() : outputs.size();
    if (count != op.outputs.size()) {
      throw InvalidArgument(caller + ": the " + rule + " rule of '" + op.op->name + "' returned " +
                            std::to_string(count) + " outputs for " +
                            std::to_string(op.outputs.size()));
    }
    for (std::size_t j = 0; j < count; ++j) {
      // A diagonal output has the example's shape; a dense one the batch axis in front.
      const bool diagonal = structured_outputs && (*structured_outputs)[j].is_diagonal();
      Tensor& result = !structured_outputs ? outputs[j]
                       : diagonal          ? (*structured_outputs)[j].diagonal
                                           : (*structured_outputs)[j].dense;
      const Shape expected =
          diagonal ? op.output_shapes()[j] : with_batch_axis(batch, op.output_shapes()[j]);
      if (!result.defined() || result.shape() != expected ||
          result.dtype() != op.output_dtypes()[j]) {
        throw InvalidArgument(
            caller + ": the " + rule + " rule of '" + op.op->name + "' returned output " +
            std::to_string(j) + " of shape " +
            (result.defined() ? shape_to_string(result.shape()) : "(undefined)") + " and dtype " +
            (result.defined() ? dtype_name(result.dtype()) : "-") + "; expected shape " +
            shape_to_string(expected) + " and dtype " + dtype_name(op.output_dtypes()[j]));
      }
      StructuredValue& out = values[op.outputs[j]];
      out = StructuredValue{};
      (diagonal ? out.diagonal : out.dense) = std::move(result);
    }
    release_inputs(op);
  };

  // A run is computed where its last op is (the ops between its ops read none of its values:
  // fusable_runs), as one loop when every batched value it reads is dense; a diagonal one
  // keeps its structure through the ops' own rules instead.
  const BatchedFusion fusion = plan_batched_fusion(call.trace, needed, call.outputs, batch);
  for (std::size_t k = 0; k < call.trace.ops.size(); ++k) {
    if (!needed[k]) continue;
    const std::size_t r = fusion.run_of(k);
    if (r == BatchedFusion::kNone) {
      replay_op(k);
      continue;
    }
    const BatchedFusion::Run& run = fusion.runs[r];
    if (run.ops.back() != k) continue;
    inputs.clear();
    for (const TracedInput& in : run.loop.inputs) {
      inputs.push_back(in.value == TracedInput::kConstant ? in.constant : values[in.value].dense);
    }
    const bool all_dense =
        std::all_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined(); });
    if (!all_dense) {
      for (std::size_t member : run.ops) replay_op(member);
      continue;
    }
    std::vector<Tensor> outputs = run_fused(run.loop, inputs);
    inputs.clear();
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      StructuredValue& out = values[run.loop.outputs[o]];
      out = StructuredValue{};
      out.dense = std::move(outputs[o]);
    }
    for (std::size_t member : run.ops) release_inputs(call.trace.ops[member]);
  }

  std::vector<Tensor> result;
  result.reserve(call.outputs.size());
  for (std::size_t j = 0; j < call.outputs.size(); ++j) {
    const TracedInput& out = call.outputs[j];
    if (out.value != TracedInput::kConstant) {
      StructuredValue& v = values[out.value];
      if (final_shapes != nullptr && !v.dense.defined()) {
        result.push_back(dense_of_diagonal(v.diagonal, (*final_shapes)[j]));
        continue;
      }
      result.push_back(dense(v));
    } else if (out.constant.defined()) {
      // fn's output does not depend on the slice: the same for every row.
      result.push_back(broadcast_to(out.constant, with_batch_axis(batch, out.constant.shape())));
    } else {
      result.emplace_back();
    }
    if (final_shapes != nullptr && result.back().defined()) {
      result.back() = reshaped(result.back(), (*final_shapes)[j]);
    }
  }
  return result;
}

std::size_t batch_size_of(const std::vector<Tensor>& elems, const std::string& caller) {
  if (elems.empty()) throw InvalidArgument(caller + ": no elems to map over");
  std::size_t batch = 0;
  for (std::size_t i = 0; i < elems.size(); ++i) {
    const Tensor& e = elems[i];
    if (!e.defined())
      throw InvalidArgument(caller + ": elem " + std::to_string(i) + " is undefined");
    if (e.rank() == 0) {
      throw InvalidArgument(caller + ": elem " + std::to_string(i) +
                            " is a scalar; each elem needs a leading axis to map over");
    }
    if (i == 0) batch = e.shape()[0];
    if (e.shape()[0] != batch) {
      throw InvalidArgument(caller + ": the elems' leading sizes differ: elem 0 has shape " +
                            shape_to_string(elems[0].shape()) + ", elem " + std::to_string(i) +
                            " has shape " + shape_to_string(e.shape()));
    }
  }
  return batch;
}

// A zero-size batch has no example to run fn on. fn is traced once on placeholders (zeros
// shaped like an example, which fn cannot read and whose kernels skip their value checks:
// op_trace.hpp), and the trace is replayed on the empty elems by the batching rules. The
// results' shapes and dtypes are the ops', and no value was invented for anyone to see.
std::vector<Tensor> empty_batch(const BatchFunction& fn, const std::vector<Tensor>& elems,
                                const std::string& caller) {
  std::vector<Tensor> placeholders;
  for (const Tensor& e : elems) {
    placeholders.push_back(zeros(Shape(e.shape().begin() + 1, e.shape().end()), e.dtype()));
  }
  const std::string why = caller +
                          ": the batch is empty, so fn is traced once on placeholders "
                          "(inputs without values) to learn its output shapes";
  TracedCall call;
  try {
    call = trace_call(fn, placeholders, false, true);
  } catch (const Error& e) {
    throw InvalidArgument(why + "; it failed: " + e.what());
  }
  try {
    return replay(call, needed_ops(call), elems, caller, 0);
  } catch (const NotBatchable& e) {
    throw InvalidArgument(why + ", but they depend on its inputs' values: " + e.what());
  }
}

std::vector<Tensor> stacked(const std::vector<std::vector<Tensor>>& rows,
                            const std::string& caller) {
  const std::size_t n_outputs = rows.front().size();
  std::vector<Tensor> result(n_outputs);
  for (std::size_t j = 0; j < n_outputs; ++j) {
    const Tensor* defined = nullptr;
    for (const auto& row : rows) {
      if (row.size() != n_outputs) {
        throw InvalidArgument(caller + ": fn returned " + std::to_string(row.size()) +
                              " outputs for one slice and " + std::to_string(n_outputs) +
                              " for another");
      }
      if (defined == nullptr && row[j].defined()) defined = &row[j];
    }
    if (defined == nullptr) continue;
    std::vector<Tensor> column;
    column.reserve(rows.size());
    for (const auto& row : rows) {
      column.push_back(row[j].defined() ? row[j] : zeros(defined->shape(), defined->dtype()));
    }
    result[j] = stack(column, 0);
  }
  return result;
}

std::vector<Tensor> rows_of(const std::vector<Tensor>& elems, std::size_t begin, std::size_t end) {
  if (begin == 0 && end == elems.front().shape()[0]) return elems;
  std::vector<Tensor> part;
  for (const Tensor& e : elems) {
    std::vector<std::int64_t> start(e.rank(), 0);
    std::vector<std::int64_t> size = signed_shape_of(e);
    start[0] = static_cast<std::int64_t>(begin);
    size[0] = static_cast<std::int64_t>(end - begin);
    part.push_back(slice(e, start, size));
  }
  return part;
}

bool vectorizable(const TracedCall& first, const TracedCall& last, const std::vector<bool>& needed,
                  const VectorizeOptions& options);

}  // namespace

std::vector<Tensor> loop_over_batch(const BatchFunction& fn, const std::vector<Tensor>& elems,
                                    const std::string& caller) {
  const std::size_t batch = batch_size_of(elems, caller);
  if (batch == 0) return empty_batch(fn, elems, caller);
  std::vector<std::vector<Tensor>> rows;
  rows.reserve(batch);
  for (std::size_t b = 0; b < batch; ++b) rows.push_back(fn(slices_at(elems, b)));
  return stacked(rows, caller);
}

namespace {

// The loop over every slice, when the traces of slices 0 and batch - 1 (run in that order)
// cannot be replayed: slice 0's results are the first trace's, and the Generators the second
// trace drew from are rewound to where it started, so the loop over slices 1, 2, ... draws
// what a loop alone would (slice 1 where slice batch - 1's trace began), no numbers more.
std::vector<Tensor> loop_after_traces(const BatchFunction& fn, const std::vector<Tensor>& elems,
                                      std::vector<Tensor> first_results, const TracedCall& last,
                                      const std::string& caller) {
  for (const OpTrace::GeneratorStart& start : last.trace.generator_starts) {
    start.generator->reset(start.generator->seed(), start.counter);
  }
  const std::size_t batch = batch_size_of(elems, caller);
  std::vector<std::vector<Tensor>> rows;
  rows.reserve(batch);
  rows.push_back(std::move(first_results));
  for (std::size_t b = 1; b < batch; ++b) rows.push_back(fn(slices_at(elems, b)));
  return stacked(rows, caller);
}

}  // namespace

std::vector<Tensor> vectorize(const BatchFunction& fn, const std::vector<Tensor>& elems,
                              const VectorizeOptions& options) {
  const std::string& caller = options.caller;
  const std::size_t batch = batch_size_of(elems, caller);
  if (batch == 0) return empty_batch(fn, elems, caller);
  if (batch == 1) return stacked({fn(slices_at(elems, 0))}, caller);  // the loop is one call

  // Slice 0's results are kept: a loop after the traces starts from them.
  TracedCall first = trace_call(fn, slices_at(elems, 0), true);
  const TracedCall last = trace_call(fn, slices_at(elems, batch - 1), batch == 2);
  const std::vector<bool> needed = needed_ops(first);
  if (!vectorizable(first, last, needed, options)) {
    return loop_after_traces(fn, elems, std::move(first.results), last, caller);
  }
  // Two slices: the two traces ran fn on both, so they are the loop already; a replay would
  // only compute the same rows again (e.g. batch_jacobian of 2 values per example).
  if (batch == 2) return stacked({first.results, last.results}, caller);

  const std::size_t step = options.rows_per_pass == 0 ? batch : options.rows_per_pass;
  std::vector<std::vector<Tensor>> parts;
  try {
    if (step >= batch) return replay(first, needed, elems, caller, batch);
    for (std::size_t begin = 0; begin < batch; begin += step) {
      const std::size_t end = std::min(batch, begin + step);
      parts.push_back(replay(first, needed, rows_of(elems, begin, end), caller, end - begin));
    }
  } catch (const NotBatchable& refused) {
    if (!options.fallback_to_loop) throw;
    warn_once(caller + "-not-batchable",
              std::string(refused.what()) + "; fn runs once per slice (a loop) instead");
    return loop_over_batch(fn, elems, caller);
  }
  std::vector<Tensor> result(parts.front().size());
  for (std::size_t j = 0; j < result.size(); ++j) {
    if (!parts.front()[j].defined()) continue;
    std::vector<Tensor> pieces;
    for (const auto& part : parts) pieces.push_back(part[j]);
    result[j] = concat(pieces, 0);
  }
  return result;
}

namespace {

// Whether the traces can be replayed: false after the one-time warning when they cannot and
// fallback_to_loop is set; InvalidArgument when it is not.
bool vectorizable(const TracedCall& first, const TracedCall& last, const std::vector<bool>& needed,
                  const VectorizeOptions& options) {
  const std::string& caller = options.caller;
  std::optional<std::string> why_not;
  std::string key;
  const OpTrace::ValueRead* read = first.trace.unabsorbed_read();
  if (read == nullptr) read = last.trace.unabsorbed_read();
  if (read != nullptr) {
    // Checked first: a read explains any difference between the traces.
    key = caller + "-value-read-" + read->description;
    why_not = caller + ": fn cannot be vectorized: it reads " + read->description +
              " (what C++ reads from a value can steer fn or come back as a new tensor, which "
              "the trace would hold as a constant: slice 0's value for every slice)";
  } else if ((why_not = trace_difference(first, last))) {
    // No value was read from C++, so what differs is an op whose output shape depends on
    // values, or a constant from outside the slices (a random draw, state fn changes).
    key = caller + "-traces-differ";
    *why_not = caller + ": fn cannot be vectorized: " + *why_not +
               ". Either an op's output shape depends on the values (boolean_mask), or fn "
               "draws random numbers or uses state that changes between calls";
  } else {
    for (std::size_t k = 0; k < first.trace.ops.size() && !why_not; ++k) {
      const OpDefinition& op = *first.trace.ops[k].op;
      if (needed[k] && batching_rule_of(op) == nullptr) {
        key = caller + "-no-batching-rule-" + op.name;
        why_not = caller + ": op '" + op.name + "' has no batching rule";
      }
    }
  }
  if (why_not) {
    if (!options.fallback_to_loop) {
      throw InvalidArgument(*why_not + ", and fallback_to_loop is false");
    }
    warn_once(key, *why_not + "; fn runs once per slice (a loop) instead");
    return false;
  }
  return true;
}

// The identity [n] ++ example, built (only for the paths that need it dense).
Tensor identity_batch(const Shape& example, DType dtype) {
  return dense_of_diagonal(ones(example, dtype));
}

// Row b of the identity [n] ++ example: one-hot at flat position b.
Tensor identity_row(const Shape& example, DType dtype, std::size_t b) {
  return dispatch_floating("jacobian", dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = xt::zeros<T>(example);
    a.data()[b] = T(1);
    return Tensor(std::move(a));
  });
}

std::vector<Tensor> reshaped_all(std::vector<Tensor> results, const std::vector<Shape>& shapes) {
  for (std::size_t j = 0; j < results.size(); ++j) {
    if (results[j].defined()) results[j] = reshaped(results[j], shapes[j]);
  }
  return results;
}

}  // namespace

std::vector<Tensor> vectorize_over_identity(const BatchFunction& fn, const Shape& example,
                                            DType dtype, const std::vector<Shape>& final_shapes,
                                            const VectorizeOptions& options) {
  return vectorize_over_identity(fn, example, dtype, FinalShapes([&] { return final_shapes; }),
                                 options);
}

std::vector<Tensor> vectorize_over_identity(const BatchFunction& fn, const Shape& example,
                                            DType dtype, const FinalShapes& final_shapes_of,
                                            const VectorizeOptions& options) {
  const std::size_t n = num_elements(example);
  if (n < 2 || (options.rows_per_pass != 0 && options.rows_per_pass < n)) {
    std::vector<Tensor> results = vectorize(fn, {identity_batch(example, dtype)}, options);
    return reshaped_all(std::move(results), final_shapes_of());
  }
  const TracedCall first = trace_call(fn, {identity_row(example, dtype, 0)});
  const TracedCall last = trace_call(fn, {identity_row(example, dtype, n - 1)});
  const std::vector<bool> needed = needed_ops(first);
  if (!vectorizable(first, last, needed, options)) {
    std::vector<Tensor> results =
        loop_over_batch(fn, {identity_batch(example, dtype)}, options.caller);
    return reshaped_all(std::move(results), final_shapes_of());
  }
  const std::vector<Shape> final_shapes = final_shapes_of();
  if (first.outputs.size() != final_shapes.size()) {
    throw InvalidArgument(options.caller + ": fn returned " + std::to_string(first.outputs.size()) +
                          " outputs for " + std::to_string(final_shapes.size()) + " final shapes");
  }
  const IdentitySeed seed{example, dtype};
  try {
    return replay(first, needed, {}, options.caller, n, &seed, &final_shapes);
  } catch (const NotBatchable& refused) {
    if (!options.fallback_to_loop) throw;
    warn_once(options.caller + "-not-batchable",
              std::string(refused.what()) + "; fn runs once per slice (a loop) instead");
    return reshaped_all(loop_over_batch(fn, {identity_batch(example, dtype)}, options.caller),
                        final_shapes);
  }
}

}  // namespace tapegrad::detail

namespace tapegrad {

std::vector<Tensor> vectorized_map(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& elems, bool fallback_to_loop) {
  detail::VectorizeOptions options;
  options.fallback_to_loop = fallback_to_loop;
  return detail::vectorize(fn, elems, options);
}

Tensor vectorized_map(const std::function<Tensor(const Tensor&)>& fn, const Tensor& elems,
                      bool fallback_to_loop) {
  if (!fn) throw InvalidArgument("vectorized_map: fn is empty");
  const auto one_output = [&fn](const std::vector<Tensor>& slices) {
    return std::vector<Tensor>{fn(slices[0])};
  };
  return vectorized_map(one_output, std::vector<Tensor>{elems}, fallback_to_loop)[0];
}

}  // namespace tapegrad
