#include "runtime/tensor_impl.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <ostream>
#include <sstream>
#include <type_traits>

#include <xtensor/xio.hpp>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "kernels/shape_util.hpp"
#include "kernels/strided_copy.hpp"
#include "runtime/new_tensor.hpp"

namespace tapegrad {

// The library's own xt::xarray<T> must be the pinned storage type, or every op would copy its
// result (and kernels reading std::get<xt::xarray<T>> would not compile). CMakeLists.txt
// pins XTENSOR_DEFAULT_ALLOCATOR for the library's sources; this catches a build that does not.
static_assert(std::is_same_v<xt::xarray<float>, storage_array<float>> &&
                  std::is_same_v<xt::xarray<double>, storage_array<double>> &&
                  std::is_same_v<xt::xarray<std::int32_t>, storage_array<std::int32_t>> &&
                  std::is_same_v<xt::xarray<std::int64_t>, storage_array<std::int64_t>> &&
                  std::is_same_v<xt::xarray<bool>, storage_array<bool>>,
              "tapegrad: the library's xt::xarray<T> is not storage_array<T>; build it through "
              "CMakeLists.txt, which pins XTENSOR_DEFAULT_ALLOCATOR");

bool is_floating(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
  }
  return "unknown";
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::size_t num_elements(const Shape& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

namespace detail {
namespace {

template <class T>
std::shared_ptr<const TensorImpl> make_impl(storage_array<T>&& a) {
  return make_impl_shared<TensorImpl>(next_tensor_id(), dtype_of<T>::value,
                                      std::in_place_type<storage_array<T>>, std::move(a));
}

}  // namespace

TensorImpl::TensorImpl(std::uint64_t id, DType dtype, Storage data, Shape shape)
    : TensorHeader(id, dtype, false), data(std::move(data)) {  // NOLINT: handles are rare
  elements_ = std::visit([](const auto& a) -> const void* { return &a; }, this->data);
  shape_.store(std::make_unique<const Shape>(std::move(shape)).release(),
               std::memory_order_release);
}

namespace {

// A view's unused array: of its dtype (visitors dispatch on it) and of shape [0], which
// allocates nothing (a default xarray is a scalar, one element).
template <class T>
TensorImpl::Storage empty_array() {
  return TensorImpl::Storage(std::in_place_type<storage_array<T>>,
                             typename storage_array<T>::shape_type{0});
}

TensorImpl::Storage empty_storage(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return empty_array<float>();
    case DType::Float64:
      return empty_array<double>();
    case DType::Int32:
      return empty_array<std::int32_t>();
    case DType::Int64:
      return empty_array<std::int64_t>();
    case DType::Bool:
      return empty_array<bool>();
  }
  throw InvalidArgument("Tensor: unknown dtype");
}

}  // namespace

TensorImpl::Strides row_major_strides_signed(const Shape& shape) {
  TensorImpl::Strides strides(shape.size());
  std::ptrdiff_t step = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return strides;
}

namespace {

// The elements are the buffer's next size() elements in row-major order: every axis longer
// than 1 steps by the product of the later axes' lengths.
bool is_row_major(const Shape& shape, const TensorImpl::Strides& strides) {
  std::ptrdiff_t step = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return true;
    if (shape[d] != 1 && strides[d] != step) return false;
    step *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return true;
}

}  // namespace

TensorImpl::TensorImpl(ViewTag, std::uint64_t id, DType dtype, Storage empty)
    : TensorHeader(id, dtype, true), data(std::move(empty)), is_view_(true) {}

TensorViewImpl::TensorViewImpl(std::uint64_t id, std::shared_ptr<const TensorImpl> base_tensor,
                               Shape shape, Strides strides, std::size_t offset)
    : TensorImpl(ViewTag{}, id, base_tensor->dtype, empty_storage(base_tensor->dtype)),
      base(std::move(base_tensor)),
      dims(shape.begin(), shape.end()),
      view_strides(std::move(strides)),
      view_offset(offset),
      is_contiguous(is_row_major(shape, view_strides)) {}

TensorImpl::Strides TensorImpl::strides() const {
  if (is_view()) return as_view().view_strides;
  const DimsRef d = dims_ref();
  return row_major_strides_signed(Shape(d.data, d.data + d.size));
}

std::shared_ptr<const TensorImpl> TensorViewImpl::materialized() const {
  if (auto built = std::atomic_load(&copy_)) return built;
  std::shared_ptr<const TensorImpl> built = std::visit(
      [&](const auto& owner) -> std::shared_ptr<const TensorImpl> {
        using T = typename std::decay_t<decltype(owner)>::value_type;
        storage_array<T> copy = allocate_array<T>("Tensor::array (a copy of a view)", shape());
        copy_strided(owner.data(), view_offset, dims.data(), view_strides.data(), dims.size(),
                     copy.data());
        return make_impl_shared<const TensorImpl>(
            next_tensor_id(), dtype, std::in_place_type<storage_array<T>>, std::move(copy));
      },
      base->data);
  std::shared_ptr<const TensorImpl> expected;
  // Two threads may build it at once: the first to publish wins, the other's copy is freed.
  if (!std::atomic_compare_exchange_strong(&copy_, &expected, built)) built = expected;
  elements_.store(built->elements(), std::memory_order_release);
  return built;
}

TensorImpl::~TensorImpl() {
  std::unique_ptr<const Shape> owned(shape_.load(std::memory_order_acquire));
}

const Shape& TensorImpl::build_shape() const {
  const DimsRef d = dims_ref();
  auto built = std::make_unique<const Shape>(d.data, d.data + d.size);
  const Shape* expected = nullptr;
  // Two threads may build it at once: the first to publish wins, the other's copy is freed.
  if (shape_.compare_exchange_strong(expected, built.get(), std::memory_order_acq_rel)) {
    return *built.release();
  }
  return *expected;
}

xt::svector<std::size_t, 4> TensorImpl::dims() const {
  const Shape* s = shape_.load(std::memory_order_acquire);
  if (s != nullptr) return xt::svector<std::size_t, 4>(s->begin(), s->end());
  if (is_view()) return as_view().dims;
  return std::visit([](const auto& a) { return xt::svector<std::size_t, 4>(a.shape()); }, data);
}

std::size_t TensorImpl::rank() const {
  const Shape* s = shape_.load(std::memory_order_acquire);
  if (s != nullptr) return s->size();
  if (is_view()) return as_view().dims.size();
  return std::visit([](const auto& a) { return a.dimension(); }, data);
}

std::size_t TensorImpl::size() const {
  const Shape* s = shape_.load(std::memory_order_acquire);
  if (s != nullptr) return num_elements(*s);
  if (is_view()) {
    std::size_t n = 1;
    for (const std::size_t d : as_view().dims) n *= d;
    return n;
  }
  return std::visit([](const auto& a) { return a.size(); }, data);
}

std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<float>&& a) {
  return make_impl(std::move(a));
}
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<double>&& a) {
  return make_impl(std::move(a));
}
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<std::int32_t>&& a) {
  return make_impl(std::move(a));
}
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<std::int64_t>&& a) {
  return make_impl(std::move(a));
}
std::shared_ptr<const TensorHeader> make_tensor_impl(storage_array<bool>&& a) {
  return make_impl(std::move(a));
}

