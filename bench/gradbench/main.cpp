// One program for every eval: GradBench's wrapper runs `bin/<eval> INPUT FUNCTION`, and
// bin/<eval> is a link to this program, so the eval is the program's own name (or the first
// argument when called as `tapegrad_gradbench EVAL INPUT FUNCTION`). Built twice: as
// tapegrad_gradbench, and with TAPEGRAD_GRADBENCH_FUNCTION_VARIANT as
// tapegrad_gradbench_function, whose eval functions run as tapegrad::functions (tool.hpp).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "tool.hpp"

namespace {

// GradBench's C++ protocol starts a new process for every evaluate, so the first op and the
// first tape of the process pay for paging in their code and setting up the thread's state
// (16-29 us for hello's x * x, 66-87 us for its tape gradient, measured cold), where a Python
// tool is a warm process. One scalar op and one tape gradient, before the input is even read,
// take that start-up cost out of the timed evaluate; nothing of the eval runs here.
// TAPEGRAD_GRADBENCH_COLD=1 skips it.
void warm_up_library() {
  const char* cold = std::getenv("TAPEGRAD_GRADBENCH_COLD");
  if (cold != nullptr && std::string(cold) == "1") return;
  const tapegrad::Tensor x = tapegrad::constant(1.5);
  tapegrad::GradientTape tape;
  tape.watch(x);
  const tapegrad::Tensor y = x * x;
  (void)tape.gradient(y, x);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tapegrad::gradbench;
  warm_up_library();
  std::string program = argv[0];
  program = program.substr(program.find_last_of('/') + 1);
  int first = 1;
#ifdef TAPEGRAD_GRADBENCH_FUNCTION_VARIANT
  set_function_variant(true);
#endif
  if (program == "tapegrad_gradbench" || program == "tapegrad_gradbench_function") {
    if (argc < 2) {
      std::cerr << "usage: tapegrad_gradbench EVAL INPUT_FILE FUNCTION\n";
      return 2;
    }
    program = argv[1];
    first = 2;
  }
  if (argc - first != 2) {
    std::cerr << "usage: " << program << " INPUT_FILE FUNCTION\n";
    return 2;
  }
  const auto& evals = all_evals();
  const auto eval = evals.find(program);
  if (eval == evals.end()) {
    std::cerr << "tapegrad has no eval '" << program << "'\n";
    return 2;
  }
  const std::string function = argv[first + 1];
  const auto entry = eval->second.find(function);
  if (entry == eval->second.end()) {
    std::cerr << "eval '" << program << "' has no function '" << function << "'\n";
    return 2;
  }
  try {
    std::ifstream file(argv[first]);
    const json input = json::parse(file);
    const RunResult result = run_function(entry->second, input);
    std::cout << result.output.dump() << "\n";
    std::cout << json{{"name", "prepare"}, {"nanoseconds", result.prepare_nanoseconds}}.dump()
              << "\n";
    for (long long ns : result.evaluate_nanoseconds)
      std::cout << json{{"name", "evaluate"}, {"nanoseconds", ns}}.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << program << " " << function << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
