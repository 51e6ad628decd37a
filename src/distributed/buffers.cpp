#include "buffers.hpp"

#include <climits>
#include <string>

namespace tapegrad::distributed::detail {
namespace {

template <class T>
Tensor read_as(const unsigned char* bytes, const Shape& shape, int divisor) {
  auto a = xt::xarray<T>::from_shape(shape);
  std::memcpy(a.data(), bytes, a.size() * sizeof(T));
  if (divisor != 1) {
    // Division, not multiplication by 1/size: a mean of equal values stays exact.
    const T d = static_cast<T>(divisor);
    for (T& v : a) v /= d;
  }
  return Tensor(std::move(a));
}

}  // namespace

void require_floating(const char* what, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw InvalidArgument(std::string(what) +
                          ": only float32 and float64 tensors are reduced, got " +
                          dtype_name(dtype));
  }
}

void Buffer::write(std::size_t offset, const Tensor& t) {
  const std::size_t size = element_size(dtype_);
  unsigned char* out = bytes_.data() + offset * size;
  if (dtype_ == DType::Float32) {
    std::memcpy(out, t.array<float>().data(), t.size() * size);
  } else {
    std::memcpy(out, t.array<double>().data(), t.size() * size);
  }
}

Tensor Buffer::read(std::size_t offset, const Shape& shape, int divisor) const {
  const unsigned char* in = bytes_.data() + offset * element_size(dtype_);
  return dtype_ == DType::Float32 ? read_as<float>(in, shape, divisor)
                                  : read_as<double>(in, shape, divisor);
}

int mpi_count(const char* what, std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(n) +
                          " elements exceed MPI's int count; split the tensors");
  }
  return static_cast<int>(n);
}

}  // namespace tapegrad::distributed::detail
