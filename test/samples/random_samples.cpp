// The random family's samples (src/ops/random/): dropout, its mask drawn from a generator
// made in the call (the same mask on every run of the sample).
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {

std::vector<OpSample> random_samples() {
  std::vector<OpSample> s;
  s.push_back(no_second_order(sample("Dropout", {random_tensor({2, 3}, 1)},
                                     [](const auto& in) {
                                       Generator generator(42);
                                       return Outputs{dropout(in[0], 0.5, generator)};
                                     }),
                              "linear in x for a fixed mask"));
  // Philox gives 4 float32 or 2 float64 uniforms per block: a seed's mask depends on the dtype.
  s.back() = float64_only(s.back(), "the mask a seed draws depends on the dtype");
  std::vector<BatchCase> cases;
  // A generator made inside fn draws the same mask for every slice: the trace is faithful.
  cases.push_back({"Dropout with a mask fixed per call",
                   {"Dropout"},
                   [](const std::vector<Tensor>& in) {
                     Generator generator(7);
                     return std::vector<Tensor>{dropout(in[0], 0.5, generator)};
                   },
                   {batch_of({2, 5}, 70)}});
  attach(s, std::move(cases));
  return s;
}

}  // namespace tapegrad::samples
