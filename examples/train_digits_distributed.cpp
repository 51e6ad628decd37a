// train_digits_distributed: train_digits' MLP trained data-parallel over MPI.
//
// Every rank loads the same data and shuffles it with the same seed; each global mini-batch
// of 32 images is split into one shard per rank (uneven when 32 is not a multiple of the
// rank count). A rank's loss is the cross-entropy summed over its shard divided by the
// global batch size, so the ranks' gradients summed (BucketedAllreduce, Reduction::Sum)
// are the whole batch's mean-loss gradient, and every rank applies the same Adam update.
// The initial weights are rank 0's (broadcast).
//
//   mpirun -np 2 ./train_digits_distributed [--epochs N] [--seed N] [--dtype float32|float64]
//                                           [--data PATH] [--check]
//
// --check also trains the single-process model (whole batches, no MPI) on every rank and
// exits non-zero unless the weights agree to 1e-6 and the test accuracies are equal.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

#include "digits_data.hpp"

namespace tg = tapegrad;
namespace td = tapegrad::distributed;

#ifndef TAPEGRAD_DIGITS_CSV
#define TAPEGRAD_DIGITS_CSV "examples/data/digits.csv.gz"
#endif

namespace {

constexpr std::size_t kHidden = 128;
constexpr std::size_t kBatchSize = 32;
constexpr double kLearningRate = 0.002;
constexpr double kTestFraction = 0.2;
constexpr double kTolerance = 1e-6;

struct Options {
  std::string data_path = TAPEGRAD_DIGITS_CSV;
  int epochs = 25;  // as train_digits
  std::uint32_t seed = 42;
  tg::DType dtype = tg::DType::Float64;
  bool check = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--data") {
      o.data_path = value();
    } else if (flag == "--epochs") {
      o.epochs = std::stoi(value());
    } else if (flag == "--seed") {
      o.seed = static_cast<std::uint32_t>(std::stoul(value()));
    } else if (flag == "--dtype") {
      const std::string d = value();
      if (d != "float32" && d != "float64")
        throw std::invalid_argument("--dtype float32|float64, got " + d);
      o.dtype = d == "float32" ? tg::DType::Float32 : tg::DType::Float64;
    } else if (flag == "--check") {
      o.check = true;
    } else {
      throw std::invalid_argument("unknown option '" + flag + "'");
    }
  }
  if (o.epochs < 1) throw std::invalid_argument("--epochs must be at least 1");
  return o;
}

// Pixels scaled to [0, 1] and labels.
struct Examples {
  std::vector<double> features;  // [n, 64]
  std::vector<int> labels;
};

Examples to_examples(const digits::Dataset& d) {
  Examples e;
  e.features.reserve(d.pixels.size());
  for (auto p : d.pixels) e.features.push_back(static_cast<double>(p) / digits::kMaxPixelValue);
  e.labels.assign(d.labels.begin(), d.labels.end());
  return e;
}

// Rows order[first, first + count): features [count, 64] and one-hot labels [count, 10].
std::pair<tg::Tensor, tg::Tensor> make_batch(const Examples& e,
                                             const std::vector<std::size_t>& order,
                                             std::size_t first, std::size_t count,
                                             tg::DType dtype) {
  std::vector<double> x(count * digits::kPixels);
  std::vector<double> y(count * digits::kClasses, 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t row = order[first + i];
    std::copy_n(e.features.begin() + static_cast<std::ptrdiff_t>(row * digits::kPixels),
                digits::kPixels, x.begin() + static_cast<std::ptrdiff_t>(i * digits::kPixels));
    y[i * digits::kClasses + static_cast<std::size_t>(e.labels[row])] = 1.0;
  }
  return {tg::from_values(x, {count, digits::kPixels}, dtype),
          tg::from_values(y, {count, std::size_t{digits::kClasses}}, dtype)};
}

// train_digits' model: a Module of two Dense layers (Glorot-uniform kernels, zero biases) of
// the chosen dtype.
struct Mlp : tg::Module {
  tg::layers::Dense& hidden;
  tg::layers::Dense& output;
  Mlp(tg::Generator& g, tg::DType dtype)
      : hidden(add_module("hidden", tg::layers::Dense(digits::kPixels, kHidden, g, true, dtype))),
        output(add_module("output", tg::layers::Dense(kHidden, digits::kClasses, g, true, dtype))) {
  }
  tg::Tensor logits(const tg::Tensor& x) const { return output(tg::relu(hidden(x))); }
};

