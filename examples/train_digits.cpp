// train_digits: trains a small neural network to read handwritten digits.
//
// An MLP 64-128-10 (ReLU hidden layer) with softmax cross-entropy and Adam, on the UCI
// "Optical Recognition of Handwritten Digits" data (1797 8x8 images, see examples/data/).
// 80 % of the images (shuffled with a fixed seed) train the network in mini-batches of 32;
// the other 20 % measure its accuracy after every epoch. Prints a progress bar per epoch,
// writes the curve (loss and accuracy per epoch) to a CSV file and, when gnuplot is
// installed, a PNG plot of it next to the CSV.
//
//   ./train_digits [--data PATH] [--curve PATH] [--epochs N] [--seed N]
//
// Everything is float32 and deterministic: the same seed gives the same numbers.
#include <unistd.h>  // isatty

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "digits_data.hpp"

namespace tg = tapegrad;

#ifndef TAPEGRAD_DIGITS_CSV
#define TAPEGRAD_DIGITS_CSV "examples/data/digits.csv.gz"
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kHidden = 128;
constexpr std::size_t kBatchSize = 32;
constexpr double kLearningRate = 0.002;
constexpr double kTestFraction = 0.2;
constexpr double kGoalAccuracy = 0.95;

struct Options {
  std::string data_path = TAPEGRAD_DIGITS_CSV;
  std::string curve_path = "train_digits_curve.csv";
  int epochs = 25;
  std::uint32_t seed = 42;
  bool help = false;
};

// A bad command line: main prints the message and the usage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* const kUsage =
    "usage: train_digits [--data PATH] [--curve PATH] [--epochs N] [--seed N]\n"
    "  --data PATH    digits CSV, gzip or plain (default: " TAPEGRAD_DIGITS_CSV ")\n"
    "  --curve PATH   where to write the loss/accuracy curve (default: train_digits_curve.csv;\n"
    "                 a PNG plot goes next to it when gnuplot is installed)\n"
    "  --epochs N     passes over the training set (default: 25)\n"
    "  --seed N       seed of the split, the shuffles and the initial weights (default: 42)\n";

int parse_int(const std::string& flag, const std::string& text, int min_value) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < min_value) {
    throw UsageError(flag + " needs an integer >= " + std::to_string(min_value) +
                                ", got '" + text + "'");
  }
  return value;
}

// Accepts "--flag value" and "--flag=value".
Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    const auto equals = flag.find('=');
    if (equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    } else if (flag != "--help" && flag != "-h") {
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      value = argv[++i];
    }
    if (flag == "--help" || flag == "-h") {
      options.help = true;
    } else if (flag == "--data") {
      options.data_path = value;
    } else if (flag == "--curve") {
      options.curve_path = value;
    } else if (flag == "--epochs") {
      options.epochs = parse_int(flag, value, 1);
    } else if (flag == "--seed") {
      options.seed = static_cast<std::uint32_t>(parse_int(flag, value, 0));
    } else {
      throw UsageError("unknown option '" + flag + "'");
    }
  }
  return options;
}

// The images as a float32 [n, 64] tensor scaled to [0, 1], the labels as class indices.
struct Examples {
  xt::xarray<float> features;
  std::vector<int> labels;
};

Examples to_examples(const digits::Dataset& data) {
  Examples out;
  out.features = xt::xarray<float>::from_shape({data.size(), digits::kPixels});
  std::transform(data.pixels.begin(), data.pixels.end(), out.features.begin(),
                 [](std::uint8_t p) { return static_cast<float>(p) / digits::kMaxPixelValue; });
  out.labels.assign(data.labels.begin(), data.labels.end());
  return out;
}

