// Random training steps as Functions: a random graph (fuzz/random_graph.hpp, 3-12 ops, or 20-60
// for every fourth) is the model, some of its inputs trainable Variables and the rest data
// passed as arguments; fn records the loss on a tape, takes the gradients, clips them (or not)
// and applies a randomly chosen optimizer or a hand-written descent. Every call of the Function
// must equal an eager step bit for bit (the loss, the gradients, each Variable's value and each
// optimizer slot afterwards), with the learning rate changed between calls as a schedule does,
// and no tensor a caller was handed or holds (an earlier call's arguments and results, a
// Variable's value read before a step, an optimizer's slot) may change afterwards: a replay
// writes its loops over dying values and its small results again where nobody holds them, and
// an update writes a Variable's buffer in place where nobody holds it.
//
// TAPEGRAD_FUZZ_SEED=<seed> sets the first seed (step program i uses seed + i) and
// TAPEGRAD_FUZZ_PROGRAMS=<n> the number of them; a failure prints the seed that reproduces it:
//   TAPEGRAD_FUZZ_SEED=<seed> TAPEGRAD_FUZZ_PROGRAMS=1 build/test/test_function_random_training
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fuzz/fuzz_env.hpp"
#include "fuzz/fuzz_failures.hpp"
#include "fuzz/random_graph.hpp"
#include "identical_support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::fuzz;
using namespace tapegrad::testing;

namespace {

constexpr std::uint64_t kDefaultPrograms = fuzz_count(2000, 200);
constexpr std::uint64_t kDefaultSeed = 20261201;
constexpr int kCalls = 5;  // the trace and four replays

// What one seed draws besides its graph: which inputs are Variables, the loss, the clipping,
// the optimizer and its hyperparameters, and the learning rate of each call.
struct StepChoice {
  std::vector<bool> trainable;  // per graph input
  bool mean_loss = false;       // reduce_mean(square(y)), else 0.5 * reduce_sum(square(y))
  int clip = 0;                 // 0 none, 1 clip_by_norm of each gradient, 2 clip_by_global_norm
  double clip_norm = 1.0;
  // 0 SGD, 1 Adam, 2 AdamW, 3 a hand-written descent: assign_sub(rate * g), the rate a Variable
  int optimizer = 0;
  double momentum = 0.0;
  bool nesterov = false;
  AdamOptions adam;
  double weight_decay = 0.0;
  std::vector<double> learning_rates;  // per call
  std::vector<double> data_scales;     // per call, the data arguments' factor

  static StepChoice draw(std::uint64_t seed, std::size_t inputs) {
    std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ULL + 7);
    const auto chance = [&](double p) {
      return std::uniform_real_distribution<>(0, 1)(random) < p;
    };
    const auto pick = [&](std::initializer_list<double> values) {
      auto it = values.begin();
      std::advance(it, std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(random));
      return *it;
    };
    StepChoice c;
    for (std::size_t i = 0; i < inputs; ++i) c.trainable.push_back(chance(0.6));
    if (std::find(c.trainable.begin(), c.trainable.end(), true) == c.trainable.end())
      c.trainable[std::uniform_int_distribution<std::size_t>(0, inputs - 1)(random)] = true;
    c.mean_loss = chance(0.5);
    c.clip = static_cast<int>(std::uniform_int_distribution<>(0, 2)(random));
    c.clip_norm = pick({0.01, 0.5, 10.0});
    c.optimizer = static_cast<int>(std::uniform_int_distribution<>(0, 3)(random));
    c.momentum = pick({0.0, 0.0, 0.5, 0.9});
    c.nesterov = chance(0.5);
    c.adam.beta1 = pick({0.9, 0.5, 0.0});
    c.adam.beta2 = pick({0.999, 0.9});
    c.adam.epsilon = pick({1e-7, 1e-3, 0.0});
    c.adam.pytorch_epsilon = chance(0.5);
    c.weight_decay = pick({0.0, 0.01, 0.5});
    const double rate = pick({1e-3, 1e-2, 0.1});
    for (int k = 0; k < kCalls; ++k) {
      c.learning_rates.push_back(chance(0.3) ? rate * pick({0.0, 0.5, 2.0}) : rate);
      c.data_scales.push_back(k < 2 ? 1.0 : pick({0.97, 1.0, 1.03}));
    }
    return c;
  }