double accuracy(const Mlp& model, const Examples& test, tg::DType dtype) {
  std::vector<std::size_t> order(test.labels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto [x, y] = make_batch(test, order, 0, order.size(), dtype);
  const tg::Tensor logits = tg::cast(model.logits(x), tg::DType::Float64);
  const double* row = logits.array<double>().data();
  std::size_t correct = 0;
  for (std::size_t i = 0; i < order.size(); ++i, row += digits::kClasses) {
    const auto predicted = std::max_element(row, row + digits::kClasses) - row;
    correct += predicted == test.labels[i] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(order.size());
}

struct Trained {
  std::vector<tg::Tensor> weights;
  double test_accuracy = 0;
  std::size_t steps = 0;
};

// Trains with `comm` (data-parallel: this rank's shard of every batch) or without (whole
// batches). The same seed gives the same initial weights (a tapegrad Generator) and batch
// order (a std::mt19937) either way.
Trained train(const Options& o, const Examples& train_set, const Examples& test_set,
              const td::Communicator* comm) {
  tg::Generator init_generator(o.seed);
  Mlp model(init_generator, o.dtype);
  std::mt19937 shuffle_generator(o.seed);
  const std::vector<tg::Variable> variables = model.trainable_variables();
  tg::Adam adam(kLearningRate);
  const int rank = comm != nullptr ? comm->rank() : 0;
  const int ranks = comm != nullptr ? comm->size() : 1;
  std::unique_ptr<td::BucketedAllreduce> reducer;
  if (comm != nullptr) {
    comm->broadcast(variables, 0);
    td::BucketOptions options;
    options.reduction = td::Reduction::Sum;  // each shard's loss is already / batch size
    reducer = std::make_unique<td::BucketedAllreduce>(*comm, variables, options);
  }
  std::vector<std::size_t> order(train_set.labels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t batches = (order.size() + kBatchSize - 1) / kBatchSize;
  Trained result;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffle_generator);
    double loss_sum = 0;
    for (std::size_t batch = 0; batch < batches; ++batch) {
      const std::size_t first = batch * kBatchSize;
      const std::size_t count = std::min(kBatchSize, order.size() - first);
      // This rank's rows of the batch: [r * count / n, (r + 1) * count / n).
      const std::size_t begin =
          static_cast<std::size_t>(rank) * count / static_cast<std::size_t>(ranks);
      const std::size_t end =
          static_cast<std::size_t>(rank + 1) * count / static_cast<std::size_t>(ranks);
      const auto [x, y] = make_batch(train_set, order, first + begin, end - begin, o.dtype);

      std::vector<tg::Tensor> grads;
      tg::Tensor loss;
      {
        tg::GradientTape tape;
        if (reducer) reducer->attach(tape);
        loss = tg::reduce_sum(tg::softmax_cross_entropy_with_logits(y, model.logits(x))) /
               static_cast<double>(count);
        grads = tape.gradient(loss, variables);
        if (reducer) grads = reducer->finish(grads);
      }
      std::vector<std::pair<tg::Tensor, tg::Variable>> pairs;
      for (std::size_t i = 0; i < variables.size(); ++i) pairs.emplace_back(grads[i], variables[i]);
      adam.apply_gradients(pairs);
      loss_sum += tg::cast(loss, tg::DType::Float64).item<double>();
      ++result.steps;
    }
    if (comm != nullptr) {
      loss_sum = comm->allreduce(tg::constant(loss_sum), td::Reduction::Sum).item<double>();
    }
    if (rank == 0 && comm != nullptr) {
      std::cout << "epoch " << std::setw(2) << epoch << "  train loss " << std::fixed
                << std::setprecision(4) << loss_sum / static_cast<double>(batches)
                << "  test accuracy " << std::setprecision(1)
                << 100.0 * accuracy(model, test_set, o.dtype) << "%" << std::endl;
    }
  }
  for (const auto& v : variables) result.weights.push_back(v.peek());
  result.test_accuracy = accuracy(model, test_set, o.dtype);
  return result;
}

double max_abs_difference(const tg::Tensor& a, const tg::Tensor& b) {
  const tg::Tensor d =
      tg::reduce_max(tg::abs(tg::cast(a, tg::DType::Float64) - tg::cast(b, tg::DType::Float64)));
  return d.item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    const td::Communicator comm = td::Communicator::world();
    const digits::Dataset all = digits::load_csv(o.data_path);
    const digits::Split split = digits::split_train_test(all, kTestFraction, o.seed);
    const Examples train_set = to_examples(split.train);
    const Examples test_set = to_examples(split.test);
    if (comm.rank() == 0) {
      std::cout << "train_digits_distributed: " << comm.size() << " rank(s), global batch "
                << kBatchSize << " split into " << comm.size() << " shard(s), "
                << (o.dtype == tg::DType::Float64 ? "float64" : "float32") << ", " << o.epochs
                << " epoch(s), seed " << o.seed << std::endl;
    }
    const Trained distributed = train(o, train_set, test_set, &comm);
    if (comm.rank() == 0) {
      std::cout << "final test accuracy " << std::fixed << std::setprecision(1)
                << 100.0 * distributed.test_accuracy << "% after " << distributed.steps << " steps"
                << std::endl;
    }
    if (!o.check) return 0;

    const Trained single = train(o, train_set, test_set, nullptr);
    double worst = 0;
    for (std::size_t i = 0; i < single.weights.size(); ++i) {
      worst = std::max(worst, max_abs_difference(distributed.weights[i], single.weights[i]));
    }
    const bool ok = worst <= kTolerance && distributed.test_accuracy == single.test_accuracy;
    // Every rank checks its own weights; the verdict is the worst rank's.
    const double worst_all = comm.allreduce(tg::constant(worst), td::Reduction::Sum).item<double>();
    const double failures =
        comm.allreduce(tg::constant(ok ? 0.0 : 1.0), td::Reduction::Sum).item<double>();
    if (comm.rank() == 0) {
      std::cout << std::scientific << std::setprecision(2) << "check: after " << single.steps
                << " steps, max |w_distributed - w_single| = " << worst
                << " on rank 0 (sum over ranks " << worst_all << "), test accuracy " << std::fixed
                << std::setprecision(2) << 100.0 * distributed.test_accuracy << "% vs "
                << 100.0 * single.test_accuracy << "%: " << (failures == 0 ? "same" : "DIFFERENT")
                << std::endl;
    }
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "train_digits_distributed: error: " << e.what() << "\n";
    return 1;
  }
}
