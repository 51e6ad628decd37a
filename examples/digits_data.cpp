#include "digits_data.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string_view>

#include <zlib.h>

namespace digits {
namespace {

constexpr std::size_t kFields = kPixels + 1;  // the pixels, then the label

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void fail_at(const std::string& path, std::size_t line, const std::string& what) {
  throw DataError(path + ":" + std::to_string(line) + ": " + what);
}

// Reads one line without its '\n' (lines of any length). False at the end of the file.
bool read_line(gzFile file, const std::string& path, std::string& line) {
  line.clear();
  char buffer[512];
  while (true) {
    if (gzgets(file, buffer, sizeof buffer) == nullptr) {
      int code = Z_OK;
      const char* message = gzerror(file, &code);
      // Z_BUF_ERROR here means the gzip stream stopped early (a truncated file).
      if (code != Z_OK) throw DataError(path + ": cannot read the file: " + message);
      return !line.empty();
    }
    line += buffer;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      return true;
    }
  }
}

// Parses a non-negative decimal integer field; false if it is anything else. Values past
// 1000 stop growing (they are out of range anyway), so long fields cannot overflow.
bool parse_field(std::string_view field, int& value) {
  if (field.empty()) return false;
  value = 0;
  for (char c : field) {
    if (c < '0' || c > '9') return false;
    value = std::min(value * 10 + (c - '0'), 1000);
  }
  return true;
}

void parse_row(std::string_view row, const std::string& path, std::size_t line_number,
               Dataset& data) {
  if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
  const std::size_t fields = static_cast<std::size_t>(std::count(row.begin(), row.end(), ',')) + 1;
  if (row.empty() || fields != kFields) {
    fail_at(path, line_number,
            "expected " + std::to_string(kFields) +
                " comma-separated fields (64 pixels and the label), found " +
                std::to_string(row.empty() ? 0 : fields));
  }
  std::size_t start = 0;
  for (std::size_t index = 0; index < kFields; ++index) {
    const std::size_t end = std::min(row.find(',', start), row.size());
    const std::string_view field = row.substr(start, end - start);
    start = end + 1;
    const bool is_label = index == kPixels;
    const std::string name = is_label ? "the label" : "pixel " + std::to_string(index + 1);
    int value = 0;
    if (!parse_field(field, value)) {
      fail_at(path, line_number,
              name + " is not a non-negative integer: '" + std::string(field) + "'");
    }
    const int max_value = is_label ? kClasses - 1 : kMaxPixelValue;
    if (value > max_value) {
      fail_at(path, line_number,
              name + " is " + std::string(field) + ", outside 0.." + std::to_string(max_value));
    }
    (is_label ? data.labels : data.pixels).push_back(static_cast<std::uint8_t>(value));
  }
}

void append_row(const Dataset& from, std::size_t row, Dataset& to) {
  const auto first = from.pixels.begin() + static_cast<std::ptrdiff_t>(row * kPixels);
  to.pixels.insert(to.pixels.end(), first, first + static_cast<std::ptrdiff_t>(kPixels));
  to.labels.push_back(from.labels[row]);
}

}  // namespace

Dataset load_csv(const std::string& path) {
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) {
    const int error = errno;  // gzopen leaves the reason of a failed open in errno
    throw DataError(path + ": cannot open the file" +
                    (error != 0 ? std::string(": ") + std::strerror(error) : std::string()));
  }
  Dataset data;
  std::string line;
  std::size_t line_number = 0;
  while (read_line(file.get(), path, line)) parse_row(line, path, ++line_number, data);
  if (data.size() == 0) throw DataError(path + ": no rows (the file is empty)");
  return data;
}

Split split_train_test(const Dataset& data, double test_fraction, std::uint32_t seed) {
  if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
    throw std::invalid_argument("split_train_test: test_fraction must be in (0, 1), got " +
                                std::to_string(test_fraction));
  }
  std::vector<std::size_t> order(data.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // std::shuffle's algorithm is the standard library's choice; with libstdc++ a seed gives
  // the same order on every run and machine.
  std::mt19937 generator(seed);
  std::shuffle(order.begin(), order.end(), generator);
  const auto test_rows =
      static_cast<std::size_t>(std::lround(test_fraction * static_cast<double>(data.size())));
  Split split;
  for (std::size_t i = 0; i < order.size(); ++i) {
    append_row(data, order[i], i < test_rows ? split.test : split.train);
  }
  return split;
}

}  // namespace digits