  std::string describe() const {
    std::ostringstream out;
    out << (optimizer == 0   ? "SGD"
            : optimizer == 1 ? "Adam"
            : optimizer == 2 ? "AdamW"
                             : "assign_sub of rate * gradient");
    if (optimizer == 0) out << " momentum " << momentum << (nesterov ? " nesterov" : "");
    if (optimizer == 1) {
      out << " betas " << adam.beta1 << ", " << adam.beta2 << " epsilon " << adam.epsilon
          << (adam.pytorch_epsilon ? " (PyTorch's rule)" : "");
    }
    if (optimizer == 2) out << " weight decay " << weight_decay;
    out << ", learning rates";
    for (double r : learning_rates) out << " " << r;
    out << (clip == 0 ? ", no clipping" : clip == 1 ? ", clip_by_norm " : ", clip_by_global_norm ");
    if (clip != 0) out << clip_norm;
    out << (mean_loss ? ", mean" : ", half sum") << " of squares, trainable inputs";
    for (std::size_t i = 0; i < trainable.size(); ++i)
      if (trainable[i]) out << " " << i;
    return out.str();
  }
};

// The step's optimizer; none for the hand-written descent.
std::unique_ptr<Optimizer> make_optimizer(const StepChoice& c) {
  if (c.optimizer == 3) return nullptr;
  if (c.optimizer == 0) return std::make_unique<SGD>(c.learning_rates[0], c.momentum, c.nesterov);
  if (c.optimizer == 1) {
    AdamOptions options = c.adam;
    options.learning_rate = c.learning_rates[0];
    return std::make_unique<Adam>(options);
  }
  return std::make_unique<AdamW>(c.learning_rates[0], c.weight_decay);
}

// One side of the comparison: its Variables, its optimizer and the step fn over them.
struct Trainer {
  std::vector<Variable> variables;
  std::unique_ptr<Optimizer> optimizer;
  Variable rate;  // the hand-written descent's, read by fn: a schedule changes it between calls

  Trainer(const RandomGraph& graph, const StepChoice& choice)
      : optimizer(make_optimizer(choice)),
        rate(scalar(choice.learning_rates[0], graph.inputs()[0].dtype()), false, "rate") {
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      if (choice.trainable[i]) {
        variables.emplace_back(graph.inputs()[i], true, "input" + std::to_string(i));
      }
    }
  }

  // The loss, then the (clipped) gradients the optimizer applied.
  std::vector<Tensor> step(const RandomGraph& graph, const StepChoice& choice,
                           const std::vector<Tensor>& data) {
    GradientTape tape;
    std::vector<Tensor> point;
    std::size_t next_variable = 0, next_data = 0;
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      point.push_back(choice.trainable[i] ? variables[next_variable++].value() : data[next_data++]);
    }
    const Tensor y = graph.evaluate(point);
    const Tensor squares = square(y);
    const Tensor loss = choice.mean_loss ? reduce_mean(squares)
                                         : multiply(reduce_sum(squares), scalar(0.5, y.dtype()));
    std::vector<Tensor> gradients = tape.gradient(loss, variables, UnconnectedGradients::Zero);
    if (choice.clip == 1) {
      for (Tensor& g : gradients) g = clip_by_norm(g, choice.clip_norm);
    } else if (choice.clip == 2) {
      gradients = clip_by_global_norm(gradients, choice.clip_norm).first;
    }
    std::vector<std::pair<Tensor, Variable>> pairs;
    for (std::size_t v = 0; v < variables.size(); ++v)
      pairs.emplace_back(gradients[v], variables[v]);
    if (optimizer != nullptr) {
      optimizer->apply_gradients(pairs);
    } else {
      for (std::size_t v = 0; v < variables.size(); ++v) {
        variables[v].assign_sub(multiply(gradients[v], rate.value()));
      }
    }
    std::vector<Tensor> results{loss};
    results.insert(results.end(), gradients.begin(), gradients.end());
    return results;
  }

  void set_learning_rate(int kind, double learning_rate) {
    if (kind == 0) static_cast<SGD&>(*optimizer).set_learning_rate(learning_rate);
    if (kind == 1) static_cast<Adam&>(*optimizer).set_learning_rate(learning_rate);
    if (kind == 2) static_cast<AdamW&>(*optimizer).set_learning_rate(learning_rate);
    if (kind == 3) rate.assign(scalar(learning_rate, rate.value().dtype()));
  }

  // Each Variable's value, then each slot of each Variable (none before the first step).
  std::vector<Tensor> state() const {
    std::vector<Tensor> s;
    for (const Variable& v : variables) s.push_back(v.value());
    if (optimizer == nullptr || optimizer->iterations() == 0) return s;
    for (const std::string& name : optimizer->slot_names()) {
      for (const Variable& v : variables) s.push_back(optimizer->slot(v, name));
    }
    return s;
  }
};

// A tensor a caller holds, with its bytes when it was handed over.
struct Held {
  std::string what;
  Tensor tensor;
  std::string bytes;
};

}  // namespace

