// The .npy format: header writer, strict header reader, element bytes (see npy_format.hpp).
#include "files/npy_format.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#include <xtensor/xmanipulation.hpp>

#include "tapegrad/errors.hpp"
#include "tapegrad/storage.hpp"

namespace tapegrad::detail::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
// Magic, two version bytes, and the shortest length field.
constexpr std::size_t kShortestPrefix = kMagicSize + 2 + 2;
// NumPy aligns the elements to 64 bytes (its own header writer pads to that since 1.14).
constexpr std::size_t kDataAlignment = 64;
// A header describes one dtype and a shape: a few hundred bytes at most for any real rank.
// Longer ones are refused before they are read, whatever the file's size.
constexpr std::uint64_t kLongestHeader = 1 << 20;
// NumPy 2 allows 64 dimensions (NumPy 1, 32); more can only be a corrupt header.
constexpr std::size_t kMostDimensions = 64;

struct DTypeCode {
  DType dtype;
  const char* descr;
  std::size_t element_size;
};
// The descr NumPy writes for each dtype on a little-endian machine ('|': one byte, no order).
constexpr DTypeCode kDTypeCodes[] = {
    {DType::Float32, "<f4", 4}, {DType::Float64, "<f8", 8}, {DType::Int32, "<i4", 4},
    {DType::Int64, "<i8", 8},   {DType::Bool, "|b1", 1},
};

const DTypeCode& code_of(DType dtype) {
  for (const DTypeCode& code : kDTypeCodes) {
    if (code.dtype == dtype) return code;
  }
  throw InvalidArgument("npy: unknown dtype");  // unreachable: every DType has a code
}

// Text from a file, safe to put in a message: non-printable bytes as \xNN, at most 160
// characters (a corrupt header may be long binary noise).
std::string printable(const std::string& text) {
  constexpr std::size_t kShown = 160;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      out += static_cast<char>(byte);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  if (text.size() > kShown) out += "...";
  return out;
}

std::string python_tuple(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  // A one-element tuple needs its comma in Python: "(3,)", since "(3)" is the number 3.
  if (shape.size() == 1) out += ",";
  return out + ")";
}

