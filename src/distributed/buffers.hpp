// Packing tensors into one contiguous buffer per dtype and back, for the collectives.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include <mpi.h>

#include "tapegrad/errors.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::distributed::detail {

inline MPI_Datatype mpi_type(DType dtype) {
  return dtype == DType::Float32 ? MPI_FLOAT : MPI_DOUBLE;
}

inline std::size_t element_size(DType dtype) { return dtype == DType::Float32 ? 4 : 8; }

// InvalidArgument unless the dtype is one a collective reduces.
void require_floating(const char* what, DType dtype);

// Elements of a contiguous buffer of one dtype (bytes, so that one type serves both).
class Buffer {
 public:
  explicit Buffer(DType dtype) : dtype_(dtype) {}
  DType dtype() const { return dtype_; }
  std::size_t elements() const { return bytes_.size() / element_size(dtype_); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  void resize(std::size_t elements) { bytes_.resize(elements * element_size(dtype_)); }
  // Copies t's elements to element `offset` (t must have this dtype).
  void write(std::size_t offset, const Tensor& t);
  // A tensor of `shape` from the elements at `offset`, divided by `divisor` when it is not 1.
  Tensor read(std::size_t offset, const Shape& shape, int divisor) const;

 private:
  DType dtype_;
  std::vector<unsigned char> bytes_;
};

// MPI counts are ints.
int mpi_count(const char* what, std::size_t n);

}  // namespace tapegrad::distributed::detail
