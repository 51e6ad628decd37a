// tapegrad::distributed under mpirun (-np 2 and -np 3): allreduce values (dense, fused,
// row-sparse), broadcast, shape/dtype mismatches across ranks, and the bucketed allreduce:
// its values, the order its buckets start in (last layer first, during the backward pass)
// and data-parallel gradients equal to the whole batch's; Checkpoint's save on rank 0 and
// restore on every rank.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

#include "misuse_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::distributed;
using tapegrad::testing::expect_misuse;
using tapegrad::testing::random_tensor;
using tapegrad::testing::require_close;
using tapegrad::testing::values;

namespace {

// The world, with a timeout short enough that a failed rank cannot stall the suite.
Communicator world() {
  Communicator c = Communicator::world();
  c.set_timeout(std::chrono::seconds(30));
  return c;
}

double triangle(int n) { return n * (n + 1) / 2.0; }  // 1 + 2 + ... + n

}  // namespace

TEST_CASE("world: rank and size", "[mpi]") {
  const Communicator c = world();
  REQUIRE(c.size() >= 2);
  REQUIRE(c.rank() >= 0);
  REQUIRE(c.rank() < c.size());
  // Every rank's number appears once: the sum of the ranks is 0 + 1 + ... + (size - 1).
  const Tensor r = c.allreduce(constant(static_cast<double>(c.rank())), Reduction::Sum);
  REQUIRE(r.item<double>() == triangle(c.size() - 1));
}

TEST_CASE("allreduce of one dense tensor: sum and mean, float64 and float32", "[mpi]") {
  const Communicator c = world();
  const int n = c.size();
  const double k = c.rank() + 1;  // 1..n
  const Tensor x64 = from_values({k, 2 * k, -k, 0.5 * k, 0.0, 4 * k}, {2, 3}, DType::Float64);
  const double s = triangle(n);
  require_close(c.allreduce(x64, Reduction::Sum), {2, 3}, {s, 2 * s, -s, 0.5 * s, 0.0, 4 * s}, 0.0);
  require_close(c.allreduce(x64, Reduction::Mean), {2, 3},
                {s / n, 2 * s / n, -s / n, 0.5 * s / n, 0.0, 4 * s / n}, 1e-15);
  const Tensor x32 = from_values({k, -3 * k}, {2}, DType::Float32);
  const Tensor r32 = c.allreduce(x32, Reduction::Sum);
  REQUIRE(r32.dtype() == DType::Float32);
  require_close(r32, {2}, {s, -3 * s}, 0.0);
  const Tensor scalar = c.allreduce(constant(k), Reduction::Mean);
  require_close(scalar, {}, {s / n}, 1e-15);
}

TEST_CASE("allreduce of a list: mixed dtypes fused, undefined kept, shapes kept", "[mpi]") {
  const Communicator c = world();
  const int n = c.size();
  const double k = c.rank() + 1;
  std::vector<GradientValue> grads{GradientValue(from_values({k, k}, {2}, DType::Float64)),
                                   GradientValue(),
                                   GradientValue(from_values({k}, {1, 1}, DType::Float32)),
                                   GradientValue(from_values({10 * k, k, k}, {3}, DType::Float64))};
  const auto out = c.allreduce(grads, Reduction::Sum);
  REQUIRE(out.size() == 4);
  const double s = triangle(n);
  require_close(out[0].dense(), {2}, {s, s}, 0.0);
  REQUIRE_FALSE(out[1].defined());
  REQUIRE(out[2].dense().dtype() == DType::Float32);
  require_close(out[2].dense(), {1, 1}, {s}, 0.0);
  require_close(out[3].dense(), {3}, {10 * s, s, s}, 0.0);
}

