// clip_by_norm and clip_by_global_norm: compositions of differentiable ops (no op of their
// own), so their gradients and higher derivatives are those of the parts. Declared with the
// optimizers (tapegrad/optim.hpp), but ops like norm (TF's clip_ops): they live here, where
// they validate their operands as every op does (require_defined, describe, normalize_axes).
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "ops/op_support.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/reduce.hpp"
#include "tapegrad/optim.hpp"

namespace tapegrad {
namespace {

void require_clip_norm(const char* op, double clip_norm) {
  if (!(clip_norm > 0.0) || !std::isfinite(clip_norm)) {
    std::ostringstream os;
    os << op << ": clip_norm must be positive and finite, got " << clip_norm;
    throw InvalidArgument(os.str());
  }
}

// sqrt(s) for s >= 0 whose gradient at s = 0 is 0 instead of NaN (0 * infinity): the zero
// entries take sqrt of 1 on a branch that `where` discards.
Tensor safe_sqrt(const Tensor& sum_of_squares) {
  const Tensor positive = greater(sum_of_squares, zeros_like(sum_of_squares));
  const Tensor safe = where(positive, sum_of_squares, ones_like(sum_of_squares));
  return where(positive, sqrt(safe), sum_of_squares);
}

}  // namespace

Tensor clip_by_norm(const Tensor& x, double clip_norm, std::vector<int> axes) {
  const char* op = "clip_by_norm";
  detail::require_defined(op, x);
  if (!is_floating(x.dtype())) {
    throw InvalidArgument(detail::describe(op, x) + ": x must be float32 or float64");
  }
  require_clip_norm(op, clip_norm);
  const std::vector<std::size_t> normalized = detail::normalize_axes(op, axes, x);
  const std::vector<int> reduced(normalized.begin(), normalized.end());
  const Tensor norm = safe_sqrt(reduce_sum(square(x), reduced, /*keepdims=*/true));
  const Tensor limit = scalar(clip_norm, x.dtype());
  return x * limit / maximum(norm, limit);
}

std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& tensors,
                                                           double clip_norm) {
  const char* op = "clip_by_global_norm";
  require_clip_norm(op, clip_norm);
  Tensor sum_of_squares;
  std::size_t first = tensors.size();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    if (!is_floating(t.dtype())) {
      throw InvalidArgument(std::string(op) + ": entry " + std::to_string(i) + " has dtype " +
                            dtype_name(t.dtype()) + "; only float32 and float64 are clipped");
    }
    if (first == tensors.size()) {
      first = i;
    } else if (t.dtype() != tensors[first].dtype()) {
      throw InvalidArgument(std::string(op) + ": entry " + std::to_string(i) + " has dtype " +
                            dtype_name(t.dtype()) + " but entry " + std::to_string(first) +
                            " has dtype " + dtype_name(tensors[first].dtype()) +
                            "; every entry must have the same dtype");
    }
    const Tensor part = reduce_sum(square(t));
    sum_of_squares = sum_of_squares.defined() ? sum_of_squares + part : part;
  }
  if (!sum_of_squares.defined()) return {tensors, scalar(0.0, DType::Float64)};
  const Tensor global_norm = safe_sqrt(sum_of_squares);
  const Tensor limit = scalar(clip_norm, global_norm.dtype());
  // (norm - norm) is 0 for a finite norm and NaN for an infinite or NaN one: TF's rule that
  // such a list clips to NaN rather than to zeros.
  const Tensor scale = limit / maximum(global_norm, limit) + (global_norm - global_norm);
  std::vector<Tensor> clipped;
  clipped.reserve(tensors.size());
  for (const Tensor& t : tensors) clipped.push_back(t.defined() ? t * scale : Tensor());
  return {std::move(clipped), global_norm};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(clip_norm)
