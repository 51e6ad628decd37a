// save_npy / load_npy / save_npz / load_npz: round trips bit for bit, NumPy reading what
// tapegrad writes and the reverse (python3 with numpy: scripts/setup.sh installs it), every
// refusal with what its message names, atomic replacement, and a deterministic fuzz of
// mutated files (every load succeeds or throws InvalidArgument, never anything else).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "file_support.hpp"
#include "identical_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using tapegrad::testing::element_bytes;
using tapegrad::testing::read_bytes;
using tapegrad::testing::require_identical;
using tapegrad::testing::TempFolder;
using tapegrad::testing::write_bytes;
namespace fs = std::filesystem;

#ifndef TAPEGRAD_TEST_PYTHON
#define TAPEGRAD_TEST_PYTHON "python3"
#endif

namespace {

std::vector<std::string> folder_entries(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// ---- sample tensors ---------------------------------------------------------------------

const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                                    DType::Bool};
// Ranks 0 to 4, and empty shapes (a zero dimension first, last and in the middle).
const std::vector<Shape> kShapes = {{},           {5}, {2, 3},    {2, 3, 4},
                                    {2, 1, 3, 2}, {0}, {2, 0, 3}, {3, 0}};

template <class T>
T from_bits(std::uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Values of `shape` whose first elements are the edge cases of the dtype: NaNs with payloads
// and signs, infinities, -0.0, subnormals and extremes for floats; the extremes for integers.
template <class T>
storage_array<T> sample_array(const Shape& shape, unsigned seed) {
  storage_array<T> a = storage_array<T>::from_shape(shape);
  std::mt19937_64 generator(seed);
  std::vector<T> edges;
  if constexpr (std::is_same_v<T, double>) {
    edges = {from_bits<double>(0x7ff8000000000123ULL),
             from_bits<double>(0xfff0000000000001ULL),
             std::numeric_limits<double>::infinity(),
             -std::numeric_limits<double>::infinity(),
             -0.0,
             std::numeric_limits<double>::denorm_min(),
             std::numeric_limits<double>::max(),
             std::numeric_limits<double>::lowest()};
  } else if constexpr (std::is_same_v<T, float>) {
    edges = {from_bits<float>(0x7fc00123U),
             from_bits<float>(0xff800001U),
             std::numeric_limits<float>::infinity(),
             -std::numeric_limits<float>::infinity(),
             -0.0f,
             std::numeric_limits<float>::denorm_min(),
             std::numeric_limits<float>::max(),
             std::numeric_limits<float>::lowest()};
  } else if constexpr (std::is_same_v<T, bool>) {
    edges = {true, false};
  } else {
    edges = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), T(-1)};
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i < edges.size()) {
      a.data()[i] = edges[i];
    } else if constexpr (std::is_same_v<T, bool>) {
      a.data()[i] = (generator() & 1) != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      a.data()[i] = static_cast<T>(std::normal_distribution<double>(0.0, 10.0)(generator));
    } else {
      a.data()[i] = static_cast<T>(generator());
    }
  }
  return a;
}

Tensor sample(DType dtype, const Shape& shape, unsigned seed) {
  switch (dtype) {
    case DType::Float32:
      return Tensor(sample_array<float>(shape, seed));
    case DType::Float64:
      return Tensor(sample_array<double>(shape, seed));
    case DType::Int32:
      return Tensor(sample_array<std::int32_t>(shape, seed));
    case DType::Int64:
      return Tensor(sample_array<std::int64_t>(shape, seed));
    case DType::Bool:
      return Tensor(sample_array<bool>(shape, seed));
  }
  return Tensor();
}

std::string shape_label(const Shape& shape) { return shape_to_string(shape); }

// ---- python -----------------------------------------------------------------------------

struct PythonRun {
  int status = -1;
  std::string output;
};

std::string quoted(const std::string& text) { return "'" + text + "'"; }

// Runs `script` with the test's Python (the one with numpy found at configure time).
PythonRun run_python(const TempFolder& folder, const std::string& script,
                     const std::vector<std::string>& arguments = {}) {
  const std::string script_path = folder.file("script.py");
  const std::string output_path = folder.file("python_output.txt");
  write_bytes(script_path, script);
  std::string command = quoted(TAPEGRAD_TEST_PYTHON) + " " + quoted(script_path);
  for (const auto& argument : arguments) command += " " + quoted(argument);
  command += " > " + quoted(output_path) + " 2>&1";
  PythonRun run;
  run.status = std::system(command.c_str());
  run.output = read_bytes(output_path);
  return run;
}

// NumPy is a requirement of the test suite, not an option: missing, the interop tests fail.
void require_numpy(const TempFolder& folder) {
  const PythonRun run = run_python(folder, "import numpy\nprint(numpy.__version__)\n");
  INFO("python: " << TAPEGRAD_TEST_PYTHON << "\n" << run.output);
  if (run.status != 0) {
    FAIL(
        "python3 with numpy is required by the NumPy file tests (scripts/setup.sh installs "
        "python3-numpy; configure with -DTAPEGRAD_TEST_PYTHON=/path/to/python to choose one)");
  }
}

std::string dtype_text(DType dtype) { return dtype_name(dtype); }

