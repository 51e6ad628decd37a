// The functional forms of forward mode: jvp and jacobian_forward, each one accumulator (per
// column) around a call of f.
#include <optional>
#include <string>

#include "derivatives/function_result.hpp"
#include "derivatives/vectorize.hpp"
#include "tapegrad/forward.hpp"
#include "tapegrad/ops/array.hpp"

namespace tapegrad {

namespace {

// x's shape as reshape takes it, after `leading`.
std::vector<std::int64_t> joined_dims(const Shape& leading, const Shape& trailing) {
  std::vector<std::int64_t> dims;
  dims.reserve(leading.size() + trailing.size());
  for (std::size_t d : leading) dims.push_back(static_cast<std::int64_t>(d));
  for (std::size_t d : trailing) dims.push_back(static_cast<std::int64_t>(d));
  return dims;
}

}  // namespace

std::pair<Tensor, Tensor> jvp(const Fn& f, const std::vector<Tensor>& primals,
                              const std::vector<Tensor>& tangents) {
  // Each floating primal as a tensor of its own (an identity, so that outer tapes and
  // accumulators still connect it to the caller's): f(x, x) with two tangents is the sum of
  // both directional derivatives.
  std::vector<Tensor> inputs;
  inputs.reserve(primals.size());
  for (std::size_t i = 0; i < primals.size(); ++i) {
    if (!primals[i].defined()) {
      throw InvalidArgument("jvp: primal " + std::to_string(i) + " is undefined");
    }
    inputs.push_back(is_floating(primals[i].dtype()) ? identity(primals[i]) : primals[i]);
  }
  ForwardAccumulator accumulator(inputs, tangents);
  Tensor y = f(inputs);
  detail::require_function_result(y, "jvp");
  Tensor tangent = accumulator.jvp(y, UnconnectedGradients::Zero);
  return {y, tangent};
}

Tensor jacobian_forward(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  if (!x.defined()) throw InvalidArgument("jacobian_forward: x is undefined");
  if (!is_floating(x.dtype())) {
    throw InvalidArgument(std::string("jacobian_forward: x must be float32 or float64, got ") +
                          dtype_name(x.dtype()));
  }
  const std::size_t n = x.size();
  if (n == 0) {
    Tensor y = f(x);
    detail::require_function_result(y, "jacobian_forward");
    Shape shape = y.shape();
    shape.insert(shape.end(), x.shape().begin(), x.shape().end());
    return zeros(shape, y.dtype());
  }
  // Column j is the derivative along the j-th basis vector of x's space. The columns are one
  // vectorized pass (derivatives/vectorize.hpp): the tangent computation is traced for two
  // basis vectors and replayed over all of them at once by the ops' batching rules, with the
  // identity kept diagonal while the ops allow it; an op without a batching rule makes it a
  // loop of one accumulator per column (with vectorized_map's one-time warning).
  // y's shape is learnt from the first call (a trace), not from a primal call of its own.
  std::optional<Shape> y_shape;
  const detail::BatchFunction column = [&](const std::vector<Tensor>& direction) {
    ForwardAccumulator accumulator(x, direction[0]);
    Tensor value = f(x);
    detail::require_function_result(value, "jacobian_forward");
    if (!y_shape) {
      y_shape = value.shape();
    } else if (value.shape() != *y_shape) {
      throw InvalidArgument("jacobian_forward: f returned shape " + shape_to_string(value.shape()) +
                            " on one call and " + shape_to_string(*y_shape) + " on another");
    }
    return std::vector<Tensor>{accumulator.jvp(value, UnconnectedGradients::Zero)};
  };
  detail::VectorizeOptions options;
  options.caller = "jacobian_forward";
  // The columns come out as [n] ++ y.shape and one transpose moves that axis last (the
  // transpose merges y's axes, so it is a matrix transpose); only x's shape, when not [n],
  // needs a reshape.
  Shape columns_shape{n};
  const auto final_shapes = [&] {
    columns_shape.insert(columns_shape.end(), y_shape->begin(), y_shape->end());
    return std::vector<Shape>{columns_shape};
  };
  const Tensor columns = detail::vectorize_over_identity(
      column, x.shape(), x.dtype(), detail::FinalShapes(final_shapes), options)[0];
  std::vector<int> column_axis_last(columns_shape.size());
  for (std::size_t d = 0; d + 1 < columns_shape.size(); ++d)
    column_axis_last[d] = static_cast<int>(d + 1);
  column_axis_last.back() = 0;
  const Tensor result = transpose(columns, column_axis_last);
  if (x.rank() == 1) return result;
  return reshape(result, joined_dims(*y_shape, x.shape()));
}

}  // namespace tapegrad
