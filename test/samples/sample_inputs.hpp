// The inputs the family sample files build: fixed random tensors, batches for vectorized_map,
// integer index tensors, and the misuse cases' small literals.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include "misuse_support.hpp"
#include "samples/op_sample.hpp"
#include "support.hpp"

namespace tapegrad::samples {

using tapegrad::testing::random_tensor;

// Uniform in [0.5, 2): where log, sqrt, reciprocal and the gamma functions are smooth.
inline Tensor positive(const Shape& shape, unsigned seed) {
  return random_tensor(shape, seed, 0.5, 2.0);
}

// ---- batches for vectorized_map -----------------------------------------------------------

constexpr std::size_t kBatch = 3;

inline Shape batched(const Shape& example, std::size_t batch = kBatch) {
  Shape s{batch};
  s.insert(s.end(), example.begin(), example.end());
  return s;
}

// [B] ++ example, uniform in [lo, hi).
inline Tensor batch_of(const Shape& example, unsigned seed, double lo = -1.0, double hi = 1.0) {
  return random_tensor(batched(example), seed, lo, hi);
}

inline Tensor ints(const std::vector<double>& v, const Shape& shape, DType dtype = DType::Int64) {
  return from_values(v, shape, dtype);
}

inline Tensor as_f32(const Tensor& t) { return cast(t, DType::Float32); }

// The gradient of `forward` at the fixed x with output gradient in[0]: the op's gradient op
// (TanhGrad, SliceGrad, ...) applied to a batched output gradient.
inline RunFn gradient_at(Tensor x, std::function<Tensor(const Tensor&)> forward) {
  return [x, forward](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = forward(x);
    return tape.gradient({y}, {x}, {in[0]});
  };
}

inline RunFn unary_fn(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& in) { return Outputs{f(in[0])}; };
}

// ---- misuse cases -------------------------------------------------------------------------

constexpr std::int32_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();

inline Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Float64);
}
inline Tensor f64(const std::vector<double>& v) { return f64(v, {v.size()}); }
inline Tensor f32(const std::vector<double>& v) {
  return from_values(v, {v.size()}, DType::Float32);
}
inline Tensor b8(const std::vector<double>& v) { return from_values(v, {v.size()}, DType::Bool); }
inline Tensor i32(const std::vector<std::int32_t>& v, const Shape& shape) {
  xt::xarray<std::int32_t> a = xt::empty<std::int32_t>(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return Tensor(std::move(a));
}
inline Tensor i32(const std::vector<std::int32_t>& v) { return i32(v, {v.size()}); }
inline Tensor i64(const std::vector<std::int64_t>& v, const Shape& shape) {
  xt::xarray<std::int64_t> a = xt::empty<std::int64_t>(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return Tensor(std::move(a));
}
inline Tensor i64(const std::vector<std::int64_t>& v) { return i64(v, {v.size()}); }

template <class T>
std::vector<T> elements(const Tensor& t) {
  const auto& a = t.array<T>();
  return std::vector<T>(a.begin(), a.end());
}

inline bool is_nan(const Tensor& t) { return std::isnan(t.item<double>()); }

// A variable's handle: it stands for the variable on tapes and holds no elements.
inline Tensor variable_handle() {
  static const Variable v(f64({1, 2, 3}, {3}), true, "w");
  return v.handle();
}

using MisuseCases = std::vector<MisuseCase>;

// A case whose body must throw E with every fragment in the message.
template <class E = InvalidArgument>
void misuse(MisuseCases& t, const std::string& name, std::function<void()> body,
            std::vector<std::string> fragments) {
  t.push_back(
      {name, std::move(body), std::move(fragments), &testing::expect_misuse<E>, typeid(E).name()});
}

// A case that is NOT an error: its body checks the defined result itself.
inline void defined(MisuseCases& t, const std::string& name, std::function<void()> body) {
  t.push_back({name,
               std::move(body),
               {},
               [](const std::string& n, const std::function<void()>& b,
                  const std::vector<std::string>&) { testing::expect_defined(n, b); },
               ""});
}

// Attaches each case to the sample of the op its public function records: the function is
// the case name's first word ("reshape: two -1" -> "reshape"), `op_of` maps it to the op.
// Throws std::logic_error for a function missing from `op_of`.
void attach_by_function(std::vector<OpSample>& samples, MisuseCases cases,
                        const std::vector<std::pair<std::string, std::string>>& op_of);

}  // namespace tapegrad::samples

namespace tapegrad::samples {

// The dense batch of a diagonal d (row b is e_b d[b]): a d.size() x d.size() diagonal matrix.
inline std::vector<double> diagonal_matrix(const std::vector<double>& d) {
  std::vector<double> dense(d.size() * d.size(), 0.0);
  for (std::size_t b = 0; b < d.size(); ++b) dense[b * d.size() + b] = d[b];
  return dense;
}

// The diagonal most structure cases use: d = {0.5, -2, 3}, dense batches 3 x 3 diagonals.
inline Tensor structure_d() { return f64({0.5, -2, 3}, {3}); }

// A fused activation gradient (y or x constant, the output gradient g = d diagonal).
inline StructureCase fused_structure(const std::vector<double>& y,
                                     const std::vector<double>& result) {
  return StructureCase{
      {f64(y, {3}), structure_d()}, {false, true}, std::nullopt, {3}, diagonal_matrix(result)};
}

}  // namespace tapegrad::samples

namespace tapegrad::samples {

// A fused activation gradient op (ReluGrad, SqrtGrad, ...) under vectorized_map two ways: the
// output gradient batched at a fixed x (the slope once, broadcast), and x batched (what the op
// keeps is batched too). x in [lo, 2).
inline void add_fused_gradient_cases(std::vector<BatchCase>& cases, const std::string& op,
                                     std::function<Tensor(const Tensor&)> activation, double lo,
                                     unsigned seed) {
  cases.push_back({op + ", g batched",
                   {op},
                   gradient_at(random_tensor({2, 3}, seed, lo, 2.0), activation),
                   {batch_of({2, 3}, seed + 1)}});
  cases.push_back({op + ", x batched",
                   {op},
                   [activation](const std::vector<Tensor>& in) {
                     GradientTape tape;
                     tape.watch(in[0]);
                     return std::vector<Tensor>{tape.gradient(activation(in[0]), in[0])};
                   },
                   {batch_of({2, 3}, seed + 2, lo, 2.0)}});
}

}  // namespace tapegrad::samples

namespace tapegrad::samples {

inline RunFn unary(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return Outputs{f(in[0])}; };
}

}  // namespace tapegrad::samples
