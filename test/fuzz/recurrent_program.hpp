// Seeded random recurrent programs for the Function fuzz tests
// (test_function_random_recurrences.cpp, test_thread_random_graphs.cpp).
//
// A program is 1-3 layers of 2-30 steps of one of four cells (a tanh RNN, an LSTM cell whose
// gates are one split product, a GRU-like mix, a cell whose step output an op makes), with
// joins (concat) of the step outputs along either axis and of chosen steps, parts read by other
// ops before and after their join, loops that broadcast or gather from a join, the layer above
// reading the join's split or the step outputs, and gradients of every parameter on a tape; in
// float64 or float32, states from 1 element to joins over 1 MiB. Every decision is drawn from a
// generator seeded afresh at each call, so a trace and an eager call make the same ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tapegrad::fuzz {

// The program's shape, drawn from its seed; the same seed gives the same program.
struct RecurrentShape {
  DType dtype = DType::Float64;
  std::int64_t rows = 1;  // a state is [rows, bits]
  std::int64_t bits = 1;
  int layers = 1;
  int steps = 2;
  bool with_tape = true;
};
RecurrentShape recurrent_shape(std::uint64_t seed);

// The program's arguments at `scale` (different values for each scale, the same shapes).
std::vector<Tensor> recurrent_arguments(std::uint64_t seed, double scale);

// The program of `seed` on `args`: its losses, the gradients (with a tape), maybe a step output.
std::vector<Tensor> run_recurrent_program(std::uint64_t seed, const std::vector<Tensor>& args);

// "float64, states [1, 7], 2 layers of 23 steps, with a tape".
std::string describe_recurrent_program(std::uint64_t seed);

}  // namespace tapegrad::fuzz
