// kmeans: the cost is a sum over points of the nearest squared distance; `dir` is the Newton
// direction gradient / Hessian-diagonal, the Hessian-diagonal from a Hessian-vector product
// with ones (the Hessian is diagonal), i.e. reverse over reverse.
#include "evals/evals.hpp"

namespace tapegrad::gradbench {

Tensor kmeans_cost(const Tensor& points, const Tensor& centroids) {
  // Which centroid is nearest is piecewise constant in the centroids, so argmin finds it
  // outside the tape (stop_gradient: nothing of the [n, k] matrix is recorded), and the
  // minimum's derivative is that of the chosen distance (envelope theorem; exact wherever
  // the nearest centroid is unique). ‖p − c‖² = ‖p‖² + ‖c‖² − 2 p·c through one gemm, without
  // ‖p‖², which is the same along a row and so cannot change the argmin.
  const Tensor fixed = stop_gradient(centroids);
  const Tensor centroid_norms = reduce_sum(square(fixed), {1});  // [k]
  const Tensor nearest =
      argmin(centroid_norms - matmul(points, 2.0 * fixed, false, true), 1);  // [n]
  // The differentiable part is [n, d]: each point against its own centroid.
  return reduce_sum(square(points - gather(centroids, nearest)));
}

Tensor kmeans_dir(const Tensor& points, const Tensor& centroids) {
  GradientTape outer;
  outer.watch(centroids);
  Tensor gradient;
  {
    GradientTape inner;
    inner.watch(centroids);
    const Tensor cost = kmeans_cost(points, centroids);
    gradient = inner.gradient(cost, centroids);
  }
  // The Hessian is diagonal, so H·1 is its diagonal.
  const Tensor hessian_diagonal = outer.gradient(reduce_sum(gradient), centroids);
  return gradient / hessian_diagonal;
}

EvalFunctions kmeans_functions() {
  const auto parse = [](const json& input) {
    return std::make_pair(matrix_from_json(input["points"]), matrix_from_json(input["centroids"]));
  };
  return {
      {"cost",
       make_function(
           parse, [](const auto& in) { return number_output(kmeans_cost(in.first, in.second)); })},
      {"dir",
       make_function(
           parse, [](const auto& in) { return nested_output(kmeans_dir(in.first, in.second)); })},
  };
}

}  // namespace tapegrad::gradbench
