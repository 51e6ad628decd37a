// The generic batching rules' shared steps, and BatchingContext's accessors.
#include "ops/batching_support.hpp"

#include <string>

#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad::detail {

Shape BatchingContext::batched_output_shape(std::size_t j) const {
  return with_batch_axis(batch_size, output_shapes.at(j));
}

Tensor align_batched(const Tensor& x, std::size_t example_rank, std::size_t rank) {
  if (example_rank >= rank) return x;
  const Shape& s = x.shape();
  std::vector<std::int64_t> target{static_cast<std::int64_t>(s[0])};
  target.insert(target.end(), rank - example_rank, 1);
  target.insert(target.end(), s.begin() + 1, s.end());
  return reshape(x, target);
}

Tensor with_batch_axis(const BatchingContext& op, const std::vector<Tensor>& inputs,
                       std::size_t i) {
  if (op.is_batched(i)) return inputs[i];
  Shape shape{op.batch_size};
  shape.insert(shape.end(), inputs[i].shape().begin(), inputs[i].shape().end());
  return broadcast_to(inputs[i], shape);
}

Tensor move_axis_to_front(const Tensor& x, std::size_t from) {
  if (from == 0) return x;
  std::vector<int> perm{static_cast<int>(from)};
  for (std::size_t d = 0; d < x.rank(); ++d) {
    if (d != from) perm.push_back(static_cast<int>(d));
  }
  return transpose(x, perm);
}

Tensor move_front_axis_to(const Tensor& x, std::size_t to) {
  if (to == 0) return x;
  std::vector<int> perm;
  for (std::size_t d = 1; d <= to; ++d) perm.push_back(static_cast<int>(d));
  perm.push_back(0);
  for (std::size_t d = to + 1; d < x.rank(); ++d) perm.push_back(static_cast<int>(d));
  return transpose(x, perm);
}

std::vector<Tensor> aligned_for_broadcast(const BatchingContext& op,
                                          const std::vector<Tensor>& inputs) {
  std::size_t rank = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    rank = std::max(rank, example_rank(op, inputs, i));
  }
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    out.push_back(op.is_batched(i) ? align_batched(inputs[i], example_rank(op, inputs, i), rank)
                                   : inputs[i]);
  }
  return out;
}

namespace {

// The recorded integer `name` of `op`; InvalidArgument naming `caller` when it is missing.
int recorded_int(const char* caller, const char* purpose, const OpDefinition& op,
                 const Attrs* attrs, const char* name) {
  if (attrs == nullptr || !attrs->has(name)) {
    throw InvalidArgument(std::string(caller) + ": op '" + op.name + "' recorded no attribute '" +
                          name + "' to " + purpose + " it with");
  }
  return static_cast<int>(attrs->get_int(name));
}

// The recorded "axes", each plus `shift`.
std::vector<int> recorded_axes(const Attrs& attrs, int shift) {
  std::vector<int> axes;
  for (std::int64_t a : attrs.get_ints("axes")) axes.push_back(static_cast<int>(a) + shift);
  return axes;
}

}  // namespace

int shifted_axis(const BatchingContext& op, const char* name) {
  return recorded_int("vectorized_map", "batch", op.op, op.recorded_attrs, name) + 1;
}

std::vector<Tensor> reduce_batch(const BatchingContext& op, const std::vector<Tensor>& inputs,
                                 Tensor (*reduce)(const Tensor&, std::vector<int>, bool)) {
  const std::vector<int> axes = recorded_axes(op.attrs(), 1);
  if (axes.empty()) return {inputs[0]};  // a rank-0 example: nothing is reduced
  return {reduce(inputs[0], axes, op.attrs().get_bool("keepdims"))};
}

int recorded_axis(const ReplayContext& op, const char* name) {
  return recorded_int("function", "replay", op.op, op.recorded_attrs, name);
}

// Recorded empty only for a rank-0 input, where "every axis" (an empty list) is none too.
ReplayOutputs replay_reduce(const ReplayContext& op, const std::vector<Tensor>& inputs,
                            Tensor (*reduce)(const Tensor&, std::vector<int>, bool)) {
  return reduce(inputs[0], recorded_axes(op.attrs(), 0), op.attrs().get_bool("keepdims"));
}

std::vector<Tensor> row_of(const BatchingContext& op, const std::vector<Tensor>& inputs,
                           std::size_t b) {
  const Tensor index = from_values({static_cast<double>(b)}, Shape{}, DType::Int64);
  std::vector<Tensor> row;
  row.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    row.push_back(op.is_batched(i) ? gather(inputs[i], index, 0) : inputs[i]);
  }
  return row;
}

std::vector<Tensor> stack_rows(const std::vector<std::vector<Tensor>>& rows) {
  std::vector<Tensor> outputs;
  if (rows.empty()) return outputs;
  for (std::size_t j = 0; j < rows.front().size(); ++j) {
    std::vector<Tensor> column;
    column.reserve(rows.size());
    for (const auto& row : rows) column.push_back(row[j]);
    outputs.push_back(stack(column, 0));
  }
  return outputs;
}

bool only_first_batched(const BatchingContext& op, const std::vector<Tensor>& inputs) {
  bool only_first = op.is_batched(0) && inputs[0].rank() >= 2;
  for (std::size_t i = 1; i < inputs.size(); ++i) only_first = only_first && !op.is_batched(i);
  return only_first;
}

std::vector<Tensor> merged_into_first_axis(const BatchingContext& op,
                                           const std::vector<Tensor>& inputs,
                                           const BatchForward& forward) {
  std::vector<Tensor> merged = inputs;
  merged[0] = merge_first_two_axes(inputs[0]);
  std::vector<Tensor> outputs = forward(merged);
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    outputs[j] = split_first_axis(outputs[j], op.batch_size, op.output_shapes.at(j).at(0));
  }
  return outputs;
}

std::vector<Tensor> row_by_row(const BatchingContext& op, const std::vector<Tensor>& inputs,
                               const BatchForward& forward) {
  std::vector<std::vector<Tensor>> rows;
  rows.reserve(op.batch_size);
  for (std::size_t b = 0; b < op.batch_size; ++b) rows.push_back(forward(row_of(op, inputs, b)));
  if (rows.empty()) {
    // No row to stack: empty outputs of the batched shapes.
    std::vector<Tensor> outputs;
    for (std::size_t j = 0; j < op.output_shapes.size(); ++j) {
      outputs.push_back(zeros(op.batched_output_shape(j), op.output_dtypes.at(j)));
    }
    return outputs;
  }
  return stack_rows(rows);
}

std::vector<Tensor> batch_into_first_axis(const BatchingContext& op,
                                          const std::vector<Tensor>& inputs,
                                          const BatchForward& forward) {
  return only_first_batched(op, inputs) ? merged_into_first_axis(op, inputs, forward)
                                        : row_by_row(op, inputs, forward);
}

Tensor merge_first_two_axes(const Tensor& x) {
  std::vector<std::int64_t> shape{-1};
  shape.insert(shape.end(), x.shape().begin() + 2, x.shape().end());
  if (x.size() == 0) shape[0] = static_cast<std::int64_t>(x.shape()[0] * x.shape()[1]);
  return reshape(x, shape);
}

Tensor split_first_axis(const Tensor& x, std::size_t batch, std::size_t examples) {
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(batch),
                                  static_cast<std::int64_t>(examples)};
  shape.insert(shape.end(), x.shape().begin() + 1, x.shape().end());
  return reshape(x, shape);
}

}  // namespace tapegrad::detail

TAPEGRAD_OP_SOURCE(batching_support)
