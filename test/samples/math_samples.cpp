// The math family's samples (src/ops/math/): elementwise unary and binary math, rounding,
// trigonometry, the special functions, comparisons, where, cast, and the fused gradient ops
// of sqrt, rsqrt, tanh and reciprocal.
#include "ops/internal_ops.hpp"
#include "ops/math/math_special.hpp"
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {
namespace {

using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
using Unary = std::function<Tensor(const Tensor&)>;
using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);

// ---- samples: one per op, float64 inputs of shape [2, 3] (rows [3] where they broadcast) ---

std::vector<OpSample> op_samples() {
  const Tensor a = random_tensor({2, 3}, 1);
  const Tensor b = random_tensor({2, 3}, 2);
  const Tensor row = random_tensor({3}, 3);
  const Tensor p = positive({2, 3}, 4);
  // a scaled into asin's, acos's and atanh's open domain (-1, 1)
  const Tensor inside = multiply(a, scalar(0.8, DType::Float64));
  const std::string kinks = "piecewise linear: its second derivative is zero where it exists";
  const std::string steps = "piecewise constant: its gradient is zero where it exists";
  const std::string compare = "a comparison: its output is bool";
  std::vector<OpSample> s;
  // math_unary.cpp
  // Integer division truncates toward zero (include/tapegrad/ops/math.hpp).
  const RunFn divide_truncates = [](const std::vector<Tensor>& in) {
    return Outputs{truncated_toward_zero(divide(in[0], in[1]))};
  };
  s.push_back(with_integers(no_second_order(unary_sample("Abs", tapegrad::abs, a), kinks)));
  s.push_back(with_integers(no_second_order(unary_sample("Sign", tapegrad::sign, a), steps)));
  s.push_back(with_integers(unary_sample("Square", tapegrad::square, a)));
  s.push_back(unary_sample("Sqrt", tapegrad::sqrt, p));
  s.push_back(unary_sample("Exp", tapegrad::exp, a));
  s.push_back(unary_sample("Log", tapegrad::log, p));
  s.push_back(unary_sample("Log1p", tapegrad::log1p, p));
  s.push_back(unary_sample("Sin", tapegrad::sin, a));
  s.push_back(unary_sample("Cos", tapegrad::cos, a));
  s.push_back(unary_sample("Expm1", tapegrad::expm1, a));
  s.push_back(unary_sample("Rsqrt", tapegrad::rsqrt, p));
  s.push_back(binary_sample("SqrtGrad", detail::sqrt_grad_op, tapegrad::sqrt(p), b));
  s.push_back(binary_sample("RsqrtGrad", detail::rsqrt_grad_op, tapegrad::rsqrt(p), b));
  // math_trig.cpp
  s.push_back(unary_sample("Tan", tapegrad::tan, a));
  s.push_back(unary_sample("Asin", tapegrad::asin, inside));
  s.push_back(unary_sample("Acos", tapegrad::acos, inside));
  s.push_back(unary_sample("Atan", tapegrad::atan, a));
  s.push_back(unary_sample("Sinh", tapegrad::sinh, a));
  s.push_back(unary_sample("Cosh", tapegrad::cosh, a));
  s.push_back(unary_sample("Asinh", tapegrad::asinh, a));
  s.push_back(unary_sample("Acosh", tapegrad::acosh, add(p, scalar(1.0, DType::Float64))));
  s.push_back(unary_sample("Atanh", tapegrad::atanh, inside));
  // math_rounding.cpp
  s.push_back(no_second_order(unary_sample("Floor", tapegrad::floor, a), steps));
  s.push_back(no_second_order(unary_sample("Ceil", tapegrad::ceil, a), steps));
  s.push_back(no_second_order(unary_sample("Round", tapegrad::round, a), steps));
  s.push_back(unary_sample("Tanh", tapegrad::tanh, a));
  s.push_back(binary_sample("TanhGrad", detail::tanh_grad_op, tapegrad::tanh(a), b));
  s.push_back(unary_sample("Reciprocal", tapegrad::reciprocal, p));
  s.push_back(
      binary_sample("ReciprocalGrad", detail::reciprocal_grad_op, tapegrad::reciprocal(p), b));
  // math.cpp: the broadcasting ones with a row operand on either side.
  s.push_back(with_integers(binary_sample("Add", tapegrad::add, a, row)));
  s.push_back(with_integers(binary_sample("Sub", tapegrad::subtract, row, a)));
  s.push_back(with_integers(binary_sample("Mul", tapegrad::multiply, a, row)));
  s.push_back(with_integers(binary_sample("RealDiv", tapegrad::divide, row, p), divide_truncates));
  s.push_back(with_integers(unary_sample("Neg", tapegrad::negative, a)));
  s.push_back(binary_sample("Pow", tapegrad::pow, p, a));
  // Integers take pow to nonnegative integer powers only: a second sample with small positive
  // exponents (integer-valued 1 to 3), small enough for int32.
  s.push_back(named(with_integers(binary_sample("Pow", tapegrad::pow, p,
                                                from_values({0.25, 0.125, 0.375, 0.25, 0.125, 0.25},
                                                            {2, 3}, DType::Float64))),
                    "small exponents"));
  s.push_back(
      with_integers(no_second_order(binary_sample("Maximum", tapegrad::maximum, a, row), kinks)));
  s.push_back(
      with_integers(no_second_order(binary_sample("Minimum", tapegrad::minimum, row, b), kinks)));
  // compare.cpp, cast.cpp
  s.push_back(
      with_integers(not_differentiable(binary_sample("Equal", tapegrad::equal, a, row), compare)));
  s.push_back(with_integers(
      not_differentiable(binary_sample("NotEqual", tapegrad::not_equal, a, row), compare)));
  s.push_back(
      with_integers(not_differentiable(binary_sample("Less", tapegrad::less, a, row), compare)));
  s.push_back(with_integers(
      not_differentiable(binary_sample("LessEqual", tapegrad::less_equal, row, b), compare)));
  s.push_back(with_integers(
      not_differentiable(binary_sample("Greater", tapegrad::greater, a, b), compare)));
  s.push_back(with_integers(
      not_differentiable(binary_sample("GreaterEqual", tapegrad::greater_equal, b, a), compare)));
  s.push_back(with_integers(
      no_second_order(sample("SelectV2", {greater(a, b), a, row},
                             [](const auto& in) { return Outputs{where(in[0], in[1], in[2])}; }),
                      "linear in a and b")));
  {
    OpSample to_float32 =
        sample("Cast", {a}, [](const auto& in) { return Outputs{cast(in[0], DType::Float32)}; });
    // float32 resolves 6e-8 relative: central differences of step 1e-6 through it are off by
    // 1e-2. A cast to its own dtype records nothing, so no float64 sample can stand in; the
    // forward-rule check compares its gradient's transpose with its forward rule.
    to_float32.no_gradient = to_float32.no_second_order =
        "its float32 output cannot resolve central differences of step 1e-6";
    s.push_back(with_integers(to_float32));
  }
  // math_special.cpp
  s.push_back(unary_sample("Erf", tapegrad::erf, a));
  s.push_back(unary_sample("Erfc", tapegrad::erfc, a));
  s.push_back(unary_sample("Lgamma", tapegrad::lgamma, p));
  s.push_back(unary_sample("Digamma", tapegrad::digamma, p));
  s.push_back(sample("Polygamma", {p},
                     [](const auto& in) { return Outputs{detail::polygamma(2, in[0])}; }));
  s.push_back(binary_sample("Atan2", tapegrad::atan2, a, row));
  s.push_back(with_integers(binary_sample("FloorMod", tapegrad::floormod, a, positive({3}, 13))));
  s.push_back(with_integers(no_second_order(
      sample("ClipByValue", {a, f64({-0.5, -0.2, 0.1}, {3}), f64({0.6}, {1})},
             [](const auto& in) { return Outputs{clip_by_value(in[0], in[1], in[2])}; }),
      kinks)));
  s.push_back(
      with_integers(binary_sample("SquaredDifference", tapegrad::squared_difference, a, row)));
  return s;
}

// ---- batching: each op under vectorized_map against the loop -----------------------------

// A binary op with x batched and y fixed, x fixed and y batched, and both batched; the
// examples' shapes broadcast ([2, 1] against [3]).
void add_binary_cases(std::vector<BatchCase>& cases, const std::string& op, BinaryOp f, double lo,
                      double hi) {
  const Tensor x_fixed = random_tensor({2, 1}, 11, lo, hi);
  const Tensor y_fixed = random_tensor({3}, 12, lo, hi);
  cases.push_back({op + " x batched",
                   {op},
                   [f, y_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{f(in[0], y_fixed)};
                   },
                   {batch_of({2, 1}, 13, lo, hi)}});
  cases.push_back({op + " y batched",
                   {op},
                   [f, x_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{f(x_fixed, in[0])};
                   },
                   {batch_of({3}, 14, lo, hi)}});
  cases.push_back(
      {op + " both batched",
       {op},
       [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0], in[1])}; },
       {batch_of({2, 1}, 15, lo, hi), batch_of({3}, 16, lo, hi)}});
  cases.push_back(
      {op + " scalar examples",
       {op},
       [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0], in[1])}; },
       {random_tensor({kBatch}, 17, lo, hi), random_tensor({kBatch}, 18, lo, hi)}});
}