TEST_CASE("allreduce of IndexedSlices gathers every rank's rows and stays sparse", "[mpi]") {
  const Communicator c = world();
  const int n = c.size();
  const int r = c.rank();
  // Rank r sends r rows (rank 0 sends none: shards need not be even), row j = [r, j] at
  // index (r + j) % 5 of a [5, 2] variable.
  std::vector<double> rows;
  std::vector<double> index_values;
  for (int j = 0; j < r; ++j) {
    rows.push_back(r);
    rows.push_back(j);
    index_values.push_back((r + j) % 5);
  }
  IndexedSlices local{from_values(rows, {static_cast<std::size_t>(r), 2}, DType::Float64),
                      from_values(index_values, {static_cast<std::size_t>(r)}, DType::Int32),
                      Shape{5, 2}};
  for (const Reduction reduction : {Reduction::Sum, Reduction::Mean}) {
    const auto out = c.allreduce(std::vector<GradientValue>{GradientValue(local)}, reduction);
    REQUIRE(out[0].is_sparse());
    const IndexedSlices& g = out[0].sparse();
    const double scale = reduction == Reduction::Mean ? 1.0 / n : 1.0;
    std::vector<double> expected_rows;
    std::vector<double> expected_indices;
    for (int q = 0; q < n; ++q) {  // rank order
      for (int j = 0; j < q; ++j) {
        expected_rows.push_back(q * scale);
        expected_rows.push_back(j * scale);
        expected_indices.push_back((q + j) % 5);
      }
    }
    const std::size_t total = expected_indices.size();
    REQUIRE(g.dense_shape == Shape{5, 2});
    REQUIRE(g.indices.dtype() == DType::Int32);
    require_close(g.indices, {total}, expected_indices, 0.0);
    require_close(g.values, {total, 2}, expected_rows, 1e-15);
  }
}

TEST_CASE("broadcast sets every rank's variables to the root's", "[mpi]") {
  const Communicator c = world();
  const double k = c.rank() + 1;
  Variable a(from_values({k, 2 * k, 3 * k}, {3}, DType::Float64), true, "a");
  Variable b(from_values({-k}, {1, 1}, DType::Float32), true, "b");
  const int root = c.size() - 1;
  c.broadcast({a, b}, root);
  const double rk = root + 1;
  require_close(a.peek(), {3}, {rk, 2 * rk, 3 * rk}, 0.0);
  require_close(b.peek(), {1, 1}, {-rk}, 0.0);
}

TEST_CASE("mismatched tensors across ranks: InvalidArgument naming the ranks and shapes",
          "[mpi][misuse]") {
  const Communicator c = world();
  const int r = c.rank();
  expect_misuse<InvalidArgument>(
      "allreduce of different shapes",
      [&] {
        c.allreduce(zeros({static_cast<std::size_t>(r + 1), 2}), Reduction::Sum);
      },
      {"Communicator::allreduce", "tensor 0", "rank 0 has [1, 2] float64",
       "rank 1 has [2, 2] float64"});
  expect_misuse<InvalidArgument>(
      "allreduce of different dtypes",
      [&] { c.allreduce(zeros({3}, r == 0 ? DType::Float32 : DType::Float64), Reduction::Sum); },
      {"Communicator::allreduce", "rank 0 has [3] float32", "rank 1 has [3] float64"});
  expect_misuse<InvalidArgument>(
      "allreduce of different counts",
      [&] {
        std::vector<GradientValue> grads(static_cast<std::size_t>(r + 1),
                                         GradientValue(zeros({2})));
        c.allreduce(grads, Reduction::Mean);
      },
      {"Communicator::allreduce", "rank 0 passes 1 tensor(s)", "rank 1 passes 2 tensor(s)"});
  expect_misuse<InvalidArgument>(
      "broadcast of different variables",
      [&] {
        Variable v(zeros({2, static_cast<std::size_t>(r + 2)}), true, "v");
        c.broadcast({v});
      },
      {"Communicator::broadcast", "rank 0 has [2, 2] float64", "rank 1 has [2, 3] float64"});
  expect_misuse<InvalidArgument>("an integer tensor",
                                 [&] { c.allreduce(zeros({2}, DType::Int32), Reduction::Sum); },
                                 {"Communicator::allreduce", "int32"});
  // The communicator is still usable after these errors.
  REQUIRE(c.allreduce(constant(1.0), Reduction::Sum).item<double>() == c.size());
}

namespace {

// A 3-layer MLP 5-4-3-2 of float64 Variables, the same on every rank (seeded).
struct Mlp {
  std::vector<Variable> vars;
  Mlp() {
    const std::vector<std::size_t> widths{5, 4, 3, 2};
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      vars.emplace_back(random_tensor({widths[l], widths[l + 1]}, 10 + static_cast<unsigned>(l)),
                        true, "w" + std::to_string(l));
      vars.emplace_back(random_tensor({widths[l + 1]}, 20 + static_cast<unsigned>(l)), true,
                        "b" + std::to_string(l));
    }
  }
  // Sum over the rows of the squared outputs, divided by `scale`.
  Tensor loss(const Tensor& x, double scale) const {
    Tensor h = x;
    for (std::size_t l = 0; l < 3; ++l) {
      h = matmul(h, vars[2 * l]) + vars[2 * l + 1];
      if (l < 2) h = tanh(h);
    }
    return reduce_sum(square(h)) / scale;
  }
};

