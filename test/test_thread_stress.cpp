// Thread stress: 8 threads, each running TAPEGRAD_STRESS_STEPS steps (default 2000) of
// nested and persistent tapes, custom gradients (one reading a shared Variable), BLAS
// products with shared tensors, and user primitives registered while the other threads take
// gradients. Every gradient is compared with its closed form. Then the buffer cache: buffers
// made on one thread and freed on another, threads that exit, and release_cached_memory while
// other threads allocate. Built and run under ThreadSanitizer by CI, where it must produce
// zero reports.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

constexpr int kThreads = 8;
constexpr int kRegisterEvery = 50;  // steps between two registrations of a new user op

std::size_t steps_from_env() {
  const char* text = std::getenv("TAPEGRAD_STRESS_STEPS");
  return text != nullptr && *text != '\0' ? std::stoul(text) : 2000;
}

// Read by every thread, written by none.
struct Shared {
  Variable w{constant({0.5, -1.5, 2.0}), true, "w"};          // [3]
  Variable scale{constant(1.25), true, "scale"};              // []
  Tensor c = constant({0.3, -0.7, 1.1});                      // [3]
  Tensor m = constant({{1.0, 2.0, -1.0}, {0.5, -3.0, 4.0}});  // [2, 3]
  std::vector<double> w_values{0.5, -1.5, 2.0};
  double scale_value = 1.25;
  std::vector<double> c_values{0.3, -0.7, 1.1};
  std::vector<double> m_column_sums{1.5, -1.0, 3.0};
  Tensor indices = from_values({0, 2, 2}, {3}, DType::Int64);  // gather: counts 1, 0, 2
  std::vector<double> index_counts{1.0, 0.0, 2.0};
};

// x^3 with a gradient written in tapegrad ops (so it differentiates again).
const auto cube = custom_gradient([](const Tensor& x) {
  auto grad = [x](const Tensor& dy) { return dy * 3.0 * x * x; };
  return std::make_pair(x * x * x, grad);
});

// x * scale, the Variable read inside: the gradient also returns d/dscale.
auto scaled_by(const Variable& scale) {
  return custom_gradient([scale](const Tensor& x) {
    const Tensor s = scale.value();
    auto grad = [x, s](const Tensor& dy, const std::vector<Variable>&) {
      return std::make_pair(std::vector<Tensor>{dy * s}, std::vector<Tensor>{reduce_sum(dy * x)});
    };
    return std::make_pair(x * s, grad);
  });
}

// A user primitive y = x^2 recorded under `op_type`; its gradient 2 x dy is registered by
// the caller.
Tensor user_square(const std::string& op_type, const Tensor& x) {
  Tensor y = square(stop_gradient(x));
  record_operation(op_type, {x}, {y});
  return y;
}

void register_user_square(const std::string& op_type) {
  register_gradient(
      op_type,
      [](const OpContext& ctx, const std::vector<Tensor>& grads) {
        return std::vector<Tensor>{grads[0] * 2.0 * ctx.inputs()[0]};
      },
      Keep::only({0}), Keep::none());
}

struct ThreadReport {
  std::size_t checks = 0;
  std::vector<std::string> failures;  // at most a few, with thread, step and values
};

class Checker {
 public:
  Checker(ThreadReport& report, int thread, std::size_t step)
      : report_(report), thread_(thread), step_(step) {}
  void close(const char* what, const Tensor& got, const std::vector<double>& expected) {
    ++report_.checks;
    const std::vector<double> v = got.defined() ? values(got) : std::vector<double>{};
    bool ok = v.size() == expected.size();
    for (std::size_t i = 0; ok && i < v.size(); ++i)
      ok = std::abs(v[i] - expected[i]) <= 1e-12 * (1.0 + std::abs(expected[i]));
    if (!ok && report_.failures.size() < 5) {
      std::string text = "thread " + std::to_string(thread_) + " step " + std::to_string(step_) +
                         " " + what + ": got";
      for (double e : v) text += " " + std::to_string(e);
      text += ", expected";
      for (double e : expected) text += " " + std::to_string(e);
      report_.failures.push_back(text);
    }
  }

 private:
  ThreadReport& report_;
  int thread_;
  std::size_t step_;
};

