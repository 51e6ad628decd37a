// Optimizers that apply gradients to Variables (TF: tf.keras.optimizers.SGD and Adam;
// PyTorch: torch.optim.AdamW and LBFGS), and gradient clipping by norm (TF: tf.clip_by_norm,
// tf.clip_by_global_norm).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"

namespace tapegrad {

namespace detail {
struct OptimizerState;
}

/// Updates variables in place from (gradient, variable) pairs (TF: Optimizer.apply_gradients).
/// Slots (momentum, Adam's m and v) are created on a variable's first update, zero-filled,
/// keyed by Variable::id(). Updates are not recorded on any tape. An optimizer object is not
/// meant to be shared between threads.
///
/// Errors (InvalidArgument naming the optimizer and the variable): a dense gradient whose
/// shape or dtype differs from the variable's; an IndexedSlices whose dense_shape is not the
/// variable's shape, whose values are not [n, shape[1:]...] of the variable's dtype, or whose
/// indices are not Int32/Int64 [n] within [0, shape[0]). An undefined gradient skips its
/// variable (a warning is printed once, as TF warns).
class Optimizer {
 public:
  // Out of line, as each optimizer's: a user's program that owns one does not compile the
  // destruction of its slot map.
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void apply_gradients(const std::vector<std::pair<Tensor, Variable>>& grads_and_vars);
  /// Gradients that may be row-sparse (TF: IndexedSlices from gather): only the named rows
  /// are touched by SGD; duplicate indices are summed first.
  void apply_gradients(const std::vector<std::pair<GradientValue, Variable>>& grads_and_vars);
  /// Makes `apply_gradients({{g, v}, ...})` unambiguous between the two overloads above.
  void apply_gradients(std::initializer_list<std::pair<Tensor, Variable>> grads_and_vars);

  /// Number of apply_gradients calls so far (TF: optimizer.iterations).
  std::int64_t iterations() const { return iterations_; }
  /// The slot `name` of `variable` (TF: get_slot). InvalidArgument when there is none yet.
  Tensor slot(const Variable& variable, const std::string& name) const;
  /// The slot names this optimizer keeps per variable (TF: get_slot_names).
  virtual std::vector<std::string> slot_names() const = 0;

 protected:
  Optimizer() = default;

  /// The slots of one variable, in slot_names() order, float64 or float32 like the variable.
  using Slots = std::vector<Tensor>;

  /// `step` is iterations() + 1 during the call (the Adam bias correction uses it).
  virtual void update_dense(Variable& variable, const Tensor& grad, Slots& slots,
                            std::int64_t step) = 0;
  /// `unique_indices` has no repeats; `summed_rows` holds the summed gradient rows for them,
  /// [k, shape[1:]...], same dtype as the variable.
  virtual void update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                             const Tensor& summed_rows, Slots& slots, std::int64_t step) = 0;

  virtual const char* name() const = 0;

 private:
  friend struct detail::OptimizerState;  // what a Checkpoint saves and restores
  /// The learning rate a Checkpoint saves and restores; NaN for an optimizer without one.
  virtual double checkpointed_learning_rate() const;
  /// Called by Checkpoint::restore with a finite, non-negative saved learning rate.
  virtual void restore_learning_rate(double learning_rate);

  Slots& slots_for(const Variable& variable);
  void apply_now(const std::vector<std::pair<GradientValue, Variable>>& grads_and_vars);
  void apply_one(const GradientValue& grad, Variable& variable, std::int64_t step);

  std::unordered_map<std::uint64_t, Slots> slots_;
  std::int64_t iterations_ = 0;
};

namespace detail {

/// An optimizer's state as a Checkpoint saves and restores it (not for user code): the step
/// count, the learning rate (NaN for an optimizer without one) and each variable's slots by
/// Variable::id(), in slot_names() order.
struct OptimizerState {
  std::int64_t iterations = 0;
  double learning_rate = 0.0;
  std::unordered_map<std::uint64_t, std::vector<Tensor>> slots;

  static const char* name_of(const Optimizer& optimizer) { return optimizer.name(); }
  static OptimizerState read(const Optimizer& optimizer);
  /// Replaces the optimizer's state (slots of variables absent from `state` are dropped). The
  /// caller has checked every value.
  static void write(Optimizer& optimizer, OptimizerState state);
};

}  // namespace detail

/// Gradient descent with optional momentum (TF: tf.keras.optimizers.SGD):
///   momentum == 0:  w -= lr * g
///   otherwise:      velocity = momentum * velocity - lr * g
///                   w += velocity                                (nesterov = false)
///                   w += momentum * velocity - lr * g            (nesterov = true)
/// Sparse gradients update only the named rows (and only their velocity rows).
/// InvalidArgument for a negative learning rate or a momentum outside [0, 1].
class SGD : public Optimizer {
 public:
  explicit SGD(double learning_rate = 0.01, double momentum = 0.0, bool nesterov = false);
  ~SGD() override;
  std::vector<std::string> slot_names() const override;
  double learning_rate() const { return learning_rate_; }
  /// Changes the learning rate of the next updates, e.g. for a schedule (TF: assigning
  /// optimizer.learning_rate); the slots are kept. InvalidArgument when negative or NaN.
  void set_learning_rate(double learning_rate);

