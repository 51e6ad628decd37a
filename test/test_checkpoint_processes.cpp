// Checkpoints across processes: a training run resumed in a new process ends bit for bit
// where the uninterrupted run ends, and a process killed (SIGKILL) at random moments while it
// saves in a loop always leaves a file that restores whole, to its last completed round.
// The programs run here are test/checkpoint/digits_resume.cpp and checkpoint_writer.cpp.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "file_support.hpp"
#include "identical_support.hpp"
#include "support.hpp"

extern char** environ;

using namespace tapegrad;
using tapegrad::testing::element_bytes;
using tapegrad::testing::TempFolder;

namespace {

// A child process, its stdout a pipe when asked; killed and reaped by the destructor if the
// test ends early.
class Child {
 public:
  Child(const std::vector<std::string>& arguments, bool pipe_stdout) {
    std::vector<char*> argv;
    for (const std::string& argument : arguments)
      argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    int pipe_ends[2] = {-1, -1};
    if (pipe_stdout) {
      REQUIRE(::pipe2(pipe_ends, O_CLOEXEC) == 0);
      posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
    }
    const int spawned = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (pipe_stdout) {
      ::close(pipe_ends[1]);
      stdout_ = pipe_ends[0];
    }
    REQUIRE(spawned == 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdout_ >= 0) ::close(stdout_);
  }

  // Blocks until the child has written a line (or closed its stdout); false at end of file.
  bool wait_for_line() {
    std::string line;
    return read_line(line);
  }
  // The next line the child wrote, without its newline; false at end of file.
  bool read_line(std::string& line) {
    line.clear();
    char c = 0;
    while (::read(stdout_, &c, 1) == 1) {
      if (c == '\n') return true;
      line += c;
    }
    return false;
  }
  // The exit status as waitpid gives it.
  int wait() {
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return status;
  }
  int kill_and_wait() {
    ::kill(pid_, SIGKILL);
    return wait();
  }

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
};

void run_to_success(const std::vector<std::string>& arguments) {
  Child child(arguments, false);
  const int status = child.wait();
  INFO(arguments[0] << " " << arguments[1]);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

std::map<std::string, std::string> entries_as_bytes(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& entry : load_npz(path)) out[entry.first] = element_bytes(entry.second);
  return out;
}

}  // namespace

TEST_CASE("a run resumed in a new process ends bit for bit where the straight run ends",
          "[checkpoint][processes]") {
  TempFolder folder("resume");
  const std::string program = TAPEGRAD_DIGITS_RESUME;
  const std::string data = TAPEGRAD_DIGITS_CSV;
  run_to_success({program, data, "10", "--save", folder.file("straight.npz")});
  run_to_success({program, data, "5", "--save", folder.file("half.npz")});
  run_to_success({program, data, "5", "--restore", folder.file("half.npz"), "--save",
                  folder.file("resumed.npz")});

  const auto straight = entries_as_bytes(folder.file("straight.npz"));
  const auto half = entries_as_bytes(folder.file("half.npz"));
  const auto resumed = entries_as_bytes(folder.file("resumed.npz"));
  REQUIRE(straight.size() == resumed.size());
  for (const auto& [name, bytes] : straight) {
    INFO("entry " << name);
    REQUIRE(resumed.count(name) == 1);
    CHECK(resumed.at(name) == bytes);
  }
  // Not vacuous: the last five epochs moved the weights, Adam and the dropout generator.
  CHECK(half.at("model/hidden/kernel") != straight.at("model/hidden/kernel"));
  CHECK(half.at("adam/slots/model/output/kernel/v") !=
        straight.at("adam/slots/model/output/kernel/v"));
  CHECK(half.at("dropout/counter") != straight.at("dropout/counter"));
  const auto restored = load_npz(folder.file("resumed.npz"));
  for (const auto& entry : restored) {
    if (entry.first == "epochs_done") CHECK(entry.second.item<std::int64_t>() == 10);
    if (entry.first == "adam/iterations") CHECK(entry.second.item<std::int64_t>() == 10 * 57);
  }
}