// Rows [first, first + count) of a [rows, 5] batch.
Tensor rows_of(const Tensor& batch, std::size_t first, std::size_t count) {
  const std::vector<double> all = values(batch);
  std::vector<double> part(all.begin() + static_cast<std::ptrdiff_t>(first * 5),
                           all.begin() + static_cast<std::ptrdiff_t>((first + count) * 5));
  return from_values(part, {count, 5}, DType::Float64);
}

}  // namespace

TEST_CASE("bucketed allreduce: shards of a batch give the whole batch's gradient", "[mpi][ddp]") {
  const Communicator c = world();
  const Mlp model;
  const std::size_t batch_rows = 7;  // uneven over 2 and 3 ranks
  const Tensor batch = random_tensor({batch_rows, 5}, 99);
  // Rank r's shard: rows [r * 7 / n, (r + 1) * 7 / n).
  const auto n = static_cast<std::size_t>(c.size());
  const auto r = static_cast<std::size_t>(c.rank());
  const std::size_t first = r * batch_rows / n;
  const std::size_t count = (r + 1) * batch_rows / n - first;

  std::vector<Tensor> whole;
  {
    GradientTape tape;
    whole = tape.gradient(model.loss(batch, batch_rows), model.vars);
  }
  for (const bool overlap : {true, false}) {
    INFO("overlap " << overlap);
    BucketOptions options;
    options.reduction = Reduction::Sum;  // each shard's loss is already divided by the batch size
    options.overlap = overlap;
    options.bucket_bytes = 64;  // small: several buckets
    BucketedAllreduce reducer(c, model.vars, options);
    REQUIRE(reducer.num_buckets() > 2);
    for (int step = 0; step < 2; ++step) {  // the reducer is reusable across steps
      GradientTape tape;
      reducer.attach(tape);
      const Tensor loss = model.loss(rows_of(batch, first, count), batch_rows);
      const std::vector<Tensor> reduced = reducer.finish(tape.gradient(loss, model.vars));
      // With overlap the first bucket starts during the walk, before finish(); without, none.
      const auto& events = reducer.last_step_events();
      const auto first_start = std::find_if(events.begin(), events.end(), [](const BucketEvent& e) {
        return e.kind == BucketEvent::Kind::BucketStarted;
      });
      const auto finish_called = std::find_if(
          events.begin(), events.end(),
          [](const BucketEvent& e) { return e.kind == BucketEvent::Kind::FinishCalled; });
      REQUIRE(first_start != events.end());
      REQUIRE(finish_called != events.end());
      CHECK((first_start < finish_called) == overlap);
      REQUIRE(reduced.size() == whole.size());
      for (std::size_t i = 0; i < whole.size(); ++i) {
        INFO("variable " << model.vars[i].name());
        require_close(reduced[i], whole[i].shape(), values(whole[i]), 1e-13);
      }
    }
  }
}

