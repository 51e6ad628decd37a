// The command line and the progress report of the digits examples: curve CSV and gnuplot
// plot.
#include "training_report.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace digits {

namespace {

int parse_int(const std::string& flag, const std::string& text, int min_value) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < min_value) {
    throw UsageError(flag + " needs an integer >= " + std::to_string(min_value) + ", got '" + text +
                     "'");
  }
  return value;
}

double parse_fraction(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = -1.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !(value >= 0.0 && value <= 1.0)) {
    throw UsageError(flag + " needs a number in [0, 1], got '" + text + "'");
  }
  return value;
}

// A gnuplot string literal: single quotes, where '' stands for one quote.
std::string gnuplot_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += (c == '\'') ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

// Accepts "--flag value" and "--flag=value".
TrainingOptions parse_training_options(int argc, char** argv, const TrainingOptions& defaults) {
  TrainingOptions options = defaults;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    const auto equals = flag.find('=');
    if (equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    } else if (flag != "--help" && flag != "-h" && flag != "--check-gradients" &&
               flag != "--function") {
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      value = argv[++i];
    }
    if (flag == "--help" || flag == "-h") {
      options.help = true;
    } else if (flag == "--check-gradients") {
      if (equals != std::string::npos) throw UsageError("--check-gradients takes no value");
      options.check_gradients = true;
    } else if (flag == "--function" && defaults.function_supported) {
      if (equals != std::string::npos) throw UsageError("--function takes no value");
      options.use_function = true;
    } else if (flag == "--data") {
      options.data_path = value;
    } else if (flag == "--curve") {
      options.curve_path = value;
    } else if (flag == "--epochs") {
      options.epochs = parse_int(flag, value, 1);
    } else if (flag == "--seed") {
      options.seed = static_cast<std::uint32_t>(parse_int(flag, value, 0));
    } else if (flag == "--min-accuracy") {
      options.min_accuracy = parse_fraction(flag, value);
    } else if (flag == "--checkpoint" && defaults.checkpoint_supported) {
      if (value.empty()) throw UsageError("--checkpoint needs a path");
      options.checkpoint_path = value;
    } else {
      throw UsageError("unknown option '" + flag + "'");
    }
  }
  return options;
}

std::string usage(const std::string& program, const TrainingOptions& d) {
  std::ostringstream out;
  out << "usage: " << program
      << " [--data PATH] [--curve PATH] [--epochs N] [--seed N] [--min-accuracy A]\n"
      << "       [--check-gradients]" << (d.checkpoint_supported ? " [--checkpoint PATH]" : "")
      << (d.function_supported ? " [--function]" : "") << "\n"
      << "  --data PATH       digits CSV, gzip or plain (default: " << d.data_path << ")\n"
      << "  --curve PATH      where to write the loss/accuracy curve (default: " << d.curve_path
      << ";\n                    a PNG plot goes next to it when gnuplot is installed)\n"
      << "  --epochs N        passes over the training set (default: " << d.epochs << ")\n"
      << "  --seed N          seed of the split, the shuffles and the initial weights (default: "
      << d.seed << ")\n"
      << "  --min-accuracy A  exit with status 3 when the final test accuracy is below A\n"
      << "                    (a fraction; default: " << d.min_accuracy << ")\n"
      << "  --check-gradients  after the first epoch, compare the tape's gradient of the test "
         "loss\n"
      << "                    with central differences along a random direction per variable\n"
      << "                    (exit with status 4 on a mismatch)\n";
  if (d.checkpoint_supported) {
    out << "  --checkpoint PATH save the run (weights, Adam's state, epochs done) to PATH after\n"
        << "                    every epoch; when PATH exists, resume from it first\n";
  }
  if (d.function_supported) {
    out << "  --function        run each training step as one tapegrad::Function: traced on the\n"
        << "                    first batch of each shape, replayed after (the same numbers)\n";
  }
  return out.str();
}

int accuracy_status(const TrainingOptions& options, double final_accuracy) {
  if (final_accuracy >= options.min_accuracy) return 0;
  std::cout << "final test accuracy " << final_accuracy << " is below --min-accuracy "
            << options.min_accuracy << "\n";
  return 3;
}

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
    out << r.epoch << ',' << r.train_loss << ',' << r.train_accuracy << ',' << r.test_loss << ','
        << r.test_accuracy << ',' << r.seconds << '\n';
  }
  if (!out.flush()) throw std::runtime_error(path + ": cannot write the curve file");
}

// Plots the curve CSV into a PNG with gnuplot, when it is installed. Returns whether it did.
bool plot_curve(const std::string& csv_path, const std::string& png_path,
                const std::string& title) {
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
      "set output " +
      gnuplot_quoted(png_path) +
      "\n"
      "set datafile separator ','\n"
      "set datafile columnheaders\n"
      "set title " +
      gnuplot_quoted(title) +
      "\n"
      "set xlabel 'epoch'\n"
      "set ylabel 'loss (cross-entropy)'\n"
      "set y2label 'accuracy'\n"
      "set y2range [*:1]\n"
      "set ytics nomirror\n"
      "set y2tics\n"
      "set grid\n"
      "set key center right\n"
      "plot " +
      gnuplot_quoted(csv_path) +
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
  const bool has_extension =
      dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_extension ? csv_path.substr(0, dot) : csv_path) + ".png";
}

int run_training_main(int argc, char** argv, const TrainingOptions& defaults,
                      const std::string& program,
                      const std::function<int(const TrainingOptions&)>& run) {
  try {
    const TrainingOptions options = parse_training_options(argc, argv, defaults);
    if (options.help) {
      std::cout << usage(program, defaults);
      return 0;
    }
    return run(options);
  } catch (const UsageError& e) {
    std::cerr << program << ": " << e.what() << "\n" << usage(program, defaults);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace digits
