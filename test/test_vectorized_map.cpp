// vectorized_map: every built-in op's batching rule against a loop of the op over the slices
// (a table over the ops, with batched and unbatched inputs mixed), the trace's edge cases
// (zero-size batches, scalars, constants, nesting, outer tapes), the loop fallback for a user
// primitive without a rule, and per-example gradients of the digits MLP.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "captured_stderr.hpp"
#include "misuse_support.hpp"
#include "ops/batching_support.hpp"
#include "ops/internal_ops.hpp"
#include "ops/math/math_special.hpp"
#include "ops/nn/conv_ops.hpp"
#include "ops/reduce/reduce_support.hpp"
#include "runtime/batching_context.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/op_trace.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::CapturedStderr;
using tapegrad::testing::random_tensor;
using tapegrad::testing::values;

namespace {

using MapFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
constexpr std::size_t kBatch = 3;

Shape batched(const Shape& example, std::size_t batch = kBatch) {
  Shape s{batch};
  s.insert(s.end(), example.begin(), example.end());
  return s;
}

// [B] ++ example, uniform in [lo, hi).
Tensor batch_of(const Shape& example, unsigned seed, double lo = -1.0, double hi = 1.0) {
  return random_tensor(batched(example), seed, lo, hi);
}

Tensor ints(const std::vector<double>& v, const Shape& shape, DType dtype = DType::Int64) {
  return from_values(v, shape, dtype);
}

// The reference: fn on each slice (slice + reshape), the outputs stacked.
std::vector<Tensor> loop_reference(const MapFn& fn, const std::vector<Tensor>& elems) {
  const std::size_t batch = elems[0].shape()[0];
  std::vector<std::vector<Tensor>> rows;
  for (std::size_t b = 0; b < batch; ++b) {
    std::vector<Tensor> slices;
    for (const Tensor& e : elems) {
      std::vector<std::int64_t> begin(e.rank(), 0), size(e.shape().begin(), e.shape().end());
      begin[0] = static_cast<std::int64_t>(b);
      size[0] = 1;
      std::vector<std::int64_t> example(e.shape().begin() + 1, e.shape().end());
      slices.push_back(reshape(slice(e, begin, size), example));
    }
    rows.push_back(fn(slices));
  }
  std::vector<Tensor> out;
  for (std::size_t j = 0; j < rows[0].size(); ++j) {
    std::vector<Tensor> column;
    for (auto& row : rows) column.push_back(row[j]);
    out.push_back(stack(column, 0));
  }
  return out;
}

void require_same(const Tensor& actual, const Tensor& expected, double tolerance = 1e-10) {
  REQUIRE(actual.defined());
  REQUIRE(actual.dtype() == expected.dtype());
  tapegrad::testing::require_close(actual, expected.shape(), values(expected), tolerance);
}

// vectorized_map without fallback (so every op must have its rule) equals the loop.
void require_vectorizes(const MapFn& fn, const std::vector<Tensor>& elems,
                        double tolerance = 1e-10) {
  const std::vector<Tensor> got = vectorized_map(fn, elems, /*fallback_to_loop=*/false);
  const std::vector<Tensor> expected = loop_reference(fn, elems);
  REQUIRE(got.size() == expected.size());
  for (std::size_t j = 0; j < got.size(); ++j) {
    INFO("output " << j);
    require_same(got[j], expected[j], tolerance);
  }
}

// The names of the ops fn runs on slice 0 that depend on it (what the trace holds).
std::set<std::string> traced_ops(const MapFn& fn, const std::vector<Tensor>& elems) {
  detail::OpTrace trace;
  std::vector<Tensor> slices;
  for (const Tensor& e : elems) {
    slices.push_back(gather(e, ints({0}, Shape{}), 0));
    trace.add_value(slices.back());
  }
  {
    detail::TraceScope scope(trace);
    fn(slices);
  }
  std::set<std::string> names;
  for (const auto& op : trace.ops) names.insert(op.op->name);
  return names;
}

// One-hot labels [batch, 10], label b % 10 for row b.
Tensor one_hot_rows(std::size_t batch) {
  std::vector<double> v(batch * 10, 0.0);
  for (std::size_t b = 0; b < batch; ++b) v[b * 10 + (b * 7) % 10] = 1.0;
  return from_values(v, {batch, 10});
}

struct Case {
  std::string name;
  std::vector<std::string> ops;  // built-in ops this case exercises with a batched input
  MapFn fn;
  std::vector<Tensor> elems;
};

MapFn unary(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; };
}

using Binary = Tensor (*)(const Tensor&, const Tensor&);

// A binary op with x batched and y fixed, x fixed and y batched, and both batched; the
// examples' shapes broadcast ([2, 1] against [3]).
void add_binary_cases(std::vector<Case>& cases, const std::string& op, Binary f, double lo,
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

// The gradient of `forward` at the fixed x with output gradient u: the op's gradient op
// (TanhGrad, SliceGrad, ...) applied to a batched u.
MapFn gradient_at(Tensor x, std::function<Tensor(const Tensor&)> forward) {
  return [x, forward](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = forward(x);
    return tape.gradient({y}, {x}, {in[0]});
  };
}

// ---- Issue 11's ops (and the recorded not-differentiable ops that read a tensor) -----------

Tensor as_f32(const Tensor& t) { return cast(t, DType::Float32); }

MapFn unary_fn(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; };
}

// A symmetric, well-conditioned example matrix from x: x x^T + 3 I.
Tensor spd_of(const Tensor& x) {
  const std::size_t n = x.shape().back();
  return add(matmul(x, x, false, true), multiply(eye(n, x.dtype()), scalar(3.0, x.dtype())));
}

