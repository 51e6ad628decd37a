// The tapegrad tool for GradBench: what every eval program shares.
//
// GradBench's C++ wrapper runs `bin/<eval> INPUT_FILE FUNCTION`; the tool answers with the
// output JSON on stdout's first line and one {"name", "nanoseconds"} timing per line after
// it. Each eval function is split in two: `prepare` turns the JSON input into tensors (not
// timed), the returned `Compute` does the work that is timed, and the `Output` it returns
// writes the JSON afterwards (not timed either).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tapegrad/tapegrad.hpp>

namespace tapegrad::gradbench {

using json = nlohmann::json;
using Output = std::function<json()>;
using Compute = std::function<Output()>;
using Prepare = std::function<Compute(const json& input)>;
using EvalFunctions = std::map<std::string, Prepare>;

// The functions of every eval the tool implements, by eval name ("gmm" -> {"objective",
// "jacobian"}).
const std::map<std::string, EvalFunctions>& all_evals();

// Runs one function on one input as GradBench's timing rule says: until both `min_runs`
// runs and `min_seconds` seconds are done (from the input, default 1 run); returns the last
// output and the nanoseconds of every run.
struct RunResult {
  json output;
  std::vector<long long> evaluate_nanoseconds;
  long long prepare_nanoseconds = 0;
};
RunResult run_function(const Prepare& prepare, const json& input);

// The usual answers, written after the timed work: a number, a flat list, nested lists.
Output number_output(const Tensor& t);
Output list_output(const Tensor& t);
Output nested_output(const Tensor& t);

// A GradBench function from `parse` (the JSON input -> the inputs, not timed) and `run` (the
// inputs -> an Output, timed).
template <class Parse, class Run>
Prepare make_function(Parse parse, Run run) {
  return [parse, run](const json& input) -> Compute {
    using Inputs = std::decay_t<decltype(parse(input))>;
    auto inputs = std::make_shared<const Inputs>(parse(input));
    return [inputs, run]() -> Output { return run(*inputs); };
  };
}

// JSON <-> tensors (float64).
Tensor vector_from_json(const json& values);   // [n] -> shape [n]
Tensor matrix_from_json(const json& rows);     // [[...]...] -> shape [rows, cols]
json to_json(const Tensor& t);                 // nested lists by rank; a scalar -> a number
std::vector<double> to_vector(const Tensor& t);

}  // namespace tapegrad::gradbench
