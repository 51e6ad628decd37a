// One op's test samples, declared once (the PyTorch OpInfo model): its inputs, the public call
// that runs it, the dtypes it supports, which generic checks apply (each opt-out with its
// reason), and its batching, structure and misuse cases. test/test_op_samples.cpp runs every
// check on every sample; each family of src/ops/ declares its samples in
// test/samples/<family>_samples.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tapegrad::samples {

using Outputs = std::vector<Tensor>;
// The public op on the sample's inputs (or on batched, cast or strided versions of them).
using RunFn = std::function<Outputs(const std::vector<Tensor>&)>;

// Why a check does not apply to a sample; empty: it applies. A reason is required, so that
// every opt-out says why in the source.
using OptOut = std::string;

// A call of fn under vectorized_map: its batching rules against a loop over the slices. `ops`
// are the built-in ops it exercises with a batched input (the first is the sample's op); a
// case may exercise several (a gradient op under its forward, ops of the same family).
struct BatchCase {
  std::string name;
  std::vector<std::string> ops;
  RunFn fn;
  std::vector<Tensor> elems;  // each with a leading batch axis
};

// One call of the op's structure rule (runtime/batching_context.hpp): each input a diagonal
// (example-shaped) or a constant; the expected dense batch [n] ++ output, row-major, exactly
// (dyadic operands), or empty when the rule must decline.
struct StructureCase {
  std::vector<Tensor> inputs;
  std::vector<bool> diagonal;  // per input
  std::optional<Attrs> attrs;
  Shape output;  // the output of one example
  std::vector<double> expected;
};

// A misuse of the op's public function: `expect` runs `body` and requires the exception type
// it was made for (misuse<E>, below) with every fragment in its message, or (defined) runs
// a body that checks its own values; either way the thread must be clean afterwards.
struct MisuseCase {
  std::string name;
  std::function<void()> body;
  std::vector<std::string> fragments;
  void (*expect)(const std::string& name, const std::function<void()>& body,
                 const std::vector<std::string>& fragments);
  std::string exception;  // the expected type's name, for the failure message; empty: defined
};

struct OpSample {
  std::string op;              // the registered op type ("Tan"), as registered_ops() names it
  std::string variant;         // what tells this sample from the op's others (empty for one)
  std::vector<Tensor> inputs;  // float64, integer where the op takes indices
  RunFn run;
  // Besides float64: each is run with the floating inputs cast to it, against float64.
  std::vector<DType> other_dtypes{DType::Float32};
  // The integer dtypes the op accepts (with_integers): each is run with integer-valued floating
  // inputs cast to it, exactly against float64 on the same values. Empty: the op must reject
  // integer inputs with InvalidArgument (unless integers_unreached, below).
  std::vector<DType> integer_dtypes;
  // Where the op's documented integer result differs from the real one (integer division and
  // means truncate toward zero): that result, in float64, on the integer-valued inputs.
  RunFn integer_reference;
  // A run on integers that reaches no op to check: why (a tape gives an integer tensor no
  // gradient). It must then give an undefined output rather than throw.
  OptOut integers_unreached;
  OptOut no_gradient;      // first order against central differences
  OptOut no_second_order;  // the gradient of the gradient against central differences
  OptOut no_other_dtypes;  // other_dtypes is empty: why
  std::vector<BatchCase> batching;
  std::vector<StructureCase> structure;
  std::vector<MisuseCase> misuse;
};

// The shapes of sample most ops take.
OpSample unary_sample(std::string op, Tensor (*f)(const Tensor&), Tensor x);
OpSample binary_sample(std::string op, Tensor (*f)(const Tensor&, const Tensor&), Tensor x,
                       Tensor y);
// Any call.
OpSample sample(std::string op, std::vector<Tensor> inputs, RunFn run);

// Opt-out builders, so a sample reads as what it declares.
OpSample not_differentiable(OpSample s, std::string reason);
OpSample no_second_order(OpSample s, std::string reason);
OpSample float64_only(OpSample s, std::string reason);
OpSample named(OpSample s, std::string variant);
// The op accepts int32 and int64 inputs where the sample's are floating (with its documented
// integer result, where that is not the real one).
OpSample with_integers(OpSample s, RunFn integer_reference = nullptr);
OpSample integers_unreached(OpSample s, std::string reason);
// q truncated toward zero: integer division's and integer means' result on integer values.
Tensor truncated_toward_zero(const Tensor& q);

// The families (test/samples/<family>_samples.cpp), each sample's cases attached.
std::vector<OpSample> math_samples();
std::vector<OpSample> array_samples();
std::vector<OpSample> linalg_samples();
std::vector<OpSample> nn_samples();
std::vector<OpSample> reduce_samples();
std::vector<OpSample> random_samples();
std::vector<OpSample> variable_samples();

// Every family's samples, built once.
const std::vector<OpSample>& all_samples();

// Attaches each case to the first sample of its op (BatchCase: ops[0]); throws
// std::logic_error naming a case whose op has no sample.
void attach(std::vector<OpSample>& samples, std::vector<BatchCase> cases);
void attach(std::vector<OpSample>& samples, const std::string& op, StructureCase c);
void attach(std::vector<OpSample>& samples, const std::string& op, std::vector<MisuseCase> cases);

}  // namespace tapegrad::samples
