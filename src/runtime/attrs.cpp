// Attrs and Keep: the named attributes of a recorded op, and which tensors its gradient reads.
#include <algorithm>

#include "tapegrad/registry.hpp"

namespace tapegrad {

Attrs& Attrs::set(std::string name, Value value) {
  for (auto& item : items_) {
    if (item.first == name) {
      item.second = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

bool Attrs::empty() const { return items_.empty(); }

bool Attrs::operator==(const Attrs& other) const { return items_ == other.items_; }

bool Attrs::has(std::string_view name) const {
  return std::any_of(items_.begin(), items_.end(),
                     [&](const auto& item) { return item.first == name; });
}

const Attrs::Value& Attrs::find(std::string_view name) const {
  for (const auto& item : items_) {
    if (item.first == name) return item.second;
  }
  throw InvalidArgument("Attrs: no attribute '" + std::string(name) + "'");
}

namespace {
template <class T>
const T& get_as(const Attrs::Value& v, std::string_view name, const char* type) {
  const T* p = std::get_if<T>(&v);
  if (p == nullptr) {
    throw InvalidArgument("Attrs: attribute '" + std::string(name) + "' is not " + type);
  }
  return *p;
}
}  // namespace

std::int64_t Attrs::get_int(std::string_view name) const {
  return get_as<std::int64_t>(find(name), name, "an int");
}
double Attrs::get_double(std::string_view name) const {
  return get_as<double>(find(name), name, "a double");
}
bool Attrs::get_bool(std::string_view name) const {
  return get_as<bool>(find(name), name, "a bool");
}
DType Attrs::get_dtype(std::string_view name) const {
  return get_as<DType>(find(name), name, "a dtype");
}
const std::vector<std::int64_t>& Attrs::get_ints(std::string_view name) const {
  return get_as<std::vector<std::int64_t>>(find(name), name, "a list of ints");
}
const Shape& Attrs::get_shape(std::string_view name) const {
  return get_as<Shape>(find(name), name, "a shape");
}

Keep Keep::all() { return Keep{true, {}}; }
Keep Keep::none() { return Keep{false, {}}; }
Keep Keep::only(std::initializer_list<std::size_t> indices) { return Keep{false, indices}; }

bool Keep::keeps(std::size_t index) const {
  return every || std::find(indices.begin(), indices.end(), index) != indices.end();
}

}  // namespace tapegrad

namespace tapegrad::detail {

const Attrs& attrs_or_empty(const Attrs* recorded) {
  static const Attrs none;
  return recorded != nullptr ? *recorded : none;
}

}  // namespace tapegrad::detail