// f(x) = sum(cube(x) * w) + sum(sin(x) * c) + sum(user_square(x)) + sum(m x) + sum(scale * x)
//        + sum(gather(x, indices)):
//   df/dx      = 3 x^2 w + cos(x) c + 2 x + colsum(m) + scale + counts(indices)
//   d2f/dx2    = diag(6 x w - sin(x) c + 2)   (f is a sum of functions of one element each)
//   df/dw      = x^3,  df/dscale = sum(x)
void one_step(const Shared& shared, const std::string& op_type, int thread, std::size_t step,
              ThreadReport& report) {
  Checker check(report, thread, step);
  std::vector<double> xv(3);
  for (std::size_t i = 0; i < 3; ++i)
    xv[i] = 0.1 * static_cast<double>(thread + 1) - 0.2 * static_cast<double>(i) +
            0.01 * static_cast<double>(step % 13);
  const Tensor x = from_values(xv, {3});
  const Tensor unused = from_values(xv, {3});  // watched, never read: zeros (VSpace cache)
  const auto scaled = scaled_by(shared.scale);

  GradientTape outer(/*persistent=*/true);
  outer.watch({x, unused});
  Tensor f, g;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor column = reshape(x, {3, 1});
    f = reduce_sum(multiply(cube(x), shared.w)) + reduce_sum(multiply(sin(x), shared.c)) +
        reduce_sum(user_square(op_type, x)) + reduce_sum(matmul(shared.m, column)) +
        reduce_sum(scaled(x)) + reduce_sum(gather(x, shared.indices));
    g = inner.gradient(f, x);
  }
  std::vector<double> df(3), d2f(3), x3(3);
  for (std::size_t i = 0; i < 3; ++i) {
    df[i] = 3 * xv[i] * xv[i] * shared.w_values[i] + std::cos(xv[i]) * shared.c_values[i] +
            2 * xv[i] + shared.m_column_sums[i] + shared.scale_value + shared.index_counts[i];
    d2f[i] = 6 * xv[i] * shared.w_values[i] - std::sin(xv[i]) * shared.c_values[i] + 2;
    x3[i] = xv[i] * xv[i] * xv[i];
  }
  const Tensor g_sum = reduce_sum(g);         // recorded on the outer tape
  const auto pause = outer.stop_recording();  // its own gradients need not be recorded
  check.close("df/dx (inner tape)", g, df);
  check.close("d2f/dx2 (outer tape over the inner gradient)", outer.gradient(g_sum, x), d2f);
  const std::vector<Tensor> by_variable =
      outer.gradient(f, std::vector<Variable>{shared.w, shared.scale});
  check.close("df/dw (persistent outer tape, second call)", by_variable[0], x3);
  check.close("df/dscale (custom gradient's variable gradient)", by_variable[1],
              {xv[0] + xv[1] + xv[2]});
  check.close("df/d(unused) with UnconnectedGradients::Zero",
              outer.gradient(f, unused, UnconnectedGradients::Zero), {0.0, 0.0, 0.0});
}

}  // namespace

TEST_CASE("8 threads: nested and persistent tapes, custom gradients, registrations", "[threads]") {
  const std::size_t steps = steps_from_env();
  const Shared shared;
  std::vector<ThreadReport> reports(kThreads);
  std::atomic<int> registrations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ThreadReport& report = reports[static_cast<std::size_t>(t)];
      try {
        std::string op_type;
        for (std::size_t s = 0; s < steps; ++s) {
          if (s % kRegisterEvery == 0) {  // a new op type, registered while others run
            op_type = "StressSquare_" + std::to_string(t) + "_" + std::to_string(s);
            register_user_square(op_type);
            ++registrations;
          }
          one_step(shared, op_type, t, s, report);
        }
      } catch (const std::exception& e) {
        report.failures.push_back("thread " + std::to_string(t) + " threw: " + e.what());
      }
    });
  }
  for (auto& th : threads) th.join();

  std::size_t checks = 0;
  for (const auto& r : reports) {
    checks += r.checks;
    for (const auto& f : r.failures) FAIL_CHECK(f);
  }
  std::cout << "thread stress: " << kThreads << " threads x " << steps << " steps, " << checks
            << " gradient checks, " << registrations.load() << " gradients registered\n";
  REQUIRE(checks == kThreads * steps * 5);
  for (const auto& r : reports) REQUIRE(r.failures.empty());
}