// Rows `order[first, first + count)` of the examples: features [count, 64] and one-hot
// labels [count, 10], as the loss expects them.
std::pair<tg::Tensor, tg::Tensor> make_batch(const Examples& examples,
                                             const std::vector<std::size_t>& order,
                                             std::size_t first, std::size_t count) {
  auto features = xt::xarray<float>::from_shape({count, digits::kPixels});
  xt::xarray<float> one_hot = xt::zeros<float>({count, std::size_t{digits::kClasses}});
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t row = order[first + i];
    std::copy_n(examples.features.data() + row * digits::kPixels, digits::kPixels,
                features.data() + i * digits::kPixels);
    one_hot(i, static_cast<std::size_t>(examples.labels[row])) = 1.0f;
  }
  return {tg::Tensor(std::move(features)), tg::Tensor(std::move(one_hot))};
}

// Glorot (Xavier) uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)), as Keras' default.
tg::Tensor glorot_uniform(std::size_t fan_in, std::size_t fan_out, std::mt19937& generator) {
  const float limit = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
  std::uniform_real_distribution<float> uniform(-limit, limit);
  auto weights = xt::xarray<float>::from_shape({fan_in, fan_out});
  for (float& w : weights) w = uniform(generator);
  return tg::Tensor(std::move(weights));
}

// The network: logits = relu(x W1 + b1) W2 + b2. Reading the Variables inside a tape's scope
// is what lets the tape differentiate with respect to them.
struct Mlp {
  tg::Variable w1, b1, w2, b2;

  explicit Mlp(std::mt19937& generator)
      : w1(glorot_uniform(digits::kPixels, kHidden, generator), true, "w1"),
        b1(tg::zeros({kHidden}, tg::DType::Float32), true, "b1"),
        w2(glorot_uniform(kHidden, digits::kClasses, generator), true, "w2"),
        b2(tg::zeros({std::size_t{digits::kClasses}}, tg::DType::Float32), true, "b2") {}

  tg::Tensor logits(const tg::Tensor& x) const {
    const tg::Tensor hidden = tg::relu(tg::matmul(x, w1) + b1);  // [batch, 128]
    return tg::matmul(hidden, w2) + b2;                          // [batch, 10]
  }
  std::vector<tg::Variable> variables() const { return {w1, b1, w2, b2}; }
};

// Rows whose largest logit is at the label's index.
std::size_t count_correct(const tg::Tensor& logits, const std::vector<int>& labels,
                          const std::vector<std::size_t>& order, std::size_t first) {
  const auto& values = logits.array<float>();
  const std::size_t rows = values.shape()[0];
  std::size_t correct = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const float* row = values.data() + i * digits::kClasses;
    const auto predicted = std::max_element(row, row + digits::kClasses) - row;
    if (predicted == labels[order[first + i]]) ++correct;
  }
  return correct;
}

struct EpochResult {
  int epoch;
  double train_loss;      // mean over the epoch's batches, measured while training
  double train_accuracy;  // on the same batches, before each update
  double test_loss;
  double test_accuracy;
  double seconds;         // since the program started
};

// Draws "[#####.....]  batch 12/45" on a terminal; when stdout is a file or a pipe it draws
// nothing and the caller prints one line per epoch.
class ProgressBar {
 public:
  explicit ProgressBar(bool interactive) : interactive_(interactive) {}

  void update(int epoch, int epochs, std::size_t done, std::size_t total, double loss) {
    if (!interactive_) return;
    std::cout << '\r' << prefix(epoch, epochs) << bar(done, total) << "  loss "
              << std::fixed << std::setprecision(4) << loss << "   " << std::flush;
  }
  void finish(int epochs, const EpochResult& r, std::size_t total) {
    if (interactive_) std::cout << '\r';
    std::cout << prefix(r.epoch, epochs) << bar(total, total) << std::fixed
              << std::setprecision(4) << "  loss " << r.train_loss << std::setprecision(1)
              << "  train acc " << std::setw(5) << 100.0 * r.train_accuracy << "%"
              << "  test acc " << std::setw(5) << 100.0 * r.test_accuracy << "%"
              << std::setprecision(2) << "  " << r.seconds << " s" << std::endl;
  }

