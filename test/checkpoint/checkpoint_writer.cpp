// Saves a checkpoint in an endless loop until it is killed (test_checkpoint_processes kills
// it with SIGKILL at random moments). Each round k leaves a state in which every piece says k:
// the variables are filled with k, the optimizer has taken k steps and the generator's
// counter is k, so a file that mixed two rounds would show.
//
//   checkpoint_writer CHECKPOINT     (resumes from CHECKPOINT when it exists)
// Writes "ready\n" to stdout once restored, then saves round after round, writing
// "saved K SECONDS\n" after each (SECONDS: the round's time, step and save, on this machine now).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: checkpoint_writer CHECKPOINT\n";
    return 2;
  }
  const std::string path = argv[1];
  try {
    tg::Variable weights(tg::zeros({512, 256}), true, "weights");  // 1 MiB: a save takes a while
    tg::Variable bias(tg::zeros({256}, tg::DType::Float32), true, "bias");
    tg::Variable round(tg::zeros({}, tg::DType::Int64), false, "round");
    tg::Adam adam(0.1);
    tg::Generator generator(99);
    tg::Checkpoint checkpoint;
    checkpoint.track("weights", weights)
        .track("bias", bias)
        .track("round", round)
        .track("adam", adam)
        .track("generator", generator);
    struct stat status;
    if (::stat(path.c_str(), &status) == 0) checkpoint.restore(path);
    std::cout << "ready" << std::endl;

    for (std::int64_t k = round.peek().item<std::int64_t>() + 1;; ++k) {
      const auto start = std::chrono::steady_clock::now();
      adam.apply_gradients(
          {{tg::ones({512, 256}), weights}, {tg::ones({256}, tg::DType::Float32), bias}});
      weights.assign(tg::fill({512, 256}, static_cast<double>(k)));
      bias.assign(tg::fill({256}, static_cast<double>(k), tg::DType::Float32));
      round.assign(tg::fill({}, static_cast<double>(k), tg::DType::Int64));
      generator.reset(99, static_cast<std::uint64_t>(k));
      checkpoint.save(path);
      std::cout << "saved " << k << " "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                << std::endl;
    }
  } catch (const std::exception& error) {
    std::cerr << "checkpoint_writer: " << error.what() << "\n";
    return 1;
  }
}