TEST_CASE("buffers freed on other threads than their own, and threads that exit",
          "[threads][memory]") {
  release_cached_memory();
  const std::size_t in_use = memory_stats().bytes_in_use;
  // Thread a makes tensors, thread b drops them, while both also compute.
  constexpr int kRounds = 2000;
  std::vector<Tensor> made(kRounds);
  std::atomic<int> ready{0};
  std::thread a([&] {
    for (int i = 0; i < kRounds; ++i) {
      made[i] = fill({static_cast<std::size_t>(1 + i % 300)}, static_cast<double>(i));
      ready.store(i + 1, std::memory_order_release);
    }
  });
  double sum = 0.0;
  std::thread b([&] {
    for (int i = 0; i < kRounds; ++i) {
      while (ready.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      sum += reduce_sum(made[i] * 2.0).item<double>() / (2.0 * static_cast<double>(1 + i % 300));
      made[i] = Tensor();
    }
  });
  a.join();
  b.join();
  CHECK(sum == Approx(static_cast<double>(kRounds) * (kRounds - 1) / 2.0));
  CHECK(memory_stats().bytes_in_use == in_use);
  // What the exited threads cached went to the process pool: this thread's requests of those
  // classes are hits, not system allocations.
  const MemoryStats after = memory_stats();
  CHECK(after.bytes_cached > 0);
  std::vector<Tensor> again;
  for (int i = 0; i < 50; ++i) again.push_back(fill({static_cast<std::size_t>(1 + i)}, 1.0));
  CHECK(memory_stats().system_allocations == after.system_allocations);
}

TEST_CASE("the memory figures add up every thread's own counts", "[threads][memory]") {
  // Each thread counts its buffers itself and adds them to the shared figures in steps of
  // 64 KiB; memory_stats() adds every live thread's share and an exited thread's is kept.
  const std::size_t small = 32;  // the class of three float64s
  const auto taken = [](const MemoryStats& from, const MemoryStats& to) {
    return (to.system_allocations - from.system_allocations) + (to.cache_hits - from.cache_hits);
  };
  const MemoryStats start = memory_stats();
  std::vector<Tensor> handed;  // taken on a thread that then exits, freed here
  std::thread([&handed] {
    for (int i = 0; i < 5000; ++i) handed.push_back(zeros({3}));
  }).join();
  const MemoryStats joined = memory_stats();
  CHECK(joined.bytes_in_use == start.bytes_in_use + 5000 * small);
  CHECK(taken(start, joined) == 5000);
  handed.clear();
  CHECK(memory_stats().bytes_in_use == start.bytes_in_use);

  // Two threads at once, each freeing what it took, while this one reads the figures.
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([] {
      for (int round = 0; round < 200; ++round) {
        std::vector<Tensor> kept;
        for (int i = 0; i < 100; ++i) kept.push_back(zeros({3 + static_cast<std::size_t>(i % 7)}));
      }
    });
  }
  for (int read = 0; read < 100; ++read) CHECK(memory_stats().bytes_in_use >= start.bytes_in_use);
  for (std::thread& worker : workers) worker.join();
  const MemoryStats after = memory_stats();
  CHECK(after.bytes_in_use == start.bytes_in_use);
  CHECK(taken(joined, after) == 2 * 200 * 100);
}

TEST_CASE("release_cached_memory while other threads allocate and free", "[threads][memory]") {
  const std::size_t in_use = memory_stats().bytes_in_use;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  std::vector<double> sums(4, 0.0);
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      // Small (thread lists) and large (the pool) buffers, freed on this thread.
      for (int i = 0; !stop.load(std::memory_order_relaxed) || i < 200; ++i) {
        const std::size_t n = (i % 2 == 0) ? 1 + static_cast<std::size_t>(i % 50) : 700 + i % 900;
        const Tensor t = fill({n}, 1.0) * 3.0;
        sums[w] += reduce_sum(t).item<double>() / (3.0 * static_cast<double>(n));
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    release_cached_memory();
    std::this_thread::yield();
  }
  stop.store(true);
  for (std::thread& t : workers) t.join();
  for (const double sum : sums) CHECK(sum >= 200.0);  // each term is 1
  for (const double sum : sums) CHECK(sum == std::floor(sum));
  CHECK(memory_stats().bytes_in_use == in_use);
  release_cached_memory();
  CHECK(memory_stats().bytes_cached == 0);  // the workers' lists went to the pool when they left
}

TEST_CASE("a strided view's copy is built once when several threads read it at once",
          "[views][threads]") {
  std::vector<double> v(64 * 64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  const Tensor x = from_values(v, {64, 64});
  const Tensor t = transpose(x);
  std::vector<const double*> seen(4, nullptr);
  std::vector<std::thread> threads;
  // Half read through array<T>(), half through a kernel (its sum) first.
  std::vector<double> sums(seen.size(), 0.0);
  for (std::size_t k = 0; k < seen.size(); ++k) {
    threads.emplace_back([&, k] {
      if (k % 2 == 1) sums[k] = reduce_sum(t).item<double>();
      seen[k] = t.array<double>().data();
    });
  }
  for (auto& th : threads) th.join();
  for (const double* p : seen) CHECK(p == seen[0]);
  CHECK(sums[1] == 4095.0 * 4096.0 / 2.0);
  CHECK(sums[3] == sums[1]);
  CHECK(t.array<double>()(5, 7) == 7.0 * 64 + 5.0);
}

namespace {
// Calls f and eager on argument(t, k) from each of `threads` threads, `calls` times each, at
// once: per thread, how many calls' results differed from the eager ones in any bit.
std::vector<int> mismatches_from_threads(
    const Function& f, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& eager,
    int threads, int calls, const std::function<Tensor(int, int)>& argument) {
  std::vector<int> mismatches(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (int k = 0; k < calls; ++k) {
        const Tensor x = argument(t, k);
        const std::vector<Tensor> got = f({x});
        const std::vector<Tensor> expected = eager({x});
        bool same = got.size() == expected.size();
        for (std::size_t r = 0; same && r < got.size(); ++r) {
          same = values(got[r]) == values(expected[r]);
        }
        if (!same) ++mismatches[static_cast<std::size_t>(t)];
      }
    });
  }
  for (std::thread& thread : running) thread.join();
  return mismatches;
}
}  // namespace