namespace {
template <class T>
std::shared_ptr<const TensorHeader> copied_impl(const T* data, const std::size_t* shape,
                                                std::size_t rank) {
  storage_array<T> a(typename storage_array<T>::shape_type(shape, shape + rank));
  std::copy_n(data, a.size(), a.data());
  return make_impl(std::move(a));
}
}  // namespace

std::shared_ptr<const TensorHeader> make_tensor_impl(const float* data, const std::size_t* shape,
                                                     std::size_t rank) {
  return copied_impl(data, shape, rank);
}
std::shared_ptr<const TensorHeader> make_tensor_impl(const double* data, const std::size_t* shape,
                                                     std::size_t rank) {
  return copied_impl(data, shape, rank);
}
std::shared_ptr<const TensorHeader> make_tensor_impl(const std::int32_t* data,
                                                     const std::size_t* shape, std::size_t rank) {
  return copied_impl(data, shape, rank);
}
std::shared_ptr<const TensorHeader> make_tensor_impl(const std::int64_t* data,
                                                     const std::size_t* shape, std::size_t rank) {
  return copied_impl(data, shape, rank);
}
std::shared_ptr<const TensorHeader> make_tensor_impl(const bool* data, const std::size_t* shape,
                                                     std::size_t rank) {
  return copied_impl(data, shape, rank);
}

const void* materialize_view(const TensorHeader& header) {
  const auto& impl = static_cast<const TensorImpl&>(header);
  return impl.as_view().materialized()->elements();
}