std::string python_shape(const Shape& shape) {
  std::string out = "(";
  for (std::size_t d : shape) out += std::to_string(d) + ",";
  return out + ")";
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

Shape parse_dims(const std::string& text) {
  Shape shape;
  for (const auto& part : split(text, ',')) {
    if (!part.empty()) shape.push_back(static_cast<std::size_t>(std::stoull(part)));
  }
  return shape;
}

DType parse_dtype(const std::string& name) {
  for (DType dtype : kDTypes) {
    if (name == dtype_name(dtype)) return dtype;
  }
  FAIL("unknown dtype in the manifest: " << name);
  return DType::Float64;
}

// ---- error expectations -----------------------------------------------------------------

// `body` throws InvalidArgument whose message names every string of `mentions`.
void expect_invalid(const std::string& label, const std::function<void()>& body,
                    const std::vector<std::string>& mentions) {
  INFO("case: " << label);
  std::string message;
  try {
    body();
  } catch (const InvalidArgument& e) {
    message = e.what();
  } catch (const std::exception& e) {
    FAIL("threw another exception type: " << e.what());
  }
  INFO("message: " << message);
  REQUIRE(!message.empty());
  for (const auto& mention : mentions) {
    INFO("must mention: " << mention);
    CHECK(message.find(mention) != std::string::npos);
  }
}

// A .npy file of `header_text` (padded and '\n'-terminated like NumPy's) and `data`.
std::string npy_file(const std::string& header_text, const std::string& data, int major = 1) {
  std::string header = header_text;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::uint32_t read_u32(const std::string& bytes, std::size_t at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return value;
}
void write_u32(std::string& bytes, std::size_t at, std::uint32_t value) {
  for (std::size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

// The offsets of every occurrence of a zip record signature ("PK\3\4" local, "PK\1\2" central).
std::vector<std::size_t> find_all(const std::string& bytes, const std::string& needle) {
  std::vector<std::size_t> found;
  for (std::size_t at = bytes.find(needle); at != std::string::npos;
       at = bytes.find(needle, at + 1)) {
    found.push_back(at);
  }
  return found;
}

// numpy.savez_compressed of {"w": float32 (2, 3), "conv1/kernel": int64 [-1, 2^40],
// "mask": bool [True, False, True]} (deflated members with zip64 extra fields), made once
// with NumPy 1.24 so that the fuzz needs no Python.
const std::string kNumpyCompressedNpz(
    "\x50\x4b\x03\x04\x14\x00\x00\x00\x08\x00\x00\x00\x21\x00\x4f\xe9\x00\x2a\x55\x00\x00\x00\x98"
    "\x00"
    "\x00\x00\x05\x00\x14\x00\x77\x2e\x6e\x70\x79\x01\x00\x10\x00\x98\x00\x00\x00\x00\x00\x00\x00"
    "\x55"
    "\x00\x00\x00\x00\x00\x00\x00\x9b\xec\x17\xea\x1b\x10\xc9\xc8\x50\xc6\x50\xad\x9e\x92\x5a\x9c"
    "\x5c"
    "\xa4\x6e\xa5\xa0\x6e\x93\x66\xa2\xae\xa3\xa0\x9e\x96\x5f\x54\x52\x94\x98\x17\x9f\x5f\x94\x92"
    "\x0a"
    "\x12\x77\x4b\xcc\x29\x4e\x05\x8a\x17\x67\x24\x16\xa4\x02\xf9\x1a\x46\x3a\x0a\xc6\x9a\x3a\x0a"
    "\xb5"
    "\x0a\x64\x03\x2e\x06\x30\x68\xb0\x07\x12\x0e\x40\x04\xc4\x0d\x40\xbc\xc0\x01\x00\x50\x4b\x03"
    "\x04"
    "\x14\x00\x00\x00\x08\x00\x00\x00\x21\x00\xed\x8d\xfd\x93\x4c\x00\x00\x00\x90\x00\x00\x00\x10"
    "\x00"
    "\x14\x00\x63\x6f\x6e\x76\x31\x2f\x6b\x65\x72\x6e\x65\x6c\x2e\x6e\x70\x79\x01\x00\x10\x00\x90"
    "\x00"
    "\x00\x00\x00\x00\x00\x00\x4c\x00\x00\x00\x00\x00\x00\x00\x9b\xec\x17\xea\x1b\x10\xc9\xc8\x50"
    "\xc6"
    "\x50\xad\x9e\x92\x5a\x9c\x5c\xa4\x6e\xa5\xa0\x6e\x93\x69\xa1\xae\xa3\xa0\x9e\x96\x5f\x54\x52"
    "\x94"
    "\x98\x17\x9f\x5f\x94\x92\x0a\x12\x77\x4b\xcc\x29\x4e\x05\x8a\x17\x67\x24\x16\xa4\x02\xf9\x1a"
    "\x46"
    "\x3a\x9a\x3a\x0a\xb5\x0a\x14\x00\xae\xff\x50\xc0\x00\x02\x8c\x0c\x0c\x00\x50\x4b\x03\x04\x14"
    "\x00"
    "\x00\x00\x08\x00\x00\x00\x21\x00\x16\x93\x8c\xbb\x47\x00\x00\x00\x83\x00\x00\x00\x08\x00\x14"
    "\x00"
    "\x6d\x61\x73\x6b\x2e\x6e\x70\x79\x01\x00\x10\x00\x83\x00\x00\x00\x00\x00\x00\x00\x47\x00\x00"
    "\x00"
    "\x00\x00\x00\x00\x9b\xec\x17\xea\x1b\x10\xc9\xc8\x50\xc6\x50\xad\x9e\x92\x5a\x9c\x5c\xa4\x6e"
    "\xa5"
    "\xa0\x5e\x93\x64\xa8\xae\xa3\xa0\x9e\x96\x5f\x54\x52\x94\x98\x17\x9f\x5f\x94\x92\x0a\x12\x77"
    "\x4b"
    "\xcc\x29\x4e\x05\x8a\x17\x67\x24\x16\xa4\x02\xf9\x1a\xc6\x3a\x9a\x3a\x0a\xb5\x0a\x14\x00\x2e"
    "\x46"
    "\x06\x46\x00\x50\x4b\x01\x02\x14\x03\x14\x00\x00\x00\x08\x00\x00\x00\x21\x00\x4f\xe9\x00\x2a"
    "\x55"
    "\x00\x00\x00\x98\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x00\x00"
    "\x00"
    "\x00\x77\x2e\x6e\x70\x79\x50\x4b\x01\x02\x14\x03\x14\x00\x00\x00\x08\x00\x00\x00\x21\x00\xed"
    "\x8d"
    "\xfd\x93\x4c\x00\x00\x00\x90\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"
    "\x01"
    "\x8c\x00\x00\x00\x63\x6f\x6e\x76\x31\x2f\x6b\x65\x72\x6e\x65\x6c\x2e\x6e\x70\x79\x50\x4b\x01"
    "\x02"
    "\x14\x03\x14\x00\x00\x00\x08\x00\x00\x00\x21\x00\x16\x93\x8c\xbb\x47\x00\x00\x00\x83\x00\x00"
    "\x00"
    "\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x1a\x01\x00\x00\x6d\x61\x73\x6b\x2e"
    "\x6e"
    "\x70\x79\x50\x4b\x05\x06\x00\x00\x00\x00\x03\x00\x03\x00\xa7\x00\x00\x00\x9b\x01\x00\x00\x00"
    "\x00",
    600);

}  // namespace

// ---- round trips --------------------------------------------------------------------------

TEST_CASE(
    "save_npy then load_npy gives every dtype, rank 0 to 4 and empty shapes back bit for bit") {
  TempFolder folder("roundtrip");
  int checked = 0;
  unsigned seed = 1;
  for (DType dtype : kDTypes) {
    for (const Shape& shape : kShapes) {
      INFO(dtype_name(dtype) << " " << shape_label(shape));
      const Tensor original = sample(dtype, shape, seed++);
      const std::string path = folder.file("t.npy");
      save_npy(path, original);
      require_identical(load_npy(path), original);
      ++checked;
    }
  }
  // The data start at a multiple of 64 bytes, as NumPy aligns them.
  const std::string bytes = read_bytes(folder.file("t.npy"));
  CHECK(
      (10 + (static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8))) %
          64 ==
      0);
  // Nothing but the file is left in the folder (no temporary).
  CHECK(folder_entries(folder.path()) == std::vector<std::string>{"t.npy"});
  std::cout << "npy round trips: " << checked << " (dtypes x shapes)\n";
  CHECK(checked == static_cast<int>(kDTypes.size() * kShapes.size()));
}

TEST_CASE("save_npz then load_npz gives the names, their order and every tensor back bit for bit") {
  TempFolder folder("npz_roundtrip");
  std::vector<std::pair<std::string, Tensor>> tensors;
  unsigned seed = 100;
  for (DType dtype : kDTypes) {
    for (const Shape& shape : kShapes) {
      // Out of alphabetical order, with folders in the names as a checkpoint's ("conv1/kernel").
      const std::string name = "layer" + std::to_string(99 - tensors.size()) + "/" +
                               dtype_name(dtype) + "_" + std::to_string(tensors.size());
      tensors.emplace_back(name, sample(dtype, shape, seed++));
    }
  }
  tensors.emplace_back("conv1/kernel", sample(DType::Float32, {3, 3, 1, 4}, 7));
  tensors.emplace_back("w", sample(DType::Float64, {}, 8));
  const std::string path = folder.file("all.npz");
  save_npz(path, tensors);
  const auto loaded = load_npz(path);
  REQUIRE(loaded.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO("entry " << i << " " << tensors[i].first);
    CHECK(loaded[i].first == tensors[i].first);
    require_identical(loaded[i].second, tensors[i].second);
  }
  CHECK(folder_entries(folder.path()) == std::vector<std::string>{"all.npz"});

  SECTION("an empty list is an empty archive") {
    save_npz(folder.file("empty.npz"), {});
    CHECK(load_npz(folder.file("empty.npz")).empty());
  }
}

TEST_CASE(
    "save_npy and save_npz replace an existing file whole, and a refused save leaves it alone") {
  TempFolder folder("atomic");
  const std::string path = folder.file("w.npy");
  save_npy(path, sample(DType::Float64, {4}, 1));
  const Tensor second = sample(DType::Int32, {2, 2}, 2);
  save_npy(path, second);
  require_identical(load_npy(path), second);

  // A save that fails after the checks (a Variable's handle) or before them leaves the old
  // file as it was, and no temporary behind.
  const std::string before = read_bytes(path);
  Variable variable(constant({1.0, 2.0}));
  CHECK_THROWS_AS(save_npy(path, variable.handle()), InvalidArgument);
  CHECK_THROWS_AS(save_npy(path, Tensor()), InvalidArgument);
  CHECK(read_bytes(path) == before);

  const std::string archive = folder.file("c.npz");
  save_npz(archive, {{"a", sample(DType::Float32, {3}, 3)}});
  const std::string archive_before = read_bytes(archive);
  CHECK_THROWS_AS(save_npz(archive, {{"a", constant(1.0)}, {"a", constant(2.0)}}), InvalidArgument);
  CHECK(read_bytes(archive) == archive_before);
  save_npz(archive, {{"b", second}});
  const auto loaded = load_npz(archive);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].first == "b");
  CHECK(folder_entries(folder.path()) == std::vector<std::string>{"c.npz", "w.npy"});

  // The new file's permissions follow the umask, as a plain create's would (not 0600).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat status {};
  REQUIRE(::stat(path.c_str(), &status) == 0);
  CHECK((status.st_mode & 0777) == (0666 & ~mask));
  REQUIRE(::stat(archive.c_str(), &status) == 0);
  CHECK((status.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE(
    "a write that fails midway (a full disk) throws, keeps the old file and leaves no temporary") {
  TempFolder folder("full_disk");
  const std::string archive = folder.file("big.npz");
  const std::string single = folder.file("big.npy");
  save_npz(archive, {{"small", sample(DType::Float32, {3}, 4)}});
  save_npy(single, sample(DType::Float32, {3}, 5));
  const std::string archive_before = read_bytes(archive);
  const std::string single_before = read_bytes(single);
  const Tensor large = zeros({1 << 20}, DType::Float64);  // 8 MiB

  // A file-size limit of 1 MiB makes the writes past it fail with EFBIG, as a full disk fails
  // them with ENOSPC (SIGXFSZ ignored, so the write returns the error instead).
  struct rlimit original {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &original) == 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = original;
  limited.rlim_cur = 1 << 20;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  std::string archive_message, single_message;
  try {
    save_npz(archive, {{"a", large}, {"b", large}});
  } catch (const InvalidArgument& e) {
    archive_message = e.what();
  }
  try {
    save_npy(single, large);
  } catch (const InvalidArgument& e) {
    single_message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &original);
  std::signal(SIGXFSZ, previous_handler);

  CHECK_THAT(archive_message, Catch::Contains("save_npz(\"" + archive + "\")"));
  CHECK_THAT(archive_message, Catch::Contains("cannot write the archive"));
  CHECK_THAT(archive_message, Catch::Contains("File too large"));
  CHECK_THAT(single_message, Catch::Contains("save_npy(\"" + single + "\")"));
  CHECK_THAT(single_message, Catch::Contains("File too large"));
  CHECK(read_bytes(archive) == archive_before);
  CHECK(read_bytes(single) == single_before);
  CHECK(folder_entries(folder.path()) == std::vector<std::string>{"big.npy", "big.npz"});
  // The same saves succeed without the limit.
  save_npz(archive, {{"a", large}, {"b", large}});
  CHECK(load_npz(archive).size() == 2);
}

// ---- NumPy interop ------------------------------------------------------------------------

TEST_CASE("numpy.load reads what save_npy and save_npz write: dtypes, shapes, values, names") {
  TempFolder folder("numpy_reads");
  require_numpy(folder);
  std::string manifest = "arrays = [\n";
  int count = 0;
  unsigned seed = 200;
  std::vector<std::pair<std::string, Tensor>> entries;
  std::string entry_manifest;
  for (DType dtype : kDTypes) {
    for (const Shape& shape : kShapes) {
      const Tensor t = sample(dtype, shape, seed++);
      const std::string base = folder.file("a" + std::to_string(count++));
      save_npy(base + ".npy", t);
      write_bytes(base + ".raw", element_bytes(t));
      manifest += "  ('" + base + ".npy', '" + dtype_text(dtype) + "', " + python_shape(shape) +
                  ", '" + base + ".raw'),\n";
      const std::string name = (count % 2 == 0 ? "conv" + std::to_string(count) + "/kernel"
                                               : "w" + std::to_string(count));
      entries.emplace_back(name, t);
      entry_manifest += "  ('" + name + "', '" + dtype_text(dtype) + "', " + python_shape(shape) +
                        ", '" + base + ".raw'),\n";
    }
  }
  const std::string archive = folder.file("model.npz");
  save_npz(archive, entries);
  save_npz(folder.file("empty.npz"), {});
  manifest += "]\narchives = [('" + archive + "', [\n" + entry_manifest + "]), ('" +
              folder.file("empty.npz") + "', [])]\n";
  // Known values, checked by value on the Python side (not only against tapegrad's bytes).
  save_npy(folder.file("known_f64.npy"),
           Tensor(xt::xarray<double>{1.5, -0.0, std::numeric_limits<double>::infinity(),
                                     std::numeric_limits<double>::quiet_NaN()}));
  save_npy(folder.file("known_i64.npy"),
           Tensor(xt::xarray<std::int64_t>{{std::numeric_limits<std::int64_t>::min(), -1},
                                           {0, std::numeric_limits<std::int64_t>::max()}}));
  save_npy(folder.file("known_bool.npy"), Tensor(xt::xarray<bool>{true, false, true}));
  save_npy(folder.file("known_scalar.npy"), Tensor(xt::xarray<float>(2.25f)));
  write_bytes(folder.file("manifest.py"), manifest);

  const std::string script = R"PY(
import sys, math
import numpy as np
folder, manifest_path = sys.argv[1], sys.argv[2]
spec = {}
exec(open(manifest_path).read(), spec)
def check(array, dtype, shape, raw_path, what):
    assert array.dtype == np.dtype(dtype), (what, array.dtype, dtype)
    assert array.shape == tuple(shape), (what, array.shape, shape)
    assert array.tobytes(order='C') == open(raw_path, 'rb').read(), (what, 'element bytes differ')
checked = 0
for path, dtype, shape, raw_path in spec['arrays']:
    check(np.load(path), dtype, shape, raw_path, path)
    checked += 1
for path, entries in spec['archives']:
    with np.load(path) as archive:
        assert list(archive.keys()) == [e[0] for e in entries], (path, list(archive.keys()))
        for name, dtype, shape, raw_path in entries:
            check(archive[name], dtype, shape, raw_path, path + ':' + name)
            checked += 1
f64 = np.load(folder + '/known_f64.npy')
assert f64.dtype == np.float64 and f64.shape == (4,)
assert f64[0] == 1.5 and f64[1] == 0 and math.copysign(1, f64[1]) < 0
assert f64[2] == np.inf and np.isnan(f64[3])
i64 = np.load(folder + '/known_i64.npy')
assert i64.dtype == np.int64 and i64.tolist() == [[-2**63, -1], [0, 2**63 - 1]]
b = np.load(folder + '/known_bool.npy')
assert b.dtype == np.bool_ and b.tolist() == [True, False, True]
s = np.load(folder + '/known_scalar.npy')
assert s.dtype == np.float32 and s.shape == () and s == 2.25
print('numpy checked', checked, 'arrays')
)PY";
  const PythonRun run =
      run_python(folder, script, {folder.path().string(), folder.file("manifest.py")});
  INFO(run.output);
  REQUIRE(run.status == 0);
  std::cout << run.output;
}

TEST_CASE(
    "load_npy and load_npz read what numpy writes: every dtype, rank 0 to 4, empty, Fortran order, "
    "versions 1 to 3, savez and savez_compressed") {
  TempFolder folder("numpy_writes");
  require_numpy(folder);
  const std::string script = R"PY(
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(20261127)
shapes = [(), (5,), (2, 3), (2, 3, 4), (2, 1, 3, 2), (0,), (2, 0, 3)]
dtypes = [np.float32, np.float64, np.int32, np.int64, np.bool_]
lines = []
def sample(dtype, shape):
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        a = rng.integers(0, 2, n).astype(np.bool_)
    elif np.issubdtype(dtype, np.floating):
        a = (rng.standard_normal(n) * 10).astype(dtype)
        info = np.finfo(dtype)
        edges = np.array([np.nan, np.inf, -np.inf, -0.0, info.max, info.tiny, info.smallest_subnormal], dtype=dtype)
        a[:min(n, len(edges))] = edges[:n]
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        a[:min(n, 2)] = [info.min, info.max][:n]
    return a.reshape(shape)
def record(kind, path, name, a):
    raw = path + '.' + name.replace('/', '_') + '.raw'
    open(raw, 'wb').write(a.tobytes(order='C'))
    lines.append('|'.join([kind, path, name, a.dtype.name, ','.join(str(d) for d in a.shape), raw]))
count = 0
for dtype in dtypes:
    for shape in shapes:
        a = sample(dtype, shape)
        path = '%s/c%d.npy' % (out, count)
        np.save(path, a)
        record('npy', path, '', a)
        if a.ndim >= 2 and a.size > 1:
            f = np.asfortranarray(a)
            assert f.flags.f_contiguous and not f.flags.c_contiguous
            path = '%s/f%d.npy' % (out, count)
            np.save(path, f)
            with open(path, 'rb') as fh:
                np.lib.format.read_magic(fh)
                assert np.lib.format.read_array_header_1_0(fh)[1] is True  # written in Fortran order
            record('npy', path, '', a)
        count += 1
# Format versions 2.0 and 3.0 (a 4-byte header length; 3.0 has a UTF-8 header).
for version in [(2, 0), (3, 0)]:
    a = sample(np.float64, (3, 2))
    path = '%s/v%d.npy' % (out, version[0])
    with open(path, 'wb') as fh:
        np.lib.format.write_array(fh, np.asfortranarray(a), version=version)
    record('npy', path, '', a)
# A non-contiguous view is saved in C order.
a = sample(np.int32, (4, 6))[::2, ::3]
np.save(out + '/strided.npy', a)
record('npy', out + '/strided.npy', '', a)
arrays = {'w': sample(np.float32, (2, 3)), 'conv1/kernel': sample(np.float64, (3, 3, 1, 2)),
          'b': sample(np.int64, (4,)), 'mask': sample(np.bool_, (2, 2)), 'step': sample(np.int32, ()),
          'empty': sample(np.float32, (0, 3)), 'fortran': np.asfortranarray(sample(np.int32, (3, 4)))}
for kind in ['savez', 'savez_compressed']:
    path = '%s/%s.npz' % (out, kind)
    getattr(np, kind)(path, **arrays)
    for name, a in arrays.items():
        record('npz', path, name, a)
path = out + '/positional.npz'
np.savez(path, arrays['w'], arrays['b'])
record('npz', path, 'arr_0', arrays['w'])
record('npz', path, 'arr_1', arrays['b'])
np.savez(out + '/nothing.npz')
open(out + '/manifest.txt', 'w').write('\n'.join(lines) + '\n')
print('numpy wrote', len(lines), 'arrays')
)PY";
  const PythonRun run = run_python(folder, script, {folder.path().string()});
  INFO(run.output);
  REQUIRE(run.status == 0);
  std::cout << run.output;

  std::ifstream manifest(folder.file("manifest.txt"));
  std::string line;
  int checked_npy = 0, checked_npz = 0;
  // The entries expected in each archive, in order.
  std::vector<std::pair<std::string, std::vector<std::vector<std::string>>>> archives;
  while (std::getline(manifest, line)) {
    if (line.empty()) continue;
    const auto fields = split(line, '|');
    REQUIRE(fields.size() == 6);
    INFO(line);
    if (fields[0] == "npy") {
      const Tensor t = load_npy(fields[1]);
      CHECK(t.dtype() == parse_dtype(fields[3]));
      CHECK(t.shape() == parse_dims(fields[4]));
      CHECK(element_bytes(t) == read_bytes(fields[5]));
      ++checked_npy;
    } else {
      if (archives.empty() || archives.back().first != fields[1])
        archives.push_back({fields[1], {}});
      archives.back().second.push_back(fields);
    }
  }
  for (const auto& [path, expected] : archives) {
    INFO(path);
    const auto loaded = load_npz(path);
    REQUIRE(loaded.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      INFO("entry " << expected[i][2]);
      CHECK(loaded[i].first == expected[i][2]);
      CHECK(loaded[i].second.dtype() == parse_dtype(expected[i][3]));
      CHECK(loaded[i].second.shape() == parse_dims(expected[i][4]));
      CHECK(element_bytes(loaded[i].second) == read_bytes(expected[i][5]));
      ++checked_npz;
    }
  }
  CHECK(load_npz(folder.file("nothing.npz")).empty());
  std::cout << "tapegrad read " << checked_npy << " .npy files and " << checked_npz
            << " .npz entries written by numpy\n";
  CHECK(checked_npy > 40);
  CHECK(checked_npz == 16);
}

// ---- refusals -----------------------------------------------------------------------------

TEST_CASE(
    "load_npy refuses missing, truncated, corrupt and mis-typed files with InvalidArgument naming "
    "the path") {
  TempFolder folder("bad_npy");
  const std::string path = folder.file("bad.npy");
  auto expect_bad_file = [&](const std::string& label, const std::string& bytes,
                             std::vector<std::string> mentions) {
    write_bytes(path, bytes);
    mentions.insert(mentions.begin(), {"load_npy", path});
    expect_invalid(
        label, [&] { load_npy(path); }, mentions);
  };
  const std::string f64_2x3 = std::string(48, '\0');

  expect_invalid("missing file", [&] { load_npy(folder.file("missing.npy")); },
                 {"load_npy", folder.file("missing.npy"), "No such file"});
  expect_invalid("a folder", [&] { load_npy(folder.path().string()); },
                 {"load_npy", folder.path().string(), "folder"});

  const std::string good =
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", f64_2x3);
  write_bytes(path, good);
  CHECK(load_npy(path).shape() == Shape{2, 3});
  // Truncated at every length: the prefix, the header, the data.
  for (std::size_t length = 0; length < good.size(); ++length) {
    expect_bad_file("truncated to " + std::to_string(length), good.substr(0, length), {});
  }
  expect_bad_file("empty file", "", {"too short"});
  expect_bad_file("wrong magic", "\x93NUMPX" + good.substr(6), {"magic"});
  expect_bad_file("a text file", "hello, this is not an array at all\n", {"magic"});
  std::string version = good;
  version[6] = 4;
  expect_bad_file("version 4.0", version, {"version 4.0"});
  version[6] = 1;
  version[7] = 1;
  expect_bad_file("version 1.1", version, {"version 1.1"});
  expect_bad_file("trailing bytes", good + "x", {"trailing"});
  expect_bad_file("data short by one byte", good.substr(0, good.size() - 1), {"truncated"});

  // Malformed header dicts.
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"no dict", "'descr': '<f8'"},
      {"unterminated", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), "},
      {"missing shape", "{'descr': '<f8', 'fortran_order': False}"},
      {"missing descr", "{'fortran_order': False, 'shape': (2, 3)}"},
      {"extra key", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), 'x': 1}"},
      {"duplicate key",
       "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}"},
      {"fortran_order not a bool", "{'descr': '<f8', 'fortran_order': 0, 'shape': (2, 3)}"},
      {"shape a list", "{'descr': '<f8', 'fortran_order': False, 'shape': [2, 3]}"},
      {"negative dimension", "{'descr': '<f8', 'fortran_order': False, 'shape': (-2, 3)}"},
      {"float dimension", "{'descr': '<f8', 'fortran_order': False, 'shape': (2.0, 3)}"},
      {"one dimension without comma", "{'descr': '<f8', 'fortran_order': False, 'shape': (6)}"},
      {"dimension beyond 64 bits",
       "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,)}"},
      {"unterminated string", "{'descr': '<f8, 'fortran_order': False, 'shape': (6,)}"},
      {"text after the dict", "{'descr': '<f8', 'fortran_order': False, 'shape': (6,)} x"},
  };
  for (const auto& [label, header] : malformed) {
    expect_bad_file(label, npy_file(header, f64_2x3), {});
  }
  // dtypes with no tapegrad equivalent: the message quotes the descr.
  for (const std::string descr :
       {">f8", "<u4", "|u1", "<f2", "<c16", "|O", "<U3", "|S4", "<M8[s]", "=f8", "<b1"}) {
    expect_bad_file(
        "descr " + descr,
        npy_file("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (6,), }", f64_2x3),
        {"'" + descr + "'"});
  }
  expect_bad_file("big-endian",
                  npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }", f64_2x3),
                  {"'>f8'", "big-endian"});
  expect_bad_file(
      "structured dtype",
      npy_file("{'descr': [('a', '<f8'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }",
               f64_2x3),
      {"structured"});
  // Shapes that disagree with the data, without allocating what they claim.
  expect_bad_file("shape larger than the data",
                  npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (7,), }", f64_2x3),
                  {"[7]", "truncated"});
  expect_bad_file(
      "a terabyte claimed",
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", f64_2x3),
      {"8000000000000 bytes"});
  expect_bad_file(
      "element count overflows",
      npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
               f64_2x3),
      {"more elements"});
  expect_bad_file(
      "an empty shape with huge dimensions",
      npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }",
               ""),
      {"more elements"});
  // Header lengths claiming more than the file holds: refused before any allocation.
  std::string huge = good;
  huge[8] = '\xff';
  huge[9] = '\xff';
  expect_bad_file("1.0 header length 65535", huge, {"65535"});
  std::string huge2 =
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", f64_2x3, 2);
  write_bytes(path, huge2);
  CHECK(load_npy(path).shape() == Shape{2, 3});
  huge2[8] = huge2[9] = huge2[10] = huge2[11] = '\xff';
  expect_bad_file("2.0 header length 4 GiB", huge2, {"4294967295"});
  // A bool byte other than 0 or 1.
  expect_bad_file("bool byte 2",
                  npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                           std::string("\x01\x02\x00", 3)),
                  {"bool element 1"});
}