TEST_CASE("bucketed allreduce starts the last layer's bucket first, during the backward pass",
          "[mpi][ddp]") {
  const Communicator c = world();
  const Mlp model;  // variables w0 b0 w1 b1 w2 b2 (indices 0..5)
  BucketOptions options;
  options.bucket_bytes = 8 * sizeof(double);
  BucketedAllreduce reducer(c, model.vars, options);
  // Packed last first, up to 8 elements a bucket: {b2 (2), w2 (6)}, {b1 (3)}, {w1 (12)},
  // {b0 (4)}, {w0 (20)}.
  REQUIRE(reducer.num_buckets() == 5);
  REQUIRE(reducer.bucket_variables(0) == std::vector<std::size_t>{5, 4});
  REQUIRE(reducer.bucket_variables(1) == std::vector<std::size_t>{3});
  REQUIRE(reducer.bucket_variables(2) == std::vector<std::size_t>{2});
  REQUIRE(reducer.bucket_variables(4) == std::vector<std::size_t>{0});

  GradientTape tape;
  reducer.attach(tape);
  const Tensor x = random_tensor({4, 5}, 7 + static_cast<unsigned>(c.rank()));
  const std::vector<Tensor> local = tape.gradient(model.loss(x, 1.0), model.vars);
  const std::vector<Tensor> reduced = reducer.finish(local);

  const auto& events = reducer.last_step_events();
  const auto position = [&](BucketEvent::Kind kind, std::size_t index) {
    const auto it = std::find_if(events.begin(), events.end(), [&](const BucketEvent& e) {
      return e.kind == kind && e.index == index;
    });
    REQUIRE(it != events.end());
    return it - events.begin();
  };
  using K = BucketEvent::Kind;
  // Every bucket started from a hook (before finish()), in index order...
  std::vector<std::size_t> started;
  for (const auto& e : events) {
    if (e.kind == K::FinishCalled) break;
    if (e.kind == K::BucketStarted) started.push_back(e.index);
  }
  std::vector<std::size_t> in_order(reducer.num_buckets());
  for (std::size_t b = 0; b < in_order.size(); ++b) in_order[b] = b;
  REQUIRE(started == in_order);
  // ...the last layer's bucket as soon as its two gradients were there, while the first
  // layer's gradients were not computed yet: its allreduce overlaps the rest of the walk.
  CHECK(position(K::GradientReady, 5) < position(K::BucketStarted, 0));
  CHECK(position(K::GradientReady, 4) < position(K::BucketStarted, 0));
  CHECK(position(K::BucketStarted, 0) < position(K::GradientReady, 2));
  CHECK(position(K::BucketStarted, 0) < position(K::GradientReady, 0));
  CHECK(position(K::BucketStarted, 1) < position(K::GradientReady, 0));

  // finish() came after every hook, and the events' times do not go backwards.
  CHECK(events.back().kind == K::FinishCalled);
  for (std::size_t e = 1; e < events.size(); ++e) CHECK(events[e - 1].seconds <= events[e].seconds);

  // The values: the mean of every rank's local gradients, as Communicator::allreduce gives.
  std::vector<GradientValue> local_values(local.begin(), local.end());
  const auto mean = c.allreduce(local_values, Reduction::Mean);
  for (std::size_t i = 0; i < local.size(); ++i) {
    require_close(reduced[i], local[i].shape(), values(mean[i].dense()), 1e-15);
  }
}

TEST_CASE("bucketed allreduce misuse", "[mpi][ddp][misuse]") {
  const Communicator c = world();
  const Mlp model;
  BucketedAllreduce reducer(c, model.vars);
  expect_misuse<InvalidArgument>("finish with the wrong count",
                                 [&] { reducer.finish({zeros({2})}); },
                                 {"BucketedAllreduce::finish", "1 gradients for 6 variables"});
  expect_misuse<InvalidArgument>("a gradient of the wrong shape",
                                 [&] {
                                   std::vector<Tensor> grads(6);
                                   grads[0] = zeros({2, 2});
                                   reducer.finish(grads);
                                 },
                                 {"BucketedAllreduce::finish", "'w0'", "[2, 2]", "[5, 4]"});
  expect_misuse<TapeError>("attach twice",
                           [&] {
                             GradientTape tape;
                             reducer.attach(tape);
                             reducer.attach(tape);
                           },
                           {"BucketedAllreduce::attach", "already attached"});
  // Still usable: a step with every gradient undefined reduces zeros.
  const auto out = reducer.finish(std::vector<Tensor>(6));
  require_close(out[5], {2}, {0.0, 0.0}, 0.0);
  expect_misuse<InvalidArgument>(
      "variables that differ across ranks",
      [&] {
        Variable v(zeros({static_cast<std::size_t>(c.rank() + 1)}), true, "v");
        BucketedAllreduce bad(c, {v});
      },
      {"BucketedAllreduce", "rank 0 has [1] float64", "rank 1 has [2] float64"});
}

