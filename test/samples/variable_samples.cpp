// The variable family's samples (src/ops/variable/): reading a variable (ReadVariableOp),
// and the misuse of variables and their handles.
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {
namespace {

// Variables and their handles: a handle stands for its variable on tapes and holds no
// elements; assign_add and assign_sub name themselves.
MisuseCases variable_misuse() {
  MisuseCases t;
  misuse(t, "handle * 2.0 is not a silent scalar 0", [] { (void)(variable_handle() * 2.0); },
         {"multiply", "variable handle", "[3]"});
  misuse(t, "handle.array() reads no elements", [] { (void)variable_handle().array<double>(); },
         {"variable handle", "[3]", "float64"});
  defined(t, "the variable's value is usable where its handle is not", [] {
    Variable v(f64({1, 2, 3}));
    REQUIRE(elements<double>(v.value() * 2.0) == std::vector<double>{2, 4, 6});
  });
  misuse(t, "Variable::assign_sub names itself",
         [] {
           Variable v(f64({1, 2}));
           v.assign_sub(f64({1}));
         },
         {"assign_sub", "[2]", "[1]", "float64"});
  misuse(t, "Variable::assign_add names itself",
         [] {
           Variable v(f64({1, 2}));
           v.assign_add(f32({1, 2}));
         },
         {"assign_add", "float64", "float32"});
  misuse(t, "Variable::assign_sub of a bool variable",
         [] {
           Variable v(b8({1}));
           v.assign_sub(b8({1}));
         },
         {"assign_sub", "bool", "[1]"});
  defined(t, "Variable::assign_add wraps int32", [] {
    Variable v(i32({kInt32Max}));
    v.assign_add(i32({1}));
    REQUIRE(v.peek().item<std::int32_t>() == kInt32Min);
  });
  return t;
}

}  // namespace

std::vector<OpSample> variable_samples() {
  // The value read twice under a tape (ReadVariableOp's identity gradient gives 2 x): checked
  // in every dtype against float64.
  OpSample read = sample("ReadVariableOp", {random_tensor({2, 3}, 1)}, [](const auto& in) {
    Variable v(in[0], true, "w");
    GradientTape tape;
    tape.watch(v);
    const Tensor y = reduce_sum(multiply(v.value(), v.value()));
    return Outputs{v.value(), tape.gradient(y, v)};
  });
  const std::string reason =
      "its input is a variable, which the gradient checks cannot watch as a tensor input "
      "(test_variables.cpp checks the gradient through reads)";
  read.no_gradient = reason;
  read.no_second_order = reason;
  // The read accepts integers, but the second output is the gradient, which a tape does not
  // give an integer variable.
  read = integers_unreached(read, "a tape gives an integer variable no gradient");
  std::vector<OpSample> s{read};
  // The variable family has one op: every misuse of variables and their handles is its.
  attach_by_function(s, variable_misuse(),
                     {{"handle", "ReadVariableOp"},
                      {"handle.array()", "ReadVariableOp"},
                      {"the", "ReadVariableOp"},  // "the variable's value is usable ..."
                      {"Variable", "ReadVariableOp"}});
  return s;
}

}  // namespace tapegrad::samples
