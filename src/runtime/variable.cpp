#include "tapegrad/variable.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "kernels/dispatch.hpp"
#include "kernels/int_arith.hpp"
#include "runtime/in_place.hpp"
#include "runtime/op_trace.hpp"
#include "runtime/recording.hpp"
#include "runtime/tensor_impl.hpp"
#include "runtime/variable_observer.hpp"
#include "runtime/variable_read.hpp"

namespace tapegrad {
namespace detail {

struct VariableImpl {
  std::uint64_t id;
  bool trainable;
  std::string name;
  Tensor handle;
  mutable std::mutex mutex;
  Tensor value;
};

struct VariableAccess {
  static VariableImpl& impl(const Variable& v) { return *v.impl_; }
};

namespace {

std::atomic<std::uint64_t> next_variable_id{1};

std::vector<VariableReadObserver*>& observer_stack() {
  thread_local std::vector<VariableReadObserver*> stack;
  return stack;
}

// A variable's value is always a tensor of its own (never shared with another variable or
// the caller), so a tape can tell which variable a value came from by its id.
Tensor private_copy(const Tensor& t) {
  return dispatch_any(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Tensor(xt::xarray<T>(kernel_array<T>(t)));
  });
}

// Holds no elements: it only stands for the variable on tapes, with the variable's
// dtype and shape so that gradients for it are checked like any other.
Tensor make_handle(const Tensor& value) {
  return dispatch_any(value.dtype(), [&](auto zero) {
    using T = decltype(zero);
    auto impl = std::make_shared<const TensorImpl>(
        next_tensor_id(), value.dtype(), TensorImpl::Storage(std::in_place_type<xt::xarray<T>>),
        value.shape());
    return TensorAccess::wrap(std::move(impl));
  });
}

void check_compatible(const char* op, const Variable& v, const Tensor& t) {
  if (!t.defined())
    throw InvalidArgument(std::string("Variable::") + op + ": the tensor is undefined");
  if (t.shape() != v.shape() || t.dtype() != v.dtype()) {
    throw InvalidArgument(std::string("Variable::") + op + ": variable '" + v.name() +
                          "' has shape " + shape_to_string(v.shape()) + " and dtype " +
                          dtype_name(v.dtype()) + ", the value has shape " +
                          shape_to_string(t.shape()) + " and dtype " + dtype_name(t.dtype()));
  }
}

// value = c(value, delta), in value's own buffer when no one else holds it (in_place.hpp),
// else in a new one.
template <class Combine>
void combine_into(const char* op, Tensor& value, const Tensor& delta, Combine c) {
  dispatch_numeric(op, value, [&](auto zero) {
    using T = decltype(zero);
    const T* y = kernel_data<T>(delta);
    const std::size_t n = value.size();
    // In place only with no trace live: the updated tensor would keep the id a trace knows as
    // an earlier read, and a later read would replay that read's value (fn's reads after an
    // assign_add must each be a read step of their own).
    if (only_handle(value) && live_trace_count.load(std::memory_order_relaxed) == 0) {
      T* x = own_elements<T>(value);
      for (std::size_t i = 0; i < n; ++i) x[i] = c(x[i], y[i]);
      return;
    }
    const T* x = kernel_data<T>(value);
    xt::xarray<T> out = xt::empty<T>(kernel_array<T>(value).shape());
    for (std::size_t i = 0; i < n; ++i) out.data()[i] = c(x[i], y[i]);
    value = Tensor(std::move(out));
  });
}

}  // namespace

VariableReadObserver::VariableReadObserver() { observer_stack().push_back(this); }

VariableReadObserver::~VariableReadObserver() {
  auto& stack = observer_stack();
  auto it = std::find(stack.rbegin(), stack.rend(), this);
  if (it != stack.rend()) stack.erase(std::next(it).base());
}

void tell_observers(const Variable& v) {
  for (VariableReadObserver* observer : observer_stack()) observer->notify(v);
}

void VariableReadObserver::notify(const Variable& v) {
  auto pos = std::lower_bound(read_.begin(), read_.end(), v,
                              [](const Variable& a, const Variable& b) { return a.id() < b.id(); });
  if (pos == read_.end() || pos->id() != v.id()) read_.insert(pos, v);
}

}  // namespace detail