 private:
  static std::string prefix(int epoch, int epochs) {
    std::ostringstream out;
    const int width = static_cast<int>(std::to_string(epochs).size());
    out << "epoch " << std::setw(width) << epoch << "/" << epochs << " ";
    return out.str();
  }
  static std::string bar(std::size_t done, std::size_t total) {
    constexpr std::size_t kWidth = 20;
    const std::size_t filled = total == 0 ? kWidth : done * kWidth / total;
    return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
  }
  bool interactive_;
};

// Opened before training, so that a bad path fails at once rather than after the run.
std::ofstream open_curve_csv(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot open the curve file for writing");
  return out;
}

void write_curve_csv(std::ofstream& out, const std::string& path,
                     const std::vector<EpochResult>& curve) {
  out << "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds\n";
  out << std::setprecision(6);
  for (const auto& r : curve) {
    out << r.epoch << ',' << r.train_loss << ',' << r.train_accuracy << ',' << r.test_loss
        << ',' << r.test_accuracy << ',' << r.seconds << '\n';
  }
  if (!out.flush()) throw std::runtime_error(path + ": cannot write the curve file");
}

// A gnuplot string literal: single quotes, where '' stands for one quote.
std::string gnuplot_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += (c == '\'') ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Plots the curve CSV into a PNG with gnuplot, when it is installed. Returns whether it did.
bool plot_curve(const std::string& csv_path, const std::string& png_path) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  FILE* gnuplot = popen("gnuplot", "w");
  if (gnuplot == nullptr) return false;
  const std::string script =
      // pngcairo draws nicer lines; the plain png terminal is the fallback.
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo size 900,520 noenhanced\n"
      "} else {\n"
      "  set terminal png size 900,520 noenhanced\n"
      "}\n"
      "set output " + gnuplot_quoted(png_path) + "\n"
      "set datafile separator ','\n"
      "set datafile columnheaders\n"
      "set title 'train_digits: MLP 64-128-10, Adam, UCI digits'\n"
      "set xlabel 'epoch'\n"
      "set ylabel 'loss (cross-entropy)'\n"
      "set y2label 'accuracy'\n"
      "set y2range [*:1]\n"
      "set ytics nomirror\n"
      "set y2tics\n"
      "set grid\n"
      "set key center right\n"
      "plot " + gnuplot_quoted(csv_path) +
      " using 1:2 with linespoints title 'train loss' axes x1y1,"
      " '' using 1:4 with linespoints title 'test loss' axes x1y1,"
      " '' using 1:3 with linespoints title 'train accuracy' axes x1y2,"
      " '' using 1:5 with linespoints title 'test accuracy' axes x1y2\n";
  std::fputs(script.c_str(), gnuplot);
  return pclose(gnuplot) == 0;
}

// "train_digits_curve.csv" -> "train_digits_curve.png"
std::string png_path_for(const std::string& csv_path) {
  const auto slash = csv_path.find_last_of('/');
  const auto dot = csv_path.find_last_of('.');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_extension ? csv_path.substr(0, dot) : csv_path) + ".png";
}

