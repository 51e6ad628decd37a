// Run with TAPEGRAD_SIMD set and the instruction set it names as argument ("none" when the
// variable names none): the process must run the widest available set at most that wide, and
// tanh of a tensor large enough for the vector kernels must give that set's bits.
// Prints "vector_math_choice: ok" and exits 0 when both hold.
#include <cstdio>
#include <cstring>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "kernels/vector_math.hpp"

using tapegrad::detail::InstructionSet;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: vector_math_choice baseline|avx2|avx512|none\n");
    return 2;
  }
  InstructionSet cap = InstructionSet::Avx512;
  if (std::strcmp(argv[1], "baseline") == 0) cap = InstructionSet::Baseline;
  if (std::strcmp(argv[1], "avx2") == 0) cap = InstructionSet::Avx2;
  InstructionSet expected = InstructionSet::Baseline;
  for (InstructionSet set : {InstructionSet::Avx2, InstructionSet::Avx512}) {
    if (static_cast<int>(set) <= static_cast<int>(cap) &&
        tapegrad::detail::instruction_set_available(set)) {
      expected = set;
    }
  }
  const InstructionSet chosen = tapegrad::detail::vector_math_instruction_set();
  if (chosen != expected) {
    std::printf("vector_math_choice: chose %s, expected %s\n",
                tapegrad::detail::instruction_set_name(chosen),
                tapegrad::detail::instruction_set_name(expected));
    return 1;
  }
  // Enough values that every pair of instruction sets differs in the last bit on some.
  std::vector<double> x(4096);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -3.0 + 0.0014649 * static_cast<double>(i);
  std::vector<double> want(x.size());
  tapegrad::detail::vector_math_kernels(expected)
      .f64[static_cast<int>(tapegrad::detail::VectorFunction::Tanh)](x.data(), want.data(),
                                                                     x.size());
  const tapegrad::Tensor y = tapegrad::tanh(tapegrad::from_values(x, {x.size()}));
  const auto& got = y.array<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (got(i) != want[i]) {
      std::printf("vector_math_choice: tanh(%.17g) = %.17g, the %s kernel gives %.17g\n", x[i],
                  got(i), tapegrad::detail::instruction_set_name(expected), want[i]);
      return 1;
    }
  }
  std::printf("vector_math_choice: ok (%s)\n", tapegrad::detail::instruction_set_name(chosen));
  return 0;
}
