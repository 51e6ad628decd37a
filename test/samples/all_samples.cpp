// The sample builders and the list of every family's samples.
#include <stdexcept>

#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {

OpSample sample(std::string op, std::vector<Tensor> inputs, RunFn run) {
  OpSample s;
  s.op = std::move(op);
  s.inputs = std::move(inputs);
  s.run = std::move(run);
  return s;
}

OpSample unary_sample(std::string op, Tensor (*f)(const Tensor&), Tensor x) {
  return sample(std::move(op), {std::move(x)},
                [f](const std::vector<Tensor>& in) { return Outputs{f(in[0])}; });
}

OpSample binary_sample(std::string op, Tensor (*f)(const Tensor&, const Tensor&), Tensor x,
                       Tensor y) {
  return sample(std::move(op), {std::move(x), std::move(y)},
                [f](const std::vector<Tensor>& in) { return Outputs{f(in[0], in[1])}; });
}

OpSample not_differentiable(OpSample s, std::string reason) {
  s.no_gradient = reason;
  s.no_second_order = std::move(reason);
  return s;
}

OpSample no_second_order(OpSample s, std::string reason) {
  s.no_second_order = std::move(reason);
  return s;
}

OpSample float64_only(OpSample s, std::string reason) {
  s.other_dtypes.clear();
  s.no_other_dtypes = std::move(reason);
  return s;
}

OpSample named(OpSample s, std::string variant) {
  s.variant = std::move(variant);
  return s;
}

OpSample with_integers(OpSample s, RunFn integer_reference) {
  s.integer_dtypes = {DType::Int32, DType::Int64};
  s.integer_reference = std::move(integer_reference);
  return s;
}

OpSample integers_unreached(OpSample s, std::string reason) {
  s.integers_unreached = std::move(reason);
  return s;
}

Tensor truncated_toward_zero(const Tensor& q) { return multiply(sign(q), floor(abs(q))); }

namespace {

OpSample& sample_of(std::vector<OpSample>& samples, const std::string& op,
                    const std::string& what) {
  for (OpSample& s : samples) {
    if (s.op == op) return s;
  }
  throw std::logic_error(what + ": no sample of op " + op + " in its family");
}

}  // namespace

void attach(std::vector<OpSample>& samples, std::vector<BatchCase> cases) {
  for (BatchCase& c : cases) {
    if (c.ops.empty()) throw std::logic_error("batch case " + c.name + " names no op");
    sample_of(samples, c.ops.front(), "batch case " + c.name).batching.push_back(std::move(c));
  }
}

void attach(std::vector<OpSample>& samples, const std::string& op, StructureCase c) {
  sample_of(samples, op, "structure case").structure.push_back(std::move(c));
}

void attach(std::vector<OpSample>& samples, const std::string& op, std::vector<MisuseCase> cases) {
  OpSample& s = sample_of(samples, op, "misuse case");
  for (MisuseCase& c : cases) s.misuse.push_back(std::move(c));
}

void attach_by_function(std::vector<OpSample>& samples, MisuseCases cases,
                        const std::vector<std::pair<std::string, std::string>>& op_of) {
  for (MisuseCase& c : cases) {
    const std::string function = c.name.substr(0, c.name.find_first_of(": "));
    const std::string* op = nullptr;
    for (const auto& [name, op_type] : op_of) {
      if (name == function) op = &op_type;
    }
    if (op == nullptr) {
      throw std::logic_error("misuse case \"" + c.name + "\": no op given for " + function);
    }
    sample_of(samples, *op, "misuse case " + c.name).misuse.push_back(std::move(c));
  }
}

const std::vector<OpSample>& all_samples() {
  static const std::vector<OpSample> all = [] {
    std::vector<OpSample> out;
    for (auto family : {math_samples, array_samples, linalg_samples, nn_samples, reduce_samples,
                        random_samples, variable_samples}) {
      for (OpSample& s : family()) out.push_back(std::move(s));
    }
    return out;
  }();
  return all;
}

}  // namespace tapegrad::samples