int run(const Options& options) {
  const auto start = Clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };

  std::ofstream curve_file = open_curve_csv(options.curve_path);

  // 1. Data: load, split 80/20 with the seed, scale the pixels to [0, 1].
  const digits::Dataset all = digits::load_csv(options.data_path);
  const digits::Split split = digits::split_train_test(all, kTestFraction, options.seed);
  const Examples train = to_examples(split.train);
  const Examples test = to_examples(split.test);
  std::cout << "digits: " << all.size() << " images from " << options.data_path << "; "
            << train.labels.size() << " to train, " << test.labels.size() << " to test\n"
            << "model: MLP 64-" << kHidden << "-10 (ReLU), softmax cross-entropy, Adam(lr "
            << kLearningRate << "), batch " << kBatchSize << ", " << options.epochs
            << " epochs, seed " << options.seed << "\n";

  // The test set as one batch, in its own order.
  std::vector<std::size_t> test_order(test.labels.size());
  std::iota(test_order.begin(), test_order.end(), std::size_t{0});
  const auto [test_x, test_y] = make_batch(test, test_order, 0, test_order.size());

  // 2. Model and optimizer. One generator, seeded once, drives the initial weights and the
  //    shuffles, so a run is reproducible.
  std::mt19937 generator(options.seed);
  Mlp model(generator);
  tg::Adam adam(kLearningRate);
  const std::vector<tg::Variable> variables = model.variables();

  ProgressBar progress(isatty(STDOUT_FILENO) != 0);
  std::vector<EpochResult> curve;
  double goal_reached_at = -1.0;
  int goal_epoch = 0;
  std::vector<std::size_t> order(train.labels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t batches = (order.size() + kBatchSize - 1) / kBatchSize;

  // 3. Training: one pass over the shuffled training set per epoch.
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), generator);
    double loss_sum = 0.0;
    std::size_t correct = 0;
    for (std::size_t batch = 0; batch < batches; ++batch) {
      const std::size_t first = batch * kBatchSize;
      const std::size_t count = std::min(kBatchSize, order.size() - first);
      const auto [x, y] = make_batch(train, order, first, count);

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

      loss_sum += loss.item<float>();
      correct += count_correct(logits, train.labels, order, first);
      progress.update(epoch, options.epochs, batch + 1, batches,
                      loss_sum / static_cast<double>(batch + 1));
    }

    // Evaluation: no tape is active, so nothing is recorded.
    const tg::Tensor test_logits = model.logits(test_x);
    const double test_loss =
        tg::reduce_mean(tg::softmax_cross_entropy_with_logits(test_y, test_logits)).item<float>();
    const double test_accuracy =
        static_cast<double>(count_correct(test_logits, test.labels, test_order, 0)) /
        static_cast<double>(test.labels.size());

    EpochResult result{epoch,
                       loss_sum / static_cast<double>(batches),
                       static_cast<double>(correct) / static_cast<double>(order.size()),
                       test_loss,
                       test_accuracy,
                       seconds_since_start()};
    curve.push_back(result);
    progress.finish(options.epochs, result, batches);
    if (goal_reached_at < 0.0 && test_accuracy >= kGoalAccuracy) {
      goal_reached_at = result.seconds;
      goal_epoch = epoch;
    }
  }
  const double total_seconds = seconds_since_start();

  // 4. Report, curve CSV, plot.
  const EpochResult& last = curve.back();
  std::cout << std::fixed << std::setprecision(1) << "final test accuracy "
            << 100.0 * last.test_accuracy << "% (" << test.labels.size()
            << " held-out images)\n";
  if (goal_reached_at >= 0.0) {
    std::cout << std::setprecision(0) << "reached " << 100.0 * kGoalAccuracy
              << "% test accuracy at epoch " << goal_epoch << ", " << std::setprecision(2)
              << goal_reached_at
              << " s after start\n";
  } else {
    std::cout << std::setprecision(0) << "did not reach " << 100.0 * kGoalAccuracy << "% test accuracy\n";
  }
  std::cout << std::setprecision(2) << "wall time " << total_seconds
            << " s (loading, training and evaluation)\n";

  write_curve_csv(curve_file, options.curve_path, curve);
  curve_file.close();  // gnuplot reads it next
  std::cout << "curve written to " << options.curve_path << "\n";
  const std::string png_path = png_path_for(options.curve_path);
  if (plot_curve(options.curve_path, png_path)) {
    std::cout << "plot written to " << png_path << "\n";
  } else {
    std::cout << "(no plot: gnuplot is not installed or failed)\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (options.help) {
      std::cout << kUsage;
      return 0;
    }
    return run(options);
  } catch (const UsageError& e) {
    std::cerr << "train_digits: " << e.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "train_digits: error: " << e.what() << "\n";
    return 1;
  }
}