TEST_CASE("a communicator the caller owns: MPI_COMM_SELF, one rank", "[mpi]") {
  world();  // MPI is initialised
  Communicator self(MPI_COMM_SELF);
  REQUIRE(self.rank() == 0);
  REQUIRE(self.size() == 1);
  const Tensor x = from_values({1.5, -2.0}, {2}, DType::Float64);
  require_close(self.allreduce(x, Reduction::Mean), {2}, {1.5, -2.0}, 0.0);
  const Mlp model;
  {
    // Its own scope: the misuse checks below require no tape alive on this thread.
    BucketedAllreduce reducer(self, model.vars);
    GradientTape tape;
    reducer.attach(tape);
    const std::vector<Tensor> local =
        tape.gradient(model.loss(random_tensor({3, 5}, 5), 1.0), model.vars);
    const std::vector<Tensor> reduced = reducer.finish(local);
    for (std::size_t i = 0; i < local.size(); ++i) {
      require_close(reduced[i], local[i].shape(), values(local[i]), 0.0);
    }
  }
  expect_misuse<InvalidArgument>("a non-positive timeout",
                                 [&] { self.set_timeout(std::chrono::milliseconds(0)); },
                                 {"Communicator::set_timeout", "0 ms"});
  expect_misuse<InvalidArgument>("broadcast from a root outside the communicator",
                                 [&] { self.broadcast(model.vars, 1); },
                                 {"Communicator::broadcast", "root 1", "size 1"});
}

TEST_CASE("every rank gets bitwise the same sums, small and large messages", "[mpi]") {
  const Communicator c = world();
  for (const std::size_t n : {std::size_t{7}, std::size_t{1000}, std::size_t{300000}}) {
    INFO(n << " elements");
    // Values whose sums round: the order of additions matters.
    const Tensor local =
        random_tensor({n}, 1000 + static_cast<unsigned>(c.rank()), -1.0, 1.0) * 1e-3 +
        random_tensor({n}, 2000 + static_cast<unsigned>(c.rank()), 0.0, 1e6);
    const Tensor sum = c.allreduce(local, Reduction::Sum);
    Variable rank0_sum(sum, false, "sum");
    c.broadcast({rank0_sum}, 0);
    const std::vector<double> mine = values(sum);
    const std::vector<double> root = values(rank0_sum.peek());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < n; ++i) differing += mine[i] != root[i] ? 1 : 0;
    CHECK(differing == 0);
  }
}

TEST_CASE("Checkpoint: rank 0 writes, every rank restores rank 0's values", "[mpi][checkpoint]") {
  const Communicator c = world();
  const int rank = c.rank();
  // One path for every rank: rank 0's process id, summed across ranks (the others add 0).
  const Tensor pid =
      c.allreduce(constant(rank == 0 ? static_cast<double>(::getpid()) : 0.0), Reduction::Sum);
  const std::string path = "/tmp/tapegrad_mpi_checkpoint_" +
                           std::to_string(static_cast<long>(pid.item<double>())) + ".npz";

  // Each rank holds its own values: the file must hold rank 0's.
  Variable weights(fill({3}, rank + 1.0), true, "weights");
  Generator generator(static_cast<std::uint64_t>(100 + rank));
  SGD sgd(0.5, 0.9);
  sgd.apply_gradients({{fill({3}, rank + 1.0), weights}});
  Checkpoint checkpoint;
  checkpoint.track("weights", weights).track("sgd", sgd).track("generator", generator);
  checkpoint.save(path);

  weights.assign(fill({3}, -7.0));
  generator.reset(5, 5);
  sgd.set_learning_rate(0.01);
  checkpoint.restore(path);
  // Rank 0's state after its step: w = 1 - 0.5 * 1, momentum -0.5, seed 100.
  require_close(weights.peek(), {3}, {0.5, 0.5, 0.5}, 0.0);
  require_close(sgd.slot(weights, "momentum"), {3}, {-0.5, -0.5, -0.5}, 0.0);
  CHECK(generator.seed() == 100);
  CHECK(generator.counter() == 0);
  CHECK(sgd.learning_rate() == 0.5);
  c.barrier();
  if (rank == 0) std::remove(path.c_str());

  // A save rank 0 cannot write, and a restore of a file that does not exist, throw on every
  // rank (none is left waiting).
  const std::string nowhere = "/nonexistent_tapegrad_folder/run.npz";
  CHECK_THROWS_WITH(checkpoint.save(nowhere),
                    Catch::Contains("Checkpoint::save(\"" + nowhere + "\")"));
  CHECK_THROWS_WITH(checkpoint.restore(path),
                    Catch::Contains("Checkpoint::restore(\"" + path + "\")"));
  require_close(weights.peek(), {3}, {0.5, 0.5, 0.5}, 0.0);
  c.barrier();
}
