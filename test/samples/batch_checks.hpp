// What the batching checks compare a call of fn under vectorized_map (or through a Function,
// or on strided views) with: the loop of fn over the slices, the names of the ops fn traces,
// per-example gradients, and views whose elements are not where a contiguous tensor keeps
// them. Shared by the sample driver (test_op_samples.cpp) and test_vectorized_map.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "runtime/op_registry.hpp"
#include "runtime/op_trace.hpp"
#include "samples/op_sample.hpp"
#include "support.hpp"

namespace tapegrad::samples {

using testing::values;

// The reference: fn on each slice (slice + reshape), the outputs stacked.
inline std::vector<Tensor> loop_reference(const RunFn& fn, const std::vector<Tensor>& elems) {
  const std::size_t batch = elems[0].shape()[0];
  std::vector<std::vector<Tensor>> rows;
  for (std::size_t b = 0; b < batch; ++b) {
    std::vector<Tensor> slices;
    for (const Tensor& e : elems) {
      std::vector<std::int64_t> begin(e.rank(), 0), size(e.shape().begin(), e.shape().end());
      begin[0] = static_cast<std::int64_t>(b);
      size[0] = 1;
      std::vector<std::int64_t> example(e.shape().begin() + 1, e.shape().end());
      slices.push_back(reshape(slice(e, begin, size), example));
    }
    rows.push_back(fn(slices));
  }
  std::vector<Tensor> out;
  for (std::size_t j = 0; j < rows[0].size(); ++j) {
    std::vector<Tensor> column;
    for (auto& row : rows) column.push_back(row[j]);
    out.push_back(stack(column, 0));
  }
  return out;
}

inline void require_same(const Tensor& actual, const Tensor& expected, double tolerance = 1e-10) {
  REQUIRE(actual.defined());
  REQUIRE(actual.dtype() == expected.dtype());
  testing::require_close(actual, expected.shape(), values(expected), tolerance);
}

// vectorized_map without fallback (so every op must have its rule) equals the loop.
inline void require_vectorizes(const RunFn& fn, const std::vector<Tensor>& elems,
                               double tolerance = 1e-10) {
  const std::vector<Tensor> got = vectorized_map(fn, elems, /*fallback_to_loop=*/false);
  const std::vector<Tensor> expected = loop_reference(fn, elems);
  REQUIRE(got.size() == expected.size());
  for (std::size_t j = 0; j < got.size(); ++j) {
    INFO("output " << j);
    require_same(got[j], expected[j], tolerance);
  }
}

// The names of the ops fn runs on slice 0 that depend on it (what the trace holds).
inline std::set<std::string> traced_ops(const RunFn& fn, const std::vector<Tensor>& elems) {
  detail::OpTrace trace;
  std::vector<Tensor> slices;
  for (const Tensor& e : elems) {
    slices.push_back(gather(e, from_values({0}, Shape{}, DType::Int64), 0));
    trace.add_value(slices.back());
  }
  {
    detail::TraceScope scope(trace);
    fn(slices);
  }
  std::set<std::string> names;
  for (const auto& op : trace.ops) names.insert(op.op->name);
  return names;
}

// The gradient of fn's floating outputs (through sin, so that each output gradient depends on
// the output) with respect to fn's floating inputs: what a per-example gradient under
// vectorized_map computes. Unconnected inputs get zeros.
inline RunFn per_example_gradient(const RunFn& fn) {
  return [fn](const std::vector<Tensor>& in) {
    GradientTape tape;
    std::vector<Tensor> sources;
    for (const Tensor& t : in) {
      if (!is_floating(t.dtype())) continue;
      tape.watch(t);
      sources.push_back(t);
    }
    Tensor loss = scalar(0.0, DType::Float64);
    for (const Tensor& out : fn(in)) {
      if (out.defined() && is_floating(out.dtype())) {
        loss = loss + reduce_sum(sin(cast(out, DType::Float64)));
      }
    }
    return tape.gradient(loss, sources, UnconnectedGradients::Zero);
  };
}

inline bool has_floating(const std::vector<Tensor>& elems) {
  return std::any_of(elems.begin(), elems.end(),
                     [](const Tensor& t) { return is_floating(t.dtype()); });
}

// ---- strided views (docs/guide.md "Memory") -----------------------------------------------

inline std::vector<std::int64_t> signed_dims(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

// A tensor of its own (never a view) with t's dtype, shape and values.
inline Tensor contiguous_copy(const Tensor& t) {
  return from_values(values(t), t.shape(), t.dtype());
}

// Example b of a batched input, as a tensor of its own.
inline Tensor example(const Tensor& batched_input, std::size_t b) {
  std::vector<std::int64_t> begin(batched_input.rank(), 0);
  std::vector<std::int64_t> size(batched_input.shape().begin(), batched_input.shape().end());
  begin[0] = static_cast<std::int64_t>(b);
  size[0] = 1;
  const Shape one(batched_input.shape().begin() + 1, batched_input.shape().end());
  return contiguous_copy(reshape(slice(batched_input, begin, size),
                                 std::vector<std::int64_t>(one.begin(), one.end())));
}

// Views with t's values: a contiguous one that starts inside its buffer, and three whose
// elements are not where a contiguous tensor keeps them: a transpose (permuted strides), an
// inner box of a larger tensor (strides with gaps) and a reverse (negative strides).
inline Tensor transposed_view(const Tensor& t) {
  if (t.rank() < 2) return t;
  return transpose(contiguous_copy(transpose(t)));
}
inline Tensor boxed_view(const Tensor& t) {
  Shape outer = t.shape();
  for (auto& d : outer) d += 2;
  std::vector<double> v(num_elements(outer), 0.0);
  const std::vector<double> inner = values(t);
  std::vector<std::int64_t> begin(t.rank(), 1);
  // Place t's values at [1, 1, ...] inside `outer`.
  std::vector<std::size_t> index(t.rank(), 0);
  for (std::size_t i = 0; i < inner.size(); ++i) {
    std::size_t flat = 0;
    for (std::size_t d = 0; d < t.rank(); ++d) flat = flat * outer[d] + index[d] + 1;
    v[flat] = inner[i];
    for (std::size_t d = t.rank(); d-- > 0;) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
  const Tensor big = from_values(v, outer, t.dtype());
  return slice(big, begin, signed_dims(t.shape()));
}
// Contiguous, but not at the start of its buffer: kernels read it in place.
inline Tensor offset_view(const Tensor& t) {
  std::vector<double> v(t.size() + 3, 1.0);
  const std::vector<double> own = values(t);
  std::copy(own.begin(), own.end(), v.begin() + 3);
  const Tensor big = from_values(v, {v.size()}, t.dtype());
  return reshape(slice(big, {3}, {static_cast<std::int64_t>(t.size())}), signed_dims(t.shape()));
}
inline Tensor reversed_view(const Tensor& t) {
  std::vector<int> all(t.rank());
  for (std::size_t d = 0; d < t.rank(); ++d) all[d] = static_cast<int>(d);
  return reverse(contiguous_copy(reverse(t, all)), all);
}

// Equal values, NaN equal to NaN.
inline bool same_values(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const auto x = values(a), y = values(b);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i] && !(std::isnan(x[i]) && std::isnan(y[i]))) return false;
  }
  return true;
}

