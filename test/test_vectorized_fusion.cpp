// vectorized_map's replay computes a run of elementwise ops on a large batch as one loop
// (derivatives/batched_fusion.hpp): every element as the loop of fn per slice computes it (bit
// for bit: one scalar function per op), the intermediates never tensors (the peak memory
// shows it), a gather that only the loop reads never computed, and nothing fused while a tape,
// an accumulator or a Function watches the replay.
#include <cmath>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "identical_support.hpp"
#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor wave(std::size_t n, double phase, double scale = 1.0) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = scale * (std::sin(0.37 * static_cast<double>(i) + phase) + 0.05);
  }
  return from_values(std::move(v), {n});
}

Tensor batch_of_waves(std::size_t batch, std::size_t n) {
  std::vector<Tensor> rows;
  for (std::size_t b = 0; b < batch; ++b) rows.push_back(wave(n, 0.1 * static_cast<double>(b)));
  return stack(rows, 0);
}

// (3 i + 7) mod limit, and (5 i + 1) mod limit: indices that repeat and skip.
std::vector<std::int64_t> spread_indices(std::size_t count, std::size_t limit, int a, int b) {
  std::vector<std::int64_t> indices(count);
  for (std::size_t i = 0; i < count; ++i) {
    indices[i] = static_cast<std::int64_t>(
        (static_cast<std::size_t>(a) * i + static_cast<std::size_t>(b)) % limit);
  }
  return indices;
}

Tensor int64_tensor(const std::vector<std::int64_t>& values) {
  std::vector<double> as_double(values.begin(), values.end());
  return cast(from_values(std::move(as_double), {values.size()}), DType::Int64);
}

// The two index lists of `count` rows of `limit` the gathers below read (spread_indices
// (3, 7) and (5, 1)), as values and as int64 tensors.
struct IndexPair {
  std::vector<std::int64_t> first_values, second_values;
  Tensor first, second;
};
IndexPair index_pair(std::size_t count, std::size_t limit) {
  IndexPair pair{spread_indices(count, limit, 3, 7), spread_indices(count, limit, 5, 1), {}, {}};
  pair.first = int64_tensor(pair.first_values);
  pair.second = int64_tensor(pair.second_values);
  return pair;
}

// M[k, j] = sin(0.1 k + 0.37 j) + 0.05.
Tensor square_matrix(std::size_t n) {
  std::vector<double> v(n * n);
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t j = 0; j < n; ++j) {
      v[k * n + j] = std::sin(0.1 * static_cast<double>(k) + 0.37 * static_cast<double>(j)) + 0.05;
    }
  }
  return from_values(std::move(v), {n, n});
}

// M x for a vector x.
Tensor times_vector(const Tensor& m, const Tensor& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  return reshape(matmul(m, reshape(x, {n, 1})), {n});
}

// fn per slice, stacked: the reference the replay must equal.
Tensor loop_of(const std::function<Tensor(const Tensor&)>& fn, const Tensor& elems) {
  std::vector<Tensor> rows;
  for (std::size_t b = 0; b < elems.shape()[0]; ++b) {
    rows.push_back(fn(gather(elems, from_values({static_cast<double>(b)}, Shape{}, DType::Int64))));
  }
  return stack(rows, 0);
}

// The peak bytes of the tensors that f's call allocates, in buffers of `buffer_bytes`.
template <class F>
double peak_buffers(F f, std::size_t buffer_bytes) {
  const std::size_t before = memory_stats().bytes_in_use;
  reset_peak_memory();
  const Tensor result = f();
  const std::size_t peak = memory_stats().peak_bytes_in_use - before;
  return static_cast<double>(peak) / static_cast<double>(buffer_bytes);
}

// vectorized_map(fn, elems) bit for bit as the loop of fn, holding at its peak less than one
// and a half buffers of `output_bytes` (its output: the loop's intermediates and gathers are
// never tensors).
void require_one_loop(const std::function<Tensor(const Tensor&)>& fn, const Tensor& elems,
                      std::size_t output_bytes) {
  require_identical(vectorized_map(fn, elems, false), loop_of(fn, elems));
  const double peak = peak_buffers([&] { return vectorized_map(fn, elems, false); }, output_bytes);
  INFO("peak " << peak << " buffers");
  REQUIRE(peak < 1.5);
}

}  // namespace

TEST_CASE("vectorized_map replays a chain of elementwise ops on a large batch as one loop",
          "[vectorized_map][fusion]") {
  constexpr std::size_t kBatch = 64, kN = 1000;
  const Tensor c = wave(kN, 0.7, 0.5);
  const Tensor b = constant(0.25);
  const auto fn = [&](const Tensor& x) { return (x * c + b) * x - c; };
  // Op by op, two [64, 1000] tensors are alive at once (an intermediate and the next); the
  // loop writes only its output.
  require_one_loop(fn, batch_of_waves(kBatch, kN), kBatch * kN * sizeof(double));
}