// One Function called from four threads at once, on two signatures: each call replays into
// values of its own, a trace is kept once per signature, and every result equals the eager
// call's (sum(x^2 + sin x) and its gradient 2x + cos x).
TEST_CASE("a Function called from several threads at once", "[function][threads]") {
  auto value_and_gradient = [](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch(args[0]);
    Tensor y = reduce_sum(add(multiply(args[0], args[0]), sin(args[0])));
    return std::vector<Tensor>{y, tape.gradient(y, args[0])};
  };
  const Function f = function(value_and_gradient);
  constexpr int kThreads = 4;
  const std::vector<int> mismatches =
      mismatches_from_threads(f, value_and_gradient, kThreads, 50, [](int t, int k) {
        const std::size_t n = 2 + static_cast<std::size_t>((t + k) % 2);  // [2] or [3]
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = 0.1 * (t + 1) * (k + 1) - 0.3 * double(i);
        return from_values(v, {n});
      });
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[t] == 0);
  // Threads that traced one signature at once each count a trace; one is kept.
  CHECK(f.trace_count() >= 2);
  CHECK(f.trace_count() <= 2 * kThreads);
}

TEST_CASE("a variable stepped in place while other threads read it", "[threads][optim]") {
  // SGD with learning rate 1 on a gradient of ones: after k steps every element is -k exactly.
  // A reader must always see one step's value whole, never a step half written.
  constexpr std::size_t kElements = 4096;
  constexpr int kSteps = 400;
  Variable w(zeros({kElements}), true, "w");
  const Tensor ones_gradient = ones({kElements});
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, backwards{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      double last = 0.0;
      while (!done.load()) {
        const Tensor value = w.peek();
        const auto& a = value.array<double>();
        for (double x : a) {
          if (x != a[0]) ++torn;
        }
        if (a[0] > last) ++backwards;
        last = a[0];
      }
    });
  }
  SGD sgd(1.0);
  for (int step = 0; step < kSteps; ++step) sgd.apply_gradients({{ones_gradient, w}});
  done = true;
  for (std::thread& t : readers) t.join();
  CHECK(torn.load() == 0);
  CHECK(backwards.load() == 0);
  require_close(w.peek(), {kElements}, std::vector<double>(kElements, -kSteps), 0.0);
}

TEST_CASE("a Function whose small values live in its arena, called from several threads at once",
          "[function][threads]") {
  // A recursion of small loops with its gradient: one call at a time uses the Function's
  // arena, the others an arena of their own. Every call equals the eager one bit for bit.
  const Tensor w = from_values({0.3, -0.2, 0.5, 0.1, 0.4, -0.6, 0.2, 0.7}, {2, 4});
  auto recursion = [w](const std::vector<Tensor>& args) {
    GradientTape tape;
    tape.watch(args[0]);
    Tensor hidden = args[0];
    Tensor cell = args[0] * 0.5;
    for (int t = 0; t < 30; ++t) {
      const std::vector<Tensor> gates = split(hidden * w + 0.1, 2, 0);
      cell = cell * 0.9 + sigmoid(gates[0]) * tanh(gates[1]);
      hidden = tanh(cell) * 0.5;
    }
    const Tensor total = reduce_sum(hidden);
    return std::vector<Tensor>{total, tape.gradient(total, args[0])};
  };
  const Function f = function(recursion);
  constexpr int kThreads = 4;
  const std::vector<int> mismatches =
      mismatches_from_threads(f, recursion, kThreads, 40, [](int t, int k) {
        std::vector<double> v(4);
        for (std::size_t i = 0; i < 4; ++i) v[i] = 0.1 * (t + 1) - 0.05 * k + 0.2 * double(i);
        return from_values(v, {1, 4});
      });
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[t] == 0);
}
