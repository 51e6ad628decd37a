// Checkpoint: a model, an optimizer and a generator saved and restored bit for bit; the file's
// entries; every refusal naming the entry and leaving every tracked object exactly as it was
// (restore is all or nothing); and a fuzz of mutated checkpoint files.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "file_support.hpp"
#include "identical_support.hpp"
#include "support.hpp"

using namespace tapegrad;
using tapegrad::testing::element_bytes;
using tapegrad::testing::message_of;
using tapegrad::testing::read_bytes;
using tapegrad::testing::TempFolder;
using tapegrad::testing::write_bytes;

namespace {

struct Net : Module {
  layers::Dense& hidden;
  layers::Dense& output;
  Variable calls;  // not trainable: a counter a run keeps

  explicit Net(Generator& generator)
      : hidden(add_module("hidden", layers::Dense(4, 3, generator, true, DType::Float64))),
        output(add_module("output", layers::Dense(3, 2, generator, true, DType::Float32))),
        calls(add_variable("calls", zeros({}, DType::Int64), false)) {}

  Tensor loss(const Tensor& x) const {
    return reduce_sum(square(cast(output(cast(tanh(hidden(x)), DType::Float32)), DType::Float64)));
  }
};

// Everything a run holds: a model, an optimizer with momentum slots, a dropout generator.
struct Run {
  Generator init;
  Net net;
  Adam adam{0.05};
  Generator dropout_generator;
  Variable scale{constant(1.5)};
  Checkpoint checkpoint;

  explicit Run(std::uint64_t seed) : init(seed), net(init), dropout_generator(seed + 100) {
    checkpoint.track("model", net)
        .track("scale", scale)
        .track("adam", adam)
        .track("dropout", dropout_generator);
  }

  // One training step: dropout draws from the generator, Adam moves every trainable variable.
  void step() {
    const Tensor x = from_values({0.5, -1, 2, 0.25, 1, 1, -0.5, 0}, {2, 4});
    GradientTape tape;
    const Tensor loss = net.loss(dropout(x, 0.25, dropout_generator)) * scale;
    std::vector<Variable> variables = net.trainable_variables();
    variables.push_back(scale);
    const std::vector<Tensor> grads = tape.gradient(loss, variables);
    std::vector<std::pair<Tensor, Variable>> pairs;
    for (std::size_t i = 0; i < grads.size(); ++i) pairs.emplace_back(grads[i], variables[i]);
    adam.apply_gradients(pairs);
    net.calls.assign_add(ones({}, DType::Int64));
  }

  // The whole state as bytes, to compare runs exactly.
  std::map<std::string, std::string> state() const {
    std::map<std::string, std::string> out;
    std::vector<std::pair<std::string, Variable>> variables = net.named_variables();
    variables.emplace_back("scale", scale);
    for (const auto& [name, variable] : variables) {
      out["variable " + name] = element_bytes(variable.peek());
      for (const std::string& slot : adam.slot_names()) {
        if (variable.trainable() && adam.iterations() > 0) {
          out["slot " + name + " " + slot] = element_bytes(adam.slot(variable, slot));
        }
      }
    }
    out["adam iterations"] = std::to_string(adam.iterations());
    out["adam learning rate"] = std::to_string(adam.learning_rate());
    out["dropout"] = std::to_string(dropout_generator.seed()) + "/" +
                     std::to_string(dropout_generator.counter());
    return out;
  }
};

std::vector<std::string> names_in(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& entry : load_npz(path)) names.push_back(entry.first);
  return names;
}

// The checkpoint at `from` with `change` applied to its entries, written to `to`.
template <class Change>
void rewrite(const std::string& from, const std::string& to, Change change) {
  std::vector<std::pair<std::string, Tensor>> entries = load_npz(from);
  change(entries);
  save_npz(to, entries);
}

Tensor& entry(std::vector<std::pair<std::string, Tensor>>& entries, const std::string& name) {
  for (auto& item : entries) {
    if (item.first == name) return item.second;
  }
  FAIL("no entry " << name);
  return entries.front().second;
}

}  // namespace

TEST_CASE("a restored run is the saved run bit for bit, and continues identically",
          "[checkpoint]") {
  TempFolder folder("checkpoint");
  const std::string path = folder.file("run.npz");
  Run original(1);
  for (int i = 0; i < 3; ++i) original.step();
  original.adam.set_learning_rate(0.02);
  original.checkpoint.save(path);

  Run resumed(99);  // other initial weights, no steps, another generator
  REQUIRE(resumed.state() != original.state());
  resumed.checkpoint.restore(path);
  CHECK(resumed.state() == original.state());
  CHECK(resumed.adam.iterations() == 3);
  CHECK(resumed.adam.learning_rate() == 0.02);

  for (int i = 0; i < 4; ++i) {
    original.step();
    resumed.step();
  }
  CHECK(resumed.state() == original.state());
}