TEST_CASE("vectorized_map's loop reads a gather's rows from its params",
          "[vectorized_map][fusion]") {
  constexpr std::size_t kBatch = 40, kVertices = 300, kPoints = 1200;
  const IndexPair indices = index_pair(kPoints, kVertices);
  const Tensor &first = indices.first, &second = indices.second;
  const Tensor weight = wave(kPoints, 0.3);
  const auto fn = [&](const Tensor& x) {
    return gather(x, first) * weight + (1.0 - weight) * gather(x, second);
  };
  // The two gathered [40, 1200] tensors are never built: the output is the only buffer.
  require_one_loop(fn, batch_of_waves(kBatch, kVertices), kBatch * kPoints * sizeof(double));
}

TEST_CASE("vectorized_map's loop reads gathered rows of three across its blocks",
          "[vectorized_map][fusion]") {
  // Rows of 3 against blocks of 1,024 elements: blocks start inside a row, and the last block
  // (144,000 = 140 · 1,024 + 640 elements) ends inside one.
  constexpr std::size_t kBatch = 40, kVertices = 300, kPoints = 1200;
  const IndexPair indices = index_pair(kPoints, kVertices);
  const Tensor &first = indices.first, &second = indices.second;
  const Tensor weight = reshape(wave(kPoints, 0.3), {static_cast<std::int64_t>(kPoints), 1});
  const auto fn = [&](const Tensor& x) {
    return weight * gather(x, first) - gather(x, second) * weight;
  };
  const Tensor elems =
      reshape(batch_of_waves(kBatch, kVertices * 3),
              {static_cast<std::int64_t>(kBatch), static_cast<std::int64_t>(kVertices), 3});
  require_one_loop(fn, elems, kBatch * kPoints * 3 * sizeof(double));
}

TEST_CASE("jacobian_forward's tangents of a gathered, weighted sum are one loop, exact",
          "[vectorized_map][fusion][forward]") {
  // f(x)_i = w_i (M x)_a(i) + v_i (M x)_b(i): J[i, j] = w_i M[a(i), j] + v_i M[b(i), j]. The
  // tangents of M x are M's columns (dense), exact, and so is each term.
  constexpr std::size_t kVertices = 50, kPoints = 400;
  const IndexPair pair = index_pair(kPoints, kVertices);
  const std::vector<std::int64_t>&a = pair.first_values, &b = pair.second_values;
  const Tensor &a_indices = pair.first, &b_indices = pair.second;
  const Tensor w = wave(kPoints, 0.2), v = wave(kPoints, 1.1);
  const Tensor m = square_matrix(kVertices);
  const auto f = [&](const Tensor& x) {
    const Tensor mixed = times_vector(m, x);
    return w * gather(mixed, a_indices) + v * gather(mixed, b_indices);
  };
  const Tensor x = wave(kVertices, 0.4);
  const Tensor jacobian = jacobian_forward(f, x);
  REQUIRE(jacobian.shape() == Shape{kPoints, kVertices});
  const auto& got = jacobian.array<double>();
  const auto& ms = m.array<double>();
  const auto& ws = w.array<double>();
  const auto& vs = v.array<double>();
  for (std::size_t i = 0; i < kPoints; ++i) {
    for (std::size_t j = 0; j < kVertices; ++j) {
      INFO("J[" << i << ", " << j << "]");
      const auto ai = static_cast<std::size_t>(a[i]), bi = static_cast<std::size_t>(b[i]);
      REQUIRE(got(i, j) == ws(i) * ms(ai, j) + vs(i) * ms(bi, j));
    }
  }
  // The loop writes the [50, 400] tangents of f once; op by op, its two gathers, two products
  // and sum are five such tensors, three alive at once.
  const std::size_t buffer = kPoints * kVertices * sizeof(double);
  const double peak = peak_buffers([&] { return jacobian_forward(f, x); }, buffer);
  INFO("peak " << peak << " buffers");
  REQUIRE(peak < 2.0);
}

TEST_CASE("a replay with diagonal inputs keeps its ops' structure instead of one loop",
          "[vectorized_map][fusion][forward]") {
  // The tangents of x c + d x stay diagonal (n numbers for the n x n identity's rows), so the
  // run is replayed op by op; J = diag(c + d).
  constexpr std::size_t kN = 200;
  const Tensor c = wave(kN, 0.3), d = wave(kN, 2.0);
  const Tensor jacobian =
      jacobian_forward([&](const Tensor& x) { return x * c + d * x; }, wave(kN, 0.9));
  const auto& got = jacobian.array<double>();
  const auto& cs = c.array<double>();
  const auto& ds = d.array<double>();
  for (std::size_t i = 0; i < kN; ++i) {
    for (std::size_t j = 0; j < kN; ++j) REQUIRE(got(i, j) == (i == j ? cs(i) + ds(i) : 0.0));
  }
}