Tensor pow_tensors(const Tensor& x, const Tensor& y) { return pow(x, y); }

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> cases;
  add_binary_cases(cases, "Add", add, -1, 1);
  add_binary_cases(cases, "Sub", subtract, -1, 1);
  add_binary_cases(cases, "Mul", multiply, -1, 1);
  add_binary_cases(cases, "RealDiv", divide, 0.5, 2);
  add_binary_cases(cases, "Pow", pow_tensors, 0.5, 2);
  add_binary_cases(cases, "Maximum", maximum, -1, 1);
  add_binary_cases(cases, "Minimum", minimum, -1, 1);
  add_binary_cases(cases, "Equal", equal, -1, 1);
  add_binary_cases(cases, "NotEqual", not_equal, -1, 1);
  add_binary_cases(cases, "Less", less, -1, 1);
  add_binary_cases(cases, "LessEqual", less_equal, -1, 1);
  add_binary_cases(cases, "Greater", greater, -1, 1);
  add_binary_cases(cases, "GreaterEqual", greater_equal, -1, 1);
  const std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>> unaries = {
      {"Neg", negative}, {"Abs", abs},     {"Sign", sign},   {"Square", square},
      {"Sqrt", sqrt},    {"Exp", exp},     {"Log", log},     {"Log1p", log1p},
      {"Sin", sin},      {"Cos", cos},     {"Tanh", tanh},   {"Reciprocal", reciprocal},
      {"Tan", tan},      {"Asin", asin},   {"Acos", acos},   {"Atan", atan},
      {"Sinh", sinh},    {"Cosh", cosh},   {"Asinh", asinh}, {"Atanh", atanh},
      {"Expm1", expm1},  {"Rsqrt", rsqrt}, {"Floor", floor}, {"Ceil", ceil},
      {"Round", round}};
  for (const auto& [name, f] : unaries) {
    cases.push_back({name, {name}, unary_fn(f), {batch_of({2, 3}, 21, 0.1, 0.9)}});
  }
  cases.push_back({"Acosh", {"Acosh"}, unary(acosh), {batch_of({2, 3}, 22, 1.1, 3.0)}});
  cases.push_back({"Exp of scalars", {"Exp"}, unary(exp), {random_tensor({kBatch}, 23)}});
  cases.push_back({"Exp float32", {"Exp"}, unary(exp), {cast(batch_of({4}, 24), DType::Float32)}});

  cases.push_back(
      {"Cast to float32, int32, bool, back",
       {"Cast"},
       [](const std::vector<Tensor>& in) {
         const Tensor as_int = cast(multiply(in[0], scalar(10.0, DType::Float64)), DType::Int32);
         return std::vector<Tensor>{cast(in[0], DType::Float32), as_int,
                                    cast(as_int, DType::Float64), cast(as_int, DType::Bool)};
       },
       {batch_of({2, 2}, 25)}});
  const Tensor where_a = random_tensor({2, 3}, 26);
  cases.push_back({"SelectV2 cond and b batched",
                   {"SelectV2", "Greater"},
                   [where_a](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         where(greater(in[0], scalar(0.0, DType::Float64)), where_a, in[1])};
                   },
                   {batch_of({3}, 27), batch_of({2, 1}, 28)}});
  // The special functions: positive for the gamma functions.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> special = {
      {"Erf", [](const Tensor& x) { return erf(x); }},
      {"Erfc", [](const Tensor& x) { return erfc(x); }},
      {"Lgamma", [](const Tensor& x) { return lgamma(x); }},
      {"Digamma", [](const Tensor& x) { return digamma(x); }},
      {"Polygamma", [](const Tensor& x) { return detail::polygamma(2, x); }}};
  for (const auto& [name, f] : special) {
    const double lo = name == "Erf" || name == "Erfc" ? -2.0 : 0.2;
    cases.push_back({name, {name}, unary_fn(f), {batch_of({2, 3}, 101, lo, 2.0)}});
    cases.push_back(
        {name + " float32", {name}, unary_fn(f), {as_f32(batch_of({4}, 102, lo, 2.0))}});
  }
  add_binary_cases(cases, "Atan2", atan2, -1, 1);
  add_binary_cases(cases, "FloorMod", floormod, 0.5, 2);
  add_binary_cases(cases, "SquaredDifference", squared_difference, -1, 1);
  cases.push_back({"Atan2, FloorMod, SquaredDifference float32",
                   {"Atan2", "FloorMod", "SquaredDifference"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{atan2(in[0], in[1]), floormod(in[0], in[1]),
                                                squared_difference(in[1], in[0])};
                   },
                   {as_f32(batch_of({2, 3}, 103, 0.5, 2)), as_f32(batch_of({3}, 104, 0.5, 2))}});

  const Tensor lo_fixed = random_tensor({3}, 105, -0.5, -0.1);
  cases.push_back({"ClipByValue x batched",
                   {"ClipByValue"},
                   [lo_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         clip_by_value(in[0], lo_fixed, scalar(0.4, DType::Float64)),
                         clip_by_value(in[0], -0.2, 0.3)};
                   },
                   {batch_of({2, 3}, 106)}});
  const Tensor x_fixed = random_tensor({2, 3}, 107);
  cases.push_back({"ClipByValue bounds batched",
                   {"ClipByValue"},
                   [x_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{clip_by_value(x_fixed, in[0], in[1]),
                                                clip_by_value(in[2], in[0], in[1])};
                   },
                   {random_tensor({kBatch}, 108, -0.8, -0.1), batch_of({3}, 109, 0.1, 0.8),
                    batch_of({2, 3}, 110)}});
  cases.push_back({"TanhGrad, g batched",
                   {"TanhGrad"},
                   gradient_at(random_tensor({2, 3}, 48), [](const Tensor& x) { return tanh(x); }),
                   {batch_of({2, 3}, 49)}});
  cases.push_back({"TanhGrad and SigmoidGrad, y batched",
                   {"TanhGrad", "SigmoidGrad"},
                   [](const std::vector<Tensor>& in) {
                     GradientTape tape;
                     tape.watch(in[0]);
                     const Tensor y = add(tanh(in[0]), sigmoid(in[0]));
                     return std::vector<Tensor>{tape.gradient(y, in[0])};
                   },
                   {batch_of({2, 3}, 50)}});
  add_fused_gradient_cases(
      cases, "ReciprocalGrad", [](const Tensor& x) { return reciprocal(x); }, 0.5, 194);
  add_fused_gradient_cases(
      cases, "SqrtGrad", [](const Tensor& x) { return sqrt(x); }, 0.5, 197);
  add_fused_gradient_cases(
      cases, "RsqrtGrad", [](const Tensor& x) { return rsqrt(x); }, 0.5, 200);
  return cases;
}

