// OpContext: what a gradient rule sees of the entry it differentiates.
#include <string>

#include "runtime/tape.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad {

// Built on first use: most gradient rules never ask, and the entry holds only the definition.
const std::string& OpContext::op_type() const {
  if (op_type_.empty()) op_type_ = entry_.op->name;
  return op_type_;
}

const std::vector<Tensor>& OpContext::inputs() const { return *inputs_; }
const std::vector<Tensor>& OpContext::outputs() const { return *outputs_; }
const Attrs& OpContext::attrs() const {
  static const Attrs none;
  const Attrs* attrs = entry_.attrs();
  return attrs != nullptr ? *attrs : none;
}
bool OpContext::needs_gradient(std::size_t i) const {
  return i < needs_gradient_.size() && needs_gradient_[i];
}
std::size_t OpContext::num_inputs() const { return entry_.n_inputs; }
std::size_t OpContext::num_outputs() const { return entry_.n_outputs; }
Shape OpContext::input_shape(std::size_t i) const { return entry_.inputs().at(i).full_shape(); }
DType OpContext::input_dtype(std::size_t i) const { return entry_.inputs().at(i).dtype(); }
Shape OpContext::output_shape(std::size_t i) const { return entry_.outputs().at(i).full_shape(); }
bool OpContext::input_shape_matches(std::size_t i, const Tensor& t) const {
  return entry_.inputs().at(i).same_shape(t);
}
DType OpContext::output_dtype(std::size_t i) const { return entry_.outputs().at(i).dtype(); }

}  // namespace tapegrad
