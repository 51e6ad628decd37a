// The digits loader of examples/train_digits (examples/digits_data.cpp, compiled into this
// test): the shipped file, gzip and plain input, and every kind of malformed input.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <zlib.h>

#include "digits_data.hpp"

namespace {

// A file in the temporary directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& name)
      : path_(std::string(std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp") +
              "/tapegrad_test_digits_" + name) {}
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_plain(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

void write_gzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, text.data(), static_cast<unsigned>(text.size())) ==
          static_cast<int>(text.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

// A valid row: pixel i is (first + i) % 17, then the label.
std::string row(int first, int label) {
  std::string out;
  for (int i = 0; i < 64; ++i) out += std::to_string((first + i) % 17) + ",";
  return out + std::to_string(label) + "\n";
}

std::string message_of_load(const std::string& path) {
  try {
    digits::load_csv(path);
  } catch (const digits::DataError& e) {
    return e.what();
  }
  FAIL("load_csv(" << path << ") did not throw DataError");
  return "";
}

}  // namespace

TEST_CASE("the shipped digits file has 1797 images of 10 classes", "[digits]") {
  const digits::Dataset data = digits::load_csv(TAPEGRAD_DIGITS_CSV);
  REQUIRE(data.size() == 1797);
  REQUIRE(data.pixels.size() == 1797 * 64);
  // The first image and label of the file (a 0), as written in it.
  const std::vector<int> first_row_start = {0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5};
  for (std::size_t i = 0; i < first_row_start.size(); ++i) {
    CHECK(static_cast<int>(data.pixels[i]) == first_row_start[i]);
  }
  CHECK(data.labels[0] == 0);
  CHECK(data.labels[1] == 1);
  CHECK(data.labels[2] == 2);
  std::vector<int> per_class(10, 0);
  for (auto label : data.labels) ++per_class.at(label);
  for (int count : per_class) CHECK(count >= 170);  // scikit-learn: 174..183 per class
  for (auto pixel : data.pixels) REQUIRE(pixel <= 16);
}

TEST_CASE("load_csv reads plain and gzip CSV, with or without CR and final newline", "[digits]") {
  TempFile plain("plain.csv");
  TempFile gzip("rows.csv.gz");
  const std::string text = row(0, 3) + row(5, 9) + row(16, 0);
  write_plain(plain.path(), text.substr(0, text.size() - 1));  // no final newline
  write_gzip(gzip.path(),
             row(0, 3) + row(5, 9).replace(row(5, 9).size() - 1, 1, "\r\n") + row(16, 0));
  for (const std::string& path : {plain.path(), gzip.path()}) {
    INFO(path);
    const digits::Dataset data = digits::load_csv(path);
    REQUIRE(data.size() == 3);
    CHECK(data.labels == std::vector<std::uint8_t>{3, 9, 0});
    CHECK(data.pixels[0] == 0);
    CHECK(data.pixels[63] == 63 % 17);
    CHECK(data.pixels[64] == 5);
    CHECK(data.pixels[64 + 12] == 0);  // (5 + 12) % 17
    CHECK(data.pixels[128] == 16);
    CHECK(data.pixels[128 + 63] == (16 + 63) % 17);
  }
}

TEST_CASE("load_csv names the file when it cannot be opened or is empty", "[digits]") {
  const std::string missing = "/nonexistent_dir/digits.csv.gz";
  const std::string message = message_of_load(missing);
  CHECK_THAT(message, Catch::StartsWith(missing + ": cannot open the file"));
  CHECK_THAT(message, Catch::Contains("No such file"));

  TempFile empty("empty.csv");
  write_plain(empty.path(), "");
  CHECK(message_of_load(empty.path()) == empty.path() + ": no rows (the file is empty)");
}

TEST_CASE("load_csv names the file when the gzip stream is truncated", "[digits]") {
  TempFile whole("whole.csv.gz");
  std::string text;
  for (int i = 0; i < 50; ++i) text += row(i, i % 10);
  write_gzip(whole.path(), text);
  std::ifstream in(whole.path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TempFile cut("cut.csv.gz");
  write_plain(cut.path(), bytes.substr(0, bytes.size() / 2));
  CHECK_THAT(message_of_load(cut.path()), Catch::StartsWith(cut.path() + ": cannot read"));
}

TEST_CASE("a malformed row throws DataError naming the file and the line", "[digits]") {
  TempFile file("bad.csv");
  struct Case {
    std::string bad_row;
    std::string expected;
  };
  const std::string good = row(0, 1);
  std::string missing_label = good.substr(0, good.rfind(',')) + "\n";
  std::string extra_field = good.substr(0, good.size() - 1) + ",4\n";
  std::string not_integer = good;
  not_integer.replace(0, 1, "1.5");
  std::string negative = good;
  negative.replace(0, 1, "-1");
  std::string empty_field = good;
  empty_field.replace(0, 1, "");
  std::string pixel_too_big = good;
  pixel_too_big.replace(0, 1, "17");
  std::string huge_pixel = good;
  huge_pixel.replace(0, 1, "123456789012");
  std::string label_too_big = good.substr(0, good.rfind(',') + 1) + "10\n";
  const std::vector<Case> cases = {
      {missing_label, ":3: expected 65 comma-separated fields (64 pixels and the label), found 64"},
      {extra_field, ":3: expected 65 comma-separated fields (64 pixels and the label), found 66"},
      {"\n", ":3: expected 65 comma-separated fields (64 pixels and the label), found 0"},
      {not_integer, ":3: pixel 1 is not a non-negative integer: '1.5'"},
      {negative, ":3: pixel 1 is not a non-negative integer: '-1'"},
      {empty_field, ":3: pixel 1 is not a non-negative integer: ''"},
      {pixel_too_big, ":3: pixel 1 is 17, outside 0..16"},
      {huge_pixel, ":3: pixel 1 is 123456789012, outside 0..16"},
      {label_too_big, ":3: the label is 10, outside 0..9"},
  };
  for (const auto& c : cases) {
    INFO(c.bad_row);
    write_plain(file.path(), row(0, 1) + row(3, 2) + c.bad_row + row(7, 4));
    CHECK(message_of_load(file.path()) == file.path() + c.expected);
  }

  // Line numbers count every line; a bad pixel in the middle of a row is named by position.
  std::string bad_middle = row(2, 5);
  const std::size_t comma = bad_middle.find(',', bad_middle.find(',') + 1);  // after pixel 2
  bad_middle.insert(comma + 1, "x");
  write_plain(file.path(), row(0, 1) + row(0, 1) + row(0, 1) + row(0, 1) + bad_middle);
  CHECK(message_of_load(file.path()) ==
        file.path() + ":5: pixel 3 is not a non-negative integer: 'x4'");
}

TEST_CASE("split_train_test shuffles with the seed and keeps every row once", "[digits]") {
  digits::Dataset data;
  for (int i = 0; i < 100; ++i) {
    // Row i: every pixel is i % 17, label i % 10; the pixel and label identify the row with
    // the row's position below.
    for (int p = 0; p < 64; ++p)
      data.pixels.push_back(static_cast<std::uint8_t>(p == 0 ? i : i % 17));
    data.labels.push_back(static_cast<std::uint8_t>(i % 10));
  }
  const digits::Split split = digits::split_train_test(data, 0.2, 7);
  REQUIRE(split.test.size() == 20);
  REQUIRE(split.train.size() == 80);
  REQUIRE(split.train.pixels.size() == 80 * 64);
  std::set<int> seen;
  bool in_original_order = true;
  int previous = -1;
  for (const digits::Dataset* part : {&split.test, &split.train}) {
    for (std::size_t r = 0; r < part->size(); ++r) {
      const int original = part->pixels[r * 64];  // pixel 0 holds the original row index
      CHECK(part->labels[r] == original % 10);
      CHECK(part->pixels[r * 64 + 63] == original % 17);
      seen.insert(original);
      if (original < previous) in_original_order = false;
      previous = original;
    }
  }
  CHECK(seen.size() == 100);
  CHECK_FALSE(in_original_order);

  const digits::Split again = digits::split_train_test(data, 0.2, 7);
  CHECK(again.test.pixels == split.test.pixels);
  CHECK(again.train.labels == split.train.labels);
  const digits::Split other = digits::split_train_test(data, 0.2, 8);
  CHECK(other.test.pixels != split.test.pixels);

  CHECK_THROWS_AS(digits::split_train_test(data, 0.0, 1), std::invalid_argument);
  CHECK_THROWS_AS(digits::split_train_test(data, 1.0, 1), std::invalid_argument);
}
