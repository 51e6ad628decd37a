// What the digits examples (train_digits, train_digits_cnn) share around their training
// loops: the command line, one epoch's figures, the progress bar, the curve CSV and its
// gnuplot PNG.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace digits {

// The command line of a training example:
//   --data PATH  --curve PATH  --epochs N  --seed N  --min-accuracy A  --check-gradients
//   (--flag=value too)
struct TrainingOptions {
  std::string data_path;
  std::string curve_path;
  int epochs = 25;
  std::uint32_t seed = 42;
  double min_accuracy = 0.0;     // exit status 3 when the final test accuracy is below it
  bool check_gradients = false;  // probe the gradients after epoch 1 (exit status 4)
  // --checkpoint PATH: save after every epoch, resume from PATH when it exists. Only for the
  // examples that set checkpoint_supported in their defaults (train_digits).
  std::string checkpoint_path;
  bool checkpoint_supported = false;
  // --function: the training step is one tapegrad::Function (traced once, replayed). Only for
  // the examples that set function_supported (train_digits).
  bool use_function = false;
  bool function_supported = false;
  bool help = false;
};

// A bad command line: main prints the message and the usage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `defaults` with the flags of argv applied; UsageError for an unknown flag or a bad value.
TrainingOptions parse_training_options(int argc, char** argv, const TrainingOptions& defaults);
std::string usage(const std::string& program, const TrainingOptions& defaults);
// 0, or 3 (printing why) when `final_accuracy` is below options.min_accuracy: what a smoke
// test of the example checks.
int accuracy_status(const TrainingOptions& options, double final_accuracy);
// An example's main(): parses argv over `defaults`, prints the usage for --help (status 0),
// runs `run` and returns its status; a bad command line prints the message and the usage
// (status 2), any other exception "program: error: ..." (status 1).
int run_training_main(int argc, char** argv, const TrainingOptions& defaults,
                      const std::string& program,
                      const std::function<int(const TrainingOptions&)>& run);

struct EpochResult {
  int epoch;
  double train_loss;      // mean over the epoch's batches, measured while training
  double train_accuracy;  // on the same batches, before each update
  double test_loss;
  double test_accuracy;
  double seconds;  // since the program started
};

// Draws "[#####.....]  batch 12/45" on a terminal; when stdout is a file or a pipe it draws
// nothing and the caller prints one line per epoch.
class ProgressBar {
 public:
  explicit ProgressBar(bool interactive) : interactive_(interactive) {}

  void update(int epoch, int epochs, std::size_t done, std::size_t total, double loss) {
    if (!interactive_) return;
    std::cout << '\r' << prefix(epoch, epochs) << bar(done, total) << "  loss " << std::fixed
              << std::setprecision(4) << loss << "   " << std::flush;
  }
  void finish(int epochs, const EpochResult& r, std::size_t total) {
    if (interactive_) std::cout << '\r';
    std::cout << prefix(r.epoch, epochs) << bar(total, total) << std::fixed << std::setprecision(4)
              << "  loss " << r.train_loss << std::setprecision(1) << "  train acc " << std::setw(5)
              << 100.0 * r.train_accuracy << "%"
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
// std::runtime_error naming the path when it cannot be opened.
std::ofstream open_curve_csv(const std::string& path);
// One line per epoch under a header: epoch,train_loss,train_accuracy,test_loss,
// test_accuracy,seconds. std::runtime_error naming the path when it cannot be written.
void write_curve_csv(std::ofstream& out, const std::string& path,
                     const std::vector<EpochResult>& curve);
// Plots the curve CSV (losses on the left axis, accuracies on the right) into a PNG with
// gnuplot, when it is installed. Returns whether it did.
bool plot_curve(const std::string& csv_path, const std::string& png_path, const std::string& title);
// "train_digits_curve.csv" -> "train_digits_curve.png"
std::string png_path_for(const std::string& csv_path);

}  // namespace digits