void add_issue11_cases(std::vector<Case>& cases) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> unaries = {
      {"Erf", [](const Tensor& x) { return erf(x); }},
      {"Erfc", [](const Tensor& x) { return erfc(x); }},
      {"Lgamma", [](const Tensor& x) { return lgamma(x); }},
      {"Digamma", [](const Tensor& x) { return digamma(x); }},
      {"Polygamma", [](const Tensor& x) { return detail::polygamma(2, x); }},
      {"LeakyRelu", [](const Tensor& x) { return leaky_relu(x, 0.3); }},
      {"Elu", [](const Tensor& x) { return elu(x); }},
      {"Selu", [](const Tensor& x) { return selu(x); }},
      {"Gelu", [](const Tensor& x) { return gelu(x, false); }},
      {"GeluTanh", [](const Tensor& x) { return gelu(x, true); }},
      {"Silu", [](const Tensor& x) { return silu(x); }},
      {"LogSigmoid", [](const Tensor& x) { return log_sigmoid(x); }},
      {"Softsign", [](const Tensor& x) { return softsign(x); }}};
  for (const auto& [name, f] : unaries) {
    // Positive for the gamma functions, both signs for the activations.
    const bool gamma = name == "Lgamma" || name == "Digamma" || name == "Polygamma";
    const double lo = gamma ? 0.2 : -2.0;
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

  // Linear algebra.
  cases.push_back({"MatrixDiag, MatrixDiagPart, MatrixBandPart",
                   {"MatrixDiag", "MatrixDiagPart", "MatrixBandPart"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{diag(in[0]), diag_part(in[1]),
                                                band_part(in[1], 1, 0), band_part(in[1], -1, 2),
                                                diag(in[2])};
                   },
                   {batch_of({2, 3}, 111), batch_of({2, 3, 4}, 112), as_f32(batch_of({3}, 113))}});
  const Tensor v_fixed = random_tensor({2, 3}, 114);
  cases.push_back({"Cross",
                   {"Cross"},
                   [v_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{cross(in[0], v_fixed), cross(v_fixed, in[0]),
                                                cross(in[0], in[1])};
                   },
                   {batch_of({2, 3}, 115), batch_of({2, 3}, 116)}});
  for (const bool f32 : {false, true}) {
    const auto prepare = [f32](const Tensor& t) { return f32 ? as_f32(t) : t; };
    const std::string suffix = f32 ? " float32" : "";
    cases.push_back(
        {"LogMatrixDeterminant, SelfAdjointEigV2" + suffix,
         {"LogMatrixDeterminant", "SelfAdjointEigV2"},
         [](const std::vector<Tensor>& in) {
           const Tensor a = spd_of(in[0]);
           const SlogdetResult s =
               slogdet(add(in[0], multiply(eye(3, in[0].dtype()), scalar(2.0, in[0].dtype()))));
           const EighResult e = eigh(a);
           return std::vector<Tensor>{s.sign, s.log_abs_det, e.eigenvalues, e.eigenvectors};
         },
         {prepare(batch_of({3, 3}, 117))}});
    cases.push_back({"Qr, Svd" + suffix,
                     {"Qr", "Svd"},
                     [](const std::vector<Tensor>& in) {
                       const QrResult q = qr(in[0]);
                       const SvdResult s = svd(in[0]);
                       const SvdResult full = svd(in[0], true);
                       return std::vector<Tensor>{q.q, q.r, s.s, s.u, s.v, full.u, full.v};
                     },
                     {prepare(batch_of({4, 3}, 118))}});
  }
  const Tensor tri_fixed = add(band_part(random_tensor({3, 3}, 119), -1, 0),
                               multiply(eye(3), scalar(2.0, DType::Float64)));
  const Tensor rhs_fixed = random_tensor({3, 2}, 120);
  for (const bool lower : {false, true}) {
    for (const bool adjoint : {false, true}) {
      const std::string flags =
          std::string(lower ? " lower" : " upper") + (adjoint ? " adjoint" : "");
      cases.push_back({"MatrixTriangularSolve" + flags,
                       {"MatrixTriangularSolve"},
                       [=](const std::vector<Tensor>& in) {
                         const Tensor a = add(in[0], multiply(eye(3), scalar(3.0, DType::Float64)));
                         return std::vector<Tensor>{
                             triangular_solve(a, rhs_fixed, lower, adjoint),
                             triangular_solve(tri_fixed, in[1], lower, adjoint),
                             triangular_solve(a, in[1], lower, adjoint)};
                       },
                       {batch_of({3, 3}, 121), batch_of({3, 2}, 122)}});
    }
  }

  // Scans, reversal, padding.
  cases.push_back({"Cumsum, Cumprod, ReverseV2",
                   {"Cumsum", "Cumprod", "ReverseV2"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{cumsum(in[0], 0),
                                                cumsum(in[0], -1, true, false),
                                                cumprod(in[0], 1, false, true),
                                                cumprod(in[0], 0, true, true),
                                                reverse(in[0], {0}),
                                                reverse(in[0], {-1, 0}),
                                                cumsum(in[1], 0),
                                                reverse(in[1], {0})};
                   },
                   {batch_of({2, 3}, 123), as_f32(batch_of({4}, 124))}});
  cases.push_back({"PadV2, MirrorPad",
                   {"PadV2", "MirrorPad"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         pad(in[0], {{1, 0}, {2, 1}}, PadMode::Constant, 2.5),
                         pad(in[0], {{1, 1}, {2, 0}}, PadMode::Reflect),
                         pad(in[0], {{0, 2}, {1, 3}}, PadMode::Symmetric), pad(in[1], {{2, 1}})};
                   },
                   {batch_of({3, 4}, 125), as_f32(batch_of({3}, 126))}});
  cases.push_back({"MirrorPadGrad, g batched",
                   {"MirrorPadGrad"},
                   gradient_at(random_tensor({3, 4}, 127),
                               [](const Tensor& x) {
                                 return pad(x, {{1, 1}, {2, 3}}, PadMode::Symmetric);
                               }),
                   {batch_of({5, 9}, 128)}});

  // N-d gather and scatter.
  const Tensor nd_params = random_tensor({3, 4, 2}, 129);
  const Tensor nd_index = ints({2, 1, 0, 3}, {2, 2});
  const Tensor nd_batched_index =
      ints({0, 1, 2, 3, 1, 0, 2, 2, 0, 0, 1, 3}, {kBatch, 2, 2}, DType::Int32);
  cases.push_back({"GatherNd",
                   {"GatherNd"},
                   [nd_params, nd_index](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         gather_nd(in[0], nd_index), gather_nd(nd_params, in[1]),
                         gather_nd(in[0], in[1]), gather_nd(in[0], ints({1}, {1}))};
                   },
                   {batch_of({3, 4, 2}, 130), nd_batched_index}});
  cases.push_back({"ScatterNd, TensorScatterUpdate",
                   {"ScatterNd", "TensorScatterUpdate"},
                   [nd_index](const std::vector<Tensor>& in) {
                     const Tensor fixed_updates = from_values({1, 2, 3, 4}, {2, 2});
                     const Tensor base = from_values(std::vector<double>(24, 0.5), {3, 4, 2});
                     return std::vector<Tensor>{
                         scatter_nd(nd_index, in[0], {3, 4, 2}),
                         scatter_nd(in[1], fixed_updates, {3, 4, 2}),
                         scatter_nd(in[1], in[0], {3, 4, 2}),
                         tensor_scatter_nd_update(in[2], nd_index, fixed_updates),
                         tensor_scatter_nd_update(base, in[1], in[0]),
                         tensor_scatter_nd_update(in[2], in[1], in[0])};
                   },
                   {batch_of({2, 2}, 131), nd_batched_index, batch_of({3, 4, 2}, 132)}});

  // Sorting: ArgSort's positions, then TakeAlongAxis (sort, top_k) and PutAlongAxis (their
  // gradients), with x batched (so are the positions) or only the output gradient batched.
  cases.push_back({"ArgSort, TakeAlongAxis, PutAlongAxis",
                   {"ArgSort", "TakeAlongAxis", "PutAlongAxis"},
                   [](const std::vector<Tensor>& in) {
                     GradientTape tape;
                     tape.watch(in[0]);
                     const Tensor sorted = sort(in[0], 0, true);
                     const TopK top = top_k(in[0], 2);
                     const Tensor loss = add(reduce_sum(multiply(sorted, sorted)),
                                             reduce_sum(multiply(top.values, top.values)));
                     return std::vector<Tensor>{sorted,      top.values,
                                                top.indices, argsort(in[0], -1),
                                                sort(in[1]), tape.gradient(loss, in[0])};
                   },
                   {batch_of({3, 4}, 133), as_f32(batch_of({5}, 134))}});
  cases.push_back(
      {"PutAlongAxis, g batched",
       {"PutAlongAxis"},
       gradient_at(random_tensor({3, 4}, 135), [](const Tensor& x) { return sort(x, 1); }),
       {batch_of({3, 4}, 136)}});

  // Convolutions and pooling: the batch merged into the examples axis, or one call per row.
  const Tensor images = random_tensor({2, 5, 5, 2}, 137);
  const Tensor filters = random_tensor({3, 3, 2, 3}, 138);
  cases.push_back({"Conv2D",
                   {"Conv2D"},
                   [images, filters](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         conv2d(in[0], filters, {1, 1}, Padding::Same),
                         conv2d(images, in[1], {2, 2}, Padding::Valid),
                         conv2d(in[0], in[1], {1, 2}, Padding::Valid, {2, 1})};
                   },
                   {batch_of({2, 5, 5, 2}, 139), batch_of({3, 3, 2, 3}, 140)}});
  const Tensor transposed_in = random_tensor({2, 3, 3, 3}, 141);
  cases.push_back({"Conv2DBackpropInput",
                   {"Conv2DBackpropInput"},
                   [transposed_in, filters](const std::vector<Tensor>& in) {
                     const Shape out{2, 5, 5, 2};
                     return std::vector<Tensor>{
                         conv2d_transpose(in[0], filters, out, {2, 2}, Padding::Same),
                         conv2d_transpose(transposed_in, in[1], out, {2, 2}, Padding::Same),
                         conv2d_transpose(in[0], in[1], out, {2, 2}, Padding::Same)};
                   },
                   {batch_of({2, 3, 3, 3}, 142), batch_of({3, 3, 2, 3}, 143)}});
  cases.push_back({"Conv2DBackpropFilter, g batched",
                   {"Conv2DBackpropFilter"},
                   [images](const std::vector<Tensor>& in) {
                     const Tensor w = random_tensor({3, 3, 2, 3}, 144);
                     GradientTape tape;
                     tape.watch(w);
                     const Tensor y = conv2d(images, w, {1, 1}, Padding::Same);
                     return tape.gradient({y}, {w}, {in[0]});
                   },
                   {batch_of({2, 5, 5, 3}, 145)}});
  cases.push_back({"Conv2DBackpropFilter, x batched, with g batched or fixed",
                   {"Conv2DBackpropFilter"},
                   [filters](const std::vector<Tensor>& in) {
                     const Tensor w = as_f32(filters);
                     GradientTape tape;
                     tape.watch(w);
                     const Tensor y = conv2d(in[0], w, {2, 1}, Padding::Valid);
                     // g = 2 y batched too (one call per row), then a fixed g (x alone batched).
                     const Tensor both = tape.gradient(reduce_sum(square(y)), w);
                     GradientTape fixed_g;
                     fixed_g.watch(w);
                     const Tensor y2 = conv2d(in[0], w, {2, 1}, Padding::Valid);
                     const Tensor u = as_f32(random_tensor({2, 2, 3, 3}, 157));
                     return std::vector<Tensor>{both, fixed_g.gradient({y2}, {w}, {u})[0]};
                   },
                   {as_f32(batch_of({2, 5, 5, 2}, 146))}});
  cases.push_back({"MaxPool, AvgPool",
                   {"MaxPool", "AvgPool"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{max_pool2d(in[0], {2, 2}, {2, 2}, Padding::Same),
                                                avg_pool2d(in[0], {3, 2}, {1, 2}, Padding::Valid),
                                                max_pool2d(in[1], {2, 2}, {1, 1}, Padding::Valid)};
                   },
                   {batch_of({2, 5, 5, 2}, 147), as_f32(batch_of({1, 4, 4, 3}, 148))}});
  // The maxima's gradient ops with x and the gradient batched, one of them, or both.
  const Tensor pool_x = random_tensor({2, 5, 5, 2}, 158);
  cases.push_back(
      {"MaxPoolGrad, MaxPoolGradGrad",
       {"MaxPoolGrad", "MaxPoolGradGrad"},
       [pool_x](const std::vector<Tensor>& in) {
         const auto grad = [](const Tensor& x, const Tensor& g) {
           return detail::max_pool_grad(x, g, {2, 2}, {2, 2}, Padding::Same);
         };
         const auto grad_grad = [](const Tensor& x, const Tensor& h) {
           return detail::max_pool_grad_grad(x, h, {2, 2}, {2, 2}, Padding::Same);
         };
         return std::vector<Tensor>{grad(in[0], in[1]), grad(pool_x, in[1]),
                                    grad_grad(in[0], in[2]), grad_grad(in[0], pool_x),
                                    grad_grad(pool_x, in[2])};
       },
       {batch_of({2, 5, 5, 2}, 159), batch_of({2, 3, 3, 2}, 160), batch_of({2, 5, 5, 2}, 161)}});
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
  cases.push_back({"AvgPoolGrad, g batched",
                   {"AvgPoolGrad"},
                   gradient_at(random_tensor({2, 5, 5, 2}, 149),
                               [](const Tensor& x) {
                                 return avg_pool2d(x, {2, 2}, {2, 2}, Padding::Same);
                               }),
                   {batch_of({2, 3, 3, 2}, 150)}});

  // Sparse cross entropy; argmax, argmin, one_hot.
  const Tensor class_ids = ints({3, 0}, {2}, DType::Int32);
  const Tensor logits_fixed = random_tensor({2, 4}, 151);
  cases.push_back({"SparseSoftmaxCrossEntropyWithLogits",
                   {"SparseSoftmaxCrossEntropyWithLogits"},
                   [class_ids, logits_fixed](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         sparse_softmax_cross_entropy_with_logits(class_ids, in[0]),
                         sparse_softmax_cross_entropy_with_logits(in[1], logits_fixed),
                         sparse_softmax_cross_entropy_with_logits(in[1], in[0])};
                   },
                   {batch_of({2, 4}, 152), ints({1, 2, 0, 3, 3, 3}, {kBatch, 2})}});
  cases.push_back({"ArgMax, ArgMin, OneHot",
                   {"ArgMax", "ArgMin", "OneHot"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor best = argmax(in[0], 1);
                     return std::vector<Tensor>{best,
                                                argmin(in[0], 0),
                                                argmax(in[1], -1),
                                                one_hot(best, 5),
                                                one_hot(in[2], 3, DType::Float32),
                                                multiply(in[0], one_hot(argmin(in[0], -1), 4))};
                   },
                   {batch_of({3, 4}, 153), as_f32(batch_of({5}, 154)),
                    ints({0, 2, 1, 1, 2, 5}, {kBatch, 2}, DType::Int32)}});
}