TEST_CASE("save_npy refuses undefined tensors, variable handles and paths it cannot write") {
  TempFolder folder("bad_save");
  const Tensor t = sample(DType::Float32, {2}, 1);
  const std::string missing_folder = folder.file("no/such/folder/w.npy");
  expect_invalid("missing folder", [&] { save_npy(missing_folder, t); },
                 {"save_npy", missing_folder, "No such file"});
  expect_invalid("a folder as the path", [&] { save_npy(folder.path().string(), t); },
                 {"save_npy", folder.path().string(), "folder"});
  write_bytes(folder.file("plain"), "x");
  const std::string under_a_file = folder.file("plain/w.npy");
  expect_invalid("a file as the folder", [&] { save_npy(under_a_file, t); },
                 {"save_npy", under_a_file});
  expect_invalid("undefined tensor", [&] { save_npy(folder.file("u.npy"), Tensor()); },
                 {"save_npy", folder.file("u.npy"), "undefined"});
  Variable variable(constant({1.0, 2.0}), true, "v");
  expect_invalid("variable handle", [&] { save_npy(folder.file("v.npy"), variable.handle()); },
                 {"save_npy", folder.file("v.npy"), "variable handle"});
  expect_invalid("empty path", [&] { save_npy("", t); }, {"save_npy"});

  // No permission: a read-only folder binds everyone but root, who is refused by sysfs.
  std::string forbidden;
  const fs::path read_only = folder.path() / "read_only";
  fs::create_directory(read_only);
  fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
  if (::geteuid() != 0) {
    forbidden = (read_only / "w.npy").string();
  } else if (fs::exists("/sys/kernel")) {
    forbidden = "/sys/tapegrad_test_w.npy";
  }
  if (!forbidden.empty()) {
    expect_invalid("no permission", [&] { save_npy(forbidden, t); }, {"save_npy", forbidden});
    expect_invalid("no permission (npz)",
                   [&] {
                     save_npz(forbidden, {{"w", t}});
                   },
                   {"save_npz", forbidden});
  } else {
    WARN("no unwritable folder to test with (root without /sys)");
  }
  // Nothing was left behind by the refused saves.
  CHECK(folder_entries(folder.path()) == std::vector<std::string>{"plain", "read_only"});
}