TEST_CASE("a tape and a Function watching jacobian_forward see every op of its replay",
          "[vectorized_map][fusion][forward]") {
  // f(x)_i = w_i y_a(i)^2 - y_b(i) with y = M x: J[i, j] = 2 w_i y_a(i) M[a(i), j] - M[b(i), j],
  // so Σ J = Σ_i 2 w_i y_a(i) r_a(i) - Σ_i r_b(i) with r = M's row sums, whose gradient is
  // Σ_i 2 w_i r_a(i) M[a(i), j]. The tangents' product and difference ([50, 400]) are a run.
  constexpr std::size_t kVertices = 50, kPoints = 400;
  const IndexPair pair = index_pair(kPoints, kVertices);
  const std::vector<std::int64_t>& a = pair.first_values;
  const Tensor &indices = pair.first, &other_indices = pair.second;
  const Tensor w = wave(kPoints, 0.2);
  const Tensor m = square_matrix(kVertices);
  const auto f = [&](const Tensor& x) {
    const Tensor y = times_vector(m, x);
    return w * gather(y * y, indices) - gather(y, other_indices);
  };
  const Tensor x = wave(kVertices, 0.4);

  GradientTape tape;
  tape.watch(x);
  const Tensor total = reduce_sum(jacobian_forward(f, x));
  const Tensor gradient = tape.gradient(total, x);
  const auto& ms = m.array<double>();
  const auto& ws = w.array<double>();
  std::vector<double> expected(kVertices, 0.0);
  for (std::size_t i = 0; i < kPoints; ++i) {
    const auto k = static_cast<std::size_t>(a[i]);
    double row_sum = 0.0;
    for (std::size_t j = 0; j < kVertices; ++j) row_sum += ms(k, j);
    for (std::size_t j = 0; j < kVertices; ++j) expected[j] += 2.0 * ws(i) * row_sum * ms(k, j);
  }
  for (std::size_t j = 0; j < kVertices; ++j) {
    INFO("dx[" << j << "]");
    REQUIRE(gradient.array<double>()(j) == Approx(expected[j]).epsilon(1e-12));
  }

  // A Function traces the replay's ops: a later call on other values computes with them.
  const Function traced = function([&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{jacobian_forward(f, args[0])};
  });
  (void)traced({x});
  const Tensor other = wave(kVertices, 2.5);
  require_identical(traced({other})[0], jacobian_forward(f, other));
}

TEST_CASE(
    "vectorized_map of a gradient through a fixed activation output: its loop, its op-by-op "
    "replay and the loop of fn give the same bits",
    "[vectorized_map][fusion]") {
  // In fn, x is captured (one for every row) and v batched: an activation's fused gradient
  // (SigmoidGrad(y, g), ...) sees a fixed y and a batched g. Op by op, its batching rule
  // computes the slope from y once and multiplies the batch of g by it; the loop computes the
  // op's own scalar function. The two used to round differently for SigmoidGrad (g y (1 - y)
  // against g (y (1 - y))) and SqrtGrad (g 0.5 / y against g (0.5 / y)).
  constexpr std::size_t kBatch = 16, kN = 1024;  // 16,384 batched elements: a loop
  const Tensor x = wave(kN, 0.3, 0.8) + 1.2;     // positive, for sqrt, rsqrt and reciprocal
  const Tensor vs = batch_of_waves(kBatch, kN);
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>> activations = {
      {"sigmoid", &sigmoid},     {"sqrt", &tapegrad::sqrt},
      {"tanh", &tapegrad::tanh}, {"reciprocal", &reciprocal},
      {"rsqrt", &rsqrt},         {"elu", &elu},
      {"relu", &relu},           {"softplus", &softplus}};
  for (const auto& [name, activation] : activations) {
    INFO(name);
    const auto fn = [&, activation = activation](const Tensor& v) {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = activation(x - 1.0);
      return tape.gradient(reduce_sum(y * v), x) * 1.5 + v;
    };
    const Tensor fused = vectorized_map(fn, vs, false);
    Tensor op_by_op;
    {
      GradientTape observer;  // nothing fuses while a tape watches the thread
      op_by_op = vectorized_map(fn, vs, false);
    }
    require_identical(fused, op_by_op);
    require_identical(fused, loop_of(fn, vs));
  }
}