std::vector<Case> op_cases() {
  std::vector<Case> cases;
  add_issue11_cases(cases);
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
      {"Neg", negative},      {"Abs", abs},           {"Sign", sign},
      {"Square", square},     {"Sqrt", sqrt},         {"Exp", exp},
      {"Log", log},           {"Log1p", log1p},       {"Sin", sin},
      {"Cos", cos},           {"Tanh", tanh},         {"Reciprocal", reciprocal},
      {"Tan", tan},           {"Asin", asin},         {"Acos", acos},
      {"Atan", atan},         {"Sinh", sinh},         {"Cosh", cosh},
      {"Asinh", asinh},       {"Atanh", atanh},       {"Expm1", expm1},
      {"Rsqrt", rsqrt},       {"Floor", floor},       {"Ceil", ceil},
      {"Round", round},       {"Relu", relu},         {"Sigmoid", sigmoid},
      {"Softplus", softplus}, {"Identity", identity}, {"StopGradient", stop_gradient}};
  for (const auto& [name, f] : unaries) {
    cases.push_back({name, {name}, unary(f), {batch_of({2, 3}, 21, 0.1, 0.9)}});
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

  cases.push_back({"Reshape, expand_dims, squeeze",
                   {"Reshape"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{reshape(in[0], {3, -1}), expand_dims(in[0], 1),
                                                squeeze(expand_dims(in[0], 0))};
                   },
                   {batch_of({2, 3}, 32)}});
  cases.push_back({"Transpose",
                   {"Transpose"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{transpose(in[0]), transpose(in[0], {1, 0, 2})};
                   },
                   {batch_of({2, 3, 4}, 33)}});
  cases.push_back(
      {"BroadcastTo",
       {"BroadcastTo"},
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{broadcast_to(in[0], {4, 2, 3}), broadcast_to(in[1], {2, 3})};
       },
       {batch_of({3}, 34), batch_of({2, 1}, 35)}});

  const Tensor params = random_tensor({4, 5}, 36);
  const Tensor index = ints({3, 0, 3}, {3});
  cases.push_back({"GatherV2 params batched",
                   {"GatherV2"},
                   [index](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{gather(in[0], index, 0), gather(in[0], index, 1)};
                   },
                   {batch_of({4, 5}, 37)}});
  cases.push_back({"GatherV2 indices batched",
                   {"GatherV2"},
                   [params](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{gather(params, in[0], 0), gather(params, in[0], 1)};
                   },
                   {ints({0, 1, 3, 2, 2, 0}, {kBatch, 2})}});
  cases.push_back({"GatherV2 both batched",
                   {"GatherV2"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{gather(in[0], in[1], 0), gather(in[0], in[1], 1),
                                                gather(in[0], in[2], 1)};
                   },
                   {batch_of({4, 5}, 38), ints({0, 1, 3, 2, 2, 0}, {kBatch, 2}),
                    ints({1, 1, 1, 0, 2, 3, 3, 3, 3, 4, 4, 0}, {kBatch, 2, 2}, DType::Int32)}});

  const Tensor data = random_tensor({4, 2}, 39);
  const Tensor ids = ints({1, 0, 1, 2}, {4});
  cases.push_back({"UnsortedSegmentSum data batched",
                   {"UnsortedSegmentSum"},
                   [ids](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{unsorted_segment_sum(in[0], ids, 3)};
                   },
                   {batch_of({4, 2}, 40)}});
  cases.push_back({"UnsortedSegmentSum ids batched",
                   {"UnsortedSegmentSum"},
                   [data](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{unsorted_segment_sum(data, in[0], 3)};
                   },
                   {ints({0, 0, 1, 2, 2, 2, 1, 0, 1, 1, 1, 1}, {kBatch, 4})}});
  cases.push_back(
      {"UnsortedSegmentSum both batched",
       {"UnsortedSegmentSum"},
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{unsorted_segment_sum(in[0], in[1], 3)};
       },
       {batch_of({4, 2}, 41), ints({0, 0, 1, 2, 2, 2, 1, 0, 1, 1, 1, 1}, {kBatch, 4})}});

  const Tensor piece = random_tensor({2, 2}, 42);
  cases.push_back({"ConcatV2 and Split",
                   {"ConcatV2", "Split"},
                   [piece](const std::vector<Tensor>& in) {
                     std::vector<Tensor> out{concat({in[0], piece, in[1]}, 1),
                                             concat({piece, in[0]}, 0), stack({in[0], in[1]}, 1)};
                     for (const Tensor& part : split(in[0], 2, 1)) out.push_back(part);
                     return out;
                   },
                   {batch_of({2, 2}, 43), batch_of({2, 2}, 44)}});
  cases.push_back({"Slice and Tile",
                   {"Slice", "Tile"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{slice(in[0], {1, 0}, {2, -1}), tile(in[0], {2, 3})};
                   },
                   {batch_of({3, 4}, 45)}});
  cases.push_back({"SliceGrad",
                   {"SliceGrad"},
                   gradient_at(random_tensor({3, 4}, 46),
                               [](const Tensor& x) {
                                 return slice(x, {1, 1}, {2, 2});
                               }),
                   {batch_of({2, 2}, 47)}});
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
  cases.push_back(
      {"SigmoidGrad, g batched",
       {"SigmoidGrad"},
       gradient_at(random_tensor({2, 3}, 51), [](const Tensor& x) { return sigmoid(x); }),
       {batch_of({2, 3}, 52)}});
  // The other fused activation gradients the same two ways: g batched at a fixed x (the slope
  // once, broadcast), and x batched (what the op keeps is batched too). Positive x where the
  // activation needs it.
  struct Fused {
    std::string op;
    std::function<Tensor(const Tensor&)> activation;
    double lo;
  };
  const std::vector<Fused> fused = {
      {"ReluGrad", [](const Tensor& x) { return relu(x); }, -1.0},
      {"SoftplusGrad", [](const Tensor& x) { return softplus(x); }, -1.0},
      {"EluGrad", [](const Tensor& x) { return elu(x); }, -1.0},
      {"GeluGrad", [](const Tensor& x) { return gelu(x, false); }, -1.0},
      {"GeluTanhGrad", [](const Tensor& x) { return gelu(x, true); }, -1.0},
      {"ReciprocalGrad", [](const Tensor& x) { return reciprocal(x); }, 0.5},
      {"SqrtGrad", [](const Tensor& x) { return sqrt(x); }, 0.5},
      {"RsqrtGrad", [](const Tensor& x) { return rsqrt(x); }, 0.5},
  };
  unsigned fused_seed = 179;
  for (const Fused& f : fused) {
    cases.push_back({f.op + ", g batched",
                     {f.op},
                     gradient_at(random_tensor({2, 3}, fused_seed, f.lo, 2.0), f.activation),
                     {batch_of({2, 3}, fused_seed + 1)}});
    cases.push_back({f.op + ", x batched",
                     {f.op},
                     [activation = f.activation](const std::vector<Tensor>& in) {
                       GradientTape tape;
                       tape.watch(in[0]);
                       return std::vector<Tensor>{tape.gradient(activation(in[0]), in[0])};
                     },
                     {batch_of({2, 3}, fused_seed + 2, f.lo, 2.0)}});
    fused_seed += 3;
  }

  const Tensor w = random_tensor({3, 4}, 53);
  const Tensor w3 = random_tensor({2, 3, 4}, 54);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const std::string flags = std::string(ta ? " ta" : "") + (tb ? " tb" : "");
      const Tensor b_fixed = tb ? transpose(w) : w;
      const Tensor a_fixed = ta ? random_tensor({3, 2}, 55) : random_tensor({2, 3}, 55);
      cases.push_back({"MatMul a batched" + flags,
                       {"MatMul"},
                       [b_fixed, ta, tb](const std::vector<Tensor>& in) {
                         return std::vector<Tensor>{matmul(in[0], b_fixed, ta, tb)};
                       },
                       {batch_of(ta ? Shape{3, 2} : Shape{2, 3}, 56)}});
      cases.push_back({"MatMul b batched" + flags,
                       {"MatMul"},
                       [a_fixed, ta, tb](const std::vector<Tensor>& in) {
                         return std::vector<Tensor>{matmul(a_fixed, in[0], ta, tb)};
                       },
                       {batch_of(tb ? Shape{4, 3} : Shape{3, 4}, 57)}});
      cases.push_back({"MatMul both batched" + flags,
                       {"MatMul"},
                       [ta, tb](const std::vector<Tensor>& in) {
                         return std::vector<Tensor>{matmul(in[0], in[1], ta, tb)};
                       },
                       {batch_of(ta ? Shape{3, 2} : Shape{2, 3}, 58),
                        batch_of(tb ? Shape{4, 3} : Shape{3, 4}, 59)}});
    }
  }
  cases.push_back({"BatchMatMulV2 with broadcast batch axes",
                   {"BatchMatMulV2"},
                   [w3](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         matmul(in[0], w3), matmul(in[1], in[0], false, true), matmul(w3, in[1])};
                   },
                   {batch_of({2, 5, 3}, 60), batch_of({1, 4, 3}, 61)}});

  const Tensor spd_shift = from_values({3, 0, 0, 0, 3, 0, 0, 0, 3}, {3, 3});
  const Tensor rhs = random_tensor({3, 2}, 62);
  cases.push_back({"linear algebra, matrix batched",
                   {"MatrixInverse", "MatrixDeterminant", "MatrixSolve", "Cholesky"},
                   [spd_shift, rhs](const std::vector<Tensor>& in) {
                     const Tensor a = add(matmul(in[0], in[0], false, true), spd_shift);
                     return std::vector<Tensor>{matrix_inverse(a), matrix_determinant(a),
                                                solve(a, rhs), cholesky(a)};
                   },
                   {batch_of({3, 3}, 63)}});
  const Tensor fixed_a =
      add(matmul(random_tensor({3, 3}, 64), random_tensor({3, 3}, 64), false, true), spd_shift);
  cases.push_back({"MatrixSolve, right-hand side batched",
                   {"MatrixSolve"},
                   [fixed_a](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{solve(fixed_a, in[0])};
                   },
                   {batch_of({3, 2}, 65)}});

  const Tensor labels = softmax(random_tensor({2, 4}, 66));
  cases.push_back(
      {"Softmax, LogSoftmax, cross entropies, logits batched",
       {"Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogits"},
       [labels](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{softmax(in[0]), log_softmax(in[0], 0),
                                    softmax_cross_entropy_with_logits(labels, in[0]),
                                    sigmoid_cross_entropy_with_logits(sigmoid(labels), in[0])};
       },
       {batch_of({2, 4}, 67)}});
  cases.push_back({"cross entropies, both batched",
                   {"SoftmaxCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogits"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor p = softmax(in[0]);
                     return std::vector<Tensor>{
                         softmax_cross_entropy_with_logits(p, in[1]),
                         sigmoid_cross_entropy_with_logits(sigmoid(in[0]), in[1])};
                   },
                   {batch_of({2, 4}, 68), batch_of({2, 4}, 69)}});
  // A generator made inside fn draws the same mask for every slice: the trace is faithful.
  cases.push_back({"Dropout with a mask fixed per call",
                   {"Dropout"},
                   [](const std::vector<Tensor>& in) {
                     Generator generator(7);
                     return std::vector<Tensor>{dropout(in[0], 0.5, generator)};
                   },
                   {batch_of({2, 5}, 70)}});
  cases.push_back({"JacobianPack and JacobianUnpack",
                   {"JacobianPack", "JacobianUnpack"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor fixed = random_tensor({2}, 71);
                     GradientTape tape;
                     tape.watch(in[0]);
                     tape.watch(fixed);
                     const Tensor packed = detail::pack_rows({in[0], fixed, in[0]}, {3, 2});
                     // Interleaved: each row read as 2 blocks of 1, out[o, r] = rows[r][o].
                     const Tensor interleaved = detail::pack_rows({in[0], fixed, in[0]}, {2, 3}, 2);
                     const Tensor seed = reshape(concat({in[0], in[0], fixed}, 0), {3, 2});
                     std::vector<Tensor> out = tape.gradient({packed, interleaved}, {in[0], fixed},
                                                             {seed, reshape(seed, {2, 3})});
                     out.push_back(packed);
                     out.push_back(interleaved);
                     return out;
                   },
                   {batch_of({2}, 72)}});
  // The vectorized Jacobian's dense diagonal (2 blocks of 3 per slice) and its inverse.
  cases.push_back({"JacobianDiagonal and JacobianDiagonalPart",
                   {"JacobianDiagonal", "JacobianDiagonalPart"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{detail::diagonal_blocks(in[0], 3, {2, 3, 3}),
                                                detail::diagonal_blocks_part(in[1], 3, {6})};
                   },
                   {batch_of({2, 3}, 73), batch_of({2, 3, 3}, 74)}});
  return cases;
}

}  // namespace

