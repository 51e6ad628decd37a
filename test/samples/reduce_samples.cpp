// The reduction family's samples (src/ops/reduce/): sum, mean, prod, logsumexp, max and min,
// and the extrema's gradient op.
#include "ops/reduce/reduce_support.hpp"
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {
namespace {

// ---- samples: over one axis kept, over all dropped; Prod also with one zero in a group (the
// zero-aware partials), Max with a tie -----------------------------------------------------------

std::vector<OpSample> op_samples() {
  const Tensor a = random_tensor({2, 3}, 1);
  const Tensor with_zero = from_values({0.0, 1.5, -0.5, 2.0, 0.7, 1.2}, {2, 3});
  const Tensor with_tie = from_values({0.3, 0.9, 0.9, -1.0, 0.2, 0.1}, {2, 3});
  const std::string linear = "linear: its second derivative is zero";
  const std::string maxima = "piecewise linear (the extrema's positions are piecewise constant)";
  std::vector<OpSample> s;
  // Integer means truncate toward zero, as TF (include/tapegrad/ops/reduce.hpp).
  const RunFn mean_truncates = [](const std::vector<Tensor>& in) {
    return Outputs{truncated_toward_zero(reduce_mean(in[0]))};
  };
  s.push_back(with_integers(no_second_order(
      sample("Sum", {a}, [](const auto& in) { return Outputs{reduce_sum(in[0], {1}, true)}; }),
      linear)));
  s.push_back(with_integers(
      no_second_order(
          sample("Mean", {a}, [](const auto& in) { return Outputs{reduce_mean(in[0])}; }), linear),
      mean_truncates));
  s.push_back(with_integers(sample("Prod", {with_zero}, [](const auto& in) {
    return Outputs{reduce_prod(in[0], {1}), reduce_prod(in[0], {0}, true)};
  })));
  s.push_back(sample("ReduceLogSumExp", {a},
                     [](const auto& in) { return Outputs{reduce_logsumexp(in[0], {0})}; }));
  // The tie: central differences move one of the tied maxima and see half the slope on each
  // side, which the tape's split of the gradient between the ties (TF) gives too.
  s.push_back(with_integers(
      no_second_order(sample("Max", {with_tie},
                             [](const auto& in) {
                               return Outputs{reduce_max(in[0], {1}), reduce_max(in[0])};
                             }),
                      maxima)));
  s.push_back(with_integers(no_second_order(
      sample("Min", {a}, [](const auto& in) { return Outputs{reduce_min(in[0], {0}, true)}; }),
      maxima)));
  // Max's gradient op, with a tie in the first row: linear in g, nothing through x or y.
  const Tensor maxima_of_rows = from_values({0.9, 0.2}, {2});
  OpSample all_inputs = sample(
      "ExtremumGrad", {with_tie, maxima_of_rows, random_tensor({2}, 26)},
      [](const auto& in) { return Outputs{detail::extremum_grad(in[0], in[1], in[2], {1})}; });
  // Any move of x or y leaves a row with no element equal to its maximum (0/0).
  all_inputs.no_gradient = all_inputs.no_second_order =
      "x and y enter through the maxima's positions only, which central differences move off "
      "the maxima (0/0); the variant in g alone checks the gradient";
  s.push_back(all_inputs);
  s.push_back(named(no_second_order(sample("ExtremumGrad", {random_tensor({2}, 26)},
                                           [with_tie, maxima_of_rows](const auto& in) {
                                             return Outputs{detail::extremum_grad(
                                                 cast(with_tie, in[0].dtype()),
                                                 cast(maxima_of_rows, in[0].dtype()), in[0], {1})};
                                           }),
                                    "linear in g"),
                    "g alone"));
  return s;
}

// ---- batching ---------------------------------------------------------------------------------

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> cases;
  using Reduce = Tensor (*)(const Tensor&, std::vector<int>, bool);
  const std::vector<std::pair<std::string, Reduce>> reductions = {
      {"Sum", reduce_sum},   {"Mean", reduce_mean},
      {"Prod", reduce_prod}, {"ReduceLogSumExp", reduce_logsumexp},
      {"Max", reduce_max},   {"Min", reduce_min}};
  for (const auto& [name, f] : reductions) {
    cases.push_back({name + " over axes",
                     {name},
                     [f = f](const std::vector<Tensor>& in) {
                       return std::vector<Tensor>{f(in[0], {}, false), f(in[0], {1}, true),
                                                  f(in[0], {0, -1}, false), f(in[0], {2, 1}, true)};
                     },
                     {batch_of({2, 3, 4}, 29)}});
    cases.push_back({name + " of scalars",
                     {name},
                     [f = f](const std::vector<Tensor>& in) {
                       return std::vector<Tensor>{f(in[0], {}, false)};
                     },
                     {random_tensor({kBatch}, 30)}});
  }
  cases.push_back({"Sum of int64",
                   {"Sum", "Cast"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor i =
                         cast(multiply(in[0], scalar(100.0, DType::Float64)), DType::Int64);
                     return std::vector<Tensor>{reduce_sum(i, {0})};
                   },
                   {batch_of({3, 2}, 31)}});
  const Tensor extremum_x = random_tensor({2, 3, 4}, 162);
  cases.push_back({"ExtremumGrad",
                   {"ExtremumGrad"},
                   [extremum_x](const std::vector<Tensor>& in) {
                     const auto grad = [](const Tensor& x, const Tensor& g) {
                       return detail::extremum_grad(x, reduce_max(x, {1}), g, {1});
                     };
                     return std::vector<Tensor>{
                         grad(in[0], in[1]), grad(extremum_x, in[1]), grad(in[0], ones({2, 4})),
                         detail::extremum_grad(in[0], reduce_min(in[0]), in[2], {0, 1, 2})};
                   },
                   {batch_of({2, 3, 4}, 163), batch_of({2, 4}, 164), batch_of({}, 165)}});
  return cases;
}

// ---- misuse -----------------------------------------------------------------------------------

MisuseCases reduce_misuse() {
  MisuseCases t;
  using Reduce = std::function<Tensor(const Tensor&, std::vector<int>)>;
  const std::vector<std::pair<std::string, Reduce>> reductions = {
      {"reduce_sum", [](const Tensor& x, std::vector<int> a) { return reduce_sum(x, a); }},
      {"reduce_mean", [](const Tensor& x, std::vector<int> a) { return reduce_mean(x, a); }},
      {"reduce_prod", [](const Tensor& x, std::vector<int> a) { return reduce_prod(x, a); }},
      {"reduce_max", [](const Tensor& x, std::vector<int> a) { return reduce_max(x, a); }},
      {"reduce_min", [](const Tensor& x, std::vector<int> a) { return reduce_min(x, a); }},
      {"reduce_logsumexp",
       [](const Tensor& x, std::vector<int> a) { return reduce_logsumexp(x, a); }},
  };
  const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  for (const auto& [name, fn] : reductions) {
    const Reduce op = fn;
    misuse(t, name + ": axis 2 of a rank-2 tensor", [op, m] { op(m, {2}); },
           {name, "axis 2", "[2, 3]"});
    misuse(t, name + ": axis -3", [op, m] { op(m, {-3}); }, {name, "axis -3", "[2, 3]"});
    misuse(t, name + ": a repeated axis",
           [op, m] {
             op(m, {1, -1});
           },
           {name, "repeated", "[2, 3]"});
    misuse(t, name + ": bool", [op] { op(b8({1, 0}), {}); }, {name, "bool", "[2]"});
    misuse(t, name + ": a variable handle", [op] { op(variable_handle(), {}); },
           {name, "variable handle"});
    misuse(t, name + ": undefined", [op] { op(Tensor(), {}); }, {name, "undefined"});
  }
  misuse(t, "reduce_logsumexp: int32",
         [] {
           reduce_logsumexp(i32({1, 2}));
         },
         {"reduce_logsumexp", "int32", "[2]"});
  misuse(t, "reduce_max: an empty reduction has no maximum",
         [] {
           reduce_max(zeros({2, 0}), {1});
         },
         {"reduce_max", "[2, 0]", "empty"});
  misuse(t, "reduce_min: an empty reduction has no minimum",
         [] {
           reduce_min(zeros({0, 3}), {0});
         },
         {"reduce_min", "[0, 3]", "empty"});
  defined(t, "reduce_sum/prod of an empty tensor: 0 and 1", [] {
    REQUIRE(reduce_sum(zeros({0})).item<double>() == 0.0);
    REQUIRE(reduce_prod(zeros({0, 4})).item<double>() == 1.0);
  });
  defined(t, "reduce_mean of an empty tensor: NaN (float), 0 (int)", [] {
    REQUIRE(is_nan(reduce_mean(zeros({0}))));
    REQUIRE(reduce_mean(zeros({0}, DType::Int32)).item<std::int32_t>() == 0);
  });
  defined(t, "reduce_logsumexp of an empty tensor: -inf",
          [] { REQUIRE(reduce_logsumexp(zeros({0})).item<double>() == -kInf); });
  defined(t, "reduce_max/min over all of an empty tensor with empty output keep the shape", [] {
    REQUIRE(reduce_max(zeros({0, 3}), {1}).shape() == Shape{0});
  });
  defined(t, "reduce_max/min propagate NaN", [] {
    REQUIRE(is_nan(reduce_max(f64({1, kNaN, 3}))));
    REQUIRE(is_nan(reduce_min(f64({kNaN, 1, 3}))));
  });
  defined(t, "reduce_sum propagates NaN and Inf", [] {
    REQUIRE(is_nan(reduce_sum(f64({1, kNaN}))));
    REQUIRE(reduce_sum(f64({1, kInf})).item<double>() == kInf);
  });
  defined(t, "reduce_sum: int64 overflow wraps", [] {
    REQUIRE(reduce_sum(i64({kInt64Max, 1})).item<std::int64_t>() == kInt64Min);
  });
  defined(t, "reduce_sum: int32 overflow wraps", [] {
    REQUIRE(reduce_sum(i32({kInt32Max, kInt32Max})).item<std::int32_t>() == -2);
  });
  defined(t, "reduce_prod: int32 overflow wraps", [] {
    REQUIRE(reduce_prod(i32({65536, 65536, 3})).item<std::int32_t>() == 0);
  });
  defined(t, "reduce_mean: int32 mean of the wrapped sum, truncated", [] {
    REQUIRE(reduce_mean(i32({kInt32Max, kInt32Max})).item<std::int32_t>() == -1);
    REQUIRE(reduce_mean(i32({7, 8})).item<std::int32_t>() == 7);
    REQUIRE(reduce_mean(i32({-7, -8})).item<std::int32_t>() == -7);
  });
  return t;
}

}  // namespace

std::vector<OpSample> reduce_samples() {
  std::vector<OpSample> s = op_samples();
  attach(s, batch_cases());
  attach_by_function(s, reduce_misuse(),
                     {{"reduce_sum", "Sum"},
                      {"reduce_sum/prod", "Sum"},
                      {"reduce_mean", "Mean"},
                      {"reduce_prod", "Prod"},
                      {"reduce_max", "Max"},
                      {"reduce_max/min", "Max"},
                      {"reduce_min", "Min"},
                      {"reduce_logsumexp", "ReduceLogSumExp"}});
  return s;
}

}  // namespace tapegrad::samples
