// The tapegrad tool for GradBench: what every eval program shares.
//
// GradBench's C++ wrapper runs `bin/<eval> INPUT_FILE FUNCTION`; the tool answers with the
// output JSON on stdout's first line and one {"name", "nanoseconds"} timing per line after
// it. Each eval function is split in two: `prepare` turns the JSON input into tensors (not
// timed), the returned `Compute` does the work that is timed, and the `Output` it returns
// writes the JSON afterwards (not timed either).
//
// The function variant (the program tapegrad_gradbench_function, installed as the tool
// tapegrad-function) runs each eval function's tensor work as one tapegrad::function whose
// arguments are the input's tensors: GradBench repeats an evaluate on one input, so the first
// run traces and the later runs replay, as JAX's jit tool compiles once.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
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

// Whether make_function's eval functions run as tapegrad::functions (the function variant).
// Set once by the program's main, before any eval runs.
void set_function_variant(bool on);
bool function_variant();

// What an eval function does with its result tensors after its tensor work: C++ that is part
// of the timed work (ba's CSR indices), returning the Output that writes the JSON.
using Finish = std::function<Output(const std::vector<Tensor>&)>;

// Every eval function's result: finish(tensors). In the function variant, while the eval's
// tensor work is traced, the tensors become the Function's results and `finish` runs after
// each replay instead.
Output finish_output(std::vector<Tensor> tensors, Finish finish);

// The usual answers, written after the timed work: a number, a flat list, nested lists.
Output number_output(const Tensor& t);
Output list_output(const Tensor& t);
Output nested_output(const Tensor& t);
// A matrix given as blocks of its columns (each [rows, width]): its rows as nested lists, each
// row the blocks' rows side by side, joined as the JSON is written.
Output joined_rows_output(std::vector<Tensor> column_blocks);

// Calls visit(Tensor&) on every tensor of an eval's parsed inputs, in one fixed order: the
// function variant's arguments. Types with no tensor of the input (sizes, plans built from
// them, a shared model) have none; evals.hpp adds its structs.
template <class T, class Visit>
void for_each_tensor(T&, Visit&) {}
template <class Visit>
void for_each_tensor(Tensor& t, Visit& visit) {
  visit(t);
}
template <class A, class B, class Visit>
void for_each_tensor(std::pair<A, B>& p, Visit& visit) {
  for_each_tensor(p.first, visit);
  for_each_tensor(p.second, visit);
}
template <class... Ts, class Visit>
void for_each_tensor(std::tuple<Ts...>& t, Visit& visit) {
  std::apply([&](auto&... parts) { (for_each_tensor(parts, visit), ...); }, t);
}

namespace detail {
// While alive on this thread, finish_output records its tensors and finish here instead of
// finishing (the function variant's trace of an eval's tensor work).
struct OutputCapture {
  OutputCapture();
  ~OutputCapture();
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;
  bool captured = false;
  std::vector<Tensor> tensors;
  Finish finish;

 private:
  OutputCapture* previous_;
};
}  // namespace detail

// A GradBench function from `parse` (the JSON input -> the inputs, not timed) and `run` (the
// inputs -> an Output, timed; its result built with finish_output). In the function variant
// the timed work is one tapegrad::function of the inputs' tensors, then the finish.
template <class Parse, class Run>
Prepare make_function(Parse parse, Run run) {
  return [parse, run](const json& input) -> Compute {
    using Inputs = std::decay_t<decltype(parse(input))>;
    auto inputs = std::make_shared<const Inputs>(parse(input));
    if (!function_variant()) return [inputs, run]() -> Output { return run(*inputs); };
    std::vector<Tensor> arguments;
    Inputs copy = *inputs;
    auto collect = [&](Tensor& t) { arguments.push_back(t); };
    for_each_tensor(copy, collect);
    auto finish = std::make_shared<Finish>();
    const Function traced = function([inputs, run, finish](const std::vector<Tensor>& args) {
      Inputs bound = *inputs;
      std::size_t next = 0;
      auto bind = [&](Tensor& t) { t = args[next++]; };
      for_each_tensor(bound, bind);
      detail::OutputCapture capture;
      (void)run(bound);
      if (!capture.captured) {
        throw std::logic_error(
            "gradbench: an eval function's result was not built with finish_output");
      }
      *finish = capture.finish;
      return capture.tensors;
    });
    return [traced, arguments, finish]() -> Output { return (*finish)(traced(arguments)); };
  };
}

// JSON <-> tensors (float64).
Tensor vector_from_json(const json& values);  // [n] -> shape [n]
Tensor matrix_from_json(const json& rows);    // [[...]...] -> shape [rows, cols]
json to_json(const Tensor& t);                // nested lists by rank; a scalar -> a number
std::vector<double> to_vector(const Tensor& t);

}  // namespace tapegrad::gradbench