TEST_CASE("every built-in op's batching rule equals a loop of the op over the slices",
          "[vectorized_map]") {
  std::set<std::string> covered;
  for (const Case& c : op_cases()) {
    INFO("case: " << c.name);
    const std::set<std::string> ran = traced_ops(c.fn, c.elems);
    for (const std::string& op : c.ops) {
      INFO("op " << op << " should be traced");
      CHECK(ran.count(op) == 1);
      covered.insert(op);
    }
    require_vectorizes(c.fn, c.elems);
  }
  // ReadVariableOp is recorded on tapes only (a variable's value is never a traced value):
  // its rule is checked directly below.
  covered.insert("ReadVariableOp");
  // Where (boolean_mask's positions) refuses to batch on purpose: tested below.
  covered.insert("Where");
  // Every rule is exercised here (test_op_registry checks that every op has one).
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    if (op->batching_rule == nullptr) continue;
    INFO("built-in op " << op->name << " has a batching rule, so it needs a row in the table");
    CHECK(covered.count(op->name) == 1);
  }
}

namespace {

// The gradient of fn's floating outputs (through sin, so that each output gradient depends on
// the output) with respect to fn's floating inputs: what a per-example gradient under
// vectorized_map computes. Unconnected inputs get zeros.
MapFn per_example_gradient(const MapFn& fn) {
  return [fn](const std::vector<Tensor>& in) {
    GradientTape tape;
    std::vector<Tensor> sources;
    for (const Tensor& t : in) {
      if (!is_floating(t.dtype())) continue;
      tape.watch(t);
      sources.push_back(t);
    }
    Tensor loss = scalar(0.0, DType::Float64);
    for (const Tensor& out : fn(in)) {
      if (out.defined() && is_floating(out.dtype())) {
        loss = loss + reduce_sum(sin(cast(out, DType::Float64)));
      }
    }
    return tape.gradient(loss, sources, UnconnectedGradients::Zero);
  };
}

bool has_floating(const std::vector<Tensor>& elems) {
  return std::any_of(elems.begin(), elems.end(),
                     [](const Tensor& t) { return is_floating(t.dtype()); });
}

}  // namespace