TEST_CASE("a checkpoint is a NumPy .npz with one entry per piece of state", "[checkpoint]") {
  TempFolder folder("checkpoint");
  const std::string path = folder.file("run.npz");
  Run run(2);
  run.step();
  run.checkpoint.save(path);
  CHECK(names_in(path) == std::vector<std::string>{"model/hidden/kernel",
                                                   "model/hidden/bias",
                                                   "model/output/kernel",
                                                   "model/output/bias",
                                                   "model/calls",
                                                   "scale",
                                                   "adam/iterations",
                                                   "adam/learning_rate",
                                                   "adam/slots/model/hidden/kernel/m",
                                                   "adam/slots/model/hidden/kernel/v",
                                                   "adam/slots/model/hidden/bias/m",
                                                   "adam/slots/model/hidden/bias/v",
                                                   "adam/slots/model/output/kernel/m",
                                                   "adam/slots/model/output/kernel/v",
                                                   "adam/slots/model/output/bias/m",
                                                   "adam/slots/model/output/bias/v",
                                                   "adam/slots/scale/m",
                                                   "adam/slots/scale/v",
                                                   "dropout/seed",
                                                   "dropout/counter"});
  std::map<std::string, Tensor> entries;
  for (auto& named : load_npz(path)) entries.emplace(named.first, named.second);
  CHECK(entries.at("adam/iterations").dtype() == DType::Int64);
  CHECK(entries.at("adam/iterations").item<std::int64_t>() == 1);
  CHECK(entries.at("adam/learning_rate").item<double>() == 0.05);
  CHECK(entries.at("dropout/seed").item<std::int64_t>() == 102);
  CHECK(entries.at("dropout/counter").item<std::int64_t>() ==
        static_cast<std::int64_t>(run.dropout_generator.counter()));
  CHECK(entries.at("model/output/kernel").dtype() == DType::Float32);
  CHECK(element_bytes(entries.at("adam/slots/model/hidden/kernel/v")) ==
        element_bytes(run.adam.slot(run.net.hidden.kernel(), "v")));

  // A generator's full 64-bit seed and counter survive the int64 entries.
  Generator big(0xFEDCBA9876543210ull, 0xFFFFFFFFFFFFFFF0ull);
  Checkpoint only_generator;
  only_generator.track("g", big);
  only_generator.save(folder.file("g.npz"));
  Generator other(1);
  Checkpoint restore_into;
  restore_into.track("g", other);
  restore_into.restore(folder.file("g.npz"));
  CHECK(other.seed() == 0xFEDCBA9876543210ull);
  CHECK(other.counter() == 0xFFFFFFFFFFFFFFF0ull);
  // The restored generator draws what the saved one would have drawn.
  const Tensor after_saved = random_uniform({2}, big, 0.0, 1.0);
  const Tensor after_restored = random_uniform({2}, other, 0.0, 1.0);
  tapegrad::testing::require_identical(after_restored, after_saved);
}

TEST_CASE("a variable tracked twice is saved and restored under its first name only",
          "[checkpoint]") {
  // Both names were written and restore assigned from each in turn: the second won, so an
  // edit of the first (the name the slots use) was silently lost.
  TempFolder folder("checkpoint_twice");
  Generator generator(1);
  layers::Dense net(2, 1, generator, false, DType::Float64);
  Variable kernel = net.trainable_variables()[0];
  SGD sgd(0.5, 0.9);
  sgd.apply_gradients({{fill({2, 1}, 1.0), kernel}});
  Checkpoint checkpoint;
  checkpoint.track("k", kernel).track("net", net).track("sgd", sgd);
  checkpoint.save(folder.file("run.npz"));
  CHECK(names_in(folder.file("run.npz")) == std::vector<std::string>{"k", "sgd/iterations",
                                                                     "sgd/learning_rate",
                                                                     "sgd/slots/k/momentum"});
  // Edited as a NumPy user would, then restored: the edit is what the variable holds.
  std::vector<std::pair<std::string, Tensor>> entries = load_npz(folder.file("run.npz"));
  entries[0].second = from_values({5.0, 6.0}, {2, 1});
  save_npz(folder.file("edited.npz"), entries);
  checkpoint.restore(folder.file("edited.npz"));
  tapegrad::testing::require_identical(kernel.value(), from_values({5.0, 6.0}, {2, 1}));
  // A file that also holds the second name (as files written before this rule do) restores
  // when the two agree, and is refused, changing nothing, when they differ.
  entries.emplace_back("net/kernel", from_values({5.0, 6.0}, {2, 1}));
  save_npz(folder.file("both.npz"), entries);
  kernel.assign(zeros({2, 1}));
  checkpoint.restore(folder.file("both.npz"));
  tapegrad::testing::require_identical(kernel.value(), from_values({5.0, 6.0}, {2, 1}));
  entries.back().second = from_values({-1.0, -2.0}, {2, 1});
  save_npz(folder.file("differ.npz"), entries);
  kernel.assign(zeros({2, 1}));
  const std::string message =
      message_of<InvalidArgument>([&] { checkpoint.restore(folder.file("differ.npz")); });
  CHECK_THAT(message, Catch::Contains("'k'") && Catch::Contains("'net/kernel'") &&
                          Catch::Contains("differ"));
  tapegrad::testing::require_identical(kernel.value(), zeros({2, 1}));
}

