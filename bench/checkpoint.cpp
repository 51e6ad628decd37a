// Checkpoint::save and restore of a 10 M-parameter model (ten layers::Dense(1000, 1000),
// float32: 40 MB), alone and with Adam's two slots per variable (120 MB), against the same
// bytes written and read with plain POSIX calls in the same process (one write, fsync,
// rename; one read): the floor any file format pays on this disk.
// Peak memory is the kernel's count (VmHWM, reset through /proc/self/clear_refs) above the
// resident size before the call, after malloc_trim has returned the free heap pages. Medians of 7
// runs; the file stays in the page cache, so a restore reads memory, not the disk.
//
//   build/bench/bench/bench_checkpoint [FOLDER]     (default: the system's temporary folder)
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

struct TenLayers : tg::Module {
  explicit TenLayers(tg::Generator& generator) {
    for (int i = 0; i < 10; ++i)
      add_module("dense" + std::to_string(i), tg::layers::Dense(1000, 1000, generator));
  }
};

long status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  }
  return -1;
}

void reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

struct Measure {
  double seconds;
  double peak_extra_mb;
};

// The median time and the largest peak above the resident size before the call, of 7 runs.
Measure measure(const std::function<void()>& work) {
  std::vector<double> times;
  double peak = 0.0;
  for (int run = 0; run < 7; ++run) {
    // Freed heap pages go back to the system first, so that what the call allocates shows in
    // the peak instead of reusing pages an earlier run left resident.
    ::malloc_trim(0);
    reset_peak();
    const long before = status_kib("VmRSS:");
    const auto start = std::chrono::steady_clock::now();
    work();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    peak = std::max(peak, (status_kib("VmHWM:") - before) / 1024.0);
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], peak};
}

void raw_write(const std::string& path, const std::vector<char>& bytes) {
  const std::string temporary = path + ".raw-tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote <= 0) throw std::runtime_error("raw write failed");
    done += static_cast<std::size_t>(wrote);
  }
  ::fsync(fd);
  ::close(fd);
  std::filesystem::rename(temporary, path);
}

std::vector<char> raw_read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<char> bytes(static_cast<std::size_t>(std::filesystem::file_size(path)));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got <= 0) throw std::runtime_error("raw read failed");
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  return bytes;
}

void row(const char* what, const Measure& m, const Measure& baseline) {
  std::printf("%-34s %9.1f ms %8.2fx %10.1f MB\n", what, m.seconds * 1e3,
              m.seconds / baseline.seconds, m.peak_extra_mb);
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path folder = argc > 1 ? argv[1] : std::filesystem::temp_directory_path();
  const std::string path = (folder / "tapegrad_bench_checkpoint.npz").string();
  const std::string raw_path = (folder / "tapegrad_bench_checkpoint.raw").string();

  tg::Generator generator(1);
  TenLayers model(generator);
  std::size_t parameters = 0;
  for (const tg::Variable& v : model.trainable_variables()) parameters += v.peek().size();
  tg::Adam adam(1e-3);
  std::vector<std::pair<tg::Tensor, tg::Variable>> grads;
  for (const tg::Variable& v : model.trainable_variables())
    grads.emplace_back(tg::ones_like(v.peek()), v);
  adam.apply_gradients(grads);

  std::printf("model: %zu parameters (float32), folder %s\n\n", parameters, folder.c_str());
  std::printf("%-34s %12s %9s %13s\n", "", "median", "/ raw", "peak extra");
  for (const bool with_adam : {false, true}) {
    tg::Checkpoint checkpoint;
    checkpoint.track("model", model);
    if (with_adam) checkpoint.track("adam", adam);
    checkpoint.save(path);
    const std::vector<char> bytes = raw_read(path);
    std::printf("%s: file %.1f MB\n", with_adam ? "model + Adam slots" : "model alone",
                static_cast<double>(bytes.size()) / 1e6);
    const Measure raw_save = measure([&] { raw_write(raw_path, bytes); });
    const Measure save = measure([&] { checkpoint.save(path); });
    const Measure raw_restore = measure([&] { raw_read(raw_path); });
    const Measure restore = measure([&] { checkpoint.restore(path); });
    row("  raw write + fsync + rename", raw_save, raw_save);
    row("  Checkpoint::save", save, raw_save);
    row("  raw read", raw_restore, raw_restore);
    row("  Checkpoint::restore", restore, raw_restore);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(raw_path);
  return 0;
}