// Every op of the table above, differentiated per example with its inputs batched: the
// gradient rules run inside the trace on slices whose values (signs, maxima, ties, zeros,
// orders) differ from one slice to the next, and no rule may read one into a constant.
TEST_CASE("every built-in op's gradient under vectorized_map equals the loop",
          "[vectorized_map][gradient]") {
  std::size_t checked = 0;
  for (const Case& c : op_cases()) {
    if (!has_floating(c.elems)) continue;  // integer-only inputs have no gradient
    INFO("case: " << c.name);
    require_vectorizes(per_example_gradient(c.fn), c.elems, 1e-9);
    ++checked;
  }
  CHECK(checked >= 100);
}

// Inputs built so that the end slices share their pattern and a middle one differs: the
// case a check of two traced slices cannot see.
TEST_CASE("per-example gradients through maxima, ties and zeros that differ in a middle slice",
          "[vectorized_map][gradient]") {
  const auto gradient_of = [](std::function<Tensor(const Tensor&)> f) -> MapFn {
    return [f](const std::vector<Tensor>& in) {
      GradientTape tape;
      tape.watch(in[0]);
      return std::vector<Tensor>{tape.gradient(reduce_sum(f(in[0])), in[0])};
    };
  };
  const auto check = [&](const std::string& name, std::function<Tensor(const Tensor&)> f,
                         const Tensor& xs, const std::vector<double>& expected) {
    INFO(name);
    const MapFn fn = gradient_of(f);
    const std::vector<Tensor> got = vectorized_map(fn, {xs}, /*fallback_to_loop=*/false);
    tapegrad::testing::require_close(got[0], xs.shape(), expected, 0);
    require_same(got[0], loop_reference(fn, {xs})[0], 0);
  };
  // The argmax of each 2x2 window: position 0, 3, 0.
  check("max_pool2d",
        [](const Tensor& x) {
          return max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
        },
        from_values({9, 1, 2, 3, 1, 2, 3, 9, 9, 1, 2, 3}, {3, 1, 2, 2, 1}),
        {1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0});
  // A tie only in the middle slice: the first maximum in window order takes it (TF).
  check("max_pool2d ties",
        [](const Tensor& x) {
          return max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
        },
        from_values({9, 1, 2, 3, 0, 4, 4, 0, 9, 1, 2, 3}, {3, 1, 2, 2, 1}),
        {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0});
  check("reduce_max", [](const Tensor& x) { return reduce_max(x); },
        from_values({5, 1, 2, 1, 2, 5, 5, 1, 2}, {3, 3}), {1, 0, 0, 0, 0, 1, 1, 0, 0});
  check("reduce_max ties", [](const Tensor& x) { return reduce_max(x); },
        from_values({5, 1, 2, 5, 2, 5, 5, 1, 2}, {3, 3}), {1, 0, 0, 0.5, 0, 0.5, 1, 0, 0});
  check("reduce_min over rows", [](const Tensor& x) { return reduce_min(x, {1}); },
        from_values({1, 5, 1, 3, 3, 3, 1, 2, 1, 5, 1, 3}, {3, 2, 2}),
        {1, 0, 1, 0, 0.5, 0.5, 1, 0, 1, 0, 1, 0});
  check("reduce_prod", [](const Tensor& x) { return reduce_prod(x); },
        from_values({0, 1, 2, 1, 0, 2, 0, 1, 2}, {3, 3}), {2, 0, 0, 0, 2, 0, 2, 0, 0});
  check("reduce_prod without, with one and with two zeros",
        [](const Tensor& x) { return reduce_prod(x); },
        from_values({1, 2, 3, 0, 0, 2, 1, 2, 3}, {3, 3}), {6, 3, 2, 0, 0, 0, 6, 3, 2});
  check("relu", [](const Tensor& x) { return relu(x) * 2.0; },
        from_values({1, -1, -1, 1, 1, -1}, {3, 2}), {2, 0, 0, 2, 2, 0});
  check("abs", [](const Tensor& x) { return abs(x); }, from_values({1, -1, -1, 1, 1, -1}, {3, 2}),
        {1, -1, -1, 1, 1, -1});
  check("maximum", [](const Tensor& x) { return maximum(x, reverse(x, {0})); },
        from_values({1, 2, 4, 3, 1, 2}, {3, 2}), {0, 2, 2, 0, 0, 2});
  check("sort",
        [](const Tensor& x) {
          return sort(x) * from_values({1, 10, 100}, {3});
        },
        from_values({3, 1, 2, 1, 3, 2, 3, 1, 2}, {3, 3}), {100, 1, 10, 1, 100, 10, 100, 1, 10});
  check("top_k", [](const Tensor& x) { return top_k(x, 1).values; },
        from_values({3, 1, 2, 1, 3, 2, 3, 1, 2}, {3, 3}), {1, 0, 0, 0, 1, 0, 1, 0, 0});
}

// A rank-2-only op for the maker below: rows of x times w (matmul of matrices).
Tensor rows_times(const Tensor& x, const Tensor& w) {
  REQUIRE(x.rank() == 2);
  return matmul(x, w);
}

TEST_CASE("batch_into_first_axis merges the batch into the examples axis, or loops",
          "[vectorized_map]") {
  const detail::OpDefinition& op = detail::op_named("MatMul");
  const Tensor x = batch_of({4, 3}, 81);
  const Tensor w = random_tensor({3, 2}, 82);
  const Tensor ws = batch_of({3, 2}, 83);
  const std::vector<Shape> shapes{{4, 2}};
  const std::vector<DType> dtypes{DType::Float64};
  for (const bool weight_batched : {false, true}) {
    INFO("weight batched: " << weight_batched);
    const std::vector<bool> batched{true, weight_batched};
    const detail::BatchingContext context{op, nullptr, batched, kBatch, shapes, dtypes};
    const std::vector<Tensor> out =
        detail::batch_into_first_axis<&rows_times>(context, {x, weight_batched ? ws : w});
    REQUIRE(out.size() == 1);
    require_same(out[0], matmul(x, weight_batched ? ws : w), 1e-12);
  }
}

TEST_CASE("ReadVariableOp's batching rule passes the batch on", "[vectorized_map]") {
  const detail::OpDefinition& op = detail::op_named("ReadVariableOp");
  REQUIRE(op.batching_rule != nullptr);
  const Tensor x = batch_of({2}, 80);
  const std::vector<bool> batched{true};
  const std::vector<Shape> shapes{{2}};
  const std::vector<DType> dtypes{DType::Float64};
  const detail::BatchingContext context{op, nullptr, batched, kBatch, shapes, dtypes};
  const std::vector<Tensor> out = op.batching_rule(context, {x});
  REQUIRE(out.size() == 1);
  require_same(out[0], x, 0);
}