TEST_CASE("restoring a checkpoint of an optimizer that never stepped clears its slots",
          "[checkpoint]") {
  TempFolder folder("checkpoint");
  const std::string path = folder.file("fresh.npz");
  Run fresh(3);
  fresh.checkpoint.save(path);
  Run stepped(3);
  stepped.step();
  stepped.checkpoint.restore(path);
  CHECK(stepped.adam.iterations() == 0);
  CHECK_THROWS_AS(stepped.adam.slot(stepped.scale, "m"), InvalidArgument);
  CHECK(stepped.state() == fresh.state());
}

TEST_CASE("restore is all or nothing: each bad entry is named and nothing changes",
          "[checkpoint][errors]") {
  TempFolder folder("checkpoint");
  const std::string good = folder.file("good.npz");
  const std::string bad = folder.file("bad.npz");
  Run saved(4);
  for (int i = 0; i < 2; ++i) saved.step();
  saved.checkpoint.save(good);

  Run target(5);
  target.step();
  const auto before = target.state();
  const auto expect_refused = [&](const std::string& path, const std::vector<std::string>& parts) {
    const std::string message =
        message_of<InvalidArgument>([&] { target.checkpoint.restore(path); });
    CHECK_THAT(message, Catch::Contains("Checkpoint::restore(\"" + path + "\")"));
    for (const std::string& part : parts) CHECK_THAT(message, Catch::Contains(part));
    CHECK(target.state() == before);
  };

  // One shape changed, in the entry checked last (the generator's): a restore that assigned
  // as it checked would have changed the model already.
  rewrite(good, bad,
          [](auto& entries) { entry(entries, "dropout/counter") = zeros({2}, DType::Int64); });
  expect_refused(bad, {"entry 'dropout/counter' has shape [2] and dtype int64 in the file",
                       "generator 'dropout' has shape [] and dtype int64"});
  rewrite(good, bad, [](auto& entries) { entry(entries, "model/hidden/kernel") = zeros({4, 4}); });
  expect_refused(bad, {"entry 'model/hidden/kernel' has shape [4, 4] and dtype float64 in the file",
                       "the tracked variable 'kernel' has shape [4, 3] and dtype float64"});
  rewrite(good, bad,
          [](auto& entries) { entry(entries, "model/output/bias") = zeros({2}, DType::Float64); });
  expect_refused(bad, {"entry 'model/output/bias'", "dtype float64 in the file", "dtype float32"});
  rewrite(good, bad, [](auto& entries) {
    entries.erase(std::find_if(entries.begin(), entries.end(),
                               [](const auto& e) { return e.first == "scale"; }));
  });
  expect_refused(bad, {"entry 'scale' is missing from the file"});
  rewrite(good, bad, [](auto& entries) { entries.emplace_back("model/extra", zeros({1})); });
  expect_refused(bad, {"entry 'model/extra' in the file matches nothing tracked"});
  rewrite(good, bad, [](auto& entries) {
    entries.erase(std::find_if(entries.begin(), entries.end(),
                               [](const auto& e) { return e.first == "adam/slots/scale/v"; }));
  });
  expect_refused(bad, {"entry 'adam/slots/scale/v' is missing from the file",
                       "the slot 'v' of optimizer 'adam' (Adam) for 'scale'"});
  rewrite(good, bad,
          [](auto& entries) { entry(entries, "adam/iterations") = fill({}, -1, DType::Int64); });
  expect_refused(bad, {"entry 'adam/iterations' holds -1, a negative step count"});
  rewrite(good, bad, [](auto& entries) { entry(entries, "adam/learning_rate") = constant(-0.5); });
  expect_refused(bad, {"entry 'adam/learning_rate' holds -0.5", "not a learning rate"});

  // Files that are not checkpoints at all.
  expect_refused(folder.file("missing.npz"), {"load_npz", "missing.npz"});
  write_bytes(bad, read_bytes(good).substr(0, read_bytes(good).size() / 2));
  expect_refused(bad, {"load_npz"});
  save_npy(bad, zeros({3}));
  expect_refused(bad, {"load_npz", "not a readable zip archive"});
}

