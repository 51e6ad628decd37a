// clip_by_norm and clip_by_global_norm: compositions of differentiable ops (no op of their
// own), so their gradients and higher derivatives are those of the parts. Declared with the
// optimizers (tapegrad/optim.hpp), but ops like norm (TF's clip_ops): they live here, where
// they validate their operands as every op does (require_defined, describe, normalize_axes).
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ops/op_support.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/ops/array.hpp"
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

// The largest |x| of each group (every axis of `reduced`; all of x when it is empty), or 1
// when that is 0, infinite or NaN: the squares are taken of x / scale, so that a norm float can
// hold is computed even when x^2 overflows (float32 3e20) or underflows to 0 (1e-30). The norm
// does not depend on the scale, so its derivatives through the scale are 0: stop_gradient.
Tensor norm_scale(const Tensor& x, const std::vector<int>& reduced) {
  const Tensor largest = stop_gradient(reduce_max(abs(x), reduced, /*keepdims=*/true));
  const Tensor one = ones_like(largest);
  const Tensor finite =
      where(less(largest, std::numeric_limits<double>::infinity()), largest, one);  // NaN too
  return where(greater(largest, 0.0), finite, one);
}

// x when its norm is within the limit (x itself, bit for bit), else x * limit / norm, computed
// as unit * (limit / unit_norm) with unit = x / scale: unit_norm is at least 1 in that branch,
// so neither the value nor the gradient of the quotient (limit / unit_norm^2) overflows where
// norm^2 would. A NaN norm is not within the limit: NaN. `extra` (0 or NaN) joins the scale.
Tensor clip_to(const Tensor& x, const Tensor& unit, const Tensor& norm, const Tensor& unit_norm,
               const Tensor& limit, const Tensor& extra = Tensor()) {
  const Tensor within = less_equal(norm, limit);
  const Tensor safe_unit_norm = where(within, ones_like(unit_norm), unit_norm);
  Tensor scale = limit / safe_unit_norm;
  if (extra.defined()) scale = scale + extra;
  return where(within, x, unit * scale);
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
  if (x.size() == 0) return identity(x);  // no element to clip (and no maximum to scale by)
  const Tensor divisor = norm_scale(x, reduced);
  const Tensor unit = x / divisor;  // its largest element is 1 in magnitude
  const Tensor unit_norm = safe_sqrt(reduce_sum(square(unit), reduced, /*keepdims=*/true));
  return clip_to(x, unit, divisor * unit_norm, unit_norm, scalar(clip_norm, x.dtype()));
}

std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& tensors,
                                                           double clip_norm) {
  const char* op = "clip_by_global_norm";
  require_clip_norm(op, clip_norm);
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
  }
  if (first == tensors.size()) return {tensors, scalar(0.0, DType::Float64)};
  // One scale for the list: norm_scale of the largest |element| of all entries.
  Tensor largest;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.size() == 0) continue;  // an empty entry adds nothing
    const Tensor part = reduce_max(abs(t));
    largest = largest.defined() ? maximum(largest, part) : part;
  }
  const Tensor divisor =
      largest.defined() ? norm_scale(largest, {}) : scalar(1.0, tensors[first].dtype());
  std::vector<Tensor> units(tensors.size());  // each entry / divisor
  Tensor sum_of_squares;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) continue;
    units[i] = tensors[i] / divisor;
    const Tensor part = reduce_sum(square(units[i]));
    sum_of_squares = sum_of_squares.defined() ? sum_of_squares + part : part;
  }
  const Tensor unit_norm = safe_sqrt(sum_of_squares);
  const Tensor global_norm = divisor * unit_norm;
  const Tensor limit = scalar(clip_norm, global_norm.dtype());
  // (norm - norm) is 0 for a finite norm and NaN for an infinite or NaN one: TF's rule that
  // such a list clips to NaN rather than to zeros.
  const Tensor not_finite = global_norm - global_norm;
  std::vector<Tensor> clipped;
  clipped.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    clipped.push_back(tensors[i].defined()
                          ? clip_to(tensors[i], units[i], global_norm, unit_norm, limit, not_finite)
                          : Tensor());
  }
  return {std::move(clipped), global_norm};
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(clip_norm)
