// The digits MLP (64-128-10, dropout on the hidden layer, Adam) trained for a given number of
// epochs, resumable through a Checkpoint: test_checkpoint_processes runs it straight for 10
// epochs, and as 5 epochs + save + (a new process) restore + 5 epochs, and compares the
// final weights bit for bit.
//
//   digits_resume DATA EPOCHS [--restore CHECKPOINT] --save CHECKPOINT
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "digits_batches.hpp"
#include "digits_data.hpp"

namespace tg = tapegrad;

namespace {

struct Mlp : tg::Module {
  tg::layers::Dense& hidden;
  tg::layers::Dense& output;
  explicit Mlp(tg::Generator& generator)
      : hidden(add_module("hidden", tg::layers::Dense(64, 128, generator))),
        output(add_module("output", tg::layers::Dense(128, 10, generator))) {}
  tg::Tensor logits(const tg::Tensor& x, tg::Generator& dropout_generator) const {
    return output(tg::dropout(tg::relu(hidden(x)), 0.2, dropout_generator));
  }
};

int run(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: digits_resume DATA EPOCHS [--restore CHECKPOINT] --save CHECKPOINT\n";
    return 2;
  }
  const std::string data_path = argv[1];
  const int epochs = std::atoi(argv[2]);
  std::string restore_path, save_path;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--restore") restore_path = argv[i + 1];
    if (flag == "--save") save_path = argv[i + 1];
  }

  const digits::Examples examples = digits::to_examples(digits::load_csv(data_path));
  tg::Generator init(2026);
  Mlp model(init);
  tg::Adam adam(0.002);
  tg::Generator dropout_generator(7);
  tg::Variable epochs_done(tg::zeros({}, tg::DType::Int64), false, "epochs_done");
  tg::Checkpoint checkpoint;
  checkpoint.track("model", model)
      .track("adam", adam)
      .track("dropout", dropout_generator)
      .track("epochs_done", epochs_done);
  if (!restore_path.empty()) checkpoint.restore(restore_path);

  const std::vector<tg::Variable> variables = model.trainable_variables();
  std::vector<std::size_t> order(examples.labels.size());
  constexpr std::size_t kBatch = 32;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    // The shuffle of an epoch depends on its number only, so it needs no saved state.
    const auto number = static_cast<std::uint32_t>(epochs_done.peek().item<std::int64_t>());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937 shuffle(1000 + number);
    std::shuffle(order.begin(), order.end(), shuffle);
    for (std::size_t first = 0; first < order.size(); first += kBatch) {
      const std::size_t count = std::min(kBatch, order.size() - first);
      const std::pair<tg::Tensor, tg::Tensor> batch =
          digits::make_batch(examples, order, first, count);
      tg::GradientTape tape;
      const tg::Tensor loss = tg::reduce_mean(tg::softmax_cross_entropy_with_logits(
          batch.second, model.logits(batch.first, dropout_generator)));
      const std::vector<tg::Tensor> grads = tape.gradient(loss, variables);
      std::vector<std::pair<tg::Tensor, tg::Variable>> pairs;
      for (std::size_t i = 0; i < grads.size(); ++i) pairs.emplace_back(grads[i], variables[i]);
      adam.apply_gradients(pairs);
    }
    epochs_done.assign_add(tg::ones({}, tg::DType::Int64));
  }
  checkpoint.save(save_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "digits_resume: " << error.what() << "\n";
    return 1;
  }
}
