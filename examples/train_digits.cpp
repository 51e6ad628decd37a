// train_digits: trains a small neural network to read handwritten digits.
//
// An MLP 64-128-10 (ReLU hidden layer; a tapegrad::Module of two layers::Dense) with softmax
// cross-entropy and Adam, on the UCI "Optical Recognition of Handwritten Digits" data (1797
// 8x8 images, see examples/data/).
// 80 % of the images (shuffled with a fixed seed) train the network in mini-batches of 32;
// the other 20 % measure its accuracy after every epoch. Prints a progress bar per epoch,
// writes the curve (loss and accuracy per epoch) to a CSV file and, when gnuplot is
// installed, a PNG plot of it next to the CSV.
//
//   ./train_digits [--data PATH] [--curve PATH] [--epochs N] [--seed N] [--min-accuracy A]
//       [--check-gradients] [--checkpoint PATH] [--function]
//
// With --function each training step is one tapegrad::Function: traced once per batch shape,
// then replayed (the same numbers, without the per-call recording and backward walk).
//
// With --checkpoint the run is saved after every epoch (a tapegrad::Checkpoint of the model,
// Adam and the epoch count) and resumed from the file when it exists: stop it at any moment,
// start it again with the same flags, and it ends with the uninterrupted run's weights.
//
// Everything is float32 and deterministic: the same seed gives the same numbers.
#include <unistd.h>  // isatty

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "digits_batches.hpp"
#include "digits_data.hpp"
#include "gradient_probe.hpp"
#include "training_report.hpp"

namespace tg = tapegrad;

#ifndef TAPEGRAD_DIGITS_CSV
#define TAPEGRAD_DIGITS_CSV "examples/data/digits.csv.gz"
#endif

namespace {

using digits::EpochResult;
using digits::Examples;
using digits::ProgressBar;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHidden = 128;
constexpr std::size_t kBatchSize = 32;
constexpr double kLearningRate = 0.002;
constexpr double kTestFraction = 0.2;
constexpr double kGoalAccuracy = 0.95;

// The defaults of the command line (see digits::usage).
digits::TrainingOptions default_options() {
  digits::TrainingOptions options;
  options.data_path = TAPEGRAD_DIGITS_CSV;
  options.curve_path = "train_digits_curve.csv";
  options.epochs = 25;
  options.checkpoint_supported = true;
  options.function_supported = true;
  return options;
}

// The network: logits = relu(x W1 + b1) W2 + b2, a Module made of two Dense layers. The layers
// own their Variables (kernel and bias, Glorot-uniform and zeros); add_module registers each
// layer under a name, so model.trainable_variables() lists all four for the tape and the
// optimizer ("hidden/kernel", "hidden/bias", "output/kernel", "output/bias").
struct Mlp : tg::Module {
  tg::layers::Dense& hidden;  // 64 -> 128
  tg::layers::Dense& output;  // 128 -> 10

  explicit Mlp(tg::Generator& generator)
      : hidden(add_module("hidden", tg::layers::Dense(digits::kPixels, kHidden, generator))),
        output(add_module("output", tg::layers::Dense(kHidden, digits::kClasses, generator))) {}

  // x [batch, 64] -> logits [batch, 10]. Reading the layers' Variables inside a tape's scope
  // is what lets the tape differentiate with respect to them.
  tg::Tensor logits(const tg::Tensor& x) const { return output(tg::relu(hidden(x))); }
};

int run(const digits::TrainingOptions& options) {
  const auto start = Clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };

  std::ofstream curve_file = digits::open_curve_csv(options.curve_path);

  // 1. Data: load, split 80/20 with the seed, scale the pixels to [0, 1].
  const digits::Dataset all = digits::load_csv(options.data_path);
  const digits::Split split = digits::split_train_test(all, kTestFraction, options.seed);
  const Examples train = digits::to_examples(split.train);
  const Examples test = digits::to_examples(split.test);
  std::cout << "digits: " << all.size() << " images from " << options.data_path << "; "
            << train.labels.size() << " to train, " << test.labels.size() << " to test\n"
            << "model: MLP 64-" << kHidden << "-10 (ReLU), softmax cross-entropy, Adam(lr "
            << kLearningRate << "), batch " << kBatchSize << ", " << options.epochs
            << " epochs, seed " << options.seed
            << (options.use_function ? ", each step one tapegrad::Function" : "") << "\n";