TEST_CASE(
    "function, random training steps: every call of a Function of a step equals the eager step "
    "bit for bit, and no tensor handed out or read before a call changes",
    "[function][optim][fuzz]") {
  const std::uint64_t first_seed = env_or("TAPEGRAD_FUZZ_SEED", kDefaultSeed);
  const std::uint64_t programs = env_or("TAPEGRAD_FUZZ_PROGRAMS", kDefaultPrograms);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t compared = 0, held_checked = 0, both_threw = 0;
  FuzzFailures failures;
  for (std::uint64_t n = 0; n < programs; ++n) {
    const std::uint64_t seed = first_seed + n;
    const DType dtype = n % 2 == 0 ? DType::Float64 : DType::Float32;
    // Every fourth model is a long graph: more values for the replay's memory plan to place.
    const bool long_graph = n % 4 == 3;
    const RandomGraph graph =
        RandomGraph::generate(seed, dtype, long_graph ? 20 : 3, long_graph ? 60 : 12);
    const StepChoice choice = StepChoice::draw(seed, graph.inputs().size());
    std::vector<Tensor> data;
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      if (!choice.trainable[i]) data.push_back(graph.inputs()[i]);
    }
    Trainer traced(graph, choice), eager(graph, choice);
    const std::string failure = failure_of([&]() -> std::string {
      const Function f = function(
          [&](const std::vector<Tensor>& args) { return traced.step(graph, choice, args); });
      std::vector<Held> held;
      const auto hold = [&](const std::string& what, const Tensor& t) {
        held.push_back({what, t, element_bytes(t)});
      };
      for (int k = 0; k < kCalls; ++k) {
        traced.set_learning_rate(choice.optimizer, choice.learning_rates[k]);
        eager.set_learning_rate(choice.optimizer, choice.learning_rates[k]);
        std::vector<Tensor> args;
        for (const Tensor& x : data)
          args.push_back(multiply(x, scalar(choice.data_scales[k], dtype)));
        for (std::size_t i = 0; i < args.size(); ++i) {
          hold("call " + std::to_string(k) + "'s argument " + std::to_string(i), args[i]);
        }
        const std::vector<Tensor> before = traced.state();
        for (std::size_t i = 0; i < before.size(); ++i) {
          hold("call " + std::to_string(k) + "'s state " + std::to_string(i) + " before it",
               before[i]);
        }
        // The eager step's own in-place writes (the walk's sums, the optimizer's update) have
        // the same duty.
        const std::vector<Tensor> eager_before = eager.state();
        for (std::size_t i = 0; i < eager_before.size(); ++i) {
          hold("eager step " + std::to_string(k) + "'s state " + std::to_string(i) + " before it",
               eager_before[i]);
        }
        // A step may throw (parameters driven to NaN reach a linear-algebra op that refuses
        // them): then the eager step must throw the same error, and the program ends there.
        std::vector<Tensor> got, expected;
        std::string got_error, expected_error;
        try {
          got = f(args);
        } catch (const std::exception& e) {
          got_error = e.what();
        }
        try {
          expected = eager.step(graph, choice, args);
        } catch (const std::exception& e) {
          expected_error = e.what();
        }
        ++compared;
        if (got_error != expected_error) {
          return "call " + std::to_string(k) + ": the Function " +
                 (got_error.empty() ? "returned" : "threw \"" + got_error + "\"") +
                 ", the eager step " +
                 (expected_error.empty() ? "returned" : "threw \"" + expected_error + "\"");
        }
        if (!got_error.empty()) {
          ++both_threw;
          break;
        }
        std::string difference = first_difference(got, expected);
        if (difference.empty()) difference = first_difference(traced.state(), eager.state());
        if (!difference.empty()) {
          return "call " + std::to_string(k) + ": " + difference +
                 " (results: the loss, then each gradient; state: each Variable, then each slot)";
        }
        for (std::size_t i = 0; i < got.size(); ++i) {
          hold("call " + std::to_string(k) + "'s result " + std::to_string(i), got[i]);
          hold("eager step " + std::to_string(k) + "'s result " + std::to_string(i), expected[i]);
        }
        for (const Held& h : held) {
          ++held_checked;
          if (element_bytes(h.tensor) != h.bytes) {
            return h.what + " changed after call " + std::to_string(k);
          }
        }
      }
      return f.trace_count() == 1 ? "" : std::to_string(f.trace_count()) + " traces";
    });
    if (!failure.empty()) {
      failures.add("seed " + std::to_string(seed) + " " + dtype_name(dtype) + " (" +
                   choice.describe() + "): " + failure + "\n" + graph.describe() +
                   "  reproduce: TAPEGRAD_FUZZ_SEED=" + std::to_string(seed) +
                   " TAPEGRAD_FUZZ_PROGRAMS=1 test_function_random_training\n");
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "random training steps: " << programs << " programs (seeds " << first_seed << ".."
            << first_seed + programs - 1 << "), " << compared << " calls compared, " << held_checked
            << " held tensors checked, " << both_threw
            << " programs ended by the same error on both sides, " << failures.count << " failed, "
            << seconds << " s\n";
  INFO(failures.first);
  REQUIRE(failures.count == 0);
}
