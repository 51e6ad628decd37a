// What an op's replay rule (OpDefinition::replay_rule) sees of the op it runs again.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

#include "runtime/op_definition.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tensor.hpp"

namespace tapegrad::detail {

// The op as a Function traced it: its definition and attributes (OpView), and its outputs'
// shapes and dtypes (a replay's inputs have the traced shapes and dtypes, so its outputs have
// these).
struct ReplayContext : OpView {
  const std::vector<Shape>& output_shapes;
  const std::vector<DType>& output_dtypes;
};

// A replay rule's outputs: up to two held inline, so that the common op (one output) costs a
// replay no allocation of its own; more go to a vector.
class ReplayOutputs {
 public:
  ReplayOutputs(std::initializer_list<Tensor> outputs) {  // NOLINT: `return {y};`
    if (outputs.size() > kInline) {
      more_.assign(outputs.begin(), outputs.end());
    } else {
      std::size_t i = 0;
      for (const Tensor& t : outputs) inline_[i++] = t;
    }
    size_ = outputs.size();
  }
  ReplayOutputs(Tensor output) : size_(1) { inline_[0] = std::move(output); }  // NOLINT
  ReplayOutputs(std::vector<Tensor> outputs) : size_(outputs.size()) {         // NOLINT
    if (size_ > kInline) {
      more_ = std::move(outputs);
    } else {
      for (std::size_t i = 0; i < size_; ++i) inline_[i] = std::move(outputs[i]);
    }
  }
  std::size_t size() const { return size_; }
  Tensor& operator[](std::size_t i) { return size_ > kInline ? more_[i] : inline_[i]; }

 private:
  static constexpr std::size_t kInline = 2;
  std::size_t size_ = 0;
  Tensor inline_[kInline];
  std::vector<Tensor> more_;
};

}  // namespace tapegrad::detail