  // The test set as one batch, in its own order.
  std::vector<std::size_t> test_order(test.labels.size());
  std::iota(test_order.begin(), test_order.end(), std::size_t{0});
  // Named copies rather than a structured binding: a lambda below captures them, which C++17
  // does not allow for a binding (GCC accepts it, Clang does not).
  const std::pair<tg::Tensor, tg::Tensor> test_batch =
      digits::make_batch(test, test_order, 0, test_order.size());
  const tg::Tensor test_x = test_batch.first;
  const tg::Tensor test_y = test_batch.second;

  // 2. Model and optimizer. A tapegrad Generator draws the initial weights and a std::mt19937
  //    the shuffles (std::shuffle needs a standard generator), both seeded with --seed, so a
  //    run is reproducible.
  tg::Generator init_generator(options.seed);
  Mlp model(init_generator);
  std::mt19937 shuffle_generator(options.seed);
  tg::Adam adam(kLearningRate);
  const std::vector<tg::Variable> variables = model.trainable_variables();

  ProgressBar progress(isatty(STDOUT_FILENO) != 0);
  std::vector<EpochResult> curve;
  double goal_reached_at = -1.0;
  int goal_epoch = 0;
  std::vector<std::size_t> order(train.labels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t batches = (order.size() + kBatchSize - 1) / kBatchSize;

  // 3. With --checkpoint: everything that steers the rest of the run (the weights, Adam's
  //    moments and step count, the epochs done) in one file, saved after every epoch. A run
  //    started again with the same --checkpoint resumes where the file left off and ends with
  //    the weights the uninterrupted run ends with, bit for bit.
  tg::Variable epochs_done(tg::zeros({}, tg::DType::Int64), /*trainable=*/false, "epochs_done");
  tg::Checkpoint checkpoint;
  checkpoint.track("model", model).track("adam", adam).track("epochs_done", epochs_done);
  int first_epoch = 1;
  if (!options.checkpoint_path.empty() && std::filesystem::exists(options.checkpoint_path)) {
    checkpoint.restore(options.checkpoint_path);
    const auto done = static_cast<int>(epochs_done.peek().item<std::int64_t>());
    // The shuffles come from a std::mt19937 the checkpoint cannot hold; they depend on the
    // seed only, so replaying the finished epochs' shuffles restores the data order.
    for (int epoch = 1; epoch <= done; ++epoch)
      std::shuffle(order.begin(), order.end(), shuffle_generator);
    first_epoch = done + 1;
    std::cout << "resumed from " << options.checkpoint_path << " after epoch " << done << "\n";
    if (first_epoch > options.epochs) {
      std::cout << "nothing to train: the checkpoint has " << done << " epochs, --epochs is "
                << options.epochs << "\n";
      return 0;
    }
  }

  // 4. One training step on a batch (x, y): the loss and the logits, Adam's update done.
  auto training_step = [&](const std::vector<tg::Tensor>& batch) {
    const tg::Tensor& x = batch[0];
    const tg::Tensor& y = batch[1];
    tg::Tensor logits, loss;
    std::vector<tg::Tensor> grads;
    {
      // The tape records the forward pass (it watches the Variables the model reads)...
      tg::GradientTape tape;
      logits = model.logits(x);
      loss = tg::reduce_mean(tg::softmax_cross_entropy_with_logits(y, logits));
      // ...and walks it backwards: d loss / d each variable.
      grads = tape.gradient(loss, variables);
    }
    std::vector<std::pair<tg::Tensor, tg::Variable>> grads_and_vars;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      grads_and_vars.emplace_back(grads[i], variables[i]);
    }
    adam.apply_gradients(grads_and_vars);
    return std::vector<tg::Tensor>{loss, logits};
  };
  // With --function: the same step traced on the first batch of each shape (the last batch
  // of an epoch is smaller) and replayed after: the same ops, with no tape or backward walk.
  const tg::Function traced_training_step = tg::function(training_step);