TEST_CASE(
    "save_npz refuses bad names and tensors naming the entry, load_npz refuses bad archives naming "
    "the entry") {
  TempFolder folder("bad_npz");
  const std::string path = folder.file("a.npz");
  const Tensor t = sample(DType::Float64, {3}, 1);
  Variable variable(constant(1.0));

  expect_invalid("duplicate names",
                 [&] {
                   save_npz(path, {{"w", t}, {"b", t}, {"w", t}});
                 },
                 {"save_npz", path, "entry \"w\"", "twice"});
  expect_invalid("empty name", [&] { save_npz(path, {{"", t}}); }, {"save_npz", path, "empty"});
  expect_invalid("NUL in a name",
                 [&] {
                   save_npz(path, {{std::string("a\0b", 3), t}});
                 },
                 {"save_npz", path, "NUL"});
  expect_invalid("undefined tensor",
                 [&] {
                   save_npz(path, {{"w", t}, {"g", Tensor()}});
                 },
                 {"save_npz", path, "entry \"g\"", "undefined"});
  expect_invalid("variable handle",
                 [&] {
                   save_npz(path, {{"v", variable.handle()}});
                 },
                 {"save_npz", path, "entry \"v\"", "variable handle"});
  expect_invalid("missing folder",
                 [&] {
                   save_npz(folder.file("no/w.npz"), {{"w", t}});
                 },
                 {"save_npz", folder.file("no/w.npz")});
  CHECK(!fs::exists(path));

  expect_invalid("missing archive", [&] { load_npz(folder.file("missing.npz")); },
                 {"load_npz", folder.file("missing.npz"), "No such file"});
  save_npy(folder.file("w.npy"), t);
  expect_invalid("a .npy is not a zip", [&] { load_npz(folder.file("w.npy")); },
                 {"load_npz", folder.file("w.npy"), "zip"});
  write_bytes(folder.file("empty.npz"), "");
  expect_invalid("an empty file", [&] { load_npz(folder.file("empty.npz")); },
                 {"load_npz", folder.file("empty.npz")});

  // A valid archive to corrupt: two stored members.
  save_npz(path, {{"first", t}, {"conv1/kernel", sample(DType::Int32, {2, 2}, 2)}});
  const std::string good = read_bytes(path);
  REQUIRE(load_npz(path).size() == 2);
  const auto locals = find_all(good, "PK\x03\x04");
  const auto centrals = find_all(good, std::string("PK\x01\x02", 4));
  REQUIRE(locals.size() == 2);
  REQUIRE(centrals.size() == 2);
  const std::string bad = folder.file("bad.npz");
  auto expect_bad_archive = [&](const std::string& label, const std::string& bytes,
                                std::vector<std::string> mentions) {
    write_bytes(bad, bytes);
    mentions.insert(mentions.begin(), {"load_npz", bad});
    expect_invalid(
        label, [&] { load_npz(bad); }, mentions);
  };
  // The second member lies about its sizes, in the central directory and the local header
  // alike (so that only the data can tell): longer, shorter, and a huge claim.
  for (const std::int64_t change : {16, -16, 1}) {
    std::string lying = good;
    for (std::size_t at : {locals[1] + 18, locals[1] + 22, centrals[1] + 20, centrals[1] + 24}) {
      write_u32(
          lying, at,
          static_cast<std::uint32_t>(static_cast<std::int64_t>(read_u32(lying, at)) + change));
    }
    expect_bad_archive("sizes changed by " + std::to_string(change), lying,
                       {"entry \"conv1/kernel\""});
  }
  {
    std::string lying = good;
    write_u32(lying, centrals[1] + 24, 0x7fffffff);  // uncompressed size only
    expect_bad_archive("uncompressed size 2 GiB", lying, {"entry \"conv1/kernel\""});
    write_u32(lying, centrals[1] + 20, 0x7fffffff);
    expect_bad_archive("both sizes 2 GiB", lying, {"entry \"conv1/kernel\""});
  }
  {
    // A data byte changed: the CRC-32 no longer matches.
    std::string corrupt = good;
    corrupt[centrals[0] - 1] = static_cast<char>(corrupt[centrals[0] - 1] ^ 0x40);
    expect_bad_archive("corrupt data", corrupt, {"entry \"conv1/kernel\""});
  }
  {
    // A member whose bytes are not a .npy file.
    std::string not_npy = good;
    // After the local header's 30 fixed bytes, the name and the extra field.
    auto u16 = [&](std::size_t at) {
      return static_cast<std::size_t>(static_cast<unsigned char>(good[at])) |
             (static_cast<std::size_t>(static_cast<unsigned char>(good[at + 1])) << 8);
    };
    const std::size_t data = locals[0] + 30 + u16(locals[0] + 26) + u16(locals[0] + 28);
    not_npy.replace(data, 6, "NOTNPY");
    expect_bad_archive("member not .npy", not_npy, {"entry \"first\"", "magic"});
  }
  {
    // Two members of one name: the second renamed to the first's (same length) in both its
    // local header and the central directory.
    save_npz(path, {{"aaaaa", t}, {"bbbbb", t}});
    std::string twice = read_bytes(path);
    for (std::size_t at : find_all(twice, "bbbbb.npy")) twice.replace(at, 5, "aaaaa");
    expect_bad_archive("a name twice", twice, {"entry \"aaaaa\"", "twice"});
  }
  expect_bad_archive("truncated archive", good.substr(0, good.size() / 2), {});
}

