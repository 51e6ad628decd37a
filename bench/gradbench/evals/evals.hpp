// The GradBench evals, written as a tapegrad user would write them: array ops for the
// function, tapes for its derivatives. Each eval has its pure functions (used by the tool
// and by test/test_gradbench_evals.cpp) and a table of the GradBench functions it answers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tool.hpp"

namespace tapegrad::gradbench {

// hello: x², its derivative.
EvalFunctions hello_functions();

// llsq: ½ Σ_i (s_i − Σ_j x_j t_i^j)², t_i = −1 + 2i/(n−1), s_i = sign(t_i).
Tensor llsq_primal(const Tensor& x, std::size_t n);
EvalFunctions llsq_functions();

// lse: log Σ exp(x_i), as a + log Σ exp(x_i − a), a = max x.
Tensor lse_primal(const Tensor& x);
EvalFunctions lse_functions();

// ode: y' = f(y), f_0 = x_0, f_i = x_i y_{i−1}, y(0) = 0, s RK4 steps to t = 2; returns y(2).
Tensor ode_primal(const Tensor& x, std::size_t steps);
EvalFunctions ode_functions();

// kmeans: Σ_i min_j ‖p_i − c_j‖²; dir = gradient / Hessian diagonal (w.r.t. the centroids).
Tensor kmeans_cost(const Tensor& points, const Tensor& centroids);
Tensor kmeans_dir(const Tensor& points, const Tensor& centroids);
EvalFunctions kmeans_functions();

// gmm: the log-posterior of a Gaussian mixture with a Wishart prior (ADBench's GMM).
struct GmmParameters {
  Tensor alpha;  // [k]
  Tensor mu;     // [k, d]
  Tensor q;      // [k, d]   log of Q's diagonal
  Tensor l;      // [k, d(d−1)/2]   Q's strict lower triangle, column by column
};
struct GmmData {
  Tensor x;  // [n, d]
  double gamma = 1;
  int m = 0;
};
template <class Visit>
void for_each_tensor(GmmParameters& p, Visit& visit) {
  for (Tensor* t : {&p.alpha, &p.mu, &p.q, &p.l}) visit(*t);
}
template <class Visit>
void for_each_tensor(GmmData& data, Visit& visit) {
  visit(data.x);
}
Tensor gmm_objective(const GmmParameters& p, const GmmData& data);
EvalFunctions gmm_functions();

// lstm: ADBench's diagonal LSTM; the loss of predicting each next character.
struct LstmData {
  Tensor state;     // [2l, b]: hidden and cell of each layer
  Tensor sequence;  // [c, b]
};
template <class Visit>
void for_each_tensor(LstmData& data, Visit& visit) {
  visit(data.state);
  visit(data.sequence);
}
Tensor lstm_objective(const Tensor& main_params /*[2l, 4b]*/, const Tensor& extra_params /*[3, b]*/,
                      const LstmData& data);
EvalFunctions lstm_functions();

// det: expansion by minors along the first row (ell! products). The plan holds, for every
// row, which entries of A each node of the expansion multiplies by: it depends on ell only,
// so it is built once per input, outside the timed work.
struct DeterminantPlan {
  struct Level {
    // Int64 [nodes * free]: each node's free columns, as indices into [A, -A] flattened:
    // row * ell + column, plus ell * ell where the cofactor sign is negative (odd positions).
    Tensor flat_index;
    std::int64_t nodes;
    std::int64_t free;
  };
  explicit DeterminantPlan(std::size_t ell);
  std::size_t ell;
  std::vector<Level> levels;
};
Tensor det_by_minors(const Tensor& a, const DeterminantPlan& plan);
EvalFunctions det_functions();

// ba: one camera, point and weight replicated into n cameras, m points and p observations
// as GradBench's input describes (observation i sees camera i mod n and point i mod m).
struct BaProblem {
  explicit BaProblem(const json& input);
  // [p, 15]: each observation's camera (11), point (3) and weight (1), gathered.
  Tensor observation_inputs() const;
  // The same as 15 rows: each input of every observation as one contiguous [1, p] row (the
  // columns of [p, 15] are strided: each op reading one copied it, and each copy read a cache
  // line of every row), parts of the gathered [11, p] and [3, p] and the weights.
  std::vector<Tensor> observation_rows() const;
  std::int64_t cameras, points, observations;
  Tensor camera_parameters;  // [n, 11]
  Tensor point_positions;    // [m, 3]
  Tensor weights;            // [p, 1]
  Tensor features;           // [p, 2]
  Tensor camera_index;       // Int64 [p]
  Tensor point_index;        // Int64 [p]
  // The by-row layouts, made when the input is read: [11, n], [3, m], [1, p], [2, p].
  Tensor camera_rows, point_rows, weight_row, feature_rows;
};
// Weighted reprojection residuals [p, 2] of the [p, 15] observation inputs.
template <class Visit>
void for_each_tensor(BaProblem& problem, Visit& visit) {
  for (Tensor* t :
       {&problem.camera_parameters, &problem.point_positions, &problem.weights, &problem.features,
        &problem.camera_index, &problem.point_index, &problem.camera_rows, &problem.point_rows,
        &problem.weight_row, &problem.feature_rows}) {
    visit(*t);
  }
}
Tensor ba_residuals(const Tensor& inputs, const Tensor& features);
// The same as two columns, from the 15 input columns (r 3, C 3, f, u0, v0, k1, k2, X 3, w)
// and the 2 feature columns, all of one shape: [p, 1], or [1, p] rows.
std::array<Tensor, 2> ba_residual_columns(const std::vector<Tensor>& columns,
                                          const std::vector<Tensor>& feature);
EvalFunctions ba_functions();

// ht: ADBench's hand model and the data points it is fitted to.
struct HandModel {
  explicit HandModel(const json& input);
  // Residuals [N, 3] for the 26 pose parameters (and, complicated, each point's [N, 2]
  // barycentric coordinates).
  Tensor residuals(const Tensor& theta, const Tensor& barycentric) const;
  // [3N, 26], or [3N, 28] when complicated (columns 0, 1: the point's own u0, u1).
  Tensor jacobian(const Tensor& theta) const;
  // The same as its blocks of columns: [3N, 26], or [3N, 2] and [3N, 26] when complicated
  // (the tool writes their rows joined, as it writes the JSON).
  std::vector<Tensor> jacobian_blocks(const Tensor& theta) const;
  std::vector<int> parents;
  Tensor base_relatives, inverse_base_absolutes;  // [22, 4, 4]
  Tensor base_positions;                          // [4, V]
  Tensor weights;                                 // [22, 1, V]
  Tensor weighted_positions;            // [V, 22·4]: weight(v, bone) · base position (bone, row)
  Tensor points;                        // [N, 3]
  Tensor vertex_a, vertex_b, vertex_c;  // Int64 [N]: simple uses vertex_a only
  Tensor us;                            // [N, 2], complicated only
  Tensor angle_source;                  // Int64 [66]
  bool mirrored = false;
  bool complicated = false;
};
EvalFunctions ht_functions();

// saddle and particle: nested derivatives through GradBench's gradient-descent solver, in
// every mode pair (outer, inner) of forward and reverse.
enum class DiffMode { Forward, Reverse };
// The gradient of a scalar function of x [n]: one tape (Reverse) or n jvps (Forward).
Tensor gradient_in_mode(DiffMode mode, const std::function<Tensor(const Tensor&)>& f,
                        const Tensor& x);
// saddle: max over q of p² − q², q found by the solver from `start` with `inner` gradients.
Tensor saddle_max_over_q(const Tensor& p, const Tensor& start, DiffMode inner);
// particle: the landing x² for the charge offset w [1], the acceleration by `inner` gradients.
Tensor particle_final_x_squared(const Tensor& w, DiffMode inner);
EvalFunctions saddle_functions();
EvalFunctions particle_functions();

}  // namespace tapegrad::gradbench