namespace {

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// A user primitive: x^3 computed outside tapegrad (from array()), recorded with
// record_operation; it has a gradient but no batching rule.
Tensor user_cube(const Tensor& x) {
  std::vector<double> v;
  for (double e : x.array<double>()) v.push_back(e * e * e);
  const Tensor out = from_values(v, x.shape());
  record_operation("TestUserCube", {x}, {out});
  return out;
}

// Its gradient, 3 x^2 g, registered once per process.
void register_user_cube_gradient() {
  static const bool registered = [] {
    register_gradient("TestUserCube", [](const OpContext& op, const std::vector<Tensor>& g) {
      const Tensor& x = op.inputs()[0];
      return std::vector<Tensor>{g[0] * x * x * 3.0};
    });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("vectorized_map of a zero-size batch gives empty results of the example's shapes",
          "[vectorized_map]") {
  const MapFn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{reduce_sum(in[0], {1}), cast(in[0], DType::Float32)};
  };
  const std::vector<Tensor> out = vectorized_map(fn, {zeros({0, 2, 3})}, false);
  REQUIRE(out.size() == 2);
  CHECK(out[0].shape() == Shape{0, 2});
  CHECK(out[0].dtype() == DType::Float64);
  CHECK(out[1].shape() == Shape{0, 2, 3});
  CHECK(out[1].dtype() == DType::Float32);
}

namespace {

// elems with their first 0 rows: a zero-size batch of the same examples.
std::vector<Tensor> no_rows(const std::vector<Tensor>& elems) {
  std::vector<Tensor> empty;
  for (const Tensor& e : elems) {
    std::vector<std::int64_t> begin(e.rank(), 0), size(e.shape().begin(), e.shape().end());
    size[0] = 0;
    empty.push_back(slice(e, begin, size));
  }
  return empty;
}

// vectorized_map of the empty batch, with and without fallback, gives results shaped [0] ++
// what the loop gives for one slice, in the loop's dtypes.
void require_empty_batch_like_loop(const MapFn& fn, const std::vector<Tensor>& elems) {
  const std::vector<Tensor> expected = loop_reference(fn, elems);
  for (const bool fallback : {false, true}) {
    INFO("fallback_to_loop " << fallback);
    const std::vector<Tensor> got = vectorized_map(fn, no_rows(elems), fallback);
    REQUIRE(got.size() == expected.size());
    for (std::size_t j = 0; j < got.size(); ++j) {
      INFO("output " << j);
      REQUIRE(got[j].defined() == expected[j].defined());
      if (!got[j].defined()) continue;
      Shape shape = expected[j].shape();
      shape[0] = 0;
      CHECK(got[j].shape() == shape);
      CHECK(got[j].dtype() == expected[j].dtype());
    }
  }
}

}  // namespace

// The shapes of an empty batch come from the batching rules, not from fn run on invented
// values: every op of the table, and its per-example gradient, on zero rows.
TEST_CASE("every built-in op and its gradient under vectorized_map of an empty batch",
          "[vectorized_map]") {
  std::size_t checked = 0;
  for (const Case& c : op_cases()) {
    INFO("case: " << c.name);
    require_empty_batch_like_loop(c.fn, c.elems);
    if (has_floating(c.elems)) require_empty_batch_like_loop(per_example_gradient(c.fn), c.elems);
    ++checked;
  }
  CHECK(checked >= 150);
}

TEST_CASE("an empty batch: fn never sees a value, so what rejects zeros does not run on them",
          "[vectorized_map]") {
  // Zeros are singular, divide by zero, and have an infinite log: no kernel rejects them.
  std::size_t calls = 0;
  const MapFn rejects_zeros = [&calls](const std::vector<Tensor>& in) {
    ++calls;
    return std::vector<Tensor>{
        matrix_inverse(in[0]), cholesky(in[0]),        solve(in[0], reduce_sum(in[0], {1}, true)),
        divide(in[1], in[1]),  floormod(in[1], in[1]), log(in[0])};
  };
  {
    DetectAnomaly anomaly;
    const std::vector<Tensor> out =
        vectorized_map(rejects_zeros, {zeros({0, 3, 3}), zeros({0, 4}, DType::Int32)}, false);
    REQUIRE(out.size() == 6);
    CHECK(out[0].shape() == Shape{0, 3, 3});
    CHECK(out[1].shape() == Shape{0, 3, 3});
    CHECK(out[2].shape() == Shape{0, 3, 1});
    CHECK(out[3].shape() == Shape{0, 4});
    CHECK(out[3].dtype() == DType::Int32);
    CHECK(out[4].shape() == Shape{0, 4});
    CHECK(out[5].shape() == Shape{0, 3, 3});
  }
  CHECK(calls == 1);  // traced once
  // The checks are back once the trace is gone.
  tapegrad::testing::expect_misuse<InvalidArgument>("matrix_inverse of zeros after an empty batch",
                                                    [] {
                                                      matrix_inverse(zeros({2, 2}));
                                                    },
                                                    {"matrix_inverse", "singular"});
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "integer division by zero after an empty batch",
      [] { divide(ones({2}, DType::Int32), zeros({2}, DType::Int32)); },
      {"divide", "division by zero"});

  // What fn reads from C++ has no value on a placeholder: the error says which read.
  const MapFn reads = [](const std::vector<Tensor>& in) {
    const double first = in[0].item<double>();
    return std::vector<Tensor>{multiply(in[0], scalar(first, DType::Float64))};
  };
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map of an empty batch, fn reads its input",
      [&] { vectorized_map(reads, {zeros({0})}); },
      {"vectorized_map", "batch is empty", "placeholder", "Tensor::item()", "float64", "shape []"});
  // An output whose shape depends on values (boolean_mask of a batched mask) cannot be known.
  const MapFn masked = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{boolean_mask(in[0], greater(in[1], scalar(0.0, DType::Float64)))};
  };
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map of an empty batch, boolean_mask of a batched mask",
      [&] {
        vectorized_map(masked, {zeros({0, 4}), zeros({0, 4})});
      },
      {"vectorized_map", "batch is empty", "depend on its inputs' values", "'Where'"});
}

TEST_CASE("vectorized_map of one slice, of scalars, of constants and of fn's own input",
          "[vectorized_map]") {
  const Tensor w = random_tensor({3, 2}, 90);
  const MapFn fn = [w](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], w, tanh(matmul(reshape(in[0], {1, 3}), w)), Tensor()};
  };
  for (const std::size_t batch : {std::size_t{1}, std::size_t{4}}) {
    INFO("batch " << batch);
    const Tensor x = random_tensor({batch, 3}, 91);
    const std::vector<Tensor> out = vectorized_map(fn, {x}, false);
    REQUIRE(out.size() == 4);
    require_same(out[0], x, 0);
    require_same(out[1], broadcast_to(w, {batch, 3, 2}), 0);
    const Tensor expected = tanh(matmul(x, w));
    require_same(out[2], reshape(expected, {static_cast<std::int64_t>(batch), 1, 2}));
    CHECK_FALSE(out[3].defined());
  }
  // Scalars in, scalars out: the batch is a vector.
  const Tensor s = constant({0.5, 1.0, 2.0});
  const std::vector<Tensor> squares = vectorized_map(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[0] + 1.0}; }, {s},
      false);
  tapegrad::testing::require_close(squares[0], {3}, {1.25, 2.0, 5.0});
}

TEST_CASE("vectorized_map nests, and is differentiable under an outer tape", "[vectorized_map]") {
  const Tensor x = random_tensor({3, 4, 2}, 92);
  const Tensor w = random_tensor({2, 2}, 93);
  const MapFn inner = [w](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sigmoid(matmul(reshape(in[0], {1, 2}), w))};
  };
  const MapFn outer_fn = [&](const std::vector<Tensor>& in) {
    return vectorized_map(inner, {in[0]}, false);
  };
  const std::vector<Tensor> nested = vectorized_map(outer_fn, {x}, false);
  const Tensor expected = sigmoid(matmul(reshape(x, {12, 2}), w));
  require_same(nested[0], reshape(expected, {3, 4, 1, 2}));

  // d/dw and d/dx of sum(vectorized) equal those of the loop.
  auto gradients = [&](bool vectorized) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    const Tensor y = vectorized ? vectorized_map(inner, {reshape(x, {12, 2})}, false)[0]
                                : loop_reference(inner, {reshape(x, {12, 2})})[0];
    return tape.gradient(reduce_sum(y * y), {x, w});
  };
  const std::vector<Tensor> got = gradients(true);
  const std::vector<Tensor> want = gradients(false);
  require_same(got[0], want[0]);
  require_same(got[1], want[1]);
}

TEST_CASE("an op without a batching rule: one warning naming it and the loop's result",
          "[vectorized_map]") {
  register_user_cube_gradient();
  const MapFn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{exp(user_cube(in[0]))};
  };
  const Tensor x = random_tensor({4, 3}, 94);
  CapturedStderr err;
  const std::vector<Tensor> first = vectorized_map(fn, {x});
  const std::vector<Tensor> second = vectorized_map(fn, {x});
  CHECK(occurrences(err.text(), "op 'TestUserCube' has no batching rule") == 1);
  CHECK(occurrences(err.text(), "a loop") == 1);
  require_same(first[0], exp(x * x * x), 1e-12);
  require_same(second[0], first[0], 0);
}

TEST_CASE("boolean_mask: a fixed mask vectorizes; a batched one's positions refuse, the loop runs",
          "[vectorized_map]") {
  // The mask fixed: its positions are a trace constant, GatherNd batches over x.
  const Tensor fixed_mask = from_values({1, 0, 1, 1}, {4}, DType::Bool);
  require_vectorizes(
      [fixed_mask](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{boolean_mask(in[0], fixed_mask)};
      },
      {batch_of({4, 2}, 155)});

  // The mask from the batched input: two true per row, at different positions in each row, so
  // both traced slices have the same shapes and only the Where rule can tell.
  const MapFn masked = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{boolean_mask(multiply(in[0], scalar(10.0, DType::Float64)),
                                            greater(in[1], scalar(0.0, DType::Float64)))};
  };
  const Tensor x = batch_of({4}, 156);
  const Tensor m = from_values({1, -1, 1, -1, -1, 1, -1, 1, 1, 1, -1, -1}, {kBatch, 4});
  CHECK(traced_ops(masked, {x, m}).count("Where") == 1);
  CapturedStderr err;
  const std::vector<Tensor> out = vectorized_map(masked, {x, m});
  CHECK(occurrences(err.text(), "op 'Where'") == 1);
  CHECK(occurrences(err.text(), "a loop") == 1);
  require_same(out[0], loop_reference(masked, {x, m})[0], 0);
  // Row 1 keeps elements 1 and 3 (not row 0's 0 and 2).
  CHECK(values(out[0])[2] == values(x)[5] * 10.0);
  CHECK(values(out[0])[3] == values(x)[7] * 10.0);

  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map: boolean_mask of a batched mask, no fallback",
      [&] {
        vectorized_map(masked, {x, m}, false);
      },
      {"vectorized_map", "'Where'", "boolean_mask", "cannot be stacked"});
}

