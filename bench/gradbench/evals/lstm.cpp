// lstm: ADBench's LSTM with diagonal weights, layer by layer. A layer's forget and output
// gates depend only on its input sequence, which the layer below has finished, so they are
// computed for every step at once; only the input gate, the change and the cell recursion
// run step by step.
#include "evals/evals.hpp"

namespace tapegrad::gradbench {

Tensor lstm_objective(const Tensor& main_params, const Tensor& extra_params, const LstmData& data) {
  const auto layers = static_cast<std::int64_t>(main_params.shape()[0] / 2);
  const auto bits = static_cast<std::int64_t>(extra_params.shape()[1]);
  const auto chars = static_cast<std::int64_t>(data.sequence.shape()[0]);
  const std::int64_t steps = chars - 1;

  const std::vector<Tensor> extra = split(extra_params, 3, 0);  // in weight, out weight, out bias
  // The layer's input for every step: [steps, bits].
  Tensor inputs = slice(data.sequence, {0, 0}, {steps, bits}) * extra[0];

  for (std::int64_t layer = 0; layer < layers; ++layer) {
    // Rows of 4·bits: forget, input gate, output gate, change.
    const auto weights =
        split(reshape(slice(main_params, {2 * layer, 0}, {1, -1}), {4, bits}), 4, 0);
    const auto biases =
        split(reshape(slice(main_params, {2 * layer + 1, 0}, {1, -1}), {4, bits}), 4, 0);
    const std::vector<Tensor> forget =
        split(sigmoid(inputs * weights[0] + biases[0]), static_cast<int>(steps), 0);
    const std::vector<Tensor> output_gate =
        split(sigmoid(inputs * weights[2] + biases[2]), static_cast<int>(steps), 0);
    // The input gate and the change both read the hidden state: one [2, bits] product per step.
    const Tensor recurrent_weights = concat({weights[1], weights[3]}, 0);
    const Tensor recurrent_biases = concat({biases[1], biases[3]}, 0);

    Tensor hidden = slice(data.state, {2 * layer, 0}, {1, bits});
    Tensor cell = slice(data.state, {2 * layer + 1, 0}, {1, bits});
    std::vector<Tensor> hiddens;
    hiddens.reserve(static_cast<std::size_t>(steps));
    for (std::int64_t t = 0; t < steps; ++t) {
      const std::vector<Tensor> gates = split(hidden * recurrent_weights + recurrent_biases, 2, 0);
      cell = cell * forget[static_cast<std::size_t>(t)] + sigmoid(gates[0]) * tanh(gates[1]);
      hidden = output_gate[static_cast<std::size_t>(t)] * tanh(cell);
      hiddens.push_back(hidden);
    }
    inputs = concat(hiddens, 0);
  }

  // Predictions for every step, normalised with ADBench's log(Σ exp + 2).
  const Tensor predictions = inputs * extra[1] + extra[2];
  const Tensor normaliser = log(reduce_sum(exp(predictions), {1}, true) + 2.0);
  const Tensor targets = slice(data.sequence, {1, 0}, {steps, bits});
  const Tensor total = reduce_sum(targets * (predictions - normaliser));
  return negative(total) / static_cast<double>(steps * bits);
}

EvalFunctions lstm_functions() {
  const auto parse = [](const json& input) {
    return std::make_tuple(
        matrix_from_json(input["main_params"]), matrix_from_json(input["extra_params"]),
        LstmData{matrix_from_json(input["state"]), matrix_from_json(input["sequence"])});
  };
  return {
      {"objective", make_function(parse,
                                  [](const auto& in) {
                                    return number_output(lstm_objective(
                                        std::get<0>(in), std::get<1>(in), std::get<2>(in)));
                                  })},
      {"jacobian", make_function(parse,
                                 [](const auto& in) -> Output {
                                   const Tensor& main_params = std::get<0>(in);
                                   const Tensor& extra_params = std::get<1>(in);
                                   GradientTape tape;
                                   tape.watch({main_params, extra_params});
                                   const Tensor value =
                                       lstm_objective(main_params, extra_params, std::get<2>(in));
                                   return finish_output(
                                       tape.gradient(value, {main_params, extra_params}),
                                       [](const std::vector<Tensor>& g) -> Output {
                                         return [g] {
                                           std::vector<double> flat = to_vector(g[0]);
                                           const std::vector<double> extra = to_vector(g[1]);
                                           flat.insert(flat.end(), extra.begin(), extra.end());
                                           return json(flat);
                                         };
                                       });
                                 })},
  };
}

}  // namespace tapegrad::gradbench