  // 5. Training: one pass over the shuffled training set per epoch.
  for (int epoch = first_epoch; epoch <= options.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffle_generator);
    double loss_sum = 0.0;
    std::size_t correct = 0;
    for (std::size_t batch = 0; batch < batches; ++batch) {
      const std::size_t first = batch * kBatchSize;
      const std::size_t count = std::min(kBatchSize, order.size() - first);
      const auto [x, y] = digits::make_batch(train, order, first, count);

      const std::vector<tg::Tensor> step =
          options.use_function ? traced_training_step({x, y}) : training_step({x, y});
      const tg::Tensor& loss = step[0];
      const tg::Tensor& logits = step[1];

      loss_sum += loss.item<float>();
      correct += digits::count_correct(logits, train.labels, order, first);
      progress.update(epoch, options.epochs, batch + 1, batches,
                      loss_sum / static_cast<double>(batch + 1));
    }

    // Evaluation: no tape is active, so nothing is recorded.
    const tg::Tensor test_logits = model.logits(test_x);
    const double test_loss =
        tg::reduce_mean(tg::softmax_cross_entropy_with_logits(test_y, test_logits)).item<float>();
    const double test_accuracy =
        static_cast<double>(digits::count_correct(test_logits, test.labels, test_order, 0)) /
        static_cast<double>(test.labels.size());

    EpochResult result{epoch,
                       loss_sum / static_cast<double>(batches),
                       static_cast<double>(correct) / static_cast<double>(order.size()),
                       test_loss,
                       test_accuracy,
                       seconds_since_start()};
    curve.push_back(result);
    progress.finish(options.epochs, result, batches);
    if (epoch == 1 && options.check_gradients) {
      // After one epoch, when the zero-initialised biases have left ReLU's kink (at a kink a
      // central difference sees the mean of both slopes). The test loss without dropout is
      // deterministic.
      const int status = digits::check_gradients(
          [&] {
            return tg::reduce_mean(
                tg::softmax_cross_entropy_with_logits(test_y, model.logits(test_x)));
          },
          model, options.seed);
      if (status != 0) return status;
    }
    if (goal_reached_at < 0.0 && test_accuracy >= kGoalAccuracy) {
      goal_reached_at = result.seconds;
      goal_epoch = epoch;
    }
    if (!options.checkpoint_path.empty()) {
      epochs_done.assign(tg::fill({}, epoch, tg::DType::Int64));
      checkpoint.save(options.checkpoint_path);  // atomic: a crash keeps the previous epoch's
    }
  }
  const double total_seconds = seconds_since_start();

  // 6. Report, curve CSV, plot.
  const EpochResult& last = curve.back();
  std::cout << std::fixed << std::setprecision(1) << "final test accuracy "
            << 100.0 * last.test_accuracy << "% (" << test.labels.size() << " held-out images)\n";
  if (goal_reached_at >= 0.0) {
    std::cout << std::setprecision(0) << "reached " << 100.0 * kGoalAccuracy
              << "% test accuracy at epoch " << goal_epoch << ", " << std::setprecision(2)
              << goal_reached_at << " s after start\n";
  } else {
    std::cout << std::setprecision(0) << "did not reach " << 100.0 * kGoalAccuracy
              << "% test accuracy\n";
  }
  std::cout << std::setprecision(2) << "wall time " << total_seconds
            << " s (loading, training and evaluation)\n";

  digits::write_curve_csv(curve_file, options.curve_path, curve);
  curve_file.close();  // gnuplot reads it next
  std::cout << "curve written to " << options.curve_path << "\n";
  const std::string png_path = digits::png_path_for(options.curve_path);
  if (digits::plot_curve(options.curve_path, png_path,
                         "train_digits: MLP 64-128-10, Adam, UCI digits")) {
    std::cout << "plot written to " << png_path << "\n";
  } else {
    std::cout << "(no plot: gnuplot is not installed or failed)\n";
  }
  return digits::accuracy_status(options, last.test_accuracy);
}

}  // namespace

int main(int argc, char** argv) {
  return digits::run_training_main(argc, argv, default_options(), "train_digits", run);
}
