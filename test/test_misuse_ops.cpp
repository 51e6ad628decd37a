// The op half of the misuse catalogue: every op family fed bad shapes, dtypes, axes, indices,
// huge shapes, variable handles, empty tensors, NaN/Inf and integer edge cases. Each case is
// an expected exception (type + what the message names) or a defined result checked by value;
// the harness checks the thread is clean after each. The cases live in tables, and one test
// case runs them all and reports the count.
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

struct Case {
  std::string name;
  std::function<void()> run;
};
using Table = std::vector<Case>;

template <class E = InvalidArgument>
void misuse(Table& t, const std::string& name, std::function<void()> body,
            std::vector<std::string> mentions) {
  t.push_back({name, [=] { expect_misuse<E>(name, body, mentions); }});
}

void defined(Table& t, const std::string& name, std::function<void()> body) {
  t.push_back({name, [=] { expect_defined(name, body); }});
}

constexpr std::int32_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Float64);
}
Tensor f64(const std::vector<double>& v) { return f64(v, {v.size()}); }
Tensor f32(const std::vector<double>& v) { return from_values(v, {v.size()}, DType::Float32); }
Tensor b8(const std::vector<double>& v) { return from_values(v, {v.size()}, DType::Bool); }
Tensor i32(const std::vector<std::int32_t>& v, const Shape& shape) {
  xt::xarray<std::int32_t> a = xt::empty<std::int32_t>(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return Tensor(std::move(a));
}
Tensor i32(const std::vector<std::int32_t>& v) { return i32(v, {v.size()}); }
Tensor i64(const std::vector<std::int64_t>& v, const Shape& shape) {
  xt::xarray<std::int64_t> a = xt::empty<std::int64_t>(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return Tensor(std::move(a));
}
Tensor i64(const std::vector<std::int64_t>& v) { return i64(v, {v.size()}); }

template <class T>
std::vector<T> elements(const Tensor& t) {
  const auto& a = t.array<T>();
  return std::vector<T>(a.begin(), a.end());
}

bool is_nan(const Tensor& t) { return std::isnan(t.item<double>()); }

// A variable and its handle: the handle stands for it on tapes and holds no elements.
Tensor variable_handle() {
  static const Variable v(f64({1, 2, 3}, {3}), true, "w");
  return v.handle();
}

using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
using Unary = std::function<Tensor(const Tensor&)>;

// ---- math ---------------------------------------------------------------------------------

Table math_cases() {
  Table t;
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
  defined(t, "scalar: 1.0 as bool is exact", [] {
    const Tensor s = scalar(1.0, DType::Bool);
    REQUIRE(s.item<bool>());
  });
  misuse(t, "scalar: 0.5 as int32", [] { scalar(0.5, DType::Int32); }, {"scalar", "0.5", "int32"});
  misuse(t, "scalar: 2 as bool", [] { scalar(2.0, DType::Bool); }, {"scalar", "2", "bool"});
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

// ---- comparisons and where ----------------------------------------------------------------

Table compare_cases() {
  Table t;
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

// ---- casts --------------------------------------------------------------------------------

Table cast_cases() {
  Table t;
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
         {"variable handle", "[3]"});
  misuse(t, "cast: undefined", [] { cast(Tensor(), DType::Float32); }, {"cast", "undefined"});
  misuse(t, "fill: 0.5 into int32", [] { fill({2}, 0.5, DType::Int32); },
         {"fill", "0.5", "int32", "[2]"});
  misuse(t, "fill: 3e9 into int32", [] { fill({2}, 3e9, DType::Int32); }, {"fill", "int32", "[2]"});
  misuse(t, "fill: NaN into int64", [] { fill({1}, kNaN, DType::Int64); },
         {"fill", "nan", "int64"});
  misuse(t, "fill: 2 into bool", [] { fill({1}, 2.0, DType::Bool); }, {"fill", "2", "bool"});
  misuse(t, "from_values: 1.5 as int32", [] { from_values({1.5}, {1}, DType::Int32); },
         {"from_values", "1.5", "int32", "[1]"});
  defined(t, "fill: -3 into int32 and 1 into bool are exact", [] {
    REQUIRE(elements<std::int32_t>(fill({2}, -3.0, DType::Int32)) ==
            std::vector<std::int32_t>{-3, -3});
    REQUIRE(elements<bool>(fill({1}, 1.0, DType::Bool)) == std::vector<bool>{true});
  });
  return t;
}

// ---- reductions ---------------------------------------------------------------------------

Table reduce_cases() {
  Table t;
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
  defined(t, "unsorted_segment_sum: int32 overflow wraps", [] {
    const Tensor s = unsorted_segment_sum(i32({kInt32Max, 1}), i32({0, 0}), 1);
    REQUIRE(elements<std::int32_t>(s) == std::vector<std::int32_t>{kInt32Min});
  });
  return t;
}

// ---- array ops ----------------------------------------------------------------------------

Table array_cases() {
  Table t;
  const Tensor x4 = f64({1, 2, 3, 4});
  const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::int64_t two62 = std::int64_t{1} << 62;

  misuse(t, "reshape: 4 elements into [3]", [x4] { reshape(x4, {3}); },
         {"reshape", "[4]", "[3]", "float64"});
  misuse(t, "reshape: two -1", [x4] { reshape(x4, {-1, -1}); }, {"reshape", "[4]", "-1"});
  misuse(t, "reshape: entry -2", [x4] { reshape(x4, {-2, 2}); }, {"reshape", "-2", "[4]"});
  misuse(t, "reshape: [2^62 + 1, 4] does not wrap to 4 elements",
         [x4, two62] {
           reshape(x4, {two62 + 1, 4});
         },
         {"reshape", "[4]", "[4611686018427387905, 4]", "2^63"});
  misuse(t, "reshape: [2^62, 2^62, 0] of 4 elements",
         [x4, two62] {
           reshape(x4, {two62, two62, 0});
         },
         {"reshape", "[4]", "[4611686018427387904, 4611686018427387904, 0]"});
  misuse(t, "reshape: -1 with a zero entry",
         [x4] {
           reshape(x4, {-1, 0});
         },
         {"reshape", "[4]", "[-1, 0]"});
  misuse(t, "reshape: a variable handle", [] { reshape(variable_handle(), {3}); },
         {"reshape", "variable handle"});
  defined(t, "reshape: empty tensor to [0, 5] and [5, -1]", [] {
    REQUIRE(reshape(zeros({0, 2}), {0, 5}).shape() == Shape{0, 5});
    REQUIRE(reshape(zeros({0, 2}), {5, -1}).shape() == Shape{5, 0});
  });

  misuse(t, "transpose: perm [0, 0]",
         [m] {
           transpose(m, {0, 0});
         },
         {"transpose", "[0, 0]", "[2, 3]"});
  misuse(t, "transpose: perm of the wrong length",
         [m] {
           transpose(m, {1, 0, 2});
         },
         {"transpose", "[1, 0, 2]", "[2, 3]"});
  misuse(t, "transpose: a variable handle", [] { transpose(variable_handle()); },
         {"transpose", "variable handle"});
  defined(t, "transpose: an empty [0, 3] gives [3, 0]", [] {
    REQUIRE(transpose(zeros({0, 3})).shape() == Shape{3, 0});
  });

  misuse(t, "concat: no values", [] { concat({}, 0); }, {"concat", "empty"});
  misuse(t, "concat: scalars",
         [] {
           concat({constant(1.0), constant(2.0)}, 0);
         },
         {"concat", "scalars", "[]"});
  misuse(t, "concat: dtypes differ",
         [] {
           concat({f64({1}), f32({1})}, 0);
         },
         {"concat", "float64", "float32"});
  misuse(t, "concat: other dimensions differ",
         [m] {
           concat({m, f64({1, 2}, {1, 2})}, 0);
         },
         {"concat", "[2, 3]", "[1, 2]"});
  misuse(t, "concat: axis 2 of rank 2", [m] { concat({m, m}, 2); }, {"concat", "axis 2", "[2, 3]"});
  misuse(t, "concat: a variable handle",
         [] {
           concat({variable_handle(), f64({1})}, 0);
         },
         {"concat", "variable handle"});
  defined(t, "concat: empties concatenate to the right shape", [] {
    REQUIRE(concat({zeros({0, 2}), zeros({3, 2})}, 0).shape() == Shape{3, 2});
    REQUIRE(concat({zeros({2, 0}), zeros({2, 0})}, 1).shape() == Shape{2, 0});
  });

  misuse(t, "stack: no values", [] { stack({}); }, {"stack", "empty"});
  misuse(t, "stack: shapes differ",
         [] {
           stack({f64({1, 2}), f64({1})});
         },
         {"stack", "[2]", "[1]"});
  misuse(t, "stack: axis 3 for rank 1",
         [] {
           stack({f64({1}), f64({2})}, 3);
         },
         {"stack", "axis 3", "[1]"});
  defined(t, "stack: empties stack", [] {
    REQUIRE(stack({zeros({0}), zeros({0})}, 1).shape() == Shape{0, 2});
  });

  misuse(t, "split: 3 does not divide 4", [x4] { split(x4, 3); }, {"split", "4", "3"});
  misuse(t, "split: a scalar", [] { split(constant(1.0), 1); }, {"split", "[]", "float64"});
  misuse(t, "split: axis 1 of rank 1", [x4] { split(x4, 2, 1); }, {"split", "axis 1", "[4]"});
  misuse(t, "split: 0 parts", [x4] { split(x4, 0); }, {"split", "0", "[4]"});

  misuse(t, "slice: negative begin", [x4] { slice(x4, {-1}, {1}); }, {"slice", "[-1]", "[4]"});
  misuse(t, "slice: size past the end", [x4] { slice(x4, {2}, {3}); },
         {"slice", "[2]", "[3]", "[4]"});
  misuse(t, "slice: begin + size past INT64_MAX", [x4] { slice(x4, {2}, {kInt64Max}); },
         {"slice", "[9223372036854775807]", "[4]"});
  misuse(t, "slice: size -2", [x4] { slice(x4, {0}, {-2}); }, {"slice", "[-2]", "[4]"});
  misuse(t, "slice: one entry for rank 2", [m] { slice(m, {0}, {1}); }, {"slice", "[2, 3]"});
  misuse(t, "slice: a variable handle", [] { slice(variable_handle(), {0}, {1}); },
         {"slice", "variable handle"});
  defined(t, "slice: an empty window and an empty tensor", [x4] {
    REQUIRE(slice(x4, {4}, {0}).shape() == Shape{0});
    REQUIRE(slice(zeros({0, 3}), {0, 1}, {0, -1}).shape() == Shape{0, 2});
  });

  misuse(t, "gather: index 4 out of range [0, 4)",
         [x4] {
           gather(x4, i32({1, 4}));
         },
         {"gather", "index 4", "[4]", "float64"});
  misuse(t, "gather: negative index", [x4] { gather(x4, i64({-1})); },
         {"gather", "index -1", "[4]"});
  misuse(t, "gather: float indices", [x4] { gather(x4, f64({0})); },
         {"gather", "indices", "float64", "[1]"});
  misuse(t, "gather: scalar params", [] { gather(constant(1.0), i32({0})); },
         {"gather", "[]", "float64"});
  misuse(t, "gather: axis 1 of rank 1", [x4] { gather(x4, i32({0}), 1); },
         {"gather", "axis 1", "[4]"});
  misuse(t, "gather: index out of range along axis 1", [m] { gather(m, i32({3}), 1); },
         {"gather", "index 3", "[2, 3]"});
  misuse(t, "gather: a variable handle", [] { gather(variable_handle(), i32({0})); },
         {"gather", "variable handle"});
  defined(t, "gather: empty indices give an empty result", [m] {
    REQUIRE(gather(m, zeros({0}, DType::Int32), 1).shape() == Shape{2, 0});
  });

  misuse(t, "tile: multiples of the wrong length",
         [x4] {
           tile(x4, {2, 2});
         },
         {"tile", "[2, 2]", "[4]"});
  misuse(t, "tile: 2^63 copies", [x4] { tile(x4, {std::size_t{1} << 63}); },
         {"tile", "[9223372036854775808]", "[4]", "2^63"});
  misuse(t, "tile: a product past 2^63 - 1",
         [m] {
           tile(m, {std::size_t{1} << 62, std::size_t{1} << 62});
         },
         {"tile", "[2, 3]", "2^63"});
  misuse(t, "tile: a variable handle", [] { tile(variable_handle(), {2}); },
         {"tile", "variable handle"});
  defined(t, "tile: zero multiples give an empty tensor", [m] {
    REQUIRE(tile(m, {0, 5}).shape() == Shape{0, 15});
  });

  misuse(t, "squeeze: an axis of size 3", [m] { squeeze(m, {1}); },
         {"squeeze", "axis 1", "[2, 3]"});
  misuse(t, "squeeze: axis 5", [m] { squeeze(m, {5}); }, {"squeeze", "axis 5", "[2, 3]"});
  misuse(t, "expand_dims: axis 4 for rank 2", [m] { expand_dims(m, 4); },
         {"expand_dims", "axis 4", "[2, 3]"});
  misuse(t, "expand_dims: axis -4 for rank 2", [m] { expand_dims(m, -4); },
         {"expand_dims", "axis -4", "[2, 3]"});
  misuse(t, "broadcast_to: [2, 3] to [3, 3]",
         [m] {
           broadcast_to(m, {3, 3});
         },
         {"broadcast_to", "[2, 3]", "[3, 3]"});
  misuse(t, "broadcast_to: a shape of 2^80 elements",
         [] {
           broadcast_to(f64({1}), {std::size_t{1} << 40, std::size_t{1} << 40});
         },
         {"broadcast_to", "[1]", "[1099511627776, 1099511627776]"});
  misuse(t, "unbroadcast: [2, 3] to [4]", [m] { unbroadcast(m, {4}); },
         {"unbroadcast", "grad has shape [2, 3] and dtype float64", "[4]"});
  misuse(t, "unbroadcast: [2, 3] to a higher rank",
         [m] {
           unbroadcast(m, {1, 2, 3});
         },
         {"unbroadcast", "[2, 3]", "[1, 2, 3]"});
  misuse(t, "unsorted_segment_sum: id out of range",
         [x4] {
           unsorted_segment_sum(x4, i32({0, 1, 2, 3}), 3);
         },
         {"unsorted_segment_sum", "segment id 3", "[4]"});
  misuse(t, "unsorted_segment_sum: one id too few",
         [x4] {
           unsorted_segment_sum(x4, i32({0, 1, 2}), 3);
         },
         {"unsorted_segment_sum", "[4]", "[3]"});
  misuse(t, "unsorted_segment_sum: 2^63 segments",
         [] { unsorted_segment_sum(f64({1}), i32({0}), std::size_t{1} << 63); },
         {"unsorted_segment_sum", "[1]", "9223372036854775808"});

  misuse(t, "zeros: [2^40, 2^40] overflows the element count",
         [] {
           zeros({std::size_t{1} << 40, std::size_t{1} << 40});
         },
         {"zeros", "[1099511627776, 1099511627776]", "2^63"});
  misuse(t, "ones: a dimension past 2^63 - 1",
         [] {
           ones({std::size_t{1} << 63, 0});
         },
         {"ones", "[9223372036854775808, 0]"});
  misuse(t, "fill: 2^62 float64 elements exceed addressable bytes",
         [] { fill({std::size_t{1} << 62}, 1.0); },
         {"fill", "[4611686018427387904]", "float64", "bytes"});
  misuse<ResourceExhausted>(t, "zeros: 2^60 bytes cannot be allocated",
                            [] {
                              zeros({std::size_t{1} << 30, std::size_t{1} << 27});
                            },
                            {"zeros", "[1073741824, 134217728]", "float64", "out of memory"});
  misuse<ResourceExhausted>(t, "tile: 2^60 bytes cannot be allocated",
                            [] { tile(f64({1}), {std::size_t{1} << 57}); },
                            {"tile", "[144115188075855872]", "float64", "out of memory"});
  misuse(t, "zeros: [0, 2^40, 2^40] is empty but its non-zero dimensions overflow",
         [] {
           zeros({0, std::size_t{1} << 40, std::size_t{1} << 40});
         },
         {"zeros", "[0, 1099511627776, 1099511627776]", "2^63"});
  misuse(t, "reshape: an empty tensor into [0, 2^40, 2^40]",
         [] {
           reshape(zeros({0}), {0, std::int64_t{1} << 40, std::int64_t{1} << 40});
         },
         {"reshape", "[0]", "[0, 1099511627776, 1099511627776]", "2^63"});
  defined(t, "zeros: [2^40, 0] is a valid empty tensor", [] {
    REQUIRE(zeros({std::size_t{1} << 40, 0}).size() == 0);
  });
  return t;
}

// ---- nn -----------------------------------------------------------------------------------

Table nn_cases() {
  Table t;
  const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  using AxisOp = std::function<Tensor(const Tensor&, int)>;
  const std::vector<std::pair<std::string, AxisOp>> axis_ops = {
      {"softmax", [](const Tensor& x, int a) { return softmax(x, a); }},
      {"log_softmax", [](const Tensor& x, int a) { return log_softmax(x, a); }},
  };
  for (const auto& [name, fn] : axis_ops) {
    const AxisOp op = fn;
    misuse(t, name + ": a scalar", [op] { op(constant(1.0), -1); }, {name, "[]", "float64"});
    misuse(t, name + ": int32", [op] { op(i32({1, 2}), -1); }, {name, "int32", "[2]"});
    misuse(t, name + ": axis 2 of rank 2", [op, m] { op(m, 2); }, {name, "axis 2", "[2, 3]"});
    misuse(t, name + ": a variable handle", [op] { op(variable_handle(), -1); },
           {name, "variable handle"});
    defined(t, name + ": an empty row axis gives an empty result", [op] {
      REQUIRE(op(zeros({0, 3}), -1).shape() == Shape{0, 3});
    });
  }
  defined(t, "softmax: a NaN logit makes its row NaN, other rows finite", [] {
    const auto r = elements<double>(softmax(f64({kNaN, 0, 1, 1}, {2, 2})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(std::isnan(r[1]));
    REQUIRE(r[2] == Approx(0.5));
  });
  defined(t, "softmax: an +inf logit gives NaN (inf - inf) and 0 elsewhere, no error", [] {
    const auto r = elements<double>(softmax(f64({kInf, 0})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(r[1] == 0.0);
  });
  using Loss = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Loss>> losses = {
      {"softmax_cross_entropy_with_logits",
       [](const Tensor& z, const Tensor& x) { return softmax_cross_entropy_with_logits(z, x); }},
      {"sigmoid_cross_entropy_with_logits",
       [](const Tensor& z, const Tensor& x) { return sigmoid_cross_entropy_with_logits(z, x); }},
  };
  for (const auto& [name, fn] : losses) {
    const Loss op = fn;
    misuse(t, name + ": shapes [2, 3] and [3]",
           [op, m] {
             op(m, f64({1, 2, 3}));
           },
           {name, "[2, 3]", "[3]"});
    misuse(t, name + ": dtypes differ",
           [op] {
             op(f32({1, 0}), f64({1, 2}));
           },
           {name, "float32", "float64"});
    misuse(t, name + ": int32", [op] { op(i32({1, 0}), i32({1, 2})); }, {name, "int32", "[2]"});
    misuse(t, name + ": a variable handle",
           [op] {
             op(f64({1, 0, 0}), variable_handle());
           },
           {name, "variable handle"});
  }
  misuse(t, "softmax_cross_entropy_with_logits: scalars",
         [] { softmax_cross_entropy_with_logits(constant(1.0), constant(1.0)); },
         {"softmax_cross_entropy_with_logits", "[]"});
  defined(t, "softmax_cross_entropy_with_logits: empty batch gives an empty loss", [] {
    REQUIRE(softmax_cross_entropy_with_logits(zeros({0, 3}), zeros({0, 3})).shape() == Shape{0});
  });
  defined(t, "relu: NaN stays NaN, -inf is 0", [] {
    const auto r = elements<double>(relu(f64({kNaN, -kInf, 2})));
    REQUIRE(std::isnan(r[0]));
    REQUIRE(r[1] == 0.0);
    REQUIRE(r[2] == 2.0);
  });
  defined(t, "relu: int32 INT_MIN is 0", [] {
    REQUIRE(elements<std::int32_t>(relu(i32({kInt32Min, 3}))) == std::vector<std::int32_t>{0, 3});
  });
  misuse(t, "relu: bool", [] { relu(b8({1})); }, {"relu", "bool", "[1]"});
  misuse(t, "sigmoid: int64", [] { sigmoid(i64({1})); }, {"sigmoid", "int64", "[1]"});
  misuse(t, "softplus: a variable handle", [] { softplus(variable_handle()); },
         {"softplus", "variable handle"});
  return t;
}

// ---- linalg -------------------------------------------------------------------------------

Table linalg_cases() {
  Table t;
  const Tensor a23 = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor singular = f64({1, 2, 2, 4}, {2, 2});
  const Tensor indefinite = f64({1, 2, 2, 1}, {2, 2});
  misuse(t, "matmul: inner dimensions 3 and 2", [a23] { matmul(a23, a23); },
         {"matmul", "[2, 3]", "3 vs 2"});
  misuse(t, "matmul: a vector", [a23] { matmul(f64({1, 2}), a23); }, {"matmul", "[2]", "[2, 3]"});
  misuse(t, "matmul: dtypes differ", [a23] { matmul(a23, cast(transpose(a23), DType::Float32)); },
         {"matmul", "float64", "float32"});
  misuse(t, "matmul: int32",
         [] {
           matmul(i32({1, 2, 3, 4}, {2, 2}), i32({1, 2, 3, 4}, {2, 2}));
         },
         {"matmul", "int32", "[2, 2]"});
  misuse(t, "matmul: batch dimensions [2] and [3]",
         [] {
           matmul(zeros({2, 2, 2}), zeros({3, 2, 2}));
         },
         {"matmul", "[2, 2, 2]", "[3, 2, 2]"});
  misuse(t, "matmul: a variable handle", [a23] { matmul(variable_handle(), a23); },
         {"matmul", "variable handle"});
  misuse(t, "matmul: a product of 2^80 elements",
         [] {
           matmul(zeros({std::size_t{1} << 40, 0}), zeros({0, std::size_t{1} << 40}));
         },
         {"matmul", "[1099511627776, 0]", "[0, 1099511627776]"});
  defined(t, "matmul: [2, 0] x [0, 3] is zeros", [] {
    const Tensor c = matmul(zeros({2, 0}), zeros({0, 3}));
    REQUIRE(c.shape() == Shape{2, 3});
    REQUIRE(elements<double>(c) == std::vector<double>(6, 0.0));
  });
  defined(t, "matmul: NaN propagates", [] {
    REQUIRE(is_nan(matmul(f64({kNaN}, {1, 1}), f64({1}, {1, 1}))));
  });
  misuse(t, "matrix_inverse: singular", [singular] { matrix_inverse(singular); },
         {"matrix_inverse", "singular", "[2, 2]"});
  misuse(t, "matrix_inverse: not square", [a23] { matrix_inverse(a23); },
         {"matrix_inverse", "[2, 3]"});
  misuse(t, "matrix_inverse: int32",
         [] {
           matrix_inverse(i32({1}, {1, 1}));
         },
         {"matrix_inverse", "int32", "[1, 1]"});
  misuse(t, "matrix_inverse: singular second batch matrix",
         [] {
           matrix_inverse(f64({1, 0, 0, 1, 0, 0, 0, 0}, {2, 2, 2}));
         },
         {"matrix_inverse", "singular", "[2, 2, 2]", "batch matrix 1"});
  defined(t, "matrix_inverse: a 0 x 0 matrix and an empty batch", [] {
    REQUIRE(matrix_inverse(zeros({0, 0})).shape() == Shape{0, 0});
    REQUIRE(matrix_inverse(zeros({0, 3, 3})).shape() == Shape{0, 3, 3});
  });
  misuse(t, "matrix_determinant: not square", [a23] { matrix_determinant(a23); },
         {"matrix_determinant", "[2, 3]"});
  misuse(t, "matrix_determinant: bool", [] { matrix_determinant(b8({1})); },
         {"matrix_determinant", "bool", "[1]"});
  defined(t, "matrix_determinant: singular is 0, 0 x 0 is 1", [singular] {
    REQUIRE(matrix_determinant(singular).item<double>() == 0.0);
    REQUIRE(matrix_determinant(zeros({0, 0})).item<double>() == 1.0);
  });
  misuse(t, "solve: singular a",
         [singular] {
           solve(singular, f64({1, 2}, {2, 1}));
         },
         {"solve", "singular", "[2, 2]", "[2, 1]"});
  misuse(t, "solve: b rows do not match",
         [] {
           solve(f64({1, 0, 0, 1}, {2, 2}), f64({1, 2, 3}, {3, 1}));
         },
         {"solve", "[2, 2]", "[3, 1]"});
  misuse(t, "solve: dtypes differ",
         [] {
           solve(f64({1}, {1, 1}), cast(f64({1}, {1, 1}), DType::Float32));
         },
         {"solve", "float64", "float32"});
  misuse(t, "solve: a variable handle",
         [] {
           solve(variable_handle(), f64({1}, {1, 1}));
         },
         {"solve", "variable handle"});
  misuse(t, "cholesky: not positive definite", [indefinite] { cholesky(indefinite); },
         {"cholesky", "positive definite", "[2, 2]"});
  misuse(t, "cholesky: negative diagonal",
         [] {
           cholesky(f64({-1}, {1, 1}));
         },
         {"cholesky", "positive definite", "[1, 1]"});
  misuse(t, "cholesky: not square", [a23] { cholesky(a23); }, {"cholesky", "[2, 3]"});
  misuse(t, "cholesky: int64", [] { cholesky(i64({1}, {1, 1})); }, {"cholesky", "int64", "[1, 1]"});
  return t;
}

// ---- variables and gradient options -------------------------------------------------------

Table variable_and_option_cases() {
  Table t;
  misuse(t, "handle * 2.0 is not a silent scalar 0", [] { (void)(variable_handle() * 2.0); },
         {"multiply", "variable handle", "[3]"});
  misuse(t, "handle.array() reads no elements", [] { (void)variable_handle().array<double>(); },
         {"variable handle", "[3]", "float64"});
  misuse(t, "identity of a handle", [] { identity(variable_handle()); },
         {"identity", "variable handle"});
  defined(t, "the variable's value is usable where its handle is not", [] {
    Variable v(f64({1, 2, 3}));
    REQUIRE(elements<double>(v.value() * 2.0) == std::vector<double>{2, 4, 6});
  });
  misuse(t, "Variable::assign_sub names itself",
         [] {
           Variable v(f64({1, 2}));
           v.assign_sub(f64({1}));
         },
         {"assign_sub", "[2]", "[1]", "float64"});
  misuse(t, "Variable::assign_add names itself",
         [] {
           Variable v(f64({1, 2}));
           v.assign_add(f32({1, 2}));
         },
         {"assign_add", "float64", "float32"});
  misuse(t, "Variable::assign_sub of a bool variable",
         [] {
           Variable v(b8({1}));
           v.assign_sub(b8({1}));
         },
         {"assign_sub", "bool", "[1]"});
  defined(t, "Variable::assign_add wraps int32", [] {
    Variable v(i32({kInt32Max}));
    v.assign_add(i32({1}));
    REQUIRE(v.peek().item<std::int32_t>() == kInt32Min);
  });
  misuse(t, "gradient: UnconnectedGradients value 7",
         [] {
           Tensor x = constant(1.0);
           GradientTape tape;
           tape.watch(x);
           Tensor y = multiply(x, x);
           tape.gradient(y, x, static_cast<UnconnectedGradients>(7));
         },
         {"gradient", "unconnected_gradients", "7"});
  misuse(t, "gradient over variables: UnconnectedGradients value -1",
         [] {
           Variable v(constant(1.0));
           GradientTape tape;
           Tensor y = multiply(v.value(), v.value());
           tape.gradient(y, std::vector<Variable>{v}, static_cast<UnconnectedGradients>(-1));
         },
         {"gradient", "unconnected_gradients", "-1"});
  misuse(t, "jacobian: UnconnectedGradients value 2",
         [] {
           Tensor x = f64({1, 2});
           GradientTape tape;
           tape.watch(x);
           Tensor y = multiply(x, x);
           tape.jacobian(y, x, static_cast<UnconnectedGradients>(2));
         },
         {"jacobian", "unconnected_gradients", "2"});
  misuse(t, "batch_jacobian: UnconnectedGradients value 3",
         [] {
           Tensor x = f64({1, 2}, {2, 1});
           GradientTape tape;
           tape.watch(x);
           Tensor y = multiply(x, x);
           tape.batch_jacobian(y, x, static_cast<UnconnectedGradients>(3));
         },
         {"batch_jacobian", "unconnected_gradients", "3"});
  misuse(t, "hessian: a non-scalar function",
         [] {
           hessian([](const Tensor& x) { return multiply(x, x); }, f64({1, 2}));
         },
         {"hessian", "[2]", "scalar"});
  defined(t, "hessian: a size-1 function is accepted", [] {
    const Tensor h = hessian(
        [](const Tensor& x) { return reduce_sum(multiply(x, multiply(x, x))); }, f64({1, 2}));
    REQUIRE(elements<double>(h) == std::vector<double>{6, 0, 0, 12});
  });
  return t;
}

std::vector<Table> all_tables() {
  return {math_cases(),  compare_cases(), cast_cases(),   reduce_cases(),
          array_cases(), nn_cases(),      linalg_cases(), variable_and_option_cases()};
}

}  // namespace

TEST_CASE(
    "the op misuse catalogue: every case throws its documented error or gives its defined result") {
  const int before = misuse_cases_run();
  std::size_t listed = 0;
  for (const Table& table : all_tables()) {
    for (const Case& c : table) {
      c.run();
      ++listed;
    }
  }
  const int run = misuse_cases_run() - before;
  REQUIRE(static_cast<std::size_t>(run) == listed);
  std::cout << "op misuse catalogue: " << run << " cases run\n";
  REQUIRE(run >= 200);
}

// softmax_cross_entropy_with_logits for labels whose rows do not sum to 1: the exact
// derivative softmax * sum(labels) - labels, first and second order, against finite
// differences in both arguments (the mixed second derivative included).
TEST_CASE("softmax_cross_entropy_with_logits: exact derivatives for label rows not summing to 1") {
  const Tensor labels = f64({0.2, 0.9, 0.4, 1.5, 0.0, 0.3}, {2, 3});  // rows sum to 1.5 and 1.8
  const Tensor logits = f64({0.1, -0.7, 1.3, 2.0, 0.5, -1.1}, {2, 3});
  const Fn loss = [](const std::vector<Tensor>& a) {
    return reduce_sum(softmax_cross_entropy_with_logits(a[0], a[1]));
  };
  SECTION("the logits gradient is softmax * sum(labels) - labels") {
    GradientTape tape;
    tape.watch(logits);
    const Tensor y = reduce_sum(softmax_cross_entropy_with_logits(labels, logits));
    const Tensor g = tape.gradient(y, logits);
    const Tensor expected =
        subtract(multiply(softmax(logits), reduce_sum(labels, {-1}, true)), labels);
    require_close(g, {2, 3}, values(expected), 1e-12);
  }
  SECTION("first order, both arguments") {
    require_gradient_matches(loss, {labels, logits}, 0);
    require_gradient_matches(loss, {labels, logits}, 1);
  }
  SECTION("second order in logits and in labels") {
    require_second_order_matches(loss, {labels, logits}, 1);
    require_second_order_matches(loss, {labels, logits}, 0);
  }
  SECTION("the mixed second derivative d/dlabels (dloss/dlogits)") {
    const Fn logits_gradient_weighted = [](const std::vector<Tensor>& a) {
      Tensor x = a[1];
      GradientTape tape;
      tape.watch(x);
      const Tensor y = reduce_sum(softmax_cross_entropy_with_logits(a[0], x));
      const Tensor g = tape.gradient(y, x);
      return reduce_sum(multiply(g, f64({0.3, -1.2, 0.7, 0.5, 2.0, -0.4}, {2, 3})));
    };
    require_gradient_matches(logits_gradient_weighted, {labels, logits}, 0);
  }
}
