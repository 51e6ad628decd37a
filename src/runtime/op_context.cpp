// OpContext: what a gradient rule sees of the entry it differentiates, and what a user
// primitive's other rules see of their op (a RuleOpView: runtime/op_context_factory.hpp).
#include <string>

#include "runtime/op_context_factory.hpp"
#include "runtime/tape.hpp"
#include "tapegrad/registry.hpp"

namespace tapegrad {

// Built on first use: most gradient rules never ask, and the entry holds only the definition.
const std::string& OpContext::op_type() const {
  if (op_type_.empty()) op_type_ = entry_ != nullptr ? entry_->op->name : view_->op.name;
  return op_type_;
}

const std::vector<Tensor>& OpContext::inputs() const { return *inputs_; }
const std::vector<Tensor>& OpContext::outputs() const { return *outputs_; }
const Attrs& OpContext::attrs() const {
  static const Attrs none;
  const Attrs* attrs = entry_ != nullptr ? entry_->attrs() : view_->attrs;
  return attrs != nullptr ? *attrs : none;
}
bool OpContext::needs_gradient(std::size_t i) const {
  return i < needs_gradient_->size() && (*needs_gradient_)[i];
}
std::size_t OpContext::num_inputs() const {
  return entry_ != nullptr ? entry_->n_inputs : view_->input_shapes.size();
}
std::size_t OpContext::num_outputs() const {
  return entry_ != nullptr ? entry_->n_outputs : view_->output_shapes.size();
}
Shape OpContext::input_shape(std::size_t i) const {
  return entry_ != nullptr ? entry_->inputs().at(i).full_shape() : view_->input_shapes.at(i);
}
DType OpContext::input_dtype(std::size_t i) const {
  return entry_ != nullptr ? entry_->inputs().at(i).dtype() : view_->input_dtypes.at(i);
}
Shape OpContext::output_shape(std::size_t i) const {
  return entry_ != nullptr ? entry_->outputs().at(i).full_shape() : view_->output_shapes.at(i);
}
bool OpContext::input_shape_matches(std::size_t i, const Tensor& t) const {
  return entry_ != nullptr ? entry_->inputs().at(i).same_shape(t)
                           : view_->input_shapes.at(i) == t.shape();
}
DType OpContext::output_dtype(std::size_t i) const {
  return entry_ != nullptr ? entry_->outputs().at(i).dtype() : view_->output_dtypes.at(i);
}

}  // namespace tapegrad