// ---- replay through a Function --------------------------------------------------------------

// Whether `op` (a built-in op's name) has a replay rule.
inline bool replays(const std::string& op) {
  for (const detail::OpDefinition* d : detail::builtin_ops()) {
    if (op == d->name) return d->replay_rule != nullptr;
  }
  return false;
}

// fn through tapegrad::function: traced on example 0 of each input, then called on example 1.
// The second call must be a replay (fn does not run) when every op fn traced has a replay
// rule, and eager otherwise; either way its results equal fn's own on example 1 exactly.
// Returns the names of the ops that were replayed.
inline std::set<std::string> check_function_replay(const RunFn& fn,
                                                   const std::vector<Tensor>& elems,
                                                   bool optimize) {
  std::vector<Tensor> first, second;
  for (const Tensor& e : elems) {
    first.push_back(example(e, 0));
    second.push_back(example(e, 1));
  }
  const std::set<std::string> ran = traced_ops(fn, elems);
  const bool every_op_replays =
      std::all_of(ran.begin(), ran.end(), [](const std::string& op) { return replays(op); });
  std::size_t calls = 0;
  FunctionOptions options;
  options.optimize = optimize;
  const Function f = function(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        return fn(in);
      },
      options);
  const std::vector<Tensor> traced = f(first);
  const std::vector<Tensor> expected_first = fn(first);
  REQUIRE(traced.size() == expected_first.size());
  for (std::size_t k = 0; k < traced.size(); ++k) CHECK(same_values(traced[k], expected_first[k]));
  const std::vector<Tensor> got = f(second);
  CHECK(f.trace_count() == 1);
  INFO("every traced op has a replay rule: " << every_op_replays);
  CHECK(calls == (every_op_replays ? 1 : 2));
  const std::vector<Tensor> expected = fn(second);
  REQUIRE(got.size() == expected.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("output " << k);
    CHECK(same_values(got[k], expected[k]));
  }
  return every_op_replays ? ran : std::set<std::string>{};
}

}  // namespace tapegrad::samples