ElementLayout element_layout(const TensorHeader& header) {
  const auto& impl = static_cast<const TensorImpl&>(header);
  const TensorImpl& owner = impl.buffer_owner();
  const TensorImpl::DimsRef dims = impl.dims_ref();
  return std::visit(
      [&](const auto& a) {
        return ElementLayout{a.data(), a.size(), impl.offset(),
                             xt::svector<std::size_t, 4>(dims.data, dims.data + dims.size),
                             impl.strides()};
      },
      owner.data);
}

std::shared_ptr<const TensorImpl> buffer_owner_of(const Tensor& t) {
  const TensorImpl& impl = impl_of(t);
  if (impl.is_view()) return impl.as_view().base;
  return std::static_pointer_cast<const TensorImpl>(TensorAccess::shared(t));
}

Tensor make_view(std::shared_ptr<const TensorImpl> owner, Shape shape, TensorImpl::Strides strides,
                 std::size_t offset) {
  return TensorAccess::wrap(make_impl_shared<const TensorViewImpl>(
      next_tensor_id(), std::move(owner), std::move(shape), std::move(strides), offset));
}

ViewGeometry view_geometry(const Tensor& x) {
  const TensorImpl& impl = impl_of(x);
  return ViewGeometry{buffer_owner_of(x), impl.shape(), impl.strides(), impl.offset()};
}

void throw_undefined_tensor(const char* what) {
  throw InvalidArgument(std::string(what) +
                        ": the tensor is undefined (an unconnected gradient, or a default-"
                        "constructed Tensor)");
}

void throw_variable_handle(const char* op, const TensorImpl& handle) {
  throw InvalidArgument(std::string(op) + ": an input is a variable handle (shape " +
                        shape_to_string(handle.shape()) + ", dtype " + dtype_name(handle.dtype) +
                        "), which holds no elements; pass the variable's value (Variable::value()"
                        " or the Variable itself) instead");
}

void throw_bad_array_access(const TensorHeader& header, DType requested) {
  if (header.dtype != requested) {
    throw InvalidArgument(std::string("Tensor::array: the tensor (shape ") +
                          shape_to_string(static_cast<const TensorImpl&>(header).shape()) +
                          ") has dtype " + dtype_name(header.dtype) + ", not the requested " +
                          dtype_name(requested));
  }
  throw_variable_handle("Tensor::array", static_cast<const TensorImpl&>(header));
}

}  // namespace detail

Tensor::Tensor(const Tensor& other) = default;
Tensor& Tensor::operator=(const Tensor& other) = default;
Tensor& Tensor::operator=(Tensor&& other) noexcept = default;
Tensor::~Tensor() = default;

const Shape& Tensor::shape() const { return detail::impl_of(*this).shape(); }

namespace {
// The buffers a tensor's elements are in: its buffer owner's and, for a strided view a read
// made contiguous, that copy (views made from the view after the read view the copy).
std::array<const detail::TensorImpl*, 2> buffers_of(const Tensor& t) {
  const detail::TensorImpl& impl = detail::impl_of(t);
  const detail::TensorImpl* copy =
      impl.is_view() ? impl.as_view().materialized_if_built().get() : nullptr;
  return {&impl.buffer_owner(), copy};
}
}  // namespace

bool shares_storage(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return false;
  for (const detail::TensorImpl* x : buffers_of(a)) {
    for (const detail::TensorImpl* y : buffers_of(b)) {
      if (x != nullptr && x == y) return true;
    }
  }
  return false;
}
std::size_t Tensor::rank() const { return detail::impl_of(*this).rank(); }
std::size_t Tensor::size() const { return detail::impl_of(*this).size(); }

const void* Tensor::reported_elements(DType requested) const {
  const void* elements = elements_of(requested);
  if (detail::live_trace_count.load(std::memory_order_relaxed) != 0) {
    detail::note_value_read(*this, "array");
  }
  return elements;
}