// The header dict of a .npy file, read strictly: a Python dict literal with exactly the keys
// 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a tuple of non-negative
// integers), in any order, then only whitespace. Anything else is an InvalidArgument quoting
// the header.
struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& context)
      : text_(text), context_(context) {}

  Header parse() {
    Header header;
    bool has_descr = false, has_fortran_order = false, has_shape = false;
    skip_space();
    expect('{');
    skip_space();
    while (!at('}')) {
      const std::string key = parse_string("a key");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        mark_seen(has_descr, key);
        // A list (structured dtype) or anything but a string has no tensor equivalent.
        if (!at('\'') && !at('"')) {
          throw InvalidArgument(context_ +
                                ": the header's 'descr' is not a dtype string (a structured "
                                "or record dtype?), which tapegrad does not read; the header "
                                "is: " +
                                printable(text_));
        }
        header.descr = parse_string("the 'descr' value");
      } else if (key == "fortran_order") {
        mark_seen(has_fortran_order, key);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(has_shape, key);
        header.shape = parse_shape();
      } else {
        fail("an unexpected key '" + printable(key) + "'");
      }
      skip_space();
      if (at(',')) {
        ++position_;
        skip_space();
      } else if (!at('}')) {
        fail("',' or '}' expected");
      }
    }
    ++position_;  // the '}'
    skip_space();
    if (position_ != text_.size()) fail("text after the dict");
    if (!has_descr || !has_fortran_order || !has_shape) {
      fail(std::string("missing key '") +
           (!has_descr           ? "descr"
            : !has_fortran_order ? "fortran_order"
                                 : "shape") +
           "'");
    }
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(context_ + ": malformed .npy header (" + what + " at byte " +
                          std::to_string(position_) + "); the header is: " + printable(text_));
  }
  bool at(char c) const { return position_ < text_.size() && text_[position_] == c; }
  void expect(char c) {
    if (!at(c)) fail(std::string("'") + c + "' expected");
    ++position_;
  }
  void skip_space() {
    // NumPy pads with spaces and ends with '\n'; Python's own literals allow tabs and CRs.
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n' ||
                                        text_[position_] == '\t' || text_[position_] == '\r')) {
      ++position_;
    }
  }
  void mark_seen(bool& seen, const std::string& key) {
    if (seen) fail("the key '" + key + "' twice");
    seen = true;
  }
  // A quoted string without escapes: no dtype string or key NumPy writes has one.
  std::string parse_string(const char* what) {
    if (!at('\'') && !at('"')) fail(std::string(what) + ": a quoted string expected");
    const char quote = text_[position_++];
    const std::size_t start = position_;
    while (position_ < text_.size() && text_[position_] != quote) {
      if (text_[position_] == '\\' || text_[position_] == '\n')
        fail("an escape or line break in a string");
      ++position_;
    }
    if (position_ == text_.size()) fail("an unterminated string");
    return text_.substr(start, position_++ - start);
  }
  bool parse_bool() {
    if (text_.compare(position_, 4, "True") == 0) {
      position_ += 4;
      return true;
    }
    if (text_.compare(position_, 5, "False") == 0) {
      position_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  std::uint64_t parse_dimension() {
    const std::size_t start = position_;
    std::uint64_t value = 0;
    while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[position_] - '0');
      if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
        fail("a dimension too large for 64 bits");
      }
      value = value * 10 + digit;
      ++position_;
    }
    if (position_ == start) fail("a non-negative integer dimension expected");
    // Python 2's NumPy wrote long integers with an 'L' suffix ("(3L, 4L)").
    if (at('L')) ++position_;
    return value;
  }
  Shape parse_shape() {
    expect('(');
    skip_space();
    Shape shape;
    bool trailing_comma = false;
    while (!at(')')) {
      if (shape.size() == kMostDimensions) fail("more than 64 dimensions");
      const std::uint64_t dimension = parse_dimension();
      if (dimension > std::numeric_limits<std::size_t>::max()) fail("a dimension too large");
      shape.push_back(static_cast<std::size_t>(dimension));
      skip_space();
      trailing_comma = at(',');
      if (trailing_comma) {
        ++position_;
        skip_space();
      } else if (!at(')')) {
        fail("',' or ')' expected in the shape");
      }
    }
    // "(3)" is the integer 3 in Python, not a shape: NumPy never writes it.
    if (shape.size() == 1 && !trailing_comma) fail("a one-dimensional shape without its comma");
    ++position_;  // the ')'
    return shape;
  }

  const std::string& text_;
  const std::string& context_;
  std::size_t position_ = 0;
};