 protected:
  void update_dense(Variable& variable, const Tensor& grad, Slots& slots,
                    std::int64_t step) override;
  void update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                     const Tensor& summed_rows, Slots& slots, std::int64_t step) override;
  const char* name() const override { return "SGD"; }

 private:
  double checkpointed_learning_rate() const override { return learning_rate_; }
  void restore_learning_rate(double learning_rate) override { learning_rate_ = learning_rate; }
  double learning_rate_;
  double momentum_;
  bool nesterov_;
};

/// Adam's hyperparameters by name, for `Adam(const AdamOptions&)`.
/// `pytorch_epsilon` chooses where epsilon enters the step (both rules are the same but for
/// epsilon; they differ visibly only when sqrt(v_hat) is not much larger than epsilon, i.e.
/// for tiny gradients):
///   false (TF/Keras):  w -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + epsilon)
///   true (torch.optim.Adam): w -= lr * m_hat / (sqrt(v_hat) + epsilon),
///                      m_hat = m/(1-b1^t), v_hat = v/(1-b2^t)
/// Note that the defaults are Keras's (epsilon 1e-7); torch.optim.Adam's epsilon is 1e-8.
struct AdamOptions {
  double learning_rate = 1e-3, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7;
  bool pytorch_epsilon = false;
};

/// Adam (TF: tf.keras.optimizers.Adam, same defaults). At step t:
///   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
///   w -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + epsilon)
/// (or PyTorch's placement of epsilon, see AdamOptions::pytorch_epsilon).
/// Sparse gradients follow TF's (non-lazy) Adam: m and v decay on EVERY row and every row is
/// updated, exactly as for the densified gradient; rows that never had a gradient stay put
/// (their m is 0), rows touched earlier keep moving on their momentum. (TF Addons' LazyAdam,
/// which updates only the named rows, is not what this does.)
/// InvalidArgument for a negative learning rate, betas outside [0, 1), epsilon < 0.
class Adam : public Optimizer {
 public:
  explicit Adam(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                double epsilon = 1e-7);
  /// The same with the hyperparameters by name, and the choice of epsilon rule.
  explicit Adam(const AdamOptions& options);
  ~Adam() override;
  std::vector<std::string> slot_names() const override;
  double learning_rate() const { return learning_rate_; }
  /// Changes the learning rate of the next updates, e.g. for a schedule (TF: assigning
  /// optimizer.learning_rate); m, v and the step count are kept. InvalidArgument when
  /// negative or NaN.
  void set_learning_rate(double learning_rate);

 protected:
  void update_dense(Variable& variable, const Tensor& grad, Slots& slots,
                    std::int64_t step) override;
  void update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                     const Tensor& summed_rows, Slots& slots, std::int64_t step) override;
  const char* name() const override { return "Adam"; }

 private:
  double checkpointed_learning_rate() const override { return learning_rate_; }
  void restore_learning_rate(double learning_rate) override { learning_rate_ = learning_rate; }
  double learning_rate_;
  double beta_1_;
  double beta_2_;
  double epsilon_;
  bool pytorch_epsilon_ = false;
};

/// Adam with decoupled weight decay (PyTorch: torch.optim.AdamW, same defaults; Loshchilov &
/// Hutter). At step t, with m and v as Adam's:
///   w -= lr * weight_decay * w                       (the decay, from w before this step)
///   w -= lr * m_hat / (sqrt(v_hat) + epsilon),       m_hat = m/(1-b1^t), v_hat = v/(1-b2^t)
/// The decay is not part of the gradient, so it never enters m or v (unlike Adam on a loss
/// with an L2 term). Slots "m" and "v". Sparse gradients are handled as Adam handles them (as
/// the densified gradient): every row decays and every row is updated.
/// InvalidArgument for a negative learning rate or weight_decay, betas outside [0, 1),
/// epsilon < 0 (NaN included), naming AdamW and the value.
class AdamW : public Optimizer {
 public:
  explicit AdamW(double learning_rate = 1e-3, double weight_decay = 1e-2, double beta1 = 0.9,
                 double beta2 = 0.999, double epsilon = 1e-8);
  ~AdamW() override;
  std::vector<std::string> slot_names() const override;
  double learning_rate() const { return learning_rate_; }
  double weight_decay() const { return weight_decay_; }
  /// Changes the learning rate of the next updates (the decay is lr * weight_decay, so it
  /// follows the schedule, as in PyTorch); m, v and the step count are kept. InvalidArgument
  /// when negative or NaN.
  void set_learning_rate(double learning_rate);