// ---- structure: the diagonal batch through the linear ops (exact, dyadic operands) ---------

void attach_structure_cases(std::vector<OpSample>& s) {
  const Tensor d = structure_d();
  const Tensor e = f64({0.25, 1, -1}, {3});
  const Tensor c = f64({4, 0.5, -1}, {3});
  const auto diag = diagonal_matrix;
  attach(s, "Neg", {{d}, {true}, std::nullopt, {3}, diag({-0.5, 2, -3})});
  attach(s, "Add", {{d, e}, {true, true}, std::nullopt, {3}, diag({0.75, -1, 2})});
  attach(s, "Sub", {{d, e}, {true, true}, std::nullopt, {3}, diag({0.25, -3, 4})});
  attach(s, "Mul", {{d, e}, {true, true}, std::nullopt, {3}, diag({0.125, -2, -3})});
  attach(s, "Mul", {{d, c}, {true, false}, std::nullopt, {3}, diag({2, -1, -3})});
  attach(s, "Mul", {{f64({2}, {}), d}, {false, true}, std::nullopt, {3}, diag({1, -4, 6})});
  attach(s, "RealDiv", {{d, c}, {true, false}, std::nullopt, {3}, diag({0.125, -4, -3})});
  // g (1 - y^2); -g y^2, g / (2 y), -g y^3 / 2.
  attach(s, "TanhGrad", fused_structure({0.5, -0.5, 0}, {0.375, -1.5, 3}));
  attach(s, "ReciprocalGrad", fused_structure({0.5, 2, -1}, {-0.125, 8, -3}));
  attach(s, "SqrtGrad", fused_structure({0.5, 2, 0.25}, {0.5, -0.5, 6}));
  attach(s, "RsqrtGrad", fused_structure({1, 2, 0.5}, {-0.25, 8, -0.1875}));
  // Declined: the dense batch is needed.
  attach(s, "Add", {{d, c}, {true, false}, std::nullopt, {3}, {}});  // a constant addend
  attach(s, "Add", {{d, f64({0.5}, {1})}, {true, true}, std::nullopt, {3}, {}});  // broadcast
  attach(s, "Mul", {{d, f64({1, 2, 3, 4, 5, 6}, {2, 3})}, {true, false}, std::nullopt, {2, 3}, {}});
  attach(s, "RealDiv", {{c, d}, {false, true}, std::nullopt, {3}, {}});   // a diagonal divisor
  attach(s, "TanhGrad", {{d, c}, {true, false}, std::nullopt, {3}, {}});  // y diagonal
}