// ---- fuzz ---------------------------------------------------------------------------------

TEST_CASE("mutated .npy and .npz files either load or throw InvalidArgument, never anything else") {
  // Tens of thousands of small files: in memory (/dev/shm) when there is one, since creating
  // and removing files costs a disk-backed or overlay file system far more than the loads.
  std::error_code no_shm;
  const bool shm = fs::is_directory("/dev/shm", no_shm) && ::access("/dev/shm", W_OK) == 0;
  TempFolder folder("fuzz", shm ? fs::path("/dev/shm") : fs::temp_directory_path());
  std::mt19937_64 generator(20261127);
  // Valid files to mutate: small .npy files of every dtype, version 1.0 and 2.0, Fortran
  // order, empty and scalar; a stored .npz from save_npz and a deflated one from NumPy.
  std::vector<std::pair<std::string, bool>> bases;  // bytes, is an archive
  unsigned seed = 1;
  for (DType dtype : kDTypes) {
    for (const Shape& shape : std::vector<Shape>{{}, {3}, {2, 3}, {0, 2}}) {
      save_npy(folder.file("base.npy"), sample(dtype, shape, seed++));
      bases.emplace_back(read_bytes(folder.file("base.npy")), false);
    }
  }
  bases.emplace_back(
      npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
               std::string("\x01\0\0\0\x02\0\0\0\x03\0\0\0\x04\0\0\0\x05\0\0\0\x06\0\0\0", 24), 2),
      false);
  save_npz(folder.file("base.npz"), {{"w", sample(DType::Float32, {2, 3}, 9)},
                                     {"conv1/kernel", sample(DType::Int64, {2}, 10)},
                                     {"mask", sample(DType::Bool, {3}, 11)}});
  bases.emplace_back(read_bytes(folder.file("base.npz")), true);
  bases.emplace_back(kNumpyCompressedNpz, true);

  const std::string npy_path = folder.file("fuzz.npy");
  const std::string npz_path = folder.file("fuzz.npz");
  long cases = 0, loaded = 0, refused = 0;
  auto attempt = [&](const std::string& bytes, bool archive, const std::string& mutation) {
    const std::string& path = archive ? npz_path : npy_path;
    // A new file each time, not a truncated one: ext4 flushes a truncated file's data at
    // close (its auto_da_alloc) when /dev/shm is missing.
    ::unlink(path.c_str());
    write_bytes(path, bytes);
    ++cases;
    try {
      if (archive) {
        load_npz(path);
      } else {
        load_npy(path);
      }
      ++loaded;
    } catch (const InvalidArgument& e) {
      ++refused;
      const std::string message = e.what();
      if (message.find(archive ? "load_npz" : "load_npy") == std::string::npos ||
          message.find(path) == std::string::npos) {
        FAIL("mutation " << mutation
                         << ": the message names neither function nor path: " << message);
      }
    } catch (const std::exception& e) {
      FAIL("mutation " << mutation << ": " << typeid(e).name() << ": " << e.what());
    }
  };
  for (std::size_t b = 0; b < bases.size(); ++b) {
    const auto& [base, archive] = bases[b];
    const std::string tag = "base " + std::to_string(b) + ", ";
    const long loaded_before = loaded;
    attempt(base, archive, tag + "unchanged");
    REQUIRE(loaded == loaded_before + 1);  // every base file is valid
    // Truncated at every length.
    for (std::size_t length = 0; length < base.size(); ++length) {
      attempt(base.substr(0, length), archive, tag + "truncated to " + std::to_string(length));
    }
    // Single bit flips: every bit of a .npy's prefix and header, random ones elsewhere.
    const std::size_t header_bits = std::min<std::size_t>(base.size(), 128) * 8;
    for (std::size_t bit = 0; bit < header_bits; ++bit) {
      if (archive && generator() % 4 != 0) continue;  // archives: a quarter of them
      std::string flipped = base;
      flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
      attempt(flipped, archive, tag + "bit " + std::to_string(bit));
    }
    for (int i = 0; i < 300; ++i) {
      const std::size_t bit = generator() % (base.size() * 8);
      std::string flipped = base;
      flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
      attempt(flipped, archive, tag + "bit " + std::to_string(bit));
    }
    // Random overwrites of 1 to 8 bytes.
    for (int i = 0; i < 300; ++i) {
      std::string overwritten = base;
      const int count = 1 + static_cast<int>(generator() % 8);
      for (int j = 0; j < count; ++j)
        overwritten[generator() % base.size()] = static_cast<char>(generator());
      attempt(overwritten, archive, tag + "overwrite " + std::to_string(i));
    }
    // Huge values at every 16- and 32-bit field position (header lengths, zip sizes,
    // offsets and counts): every aligned and unaligned offset for a .npy's first 16 bytes and
    // an archive's every offset.
    const std::size_t field_end = archive ? base.size() : std::min<std::size_t>(base.size(), 16);
    for (std::size_t at = 0; at + 4 <= field_end; ++at) {
      for (std::uint32_t value : {0xffffffffU, 0x7fffffffU, 0x80000000U, 0x0000ffffU}) {
        std::string patched = base;
        write_u32(patched, at, value);
        attempt(patched, archive,
                tag + "u32 " + std::to_string(value) + " at " + std::to_string(at));
      }
    }
    // Shapes rewritten in the header text: huge, negative, and one off.
    if (!archive) {
      for (const std::string replacement :
           {"99999999999", "18446744073709551615", "-1", "4", "1", "0", ""}) {
        std::string rewritten = base;
        const std::size_t open = rewritten.find("'shape': (");
        if (open == std::string::npos) continue;
        const std::size_t start = open + 10;
        const std::size_t end = rewritten.find_first_of(",)", start);
        rewritten.replace(start, end - start, replacement);
        attempt(rewritten, archive, tag + "shape " + replacement);
      }
    }
  }
  std::cout << "fuzz: " << cases << " mutated files, " << loaded << " loaded, " << refused
            << " refused with InvalidArgument\n";
  CHECK(cases > 10000);
  CHECK(refused > 0);
}