TEST_CASE("a process killed at random moments while saving never loses its last checkpoint",
          "[checkpoint][processes]") {
  TempFolder folder("kill");
  const std::string path = folder.file("run.npz");
  const std::string program = TAPEGRAD_CHECKPOINT_WRITER;

  // The state the parent restores into after each kill.
  Variable weights(zeros({512, 256}), true, "weights");
  Variable bias(zeros({256}, DType::Float32), true, "bias");
  Variable round(zeros({}, DType::Int64), false, "round");
  Adam adam(0.1);
  Generator generator(1);
  Checkpoint checkpoint;
  checkpoint.track("weights", weights)
      .track("bias", bias)
      .track("round", round)
      .track("adam", adam)
      .track("generator", generator);

  // Where the kills land: within about the first three rounds after a writer is ready, so that
  // a kill interrupts a save about as often as a step. A round (an Adam step, the assignments,
  // the save) takes about three saves; the window starts at ten saves measured here and then
  // follows the rounds the writers report (the median of the last 20), so that it stays three
  // rounds long when the machine slows down (a sanitizer build beside other tests).
  checkpoint.save(path);
  std::vector<double> save_seconds;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    checkpoint.save(path);
    save_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::filesystem::remove(path);
  std::sort(save_seconds.begin(), save_seconds.end());
  std::deque<double> round_seconds;
  const auto window_microseconds = [&] {
    if (round_seconds.empty()) return static_cast<unsigned>(10e6 * save_seconds[1]) + 1;
    std::vector<double> sorted(round_seconds.begin(), round_seconds.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    return static_cast<unsigned>(3.3e6 * sorted[sorted.size() / 2]) + 1;
  };

  // At least 200 kills, and more until they have covered enough ground: 100 rounds and 20
  // kills during a save (a fixed count of 200 fell short on a busy machine once).
  constexpr int kMinKills = 200;
  constexpr int kMaxKills = 1000;
  constexpr std::int64_t kMinRounds = 100;  // about 1.5 rounds a kill
  constexpr int kMinKillsMidSave = 20;
  std::mt19937 random(20261127);
  std::int64_t last_round = 0;
  int kills = 0, kills_mid_save = 0;
  const auto covered = [&] {
    return kills >= kMinKills && last_round >= kMinRounds && kills_mid_save >= kMinKillsMidSave;
  };
  for (int kill = 0; kill < kMaxKills && !covered(); ++kill) {
    {
      Child writer({program, path}, true);
      REQUIRE(writer.wait_for_line());  // restored and saving
      std::this_thread::sleep_for(std::chrono::microseconds(random() % window_microseconds()));
      const int status = writer.kill_and_wait();
      REQUIRE(WIFSIGNALED(status));
      REQUIRE(WTERMSIG(status) == SIGKILL);
      ++kills;
      // The rounds it finished before the kill: "saved K SECONDS".
      std::string line;
      while (writer.read_line(line)) {
        std::istringstream fields(line);
        std::string word;
        std::int64_t k = 0;
        double seconds = 0.0;
        REQUIRE((fields >> word >> k >> seconds));
        REQUIRE(word == "saved");
        round_seconds.push_back(seconds);
        if (round_seconds.size() > 20) round_seconds.pop_front();
      }
    }
    // A kill during a save leaves its temporary behind (the file itself is never touched).
    for (const auto& item : std::filesystem::directory_iterator(folder.path())) {
      if (item.path().string() != path) {
        ++kills_mid_save;
        std::filesystem::remove(item.path());
      }
    }
    if (!std::filesystem::exists(path)) continue;  // killed before its first save completed

    INFO("kill " << kill);
    checkpoint.restore(path);  // never throws: the file is always whole
    const std::int64_t k = round.peek().item<std::int64_t>();
    REQUIRE(k >= last_round);  // a completed round is never lost
    last_round = k;
    // Every piece of the state is from round k: none from the round before or after.
    const std::vector<double> w = testing::values(weights.peek());
    REQUIRE(std::all_of(w.begin(), w.end(), [&](double v) { return v == static_cast<double>(k); }));
    const std::vector<double> b = testing::values(bias.peek());
    REQUIRE(std::all_of(b.begin(), b.end(), [&](double v) { return v == static_cast<double>(k); }));
    REQUIRE(adam.iterations() == k);
    REQUIRE(generator.seed() == 99);
    REQUIRE(generator.counter() == static_cast<std::uint64_t>(k));
    if (k > 0) {
      const std::vector<double> m = testing::values(adam.slot(weights, "m"));
      REQUIRE(std::all_of(m.begin(), m.end(), [&](double v) { return v == m.front(); }));
    }
  }
  INFO("rounds " << last_round << ", kills " << kills << ", of them during a save "
                 << kills_mid_save << ", one save " << save_seconds[1] << " s, the window "
                 << window_microseconds() << " us");
  CHECK(kills >= kMinKills);
  CHECK(last_round >= kMinRounds);            // the writers kept making progress
  CHECK(kills_mid_save >= kMinKillsMidSave);  // and many kills hit a save in progress
}
