// Loading the UCI handwritten digits (8x8 images, 10 classes) for the train_digits example.
//
// The file is a CSV, optionally gzip-compressed (zlib reads both): one image per line, 64
// integer pixel values 0..16 (row-major 8x8) followed by the label 0..9, no header.
// Copy this unit (digits_data.hpp/.cpp, link zlib) to load the data in your own program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace digits {

constexpr std::size_t kPixels = 64;  // an 8x8 image
constexpr int kMaxPixelValue = 16;   // pixel values are 0..16
constexpr int kClasses = 10;         // labels are 0..9

/// A file that cannot be opened or decompressed, or a malformed row. The message names the
/// file and, for a bad row, its 1-based line number: "path:12: expected 65 fields, found 64".
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Images and labels, row-major: image i is pixels[i*kPixels .. (i+1)*kPixels).
struct Dataset {
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;

  std::size_t size() const { return labels.size(); }
};

/// Reads `path` (gzip or plain CSV). Throws DataError when the file cannot be opened or read,
/// holds no rows, or a line does not have exactly 65 comma-separated integer fields, with
/// pixels in 0..16 and the label in 0..9. A trailing '\r' (Windows line end) is accepted.
Dataset load_csv(const std::string& path);

/// The two parts of a shuffled split.
struct Split {
  Dataset train;
  Dataset test;
};

/// Shuffles the row order with std::mt19937(seed) and puts the first
/// round(test_fraction * size) rows in `test`, the rest in `train`. The same seed gives the
/// same split. std::invalid_argument when test_fraction is outside (0, 1).
Split split_train_test(const Dataset& data, double test_fraction, std::uint32_t seed);

}  // namespace digits
