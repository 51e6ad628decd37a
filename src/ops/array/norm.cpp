// norm (TF tf.norm), built from recorded ops. The roots (sqrt, s^(1/p)) go through a guarded
// form, where(s == 0, 0, root(where(s == 0, 1, s))): at a zero vector the root's branch is never
// taken, so the gradient there is 0 (a subgradient) instead of 0 * inf = NaN, and away from
// zero it is the plain root's, to every order. The test is s == 0, not s > 0: a NaN sum must
// reach the root and stay NaN.
#include <cmath>
#include <functional>
#include <limits>

#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/indexing.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

static Tensor guarded_root(const Tensor& s, double p) {
  const Tensor zero = scalar(0.0, s.dtype());
  const Tensor is_zero = equal(s, zero);
  const Tensor safe = where(is_zero, scalar(1.0, s.dtype()), s);
  const Tensor root = p == 2 ? sqrt(safe) : pow(safe, 1.0 / p);
  return where(is_zero, zero, root);
}

// ord as a number: 2 for "euclidean"/"fro", infinity for "inf", else the number written.
static double parse_ord(const std::string& ord,
                        const std::function<void(const std::string&)>& fail) {
  if (ord == "euclidean" || ord == "fro") return 2;
  if (ord == "inf") return std::numeric_limits<double>::infinity();
  std::size_t used = 0;
  double p = 0;
  try {
    p = std::stod(ord, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != ord.size() || ord.empty() || !(p > 0)) {
    fail("ord must be \"euclidean\", \"fro\", \"inf\" or a number > 0");
  }
  return p;
}

// The p-norm of x over `axes` (removed).
static Tensor vector_norm(const Tensor& x, double p, const std::vector<int>& axes) {
  if (std::isinf(p)) return reduce_max(abs(x), axes);
  if (p == 1) return reduce_sum(abs(x), axes);
  if (p == 2) return guarded_root(reduce_sum(square(x), axes), 2);
  return guarded_root(reduce_sum(pow(abs(x), p), axes), p);
}

Tensor norm(const Tensor& x, const std::string& ord, std::vector<int> axes) {
  detail::require_defined("norm", x);
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("norm", x) + ", ord \"" + ord + "\", axes " +
                          detail::ints_to_string(axes) + ": " + why);
  };
  if (!is_floating(x.dtype())) fail("x must be float32 or float64");
  const double p = parse_ord(ord, fail);
  if (axes.size() > 2) fail("axes must name at most two dimensions");
  std::vector<std::size_t> dims;
  for (int axis : axes) dims.push_back(detail::normalize_axis("norm", axis, x));
  if (dims.size() == 2 && dims[0] == dims[1]) fail("the two axes must differ");
  if (ord == "fro" && dims.size() == 1) fail("\"fro\" is a matrix norm: give two axes or none");
  if (dims.size() < 2 || ord == "euclidean" || ord == "fro") return vector_norm(x, p, axes);
  // Matrix norms over (rows, columns) = (axes[0], axes[1]): 1 is the largest column sum of
  // |x|, inf the largest row sum.
  if (p != 1 && !std::isinf(p))
    fail("matrix norms support \"fro\", \"euclidean\", \"1\" and \"inf\"");
  const int summed = std::isinf(p) ? axes[1] : axes[0];
  const int maxed = std::isinf(p) ? axes[0] : axes[1];
  const Tensor sums = reduce_sum(abs(x), {summed}, /*keepdims=*/true);
  return squeeze(reduce_max(sums, {maxed}, /*keepdims=*/true), {axes[0], axes[1]});
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(norm)