TEST_CASE("save and track refuse what could not be restored, naming it", "[checkpoint][errors]") {
  TempFolder folder("checkpoint");
  Checkpoint empty;
  CHECK_THAT(
      message_of<InvalidArgument>([&] { empty.save(folder.file("e.npz")); }),
      Catch::Contains("Checkpoint::save(\"" + folder.file("e.npz") + "\"): nothing is tracked"));
  CHECK_THAT(message_of<InvalidArgument>([&] { empty.restore(folder.file("e.npz")); }),
             Catch::Contains("nothing is tracked"));

  // An optimizer whose slots belong to a variable the checkpoint does not know.
  Variable tracked(constant({1.0, 2.0}), true, "tracked");
  Variable untracked(constant({3.0}), true, "untracked");
  SGD sgd(0.1, 0.9);
  sgd.apply_gradients({{constant({1.0, 1.0}), tracked}, {constant({1.0}), untracked}});
  Checkpoint partial;
  partial.track("w", tracked).track("sgd", sgd);
  const std::string path = folder.file("partial.npz");
  CHECK_THAT(
      message_of<InvalidArgument>([&] { partial.save(path); }),
      Catch::Contains("optimizer 'sgd' (SGD) holds slots for a variable that is not tracked (id " +
                      std::to_string(untracked.id()) + ", shape [1] and dtype float64)"));
  CHECK_FALSE(std::filesystem::exists(path));
  partial.track("u", untracked);
  partial.save(path);
  CHECK(names_in(path) == std::vector<std::string>{"w", "u", "sgd/iterations", "sgd/learning_rate",
                                                   "sgd/slots/w/momentum", "sgd/slots/u/momentum"});

  CHECK_THAT(message_of<InvalidArgument>([&] { partial.track("w", untracked); }),
             Catch::Contains("Checkpoint::track: the name 'w' is already tracked"));
  CHECK_THAT(message_of<InvalidArgument>([&] { partial.track("", untracked); }),
             Catch::Contains("Checkpoint::track: the name is empty"));
  CHECK_THAT(message_of<InvalidArgument>([&] { partial.track("a/b", untracked); }),
             Catch::Contains("the name 'a/b' contains '/'"));

  // A folder that does not exist: the error names the call and the system's reason, and the
  // old file (none here) is untouched.
  const std::string nowhere = folder.file("no/such/folder/run.npz");
  CHECK_THAT(message_of<InvalidArgument>([&] { partial.save(nowhere); }),
             Catch::Contains("Checkpoint::save(\"" + nowhere + "\")"));
}

TEST_CASE("mutated checkpoint files restore whole or throw, and a refusal changes nothing",
          "[checkpoint][fuzz]") {
  std::error_code no_shm;
  const bool shm =
      std::filesystem::is_directory("/dev/shm", no_shm) && ::access("/dev/shm", W_OK) == 0;
  TempFolder folder("checkpoint_fuzz", shm ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path());
  const std::string good = folder.file("good.npz");
  const std::string path = folder.file("mutated.npz");
  Run saved(6);
  saved.step();
  saved.checkpoint.save(good);
  const std::string base = read_bytes(good);

  Run target(7);
  target.step();
  const auto before = target.state();
  const std::string target_path = folder.file("target.npz");
  target.checkpoint.save(target_path);
  std::mt19937_64 generator(20261127);
  int restored = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = base;
    const int kind = trial % 3;
    if (kind == 0) {
      bytes.resize(generator() % bytes.size());  // truncated
    } else if (kind == 1) {
      const std::size_t at = generator() % bytes.size();
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << (generator() % 8)));  // one bit flipped
    } else {
      for (int k = 0; k < 4; ++k)
        bytes[generator() % bytes.size()] = static_cast<char>(generator());
    }
    ::unlink(path.c_str());
    write_bytes(path, bytes);
    try {
      target.checkpoint.restore(path);
      ++restored;
      // A mutation that still restores (a flipped bit in a zip field nobody reads) gives the
      // saved state whole; put the target back for the next trial.
      REQUIRE(target.state() == saved.state());
      target.checkpoint.restore(target_path);
      REQUIRE(target.state() == before);
    } catch (const InvalidArgument& error) {
      ++refused;
      REQUIRE_THAT(error.what(), Catch::Contains("Checkpoint::restore"));
      REQUIRE(target.state() == before);
    }
  }
  INFO("restored " << restored << ", refused " << refused);
  CHECK(refused > 2500);
  CHECK(restored + refused == 3000);
}
