// implicit_value_and_gradients: the tape finds the variables by watching what f reads.
#include "tapegrad/variables_functional.hpp"

#include "tapegrad/tape.hpp"

namespace tapegrad {

std::pair<Tensor, std::vector<std::pair<Tensor, Variable>>> implicit_value_and_gradients(
    std::function<Tensor()> f) {
  if (!f) throw InvalidArgument("implicit_value_and_gradients: the function is empty");
  GradientTape tape;
  Tensor value = f();
  if (!value.defined()) {
    throw InvalidArgument(
        "implicit_value_and_gradients: Cannot differentiate a function that "
        "returns None (an undefined tensor); did you forget to return a value?");
  }
  // Auto-watching watches exactly the trainable variables read, in creation order.
  std::vector<Variable> variables = tape.watched_variables();
  if (variables.empty()) {
    throw InvalidArgument(
        "implicit_value_and_gradients: No trainable variables were accessed "
        "while the function was being computed.");
  }
  std::vector<Tensor> grads = tape.gradient(value, variables);
  std::vector<std::pair<Tensor, Variable>> result;
  result.reserve(variables.size());
  for (std::size_t i = 0; i < variables.size(); ++i) result.emplace_back(grads[i], variables[i]);
  return {value, std::move(result)};
}

std::vector<std::pair<Tensor, Variable>> implicit_gradients(std::function<Tensor()> f) {
  return implicit_value_and_gradients(std::move(f)).second;
}

}  // namespace tapegrad