template <class T>
T Tensor::item() const {
  const auto& a = unreported_array<T>();
  if (detail::live_trace_count.load(std::memory_order_relaxed) != 0) {
    detail::note_value_read(*this, "item");
  }
  if (a.size() != 1) {
    throw InvalidArgument("Tensor::item: needs a tensor of size 1, got shape " +
                          shape_to_string(shape()) + " (" + dtype_name(dtype()) + ")");
  }
  return *a.begin();
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template bool Tensor::item<bool>() const;

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(shape=" << shape_to_string(t.shape()) << ", dtype=" << dtype_name(t.dtype())
     << ", ";
  const detail::TensorImpl& impl = detail::impl_of(t);
  if (impl.is_view()) {
    std::visit([&os](const auto& a) { os << a; }, impl.as_view().materialized()->data);
  } else {
    std::visit([&os](const auto& a) { os << a; }, impl.data);
  }
  return os << ")";
}

namespace {

template <class T>
Tensor filled(const char* op, const Shape& shape, T value) {
  xt::xarray<T> a = detail::allocate_array<T>(op, shape);
  std::fill(a.begin(), a.end(), value);
  return Tensor(std::move(a));
}

// The value in the dtype; a value the dtype cannot hold exactly (0.5 or 1e10 for int32, NaN
// for an integer, 2 for bool) is rejected rather than silently truncated.
template <class T>
T representable_value(const char* op, double value, const Shape& shape) {
  if (!detail::exactly_representable<T>(value)) {
    std::ostringstream v;
    v.precision(17);
    v << value;
    throw InvalidArgument(std::string(op) + ": the value " + v.str() +
                          " is not exactly representable in dtype " +
                          dtype_name(dtype_of<T>::value) + " (shape " + shape_to_string(shape) +
                          "); cast explicitly or use a floating dtype");
  }
  return static_cast<T>(value);
}

Tensor fill_op(const char* op, const Shape& shape, double value, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return filled<float>(op, shape, static_cast<float>(value));
    case DType::Float64:
      return filled<double>(op, shape, value);
    case DType::Int32:
      return filled<std::int32_t>(op, shape, representable_value<std::int32_t>(op, value, shape));
    case DType::Int64:
      return filled<std::int64_t>(op, shape, representable_value<std::int64_t>(op, value, shape));
    case DType::Bool:
      return filled<bool>(op, shape, representable_value<bool>(op, value, shape));
  }
  throw InvalidArgument(std::string(op) + ": unknown dtype for shape " + shape_to_string(shape));
}

}  // namespace

Tensor fill(const Shape& shape, double value, DType dtype) {
  return fill_op("fill", shape, value, dtype);
}
Tensor zeros(const Shape& shape, DType dtype) { return fill_op("zeros", shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return fill_op("ones", shape, 1.0, dtype); }
Tensor zeros_like(const Tensor& t) { return fill_op("zeros_like", t.shape(), 0.0, t.dtype()); }
Tensor ones_like(const Tensor& t) { return fill_op("ones_like", t.shape(), 1.0, t.dtype()); }

namespace detail {

Tensor scalar_of(const char* op, double value, DType dtype) {
  return fill_op(op, Shape{}, value, dtype);
}

}  // namespace detail

Tensor constant(double value) { return filled<double>("constant", {}, value); }
Tensor constant(float value) { return filled<float>("constant", {}, value); }

Tensor constant(std::initializer_list<double> values) {
  xt::xarray<double> a = xt::empty<double>(Shape{values.size()});
  std::copy(values.begin(), values.end(), a.begin());
  return Tensor(std::move(a));
}

Tensor constant(std::initializer_list<std::initializer_list<double>> rows) {
  const std::size_t cols = rows.size() ? rows.begin()->size() : 0;
  xt::xarray<double> a = xt::empty<double>(Shape{rows.size(), cols});
  std::size_t r = 0;
  for (const auto& row : rows) {
    if (row.size() != cols) {
      throw InvalidArgument("constant: row " + std::to_string(r) + " has " +
                            std::to_string(row.size()) + " values, row 0 has " +
                            std::to_string(cols));
    }
    std::copy(row.begin(), row.end(), a.begin() + static_cast<std::ptrdiff_t>(r * cols));
    ++r;
  }
  return Tensor(std::move(a));
}

Tensor from_values(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (values.size() != detail::checked_num_elements("from_values", shape)) {
    throw InvalidArgument("from_values: " + std::to_string(values.size()) +
                          " values do not fill shape " + shape_to_string(shape));
  }
  return detail::dispatch_any(dtype, [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = detail::allocate_array<T>("from_values", shape);
    std::transform(values.begin(), values.end(), a.begin(),
                   [&](double v) { return representable_value<T>("from_values", v, shape); });
    return Tensor(std::move(a));
  });
}

}  // namespace tapegrad