std::uint64_t little_endian(const unsigned char* bytes, std::size_t count) {
  std::uint64_t value = 0;
  for (std::size_t i = count; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

const DTypeCode& code_for_descr(const std::string& descr, const std::string& context) {
  for (const DTypeCode& code : kDTypeCodes) {
    if (descr == code.descr) return code;
  }
  std::string hint;
  if (!descr.empty() && descr[0] == '>') hint = " (big-endian)";
  if (descr.find('O') != std::string::npos) hint = " (an object array)";
  throw InvalidArgument(context + ": the dtype '" + printable(descr) + "'" + hint +
                        " has no tapegrad equivalent; tapegrad reads '<f4' (float32), '<f8' "
                        "(float64), '<i4' (int32), '<i8' (int64) and '|b1' (bool)");
}

// The element count of a shape, and the same check as tapegrad's ops make: the product of the
// non-zero dimensions must fit in int64 and its bytes in ptrdiff_t (NumPy refuses such shapes
// too), so that strides and offsets computed from the shape never overflow.
std::uint64_t checked_element_count(const Shape& shape, std::size_t element_size,
                                    const std::string& context) {
  std::uint64_t nonzero_product = 1;
  bool has_zero = false;
  const auto limit =
      static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / element_size;
  for (std::size_t dimension : shape) {
    if (dimension == 0) {
      has_zero = true;
      continue;
    }
    if (nonzero_product > limit / dimension) {
      throw InvalidArgument(context + ": the header's shape " + shape_to_string(shape) +
                            " has more elements than any array can hold");
    }
    nonzero_product *= dimension;
  }
  return has_zero ? 0 : nonzero_product;
}

// Reads the elements (after the header) into a new array of `shape` in the file's order.
template <class T>
storage_array<T> read_elements(ByteSource& source, const Shape& shape, std::size_t byte_count,
                               const std::string& context) {
  storage_array<T> elements = storage_array<T>::from_shape(shape);
  // Through unsigned char: a bool file byte other than 0 or 1 must be checked before it is
  // ever read as a bool (a bool holding 2 is undefined behaviour).
  auto* bytes = reinterpret_cast<unsigned char*>(elements.data());
  const std::size_t got = source.read(bytes, byte_count);
  if (got != byte_count) {
    throw InvalidArgument(context + ": the data end after " + std::to_string(got) + " of the " +
                          std::to_string(byte_count) + " bytes the shape needs (truncated)");
  }
  if constexpr (std::is_same_v<T, bool>) {
    static_assert(sizeof(bool) == 1, "a .npy bool is one byte");
    const auto* bad =
        std::find_if(bytes, bytes + byte_count, [](unsigned char b) { return b > 1; });
    if (bad != bytes + byte_count) {
      throw InvalidArgument(context + ": bool element " + std::to_string(bad - bytes) +
                            " is the byte " + std::to_string(*bad) + ", not 0 or 1");
    }
  }
  return elements;
}

template <class T>
Tensor read_tensor(ByteSource& source, const Header& header, std::size_t byte_count,
                   const std::string& context) {
  if (!header.fortran_order || header.shape.size() < 2) {
    return Tensor(read_elements<T>(source, header.shape, byte_count, context));
  }
  // Fortran order is C order of the reversed shape: read that, then transpose it (reversing
  // every axis) into a row-major array of the header's shape.
  const Shape reversed(header.shape.rbegin(), header.shape.rend());
  const storage_array<T> column_major = read_elements<T>(source, reversed, byte_count, context);
  storage_array<T> row_major = xt::transpose(column_major);
  return Tensor(std::move(row_major));
}

}  // namespace

std::string format_header(DType dtype, const Shape& shape) {
  std::string dict = std::string("{'descr': '") + code_of(dtype).descr +
                     "', 'fortran_order': False, 'shape': " + python_tuple(shape) + ", }";
  // Version 1.0 has a 2-byte length; 2.0 differs only by its 4-byte one.
  const bool long_header = kShortestPrefix + dict.size() + 1 > 65535;
  const std::size_t prefix = long_header ? kShortestPrefix + 2 : kShortestPrefix;
  // Spaces, then the '\n' that ends the header, up to the next multiple of the alignment.
  const std::size_t unpadded = prefix + dict.size() + 1;
  const std::size_t padding = (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  dict.append(padding, ' ');
  dict += '\n';

  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(long_header ? 2 : 1);
  out += static_cast<char>(0);
  const std::size_t length = dict.size();
  for (std::size_t i = 0; i < (long_header ? 4u : 2u); ++i) {
    out += static_cast<char>((length >> (8 * i)) & 0xff);
  }
  return out + dict;
}

ElementBytes element_bytes(const Tensor& tensor, const std::string& context) {
  if (!tensor.defined()) {
    throw InvalidArgument(context +
                          ": the tensor is undefined (an unconnected gradient, or a "
                          "default-constructed Tensor)");
  }
  auto view = [&](auto zero) {
    using T = decltype(zero);
    try {
      const storage_array<T>& elements = tensor.array<T>();
      return ElementBytes{elements.data(), elements.size() * sizeof(T)};
    } catch (const InvalidArgument&) {
      // The dtype is the tensor's own, so the only refusal left is a Variable's handle; the
      // public API has no other way to ask.
      throw InvalidArgument(context + ": the tensor is a variable handle (shape " +
                            shape_to_string(tensor.shape()) + ", dtype " +
                            dtype_name(tensor.dtype()) +
                            "), which holds no elements; save the variable's value() instead");
    }
  };
  switch (tensor.dtype()) {
    case DType::Float32:
      return view(float{});
    case DType::Float64:
      return view(double{});
    case DType::Int32:
      return view(std::int32_t{});
    case DType::Int64:
      return view(std::int64_t{});
    case DType::Bool:
      return view(bool{});
  }
  throw InvalidArgument(context + ": unknown dtype");
}

Tensor read_npy(ByteSource& source, std::uint64_t total_size, const std::string& context) {
  unsigned char prefix[kShortestPrefix + 2];
  if (total_size < kShortestPrefix) {
    throw InvalidArgument(context + ": " + std::to_string(total_size) +
                          " bytes, too short for a .npy file (truncated?)");
  }
  if (source.read(prefix, kMagicSize + 2) != kMagicSize + 2) {
    throw InvalidArgument(context + ": the file ends inside the .npy prefix (truncated)");
  }
  if (std::memcmp(prefix, kMagic, kMagicSize) != 0) {
    throw InvalidArgument(
        context + ": not a .npy file (its first bytes are '" +
        printable(std::string(reinterpret_cast<const char*>(prefix), kMagicSize)) +
        "', not the magic '\\x93NUMPY')");
  }
  const unsigned major = prefix[kMagicSize], minor = prefix[kMagicSize + 1];
  if (minor != 0 || major < 1 || major > 3) {
    throw InvalidArgument(context + ": .npy format version " + std::to_string(major) + "." +
                          std::to_string(minor) + " is unknown (tapegrad reads 1.0, 2.0, 3.0)");
  }
  // 1.0: a 2-byte header length; 2.0 and 3.0 (3.0: a UTF-8 header), a 4-byte one.
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t prefix_size = kMagicSize + 2 + length_bytes;
  if (total_size < prefix_size ||
      source.read(prefix + kMagicSize + 2, length_bytes) != length_bytes) {
    throw InvalidArgument(context + ": the file ends inside the .npy prefix (truncated)");
  }
  const std::uint64_t header_size = little_endian(prefix + kMagicSize + 2, length_bytes);
  // Checked before the header is allocated: a corrupt length must not become a huge buffer.
  if (header_size > total_size - prefix_size) {
    throw InvalidArgument(context + ": the header claims " + std::to_string(header_size) +
                          " bytes but only " + std::to_string(total_size - prefix_size) +
                          " follow (truncated or corrupt)");
  }
  if (header_size > kLongestHeader) {
    throw InvalidArgument(context + ": a header of " + std::to_string(header_size) +
                          " bytes, longer than any dtype and shape need (corrupt)");
  }
  std::string text(static_cast<std::size_t>(header_size), '\0');
  if (source.read(text.data(), text.size()) != text.size()) {
    throw InvalidArgument(context + ": the file ends inside the header (truncated)");
  }
  const Header header = HeaderParser(text, context).parse();
  const DTypeCode& code = code_for_descr(header.descr, context);
  const std::uint64_t count = checked_element_count(header.shape, code.element_size, context);
  const std::uint64_t byte_count = count * code.element_size;
  const std::uint64_t available = total_size - prefix_size - header_size;
  // Before any allocation: the shape must describe exactly the bytes that are there.
  if (byte_count != available) {
    throw InvalidArgument(context + ": the header's shape " + shape_to_string(header.shape) +
                          " and dtype '" + header.descr + "' need " + std::to_string(byte_count) +
                          " bytes of data, but " + std::to_string(available) +
                          " follow the header" +
                          (byte_count > available ? " (truncated)" : " (trailing bytes)"));
  }
  try {
    switch (code.dtype) {
      case DType::Float32:
        return read_tensor<float>(source, header, byte_count, context);
      case DType::Float64:
        return read_tensor<double>(source, header, byte_count, context);
      case DType::Int32:
        return read_tensor<std::int32_t>(source, header, byte_count, context);
      case DType::Int64:
        return read_tensor<std::int64_t>(source, header, byte_count, context);
      case DType::Bool:
        return read_tensor<bool>(source, header, byte_count, context);
    }
  } catch (const std::bad_alloc&) {
    throw ResourceExhausted(context + ": out of memory allocating a tensor of shape " +
                            shape_to_string(header.shape) + " and dtype " + dtype_name(code.dtype) +
                            " (" + std::to_string(byte_count) + " bytes)");
  }
  throw InvalidArgument(context + ": unknown dtype");
}

}  // namespace tapegrad::detail::npy
