// The .npy format itself, shared by the .npy and .npz functions: the header tapegrad writes,
// a strict reader of the headers NumPy writes, and the element bytes in and out of tensors.
//
// A .npy file is: the magic string "\x93NUMPY", a major and a minor version byte, the header's
// length (2 bytes little-endian for version 1.0, 4 bytes for 2.0 and 3.0), the header (the
// text of a Python dict with the keys 'descr', 'fortran_order' and 'shape', padded with
// spaces and ending in '\n'), then the elements, packed, in C or Fortran order.
//
// Why not xtensor's xnpy.hpp: it allocates whatever a header claims (the header's own length
// and the data's size) before checking that the file holds that much, sign-extends the
// length bytes, and reports errors as std::runtime_error; a file read from disk is input, so
// every inconsistency here is an InvalidArgument and nothing is allocated on a header's word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tapegrad/dtype.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail::npy {

// The elements are copied to and from files as the host's bytes: little-endian hosts only
// (every platform tapegrad builds on); a big-endian port would byte-swap here.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tapegrad's .npy support assumes a little-endian host"
#endif

// The bytes before the elements of a .npy file holding `dtype` and `shape` in C order:
// version 1.0 (2.0 for a header longer than 65535 bytes), the header padded so that the
// elements start at a multiple of 64 bytes, as NumPy aligns them.
std::string format_header(DType dtype, const Shape& shape);

// The elements of a tensor as the bytes a .npy file stores after its header (row-major,
// little-endian, bool as one byte 0 or 1): a view of the tensor's own storage.
struct ElementBytes {
  const void* data = nullptr;
  std::size_t size = 0;
};
// Throws InvalidArgument starting with `context` for an undefined tensor or a Variable's
// handle (which holds no elements).
ElementBytes element_bytes(const Tensor& tensor, const std::string& context);

// Where read_npy takes a file's bytes from: a file on disk, or a member of a zip archive.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Copies up to `count` bytes into `buffer`; fewer only at the end of the input. Throws
  // InvalidArgument on a read error (a zip member's checksum, a disk error).
  virtual std::size_t read(void* buffer, std::size_t count) = 0;

 protected:
  ByteSource() = default;
  ByteSource(const ByteSource&) = default;
  ByteSource& operator=(const ByteSource&) = default;
};

// Reads one .npy file of exactly `total_size` bytes from `source` into a new tensor. Every
// message starts with `context` (the function, the path, and for a .npz the entry). Throws
// InvalidArgument for anything that is not a .npy file of a supported dtype whose element
// count matches the bytes that follow the header; the elements are allocated only after
// that check, so a header cannot make it allocate more than the file holds.
Tensor read_npy(ByteSource& source, std::uint64_t total_size, const std::string& context);

}  // namespace tapegrad::detail::npy