TEST_CASE("a value read from C++ inside fn: the trace is not replayed, the loop runs",
          "[vectorized_map]") {
  // fn rebuilds its input from its values: tracing cannot see the dependence, so the read is
  // what tells (even when, as here, it changes nothing in the traces' structure).
  const MapFn fn = [](const std::vector<Tensor>& in) {
    const Tensor copy = from_values(values(in[0]), in[0].shape());
    return std::vector<Tensor>{sin(copy)};
  };
  const Tensor x = random_tensor({5, 2}, 95);
  CapturedStderr err;
  const std::vector<Tensor> out = vectorized_map(fn, {x});
  CHECK(occurrences(err.text(),
                    "reads Tensor::array() of a float64 value of shape [2] that "
                    "depends on the slice, in fn") == 1);
  CHECK(occurrences(err.text(), "a loop") == 1);
  require_same(out[0], sin(x), 0);

  // A read that steers fn: slice 1 alone takes the other branch. The end slices agree, so
  // comparing traces could never tell; the read does.
  const MapFn branchy = [](const std::vector<Tensor>& in) {
    const bool positive = in[0].item<double>() > 0;
    return std::vector<Tensor>{positive ? in[0] * 2.0 : in[0] * 3.0};
  };
  const Tensor s = constant({1.0, -1.0, 1.0});
  const std::vector<Tensor> steered = vectorized_map(branchy, {s});
  tapegrad::testing::require_close(steered[0], {3}, {2.0, -3.0, 2.0}, 0);
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map: fn reads item() of its slice, no fallback",
      [&] { vectorized_map(branchy, {s}, false); },
      {"vectorized_map", "Tensor::item()", "float64", "shape []", "in fn",
       "fallback_to_loop is false"});
}

namespace {

// A user primitive whose gradient function reads x's values from C++ (3 x^2 g, x^2 from
// array()): its reads are blamed on it, not on fn.
Tensor user_square_reading(const Tensor& x) {
  const Tensor out = multiply(x, x);
  record_operation("TestUserSquareReadsValues", {x}, {out});
  return out;
}

void register_user_square_reading_gradient() {
  static const bool registered = [] {
    register_gradient("TestUserSquareReadsValues",
                      [](const OpContext& op, const std::vector<Tensor>& g) {
                        const Tensor& x = op.inputs()[0];
                        std::vector<double> twice;
                        for (double v : x.array<double>()) twice.push_back(2.0 * v);
                        return std::vector<Tensor>{g[0] * from_values(twice, x.shape())};
                      });
    return true;
  }();
  (void)registered;
}

}  // namespace

TEST_CASE("a value read by a user's gradient function is blamed on it", "[vectorized_map]") {
  register_user_square_reading_gradient();
  const MapFn fn = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[0]);
    return std::vector<Tensor>{tape.gradient(reduce_sum(user_square_reading(in[0])), in[0])};
  };
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {3, 2});
  tapegrad::testing::expect_misuse<InvalidArgument>(
      "vectorized_map: a user gradient function reads values, no fallback",
      [&] { vectorized_map(fn, {x}, false); },
      {"vectorized_map", "Tensor::array()", "shape [2]",
       "in the gradient function of 'TestUserSquareReadsValues'"});
  CapturedStderr err;
  const std::vector<Tensor> out = vectorized_map(fn, {x});
  CHECK(occurrences(err.text(), "the gradient function of 'TestUserSquareReadsValues'") == 1);
  tapegrad::testing::require_close(out[0], {3, 2}, {2, 4, 6, 8, 10, 12}, 0);
}

TEST_CASE("vectorized_map misuse: the error names the op, the shapes or the reason",
          "[vectorized_map][misuse]") {
  using tapegrad::testing::expect_misuse;
  register_user_cube_gradient();
  const MapFn identity_fn = [](const std::vector<Tensor>& in) { return in; };
  expect_misuse<InvalidArgument>(
      "vectorized_map: no rule and no fallback",
      [] {
        vectorized_map(
            [](const std::vector<Tensor>& in) { return std::vector<Tensor>{user_cube(in[0])}; },
            {random_tensor({3, 2}, 96)}, false);
      },
      {"vectorized_map", "'TestUserCube'", "no batching rule", "fallback_to_loop is false"});
  expect_misuse<InvalidArgument>(
      "vectorized_map: untraceable dependence and no fallback",
      [] {
        vectorized_map(
            [](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{from_values(values(in[0]), in[0].shape())};
            },
            {random_tensor({3, 2}, 97)}, false);
      },
      {"vectorized_map", "reads Tensor::array()", "in fn", "fallback_to_loop is false"});
  expect_misuse<InvalidArgument>("vectorized_map: no elems",
                                 [&] { vectorized_map(identity_fn, {}); },
                                 {"vectorized_map", "no elems"});
  expect_misuse<InvalidArgument>("vectorized_map: a scalar elem",
                                 [&] { vectorized_map(identity_fn, {constant(1.0)}); },
                                 {"vectorized_map", "elem 0", "scalar"});
  expect_misuse<InvalidArgument>("vectorized_map: leading sizes differ",
                                 [&] {
                                   vectorized_map(identity_fn, {zeros({3, 2}), zeros({4})});
                                 },
                                 {"vectorized_map", "leading sizes differ", "[3, 2]", "[4]"});
  expect_misuse<InvalidArgument>("vectorized_map: an undefined elem",
                                 [&] {
                                   vectorized_map(identity_fn, {zeros({3}), Tensor()});
                                 },
                                 {"vectorized_map", "elem 1", "undefined"});
}

// Per-example gradients of the digits MLP (examples/train_digits: 64-128-10, ReLU, softmax
// cross-entropy): vectorized_map of the gradient equals a loop of gradient calls.
TEST_CASE("per-example gradients of the digits MLP through vectorized_map equal a loop",
          "[vectorized_map][mlp]") {
  const Tensor w1 = random_tensor({64, 128}, 100, -0.2, 0.2);
  const Tensor b1 = random_tensor({128}, 101, -0.1, 0.1);
  const Tensor w2 = random_tensor({128, 10}, 102, -0.2, 0.2);
  const Tensor b2 = random_tensor({10}, 103, -0.1, 0.1);
  const std::size_t batch = 6;
  const Tensor images = random_tensor({batch, 64}, 104, 0, 1);
  const Tensor labels = one_hot_rows(batch);
  const MapFn per_example = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    for (const Tensor* p : {&w1, &b1, &w2, &b2}) tape.watch(*p);
    const Tensor x = reshape(in[0], {1, 64});
    const Tensor logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
    const Tensor loss =
        reduce_mean(softmax_cross_entropy_with_logits(reshape(in[1], {1, 10}), logits));
    return tape.gradient(loss, {w1, b1, w2, b2});
  };
  const std::vector<Tensor> vectorized = vectorized_map(per_example, {images, labels}, false);
  REQUIRE(vectorized.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    std::vector<Tensor> rows;
    for (std::size_t b = 0; b < batch; ++b) {
      const Tensor index = ints({static_cast<double>(b)}, Shape{});
      rows.push_back(per_example({gather(images, index, 0), gather(labels, index, 0)})[k]);
    }
    INFO("parameter " << k);
    require_same(vectorized[k], stack(rows, 0), 1e-12);
  }
}

// Per-example gradients of the digits CNN (examples/train_digits_cnn: conv 3x3x16 SAME, relu,
// max_pool 2x2, conv 3x3x32 SAME, relu, dense 512-128 relu, dense 128-10, softmax
// cross-entropy) with no loop fallback. Half the pixels are 0 (no ink) and relu zeroes more,
// so the pooled windows' maxima, ties among zeros and the zero patterns differ in every slice.
TEST_CASE("per-example gradients of the digits CNN through vectorized_map equal a loop",
          "[vectorized_map][cnn]") {
  const Tensor conv1 = reshape(random_tensor({9, 16}, 170, -0.4, 0.4), {3, 3, 1, 16});
  const Tensor conv1_bias = random_tensor({16}, 171, -0.1, 0.1);
  const Tensor conv2 = reshape(random_tensor({144, 32}, 172, -0.1, 0.1), {3, 3, 16, 32});
  const Tensor conv2_bias = random_tensor({32}, 173, -0.1, 0.1);
  const Tensor hidden = random_tensor({512, 128}, 174, -0.05, 0.05);
  const Tensor hidden_bias = random_tensor({128}, 175, -0.1, 0.1);
  const Tensor out = random_tensor({128, 10}, 176, -0.1, 0.1);
  const Tensor out_bias = random_tensor({10}, 177, -0.1, 0.1);
  const std::vector<Tensor> parameters{conv1,  conv1_bias,  conv2, conv2_bias,
                                       hidden, hidden_bias, out,   out_bias};
  const std::size_t batch = 5;
  const Tensor images = reshape(relu(random_tensor({batch, 64}, 178, -1, 1)), {5, 8, 8, 1});
  const Tensor labels = one_hot_rows(batch);
  const MapFn per_example = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(parameters);
    Tensor h =
        relu(conv2d(reshape(in[0], {1, 8, 8, 1}), conv1, {1, 1}, Padding::Same) + conv1_bias);
    h = max_pool2d(h, {2, 2}, {2, 2}, Padding::Valid);
    h = relu(conv2d(h, conv2, {1, 1}, Padding::Same) + conv2_bias);
    h = relu(matmul(reshape(h, {1, 512}), hidden) + hidden_bias);
    const Tensor logits = matmul(h, out) + out_bias;
    const Tensor loss =
        reduce_mean(softmax_cross_entropy_with_logits(reshape(in[1], {1, 10}), logits));
    return tape.gradient(loss, parameters);
  };
  const std::vector<Tensor> vectorized = vectorized_map(per_example, {images, labels}, false);
  const std::vector<Tensor> looped = loop_reference(per_example, {images, labels});
  REQUIRE(vectorized.size() == 8);
  for (std::size_t k = 0; k < 8; ++k) {
    INFO("parameter " << k);
    require_same(vectorized[k], looped[k], 1e-12);
  }
  // The pooled windows did differ: some example's conv1 filter gradient is not another's.
  CHECK(values(gather(vectorized[0], ints({0}, Shape{}), 0)) !=
        values(gather(vectorized[0], ints({2}, Shape{}), 0)));
}

