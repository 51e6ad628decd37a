// Checkpoint: the tracked objects' state as named tensors (save), and back (restore), with
// every entry of a restore checked before the first assignment so that a bad file changes
// nothing.
#include "tapegrad/checkpoint.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "files/file_io.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/files.hpp"
#include "tapegrad/optim.hpp"

namespace tapegrad {

struct Checkpoint::Tracked {
  std::string name;
  std::vector<Variable> variable;  // one, for a tracked Variable (it has no default state)
  const Module* module = nullptr;
  Optimizer* optimizer = nullptr;
  Generator* generator = nullptr;
};

namespace {

// A variable with the entry it is saved under.
struct NamedVariable {
  std::string entry;
  Variable variable;
};

// Every tracked variable (modules expanded) in tracked order, once, under its first entry:
// the one saved, restored and named by an optimizer's slots. (Each entry of a variable tracked
// twice was saved and restored in turn, so the last won and an edit of the first was lost.)
struct VariableIndex {
  std::vector<NamedVariable> variables;
  // The other names of a variable tracked twice, each with its variable's position in
  // `variables`. A file written before the rule above holds them too: restore accepts such an
  // entry when it equals the first's.
  std::vector<std::pair<NamedVariable, std::size_t>> other_names;
  std::unordered_map<std::uint64_t, std::size_t> position;  // variable id -> in `variables`
};

template <class TrackedList>
VariableIndex index_variables(const TrackedList& tracked) {
  VariableIndex index;
  const auto add = [&](std::string entry, const Variable& variable) {
    const auto [at, first] = index.position.emplace(variable.id(), index.variables.size());
    if (!first) {
      index.other_names.emplace_back(NamedVariable{std::move(entry), variable}, at->second);
      return;
    }
    index.variables.push_back(NamedVariable{std::move(entry), variable});
  };
  for (const auto& item : tracked) {
    if (!item->variable.empty()) add(item->name, item->variable.front());
    if (item->module != nullptr) {
      for (const auto& named : item->module->named_variables()) {
        add(item->name + "/" + named.first, named.second);
      }
    }
  }
  return index;
}

std::string slot_entry(const std::string& optimizer, const std::string& variable_entry,
                       const std::string& slot) {
  return optimizer + "/slots/" + variable_entry + "/" + slot;
}

Tensor int64_scalar(std::int64_t value) { return Tensor(storage_array<std::int64_t>(value)); }

// A uint64 kept in an int64 entry bit for bit (NumPy shows values >= 2^63 as negative).
Tensor uint64_scalar(std::uint64_t value) {
  std::int64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return int64_scalar(bits);
}

std::uint64_t uint64_of(const Tensor& scalar) {
  const std::int64_t bits = scalar.item<std::int64_t>();
  std::uint64_t value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

template <class T>
bool same_elements(const Tensor& a, const Tensor& b) {
  return std::memcmp(a.array<T>().data(), b.array<T>().data(), a.size() * sizeof(T)) == 0;
}

// a and b (one shape and dtype) hold the same bits.
bool same_bits(const Tensor& a, const Tensor& b) {
  switch (a.dtype()) {
    case DType::Float32:
      return same_elements<float>(a, b);
    case DType::Float64:
      return same_elements<double>(a, b);
    case DType::Int32:
      return same_elements<std::int32_t>(a, b);
    case DType::Int64:
      return same_elements<std::int64_t>(a, b);
    case DType::Bool:
      return same_elements<bool>(a, b);
  }
  return false;
}

std::string describe(const Shape& shape, DType dtype) {
  return "shape " + shape_to_string(shape) + " and dtype " + dtype_name(dtype);
}

// The file's entries by name, each taken at most once; what is left at the end matches
// nothing tracked.
class FileEntries {
 public:
  FileEntries(std::vector<std::pair<std::string, Tensor>> entries, std::string call)
      : entries_(std::move(entries)), taken_(entries_.size(), false), call_(std::move(call)) {
    for (std::size_t i = 0; i < entries_.size(); ++i) position_.emplace(entries_[i].first, i);
  }

  bool contains(const std::string& name) const { return position_.count(name) != 0; }

  // The entry `name`, which must exist with `shape` and `dtype` (`what` says what it restores).
  Tensor take(const std::string& name, const Shape& shape, DType dtype, const std::string& what) {
    const auto found = position_.find(name);
    if (found == position_.end()) {
      throw InvalidArgument(call_ + ": entry '" + name + "' is missing from the file (" + what +
                            " with " + describe(shape, dtype) + ")");
    }
    const Tensor& value = entries_[found->second].second;
    if (value.shape() != shape || value.dtype() != dtype) {
      throw InvalidArgument(call_ + ": entry '" + name + "' has " +
                            describe(value.shape(), value.dtype()) + " in the file; " + what +
                            " has " + describe(shape, dtype));
    }
    taken_[found->second] = true;
    return value;
  }

  void require_all_taken() const {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (!taken_[i]) {
        throw InvalidArgument(call_ + ": entry '" + entries_[i].first +
                              "' in the file matches nothing tracked");
      }
    }
  }

 private:
  std::vector<std::pair<std::string, Tensor>> entries_;
  std::vector<bool> taken_;
  std::unordered_map<std::string, std::size_t> position_;
  std::string call_;
};

// What a restore will do once every entry has passed.
struct RestorePlan {
  std::vector<std::pair<Variable, Tensor>> assignments;
  std::vector<std::pair<Optimizer*, detail::OptimizerState>> optimizers;
  struct GeneratorState {
    Generator* generator;
    std::uint64_t seed;
    std::uint64_t counter;
  };
  std::vector<GeneratorState> generators;
};

std::mutex ranks_mutex;
std::shared_ptr<const detail::CheckpointRanks> installed_ranks;  // guarded by ranks_mutex

std::vector<char> bytes_of(const std::string& text) {
  return std::vector<char>(text.begin(), text.end());
}

// Rank 0's outcome (an error message, or empty) on every rank, thrown there if not empty.
void share_outcome(const detail::CheckpointRanks& ranks, std::string outcome) {
  std::vector<char> bytes = bytes_of(outcome);
  ranks.broadcast(bytes);
  if (!bytes.empty()) throw InvalidArgument(std::string(bytes.begin(), bytes.end()));
}

}  // namespace

namespace detail {

void set_checkpoint_ranks(std::shared_ptr<const CheckpointRanks> ranks) {
  std::lock_guard<std::mutex> lock(ranks_mutex);
  installed_ranks = std::move(ranks);
}

std::shared_ptr<const CheckpointRanks> checkpoint_ranks() {
  std::lock_guard<std::mutex> lock(ranks_mutex);
  return installed_ranks;
}

}  // namespace detail

void Checkpoint::add(Tracked tracked) {
  const std::string call = "Checkpoint::track";
  if (tracked.name.empty()) throw InvalidArgument(call + ": the name is empty");
  if (tracked.name.find('/') != std::string::npos) {
    throw InvalidArgument(call + ": the name '" + tracked.name +
                          "' contains '/' (the separator of the file's entries)");
  }
  for (const auto& item : tracked_) {
    if (item->name == tracked.name) {
      throw InvalidArgument(call + ": the name '" + tracked.name + "' is already tracked");
    }
  }
  tracked_.push_back(std::make_shared<const Tracked>(std::move(tracked)));
}

Checkpoint& Checkpoint::track(const std::string& name, const Variable& variable) {
  add(Tracked{name, {variable}, nullptr, nullptr, nullptr});
  return *this;
}

Checkpoint& Checkpoint::track(const std::string& name, const Module& module) {
  add(Tracked{name, {}, &module, nullptr, nullptr});
  return *this;
}

Checkpoint& Checkpoint::track(const std::string& name, Optimizer& optimizer) {
  add(Tracked{name, {}, nullptr, &optimizer, nullptr});
  return *this;
}

Checkpoint& Checkpoint::track(const std::string& name, Generator& generator) {
  add(Tracked{name, {}, nullptr, nullptr, &generator});
  return *this;
}

void Checkpoint::save(const std::string& path) const {
  const std::string call = detail::files::describe_call("Checkpoint::save", path);
  if (tracked_.empty()) throw InvalidArgument(call + ": nothing is tracked");
  const VariableIndex index = index_variables(tracked_);

  std::vector<std::pair<std::string, Tensor>> entries;
  for (const NamedVariable& named : index.variables) {
    entries.emplace_back(named.entry, named.variable.peek());
  }
  for (const auto& item : tracked_) {
    if (item->optimizer != nullptr) {
      const detail::OptimizerState state = detail::OptimizerState::read(*item->optimizer);
      entries.emplace_back(item->name + "/iterations", int64_scalar(state.iterations));
      if (!std::isnan(state.learning_rate)) {
        entries.emplace_back(item->name + "/learning_rate", constant(state.learning_rate));
      }
      for (const auto& slots : state.slots) {
        if (index.position.count(slots.first) == 0) {
          throw InvalidArgument(call + ": optimizer '" + item->name + "' (" +
                                detail::OptimizerState::name_of(*item->optimizer) +
                                ") holds slots for a variable that is not tracked (id " +
                                std::to_string(slots.first) +
                                (slots.second.empty() ? std::string()
                                                      : ", " + describe(slots.second[0].shape(),
                                                                        slots.second[0].dtype())) +
                                "); track every variable it updates");
        }
      }
      // Slots in the order of the tracked variables, so that a file's layout is reproducible.
      const std::vector<std::string> slot_names = item->optimizer->slot_names();
      for (const NamedVariable& named : index.variables) {
        const auto slots = state.slots.find(named.variable.id());
        if (slots == state.slots.end()) continue;
        for (std::size_t k = 0; k < slot_names.size(); ++k) {
          entries.emplace_back(slot_entry(item->name, named.entry, slot_names[k]),
                               slots->second[k]);
        }
      }
    }
    if (item->generator != nullptr) {
      entries.emplace_back(item->name + "/seed", uint64_scalar(item->generator->seed()));
      entries.emplace_back(item->name + "/counter", uint64_scalar(item->generator->counter()));
    }
  }

  const auto write = [&] {
    try {
      save_npz(path, entries);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(call + ": " + error.what());
    }
  };
  const std::shared_ptr<const detail::CheckpointRanks> ranks = detail::checkpoint_ranks();
  if (!ranks) {
    write();
    return;
  }
  std::string outcome;
  if (ranks->rank() == 0) {
    try {
      write();
    } catch (const InvalidArgument& error) {
      outcome = error.what();
    }
  }
  share_outcome(*ranks, std::move(outcome));
}

void Checkpoint::restore(const std::string& path) {
  const std::string call = detail::files::describe_call("Checkpoint::restore", path);
  if (tracked_.empty()) throw InvalidArgument(call + ": nothing is tracked");

  std::vector<std::pair<std::string, Tensor>> loaded;
  try {
    const std::shared_ptr<const detail::CheckpointRanks> ranks = detail::checkpoint_ranks();
    if (!ranks) {
      loaded = load_npz(path);
    } else {
      // Rank 0 reads; every rank parses the same bytes.
      std::vector<char> bytes;
      std::string outcome;
      if (ranks->rank() == 0) {
        try {
          bytes =
              detail::files::read_whole_file(path, detail::files::describe_call("load_npz", path));
        } catch (const InvalidArgument& error) {
          outcome = error.what();
        }
      }
      share_outcome(*ranks, std::move(outcome));
      ranks->broadcast(bytes);
      loaded = detail::files::load_npz_bytes(bytes, path);
    }
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(call + ": " + error.what());
  }

  FileEntries file(std::move(loaded), call);
  const VariableIndex index = index_variables(tracked_);
  RestorePlan plan;
  for (const NamedVariable& named : index.variables) {
    const Variable& variable = named.variable;
    plan.assignments.emplace_back(variable,
                                  file.take(named.entry, variable.shape(), variable.dtype(),
                                            "the tracked variable '" + variable.name() + "'"));
  }
  for (const auto& [other, first] : index.other_names) {
    if (!file.contains(other.entry)) continue;
    const Variable& variable = other.variable;
    const Tensor value = file.take(other.entry, variable.shape(), variable.dtype(),
                                   "the tracked variable '" + variable.name() + "'");
    if (!same_bits(value, plan.assignments[first].second)) {
      throw InvalidArgument(call + ": entries '" + index.variables[first].entry + "' and '" +
                            other.entry + "' both hold the variable '" + variable.name() +
                            "' (tracked twice) but differ; the first name " +
                            "is the one restored: remove '" + other.entry + "' from the file");
    }
  }
  for (const auto& item : tracked_) {
    if (item->optimizer != nullptr) {
      Optimizer& optimizer = *item->optimizer;
      const std::string what = std::string("optimizer '") + item->name + "' (" +
                               detail::OptimizerState::name_of(optimizer) + ")";
      detail::OptimizerState state;
      const std::string iterations_entry = item->name + "/iterations";
      state.iterations = file.take(iterations_entry, {}, DType::Int64, what).item<std::int64_t>();
      if (state.iterations < 0) {
        throw InvalidArgument(call + ": entry '" + iterations_entry + "' holds " +
                              std::to_string(state.iterations) + ", a negative step count");
      }
      state.learning_rate = detail::OptimizerState::read(optimizer).learning_rate;
      if (!std::isnan(state.learning_rate)) {
        const std::string rate_entry = item->name + "/learning_rate";
        state.learning_rate = file.take(rate_entry, {}, DType::Float64, what).item<double>();
        if (!(state.learning_rate >= 0.0) || std::isinf(state.learning_rate)) {
          throw InvalidArgument(call + ": entry '" + rate_entry + "' holds " +
                                std::to_string(state.learning_rate) +
                                ", not a learning rate (finite, >= 0)");
        }
      }
      const std::vector<std::string> slot_names = optimizer.slot_names();
      for (const NamedVariable& named : index.variables) {
        std::size_t present = 0;
        for (const std::string& slot : slot_names) {
          present += file.contains(slot_entry(item->name, named.entry, slot)) ? 1 : 0;
        }
        if (present == 0) continue;  // no step has touched this variable yet
        std::vector<Tensor> slots;
        for (const std::string& slot : slot_names) {
          // Throws for the first slot missing when only some are there.
          slots.push_back(
              file.take(slot_entry(item->name, named.entry, slot), named.variable.shape(),
                        named.variable.dtype(),
                        "the slot '" + slot + "' of " + what + " for '" + named.entry + "'"));
        }
        state.slots.emplace(named.variable.id(), std::move(slots));
      }
      plan.optimizers.emplace_back(&optimizer, std::move(state));
    }
    if (item->generator != nullptr) {
      const std::string what = "generator '" + item->name + "'";
      const std::uint64_t seed = uint64_of(file.take(item->name + "/seed", {}, DType::Int64, what));
      const std::uint64_t counter =
          uint64_of(file.take(item->name + "/counter", {}, DType::Int64, what));
      plan.generators.push_back({item->generator, seed, counter});
    }
  }
  file.require_all_taken();

  // Every entry has passed: from here on nothing is refused.
  for (auto& assignment : plan.assignments) assignment.first.assign(assignment.second);
  for (auto& optimizer : plan.optimizers) {
    detail::OptimizerState::write(*optimizer.first, std::move(optimizer.second));
  }
  for (const auto& generator : plan.generators)
    generator.generator->reset(generator.seed, generator.counter);
}

}  // namespace tapegrad