 protected:
  void update_dense(Variable& variable, const Tensor& grad, Slots& slots,
                    std::int64_t step) override;
  void update_sparse(Variable& variable, const std::vector<std::int64_t>& unique_indices,
                     const Tensor& summed_rows, Slots& slots, std::int64_t step) override;
  const char* name() const override { return "AdamW"; }

 private:
  double checkpointed_learning_rate() const override { return learning_rate_; }
  void restore_learning_rate(double learning_rate) override { learning_rate_ = learning_rate; }
  double learning_rate_;
  double weight_decay_;
  double beta_1_;
  double beta_2_;
  double epsilon_;
};

// ---- Gradient clipping by norm ----------------------------------------------------------

/// x * clip_norm / max(l2norm(x), clip_norm) (TF: tf.clip_by_norm): x unchanged when its L2
/// norm over `axes` is at most clip_norm, else rescaled to norm clip_norm. `axes` ({} = every
/// axis; negative axes count from the end) gives one norm per slice: the result has x's shape
/// and dtype, each slice scaled by its own norm. Built from differentiable tapegrad ops (its
/// gradient is exact and differentiable again; at x = 0 it is the identity's, not NaN).
/// InvalidArgument naming clip_by_norm for an undefined or non-floating x, bad axes, or a
/// clip_norm that is <= 0, NaN or infinite (the value is named).
Tensor clip_by_norm(const Tensor& x, double clip_norm, std::vector<int> axes = {});

/// Clips a list of tensors (typically gradients) by the norm of all of them together
/// (TF: tf.clip_by_global_norm). global_norm = sqrt(sum of sum(t^2) over the defined
/// entries); every entry is scaled by clip_norm / max(global_norm, clip_norm), so the list is
/// unchanged when global_norm <= clip_norm. Returns the clipped list (undefined entries stay
/// undefined, in place) and global_norm, a rank-0 tensor of the entries' dtype. When
/// global_norm is infinite or NaN every clipped value is NaN (as TF). With no defined entry the
/// norm is a float64 0. Differentiable (the scale's dependence on the entries included).
/// InvalidArgument naming clip_by_global_norm for clip_norm <= 0, NaN or infinite, a
/// non-floating entry, or entries of different dtypes (the index and dtypes are named).
std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& tensors,
                                                           double clip_norm);

// ---- L-BFGS -----------------------------------------------------------------------------

/// Options of minimize_lbfgs. Stops when max|gradient| <= tolerance_grad, when the loss
/// changes by <= tolerance_change in one iteration or every element of the step is
/// <= tolerance_change in magnitude, or after max_iterations iterations.
/// strong_wolfe: a line search satisfying the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9);
/// false: the quasi-Newton step is taken with step length 1 (for well-scaled problems).
struct LBFGSOptions {
  int max_iterations = 100;
  int history_size = 10;
  double tolerance_grad = 1e-7;
  double tolerance_change = 1e-9;
  bool strong_wolfe = true;
};

/// loss: the loss at the final variables (a rank-0 tensor). iterations: the L-BFGS iterations
/// taken (0 when the start already meets tolerance_grad). function_evaluations: calls of the
/// loss function (each with one gradient). converged: a tolerance test was met (false when
/// max_iterations ran out or the line search found no decrease).
struct LBFGSResult {
  Tensor loss;
  int iterations;
  int function_evaluations;
  bool converged;
};

/// Minimises `loss()` over `variables` by L-BFGS (PyTorch: torch.optim.LBFGS; TF Probability:
/// tfp.optimizer.lbfgs_minimize): the two-loop recursion over the last history_size (s, y)
/// pairs (Nocedal & Wright, Algorithm 7.4), a strong-Wolfe line search (Algorithms 3.5 and
/// 3.6, zoom by safeguarded cubic interpolation or bisection). Each evaluation runs `loss()`
/// under a GradientTape watching `variables` (a variable the loss does not use gets a zero
/// gradient). The variables are assigned in place; they end at the best point found. The
/// arithmetic is float64 (float32 variables are assigned the rounded values). Pairs with
/// y.s <= 1e-10 |y| |s| are skipped, which keeps the inverse-Hessian estimate positive definite.
/// InvalidArgument naming minimize_lbfgs for: no variables, a non-floating or repeated
/// variable, max_iterations < 1, history_size < 1, a loss that is undefined, not rank 0 or
/// not float32/float64 (its shape and dtype are named). An exception thrown by `loss()`
/// propagates and leaves the variables at the point being evaluated.
LBFGSResult minimize_lbfgs(const std::function<Tensor()>& loss,
                           const std::vector<Variable>& variables,
                           const LBFGSOptions& options = {});

}  // namespace tapegrad