// ---- misuse: bad dtypes, shapes, handles; integer wrapping and NaN as defined results ------

MisuseCases math_misuse() {
  MisuseCases t;
  const std::vector<std::pair<std::string, Binary>> binaries = {
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {"subtract", [](const Tensor& x, const Tensor& y) { return subtract(x, y); }},
      {"multiply", [](const Tensor& x, const Tensor& y) { return multiply(x, y); }},
      {"divide", [](const Tensor& x, const Tensor& y) { return divide(x, y); }},
      {"pow", [](const Tensor& x, const Tensor& y) { return pow(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); }},
  };
  for (const auto& [name, fn] : binaries) {
    const Binary op = fn;
    misuse(t, name + ": float64 with float32",
           [op] {
             op(f64({1, 2}), f32({1, 2}));
           },
           {name, "float64", "float32", "[2]"});
    misuse(t, name + ": shapes [2, 3] and [4]",
           [op] {
             op(f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({1, 2, 3, 4}));
           },
           {name, "[2, 3]", "[4]", "float64"});
    misuse(t, name + ": bool operands",
           [op] {
             op(b8({1, 0}), b8({0, 1}));
           },
           {name, "bool", "[2]"});
    misuse(t, name + ": undefined operand", [op] { op(Tensor(), f64({1})); }, {name, "undefined"});
    misuse(t, name + ": a variable handle",
           [op] {
             op(variable_handle(), f64({1, 2, 3}));
           },
           {name, "variable handle", "[3]", "float64"});
  }
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, double)>>>
      scalar_ops = {
          {"add", [](const Tensor& x, double v) { return x + v; }},
          {"subtract", [](const Tensor& x, double v) { return x - v; }},
          {"multiply", [](const Tensor& x, double v) { return x * v; }},
          {"divide", [](const Tensor& x, double v) { return x / v; }},
      };
  for (const auto& [name, fn] : scalar_ops) {
    const auto op = fn;
    misuse(t, name + ": int32 tensor with the scalar 0.5",
           [op] {
             op(i32({1, 2}), 0.5);
           },
           {name, "0.5", "int32", "[2]"});
  }
  misuse(t, "multiply: 0.5 * int64 tensor",
         [] {
           (void)(0.5 * i64({4, 6}));
         },
         {"multiply", "0.5", "int64", "[2]"});
  misuse(t, "multiply: int32 * 1e10 (out of range)", [] { (void)(i32({1}) * 1e10); },
         {"multiply", "int32", "[1]"});
  misuse(t, "add: int32 + NaN", [] { (void)(i32({1}) + kNaN); }, {"add", "nan", "int32"});
  defined(t, "multiply: int32 * 2.0 is exact", [] {
    REQUIRE(elements<std::int32_t>(i32({3, -4}) * 2.0) == std::vector<std::int32_t>{6, -8});
  });
  misuse(t, "pow: int32 to the power 0.5", [] { pow(i32({4}), 0.5); },
         {"pow", "0.5", "int32", "[1]"});
  misuse(t, "pow: int32 to a negative power", [] { pow(i32({2}), i32({-1})); },
         {"pow", "negative", "int32", "[1]"});
  misuse(t, "divide: int32 by zero",
         [] {
           divide(i32({1, 2}), i32({1, 0}));
         },
         {"divide", "division by zero", "int32", "[2]"});
  misuse(t, "divide: int64 by a zero scalar",
         [] {
           (void)(i64({1, 2}) / 0.0);
         },
         {"divide", "division by zero", "int64", "[2]", "[]"});
  defined(t, "divide: float by zero is inf and nan", [] {
    const auto r = elements<double>(divide(f64({1, -1, 0}), f64({0, 0, 0})));
    REQUIRE(r[0] == kInf);
    REQUIRE(r[1] == -kInf);
    REQUIRE(std::isnan(r[2]));
  });

  // Integer wrapping (two's complement, as TF and NumPy), never undefined behaviour.
  defined(t, "divide: int32 INT_MIN / -1 wraps to INT_MIN", [] {
    REQUIRE(elements<std::int32_t>(divide(i32({kInt32Min, 7}), i32({-1, -2}))) ==
            std::vector<std::int32_t>{kInt32Min, -3});
  });
  defined(t, "divide: int64 INT64_MIN / -1 wraps to INT64_MIN", [] {
    REQUIRE(elements<std::int64_t>(divide(i64({kInt64Min}), i64({-1}))) ==
            std::vector<std::int64_t>{kInt64Min});
  });
  defined(t, "negative: -INT_MIN wraps (int32)", [] {
    REQUIRE(elements<std::int32_t>(negative(i32({kInt32Min, 5}))) ==
            std::vector<std::int32_t>{kInt32Min, -5});
  });
  defined(t, "negative: -INT64_MIN wraps (int64)", [] {
    REQUIRE(elements<std::int64_t>(-i64({kInt64Min})) == std::vector<std::int64_t>{kInt64Min});
  });
  defined(t, "abs: abs(INT_MIN) wraps to INT_MIN (int32)", [] {
    REQUIRE(elements<std::int32_t>(abs(i32({kInt32Min, -3}))) ==
            std::vector<std::int32_t>{kInt32Min, 3});
  });
  defined(t, "abs: abs(INT64_MIN) wraps (int64)", [] {
    REQUIRE(elements<std::int64_t>(abs(i64({kInt64Min}))) == std::vector<std::int64_t>{kInt64Min});
  });
  defined(t, "add: INT_MAX + 1 wraps to INT_MIN (int32)", [] {
    REQUIRE(elements<std::int32_t>(add(i32({kInt32Max}), i32({1}))) ==
            std::vector<std::int32_t>{kInt32Min});
  });
  defined(t, "add: INT64_MAX + 1 wraps (int64)", [] {
    REQUIRE(elements<std::int64_t>(i64({kInt64Max}) + 1.0) == std::vector<std::int64_t>{kInt64Min});
  });
  defined(t, "subtract: INT_MIN - 1 wraps to INT_MAX (int32)", [] {
    REQUIRE(elements<std::int32_t>(subtract(i32({kInt32Min}), i32({1}))) ==
            std::vector<std::int32_t>{kInt32Max});
  });
  defined(t, "square: 65536^2 wraps to 0 (int32)", [] {
    REQUIRE(elements<std::int32_t>(square(i32({65536, 46341}))) ==
            std::vector<std::int32_t>{0, static_cast<std::int32_t>(46341u * 46341u)});
  });
  defined(t, "multiply: int64 overflow wraps", [] {
    REQUIRE(elements<std::int64_t>(multiply(i64({kInt64Max}), i64({2}))) ==
            std::vector<std::int64_t>{-2});
  });
  defined(t, "pow: int32 2^31 wraps to INT_MIN, 3^0 = 1", [] {
    REQUIRE(elements<std::int32_t>(pow(i32({2, 3}), i32({31, 0}))) ==
            std::vector<std::int32_t>{kInt32Min, 1});
  });

  // NaN propagates through maximum/minimum in both orders.
  defined(t, "maximum: NaN first or second gives NaN", [] {
    const auto r = elements<double>(maximum(f64({kNaN, 0, 1}), f64({0, kNaN, 2})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(std::isnan(r[1]));
    REQUIRE(r[2] == 2);
  });
  defined(t, "minimum: NaN first or second gives NaN", [] {
    const auto r = elements<double>(minimum(f64({kNaN, 0, 1}), f64({0, kNaN, 2})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(std::isnan(r[1]));
    REQUIRE(r[2] == 1);
  });
  defined(t, "maximum: float32 NaN in both orders", [] {
    const Tensor r = maximum(f32({0, kNaN}), f32({kNaN, 0}));
    for (float v : r.array<float>()) REQUIRE(std::isnan(v));
  });
  defined(t, "maximum: gradient away from NaN unchanged (ties to x)", [] {
    Tensor x = f64({1, 5, 3});
    Tensor y = f64({2, 4, 3});
    GradientTape tape;
    tape.watch(x);
    tape.watch(y);
    Tensor z = reduce_sum(maximum(x, y));
    auto g = tape.gradient(z, std::vector<Tensor>{x, y});
    REQUIRE(elements<double>(g[0]) == std::vector<double>{0, 1, 1});
    REQUIRE(elements<double>(g[1]) == std::vector<double>{1, 0, 0});
  });
  defined(t, "add: Inf + -Inf is NaN, no error",
          [] { REQUIRE(is_nan(add(constant(kInf), constant(-kInf)))); });

  const std::vector<std::pair<std::string, Unary>> unaries = {
      {"negative", [](const Tensor& x) { return negative(x); }},
      {"square", [](const Tensor& x) { return square(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"sign", [](const Tensor& x) { return sign(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"log1p", [](const Tensor& x) { return log1p(x); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }},
  };
  for (std::size_t i = 0; i < unaries.size(); ++i) {
    const auto& name = unaries[i].first;
    const Unary op = unaries[i].second;
    misuse(t, name + ": bool", [op] { op(b8({1, 0, 1})); }, {name, "bool", "[3]"});
    misuse(t, name + ": undefined", [op] { op(Tensor()); }, {name, "undefined"});
    misuse(t, name + ": a variable handle", [op] { op(variable_handle()); },
           {name, "variable handle", "[3]"});
    if (i >= 4) {  // the floating-only ones
      misuse(t, name + ": int32", [op] { op(i32({1, 2}, {1, 2})); }, {name, "int32", "[1, 2]"});
    }
  }
  defined(t, "sqrt/log of negative and zero: NaN and -inf, no error", [] {
    REQUIRE(is_nan(sqrt(constant(-1.0))));
    REQUIRE(log(constant(0.0)).item<double>() == -kInf);
    REQUIRE(is_nan(log(constant(-1.0))));
  });
  defined(t, "unary math of an empty tensor is empty", [] {
    const Tensor e = zeros({0, 3});
    REQUIRE(exp(e).shape() == Shape{0, 3});
    REQUIRE(negative(zeros({0}, DType::Int32)).shape() == Shape{0});
  });
  return t;
}

MisuseCases compare_misuse() {
  MisuseCases t;
  const std::vector<std::pair<std::string, Binary>> compares = {
      {"equal", [](const Tensor& x, const Tensor& y) { return equal(x, y); }},
      {"not_equal", [](const Tensor& x, const Tensor& y) { return not_equal(x, y); }},
      {"less", [](const Tensor& x, const Tensor& y) { return less(x, y); }},
      {"less_equal", [](const Tensor& x, const Tensor& y) { return less_equal(x, y); }},
      {"greater", [](const Tensor& x, const Tensor& y) { return greater(x, y); }},
      {"greater_equal", [](const Tensor& x, const Tensor& y) { return greater_equal(x, y); }},
  };
  for (std::size_t i = 0; i < compares.size(); ++i) {
    const auto& name = compares[i].first;
    const Binary op = compares[i].second;
    misuse(t, name + ": int32 with float64",
           [op] {
             op(i32({1, 2}), f64({1, 2}));
           },
           {name, "int32", "float64", "[2]"});
    misuse(t, name + ": shapes [3] and [2]",
           [op] {
             op(f64({1, 2, 3}), f64({1, 2}));
           },
           {name, "[3]", "[2]"});
    misuse(t, name + ": a variable handle",
           [op] {
             op(variable_handle(), f64({1, 2, 3}));
           },
           {name, "variable handle"});
    if (i >= 2) {
      misuse(t, name + ": bool operands", [op] { op(b8({1}), b8({0})); }, {name, "bool", "[1]"});
    }
  }
  defined(t, "comparisons with NaN are false (not_equal true)", [] {
    REQUIRE(elements<bool>(less(f64({kNaN}), f64({1}))) == std::vector<bool>{false});
    REQUIRE(elements<bool>(greater_equal(f64({kNaN}), f64({kNaN}))) == std::vector<bool>{false});
    REQUIRE(elements<bool>(not_equal(f64({kNaN}), f64({kNaN}))) == std::vector<bool>{true});
  });
  misuse(t, "where: float cond", [] { where(f64({1}), f64({1}), f64({2})); },
         {"where", "cond", "float64", "[1]"});
  misuse(t, "where: a and b dtypes differ", [] { where(b8({1}), f64({1}), f32({2})); },
         {"where", "float64", "float32"});
  misuse(t, "where: shapes [2], [3], [1]",
         [] {
           where(b8({1, 0}), f64({1, 2, 3}), f64({1}));
         },
         {"where", "[2]", "[3]", "[1]"});
  misuse(t, "where: a variable handle",
         [] {
           where(b8({1, 0, 1}), variable_handle(), f64({0}));
         },
         {"where", "variable handle"});
  misuse<ResourceExhausted>(t, "equal: a broadcast of 2^48 elements cannot be allocated",
                            [] {
                              const Tensor a = zeros({std::size_t{1} << 24, 1}, DType::Bool);
                              const Tensor b = zeros({1, std::size_t{1} << 24}, DType::Bool);
                              equal(a, b);
                            },
                            {"equal", "[16777216, 16777216]", "bool", "out of memory"});
  return t;
}

MisuseCases cast_misuse() {
  MisuseCases t;
  defined(t, "cast: NaN to int32 is 0, to int64 is 0", [] {
    REQUIRE(cast(f64({kNaN}), DType::Int32).array<std::int32_t>()(0) == 0);
    REQUIRE(cast(f64({kNaN}), DType::Int64).array<std::int64_t>()(0) == 0);
  });
  defined(t, "cast: +-Inf to int32 saturates", [] {
    REQUIRE(elements<std::int32_t>(cast(f64({kInf, -kInf}), DType::Int32)) ==
            std::vector<std::int32_t>{kInt32Max, kInt32Min});
  });
  defined(t, "cast: +-Inf to int64 saturates", [] {
    REQUIRE(elements<std::int64_t>(cast(f64({kInf, -kInf}), DType::Int64)) ==
            std::vector<std::int64_t>{kInt64Max, kInt64Min});
  });
  defined(t, "cast: 1e20 and -1e20 to int32 saturate", [] {
    REQUIRE(elements<std::int32_t>(cast(f64({1e20, -1e20}), DType::Int32)) ==
            std::vector<std::int32_t>{kInt32Max, kInt32Min});
  });
  defined(t, "cast: float32 3e9 to int32 saturates, 2^31 exactly too", [] {
    REQUIRE(elements<std::int32_t>(cast(f32({3e9, 2147483648.0}), DType::Int32)) ==
            std::vector<std::int32_t>{kInt32Max, kInt32Max});
  });
  defined(t, "cast: 1e19 to int64 saturates, -2^63 is exact", [] {
    REQUIRE(elements<std::int64_t>(cast(f64({1e19, -9223372036854775808.0}), DType::Int64)) ==
            std::vector<std::int64_t>{kInt64Max, kInt64Min});
  });
  defined(t, "cast: fractions truncate toward zero", [] {
    REQUIRE(elements<std::int32_t>(cast(f64({3.7, -3.7, -0.5}), DType::Int32)) ==
            std::vector<std::int32_t>{3, -3, 0});
  });
  defined(t, "cast: int64 to int32 wraps modulo 2^32", [] {
    REQUIRE(elements<std::int32_t>(cast(i64({(std::int64_t{1} << 32) + 5, -1}), DType::Int32)) ==
            std::vector<std::int32_t>{5, -1});
  });
  defined(t, "cast: NaN to bool is true, 0 false", [] {
    REQUIRE(elements<bool>(cast(f64({kNaN, 0.0}), DType::Bool)) == std::vector<bool>{true, false});
  });
  misuse(t, "cast: a variable handle", [] { cast(variable_handle(), DType::Float32); },
         {"cast", "variable handle", "[3]"});
  misuse(t, "cast: undefined", [] { cast(Tensor(), DType::Float32); }, {"cast", "undefined"});
  return t;
}

}  // namespace

std::vector<OpSample> math_samples() {
  std::vector<OpSample> s = op_samples();
  attach(s, batch_cases());
  attach_structure_cases(s);
  // The cases over several functions go to the first: "sqrt/log of negative and zero" to
  // Sqrt, "unary math of an empty tensor" (exp, negative) to Exp, "comparisons with NaN" to
  // Less.
  attach_by_function(s, math_misuse(),
                     {{"add", "Add"},         {"subtract", "Sub"}, {"multiply", "Mul"},
                      {"divide", "RealDiv"},  {"pow", "Pow"},      {"maximum", "Maximum"},
                      {"minimum", "Minimum"}, {"negative", "Neg"}, {"square", "Square"},
                      {"abs", "Abs"},         {"sign", "Sign"},    {"sqrt", "Sqrt"},
                      {"sqrt/log", "Sqrt"},   {"exp", "Exp"},      {"unary", "Exp"},
                      {"log", "Log"},         {"log1p", "Log1p"},  {"sin", "Sin"},
                      {"cos", "Cos"},         {"tanh", "Tanh"},    {"reciprocal", "Reciprocal"}});
  attach_by_function(s, compare_misuse(),
                     {{"equal", "Equal"},
                      {"not_equal", "NotEqual"},
                      {"less", "Less"},
                      {"less_equal", "LessEqual"},
                      {"greater", "Greater"},
                      {"greater_equal", "GreaterEqual"},
                      {"comparisons", "Less"},
                      {"where", "SelectV2"}});
  attach_by_function(s, cast_misuse(), {{"cast", "Cast"}});
  return s;
}

}  // namespace tapegrad::samples