Variable::Variable(const Variable& other) = default;
Variable& Variable::operator=(const Variable& other) = default;
Variable& Variable::operator=(Variable&& other) noexcept = default;
Variable::~Variable() = default;

Variable::Variable(Tensor initial, bool trainable, std::string name) {
  if (!initial.defined()) throw InvalidArgument("Variable: the initial value is undefined");
  impl_ = std::make_shared<detail::VariableImpl>();
  impl_->id = detail::next_variable_id.fetch_add(1, std::memory_order_relaxed);
  impl_->trainable = trainable;
  impl_->name = name.empty() ? "Variable:" + std::to_string(impl_->id) : std::move(name);
  if (detail::live_trace_count.load(std::memory_order_relaxed) != 0) {
    detail::note_variable_created(initial);
  }
  impl_->value = detail::private_copy(initial);
  impl_->handle = detail::make_handle(impl_->value);
}

namespace detail {
namespace {
// The stored value, told to live traces as a read through value() or peek().
Tensor read_value(const Variable& variable, const VariableImpl& impl, bool through_value) {
  Tensor v;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    v = impl.value;
  }
  if (live_trace_count.load(std::memory_order_relaxed) != 0) {
    note_variable_read(variable, v, through_value);
  }
  return v;
}
}  // namespace
}  // namespace detail

Tensor Variable::peek() const { return detail::read_value(*this, *impl_, false); }

Tensor Variable::value() const {
  Tensor v = detail::read_value(*this, *impl_, true);
  if (detail::any_tape_active()) detail::read_variable(*this, v);
  if (trainable()) detail::tell_observers(*this);
  return v;
}

namespace detail {
namespace {

// Traces see the write before it happens (a write is a side effect that outlives the call),
// with the value it replaces (read here, not through peek(): this is no read of fn's).
void note_write(const Variable& v, const VariableImpl& impl, TraceStep::Kind kind,
                const Tensor& value, const char* accessor) {
  if (live_trace_count.load(std::memory_order_relaxed) == 0) return;
  Tensor current;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    current = impl.value;
  }
  note_variable_write(v, kind, value, current, accessor);
}

}  // namespace
}  // namespace detail

void Variable::assign(const Tensor& value) {
  detail::check_compatible("assign", *this, value);
  detail::note_write(*this, *impl_, detail::TraceStep::Kind::Assign, value, "Variable::assign");
  Tensor copy = detail::private_copy(value);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->value = std::move(copy);
}

void Variable::assign_add(const Tensor& delta) {
  detail::check_compatible("assign_add", *this, delta);
  detail::note_write(*this, *impl_, detail::TraceStep::Kind::AssignAdd, delta,
                     "Variable::assign_add");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  detail::combine_into("Variable::assign_add", impl_->value, delta,
                       [](auto a, auto b) { return detail::wrapping_add(a, b); });
}

void Variable::assign_sub(const Tensor& delta) {
  detail::check_compatible("assign_sub", *this, delta);
  detail::note_write(*this, *impl_, detail::TraceStep::Kind::AssignSub, delta,
                     "Variable::assign_sub");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  detail::combine_into("Variable::assign_sub", impl_->value, delta,
                       [](auto a, auto b) { return detail::wrapping_sub(a, b); });
}

namespace detail {

void update_variable(Variable& variable, const std::function<void(Tensor& value)>& update) {
  VariableImpl& impl = VariableAccess::impl(variable);
  if (live_trace_count.load(std::memory_order_relaxed) != 0) {
    Tensor value = variable.peek();
    update(value);
    variable.assign(value);
    return;
  }
  std::lock_guard<std::mutex> lock(impl.mutex);
  update(impl.value);
}

}  // namespace detail

bool Variable::trainable() const { return impl_->trainable; }
const std::string& Variable::name() const { return impl_->name; }
std::uint64_t Variable::id() const { return impl_->id; }
DType Variable::dtype() const { return impl_->handle.dtype(); }
Shape Variable::shape() const { return impl_->handle.shape(); }
const Tensor& Variable::handle() const { return impl_->handle; }

}  // namespace tapegrad