// ---- Strided inputs: every op of the table takes views (docs/guide.md "Memory") ----------
// Here because this file holds the table of every op with sample inputs.

namespace {

std::vector<std::int64_t> signed_dims(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

// A tensor of its own (never a view) with t's dtype, shape and values.
Tensor contiguous_copy(const Tensor& t) { return from_values(values(t), t.shape(), t.dtype()); }

// Example b of a batched input, as a tensor of its own.
Tensor example(const Tensor& batched_input, std::size_t b) {
  std::vector<std::int64_t> begin(batched_input.rank(), 0);
  std::vector<std::int64_t> size(batched_input.shape().begin(), batched_input.shape().end());
  begin[0] = static_cast<std::int64_t>(b);
  size[0] = 1;
  const Shape one(batched_input.shape().begin() + 1, batched_input.shape().end());
  return contiguous_copy(reshape(slice(batched_input, begin, size),
                                 std::vector<std::int64_t>(one.begin(), one.end())));
}

// Views with t's values: a contiguous one that starts inside its buffer, and three whose
// elements are not where a contiguous tensor keeps them: a transpose (permuted strides), an
// inner box of a larger tensor (strides with gaps) and a reverse (negative strides).
Tensor transposed_view(const Tensor& t) {
  if (t.rank() < 2) return t;
  return transpose(contiguous_copy(transpose(t)));
}
Tensor boxed_view(const Tensor& t) {
  Shape outer = t.shape();
  for (auto& d : outer) d += 2;
  std::vector<double> v(num_elements(outer), 0.0);
  const std::vector<double> inner = values(t);
  std::vector<std::int64_t> begin(t.rank(), 1);
  // Place t's values at [1, 1, ...] inside `outer`.
  std::vector<std::size_t> index(t.rank(), 0);
  for (std::size_t i = 0; i < inner.size(); ++i) {
    std::size_t flat = 0;
    for (std::size_t d = 0; d < t.rank(); ++d) flat = flat * outer[d] + index[d] + 1;
    v[flat] = inner[i];
    for (std::size_t d = t.rank(); d-- > 0;) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
  const Tensor big = from_values(v, outer, t.dtype());
  return slice(big, begin, signed_dims(t.shape()));
}
// Contiguous, but not at the start of its buffer: kernels read it in place.
Tensor offset_view(const Tensor& t) {
  std::vector<double> v(t.size() + 3, 1.0);
  const std::vector<double> own = values(t);
  std::copy(own.begin(), own.end(), v.begin() + 3);
  const Tensor big = from_values(v, {v.size()}, t.dtype());
  return reshape(slice(big, {3}, {static_cast<std::int64_t>(t.size())}), signed_dims(t.shape()));
}
Tensor reversed_view(const Tensor& t) {
  std::vector<int> all(t.rank());
  for (std::size_t d = 0; d < t.rank(); ++d) all[d] = static_cast<int>(d);
  return reverse(contiguous_copy(reverse(t, all)), all);
}

// Equal values, NaN equal to NaN.
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const auto x = values(a), y = values(b);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i] && !(std::isnan(x[i]) && std::isnan(y[i]))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("every built-in op of the table takes strided views: the same values and gradients",
          "[vectorized_map][views]") {
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>> kinds = {
      {"offset", offset_view},
      {"transposed", transposed_view},
      {"boxed", boxed_view},
      {"reversed", reversed_view}};
  std::size_t checked = 0;
  for (const Case& c : op_cases()) {
    INFO("case: " << c.name);
    std::vector<Tensor> inputs;
    for (const Tensor& e : c.elems) inputs.push_back(example(e, 1));
    const std::vector<Tensor> expected = c.fn(inputs);
    const bool differentiable = has_floating(inputs);
    const std::vector<Tensor> expected_gradient =
        differentiable ? per_example_gradient(c.fn)(inputs) : std::vector<Tensor>{};
    for (const auto& [kind, make_view] : kinds) {
      INFO("inputs: " << kind << " views");
      std::vector<Tensor> strided;
      for (const Tensor& t : inputs) {
        strided.push_back(make_view(t));
        REQUIRE(same_values(strided.back(), t));
      }
      const std::vector<Tensor> got = c.fn(strided);
      REQUIRE(got.size() == expected.size());
      for (std::size_t k = 0; k < got.size(); ++k) {
        INFO("output " << k);
        CHECK(same_values(got[k], expected[k]));
      }
      if (differentiable) {
        const std::vector<Tensor> gradient = per_example_gradient(c.fn)(strided);
        REQUIRE(gradient.size() == expected_gradient.size());
        for (std::size_t k = 0; k < gradient.size(); ++k) {
          INFO("gradient " << k);
          CHECK(same_values(gradient[k], expected_gradient[k]));
        }
      }
    }
    ++checked;
  }
  CHECK(checked >= 150);
}

namespace {

// Whether `op` (a built-in op's name) has a replay rule.
bool replays(const std::string& op) {
  for (const detail::OpDefinition* d : detail::builtin_ops()) {
    if (op == d->name) return d->replay_rule != nullptr;
  }
  return false;
}

// fn through tapegrad::function: traced on example 0 of each input, then called on example 1.
// The second call must be a replay (fn does not run) when every op fn traced has a replay
// rule, and eager otherwise; either way its results equal fn's own on example 1 exactly.
// Returns the names of the ops that were replayed.
std::set<std::string> check_function_replay(const MapFn& fn, const std::vector<Tensor>& elems,
                                            bool optimize) {
  std::vector<Tensor> first, second;
  for (const Tensor& e : elems) {
    first.push_back(example(e, 0));
    second.push_back(example(e, 1));
  }
  const std::set<std::string> ran = traced_ops(fn, elems);
  const bool every_op_replays =
      std::all_of(ran.begin(), ran.end(), [](const std::string& op) { return replays(op); });
  std::size_t calls = 0;
  FunctionOptions options;
  options.optimize = optimize;
  const Function f = function(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        return fn(in);
      },
      options);
  const std::vector<Tensor> traced = f(first);
  const std::vector<Tensor> expected_first = fn(first);
  REQUIRE(traced.size() == expected_first.size());
  for (std::size_t k = 0; k < traced.size(); ++k) CHECK(same_values(traced[k], expected_first[k]));
  const std::vector<Tensor> got = f(second);
  CHECK(f.trace_count() == 1);
  INFO("every traced op has a replay rule: " << every_op_replays);
  CHECK(calls == (every_op_replays ? 1 : 2));
  const std::vector<Tensor> expected = fn(second);
  REQUIRE(got.size() == expected.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("output " << k);
    CHECK(same_values(got[k], expected[k]));
  }
  return every_op_replays ? ran : std::set<std::string>{};
}

}  // namespace

// Every op of the table through a Function: its replay rule re-runs the op's own kernel, so a
// replay equals the eager call exactly, value and per-example gradient (the gradient rules'
// ops replayed too), with and without dropping dead ops.
TEST_CASE("every built-in op of the table through function: a replay equals the eager call",
          "[function]") {
  std::set<std::string> replayed;
  std::size_t checked = 0;
  for (const bool optimize : {false, true}) {
    for (const Case& c : op_cases()) {
      INFO("case: " << c.name << (optimize ? ", optimized" : ", not optimized"));
      const auto ran = check_function_replay(c.fn, c.elems, optimize);
      replayed.insert(ran.begin(), ran.end());
      if (has_floating(c.elems)) {
        INFO("its per-example gradient");
        const auto ran_gradient =
            check_function_replay(per_example_gradient(c.fn), c.elems, optimize);
        replayed.insert(ran_gradient.begin(), ran_gradient.end());
      }
      ++checked;
    }
  }
  CHECK(checked >= 300);
  // Every replay rule is exercised by a case that replays. ReadVariableOp is recorded on tapes
  // only: a Function's trace reads the variable itself (test_function.cpp).
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    if (op->replay_rule == nullptr || std::string(op->name) == "ReadVariableOp") continue;
    INFO("built-in op " << op->name << " has a replay rule: a case must replay it");
    CHECK(replayed.count(op->name) == 1);
  }
}
