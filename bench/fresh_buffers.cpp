// The first write of fresh memory: a tensor of 4, 64 and 256 MB made right after
// release_cached_memory() (so its buffer comes from the system, as in a program's first step),
// filled with ones, against std::vector<double>(n, 1.0) from glibc's malloc in the same process.
// From 2 MiB on, the library maps a buffer on a huge-page boundary and asks for transparent huge
// pages (src/kernels/buffer_cache.cpp), so the kernel faults it in 2 MiB at a time. Also the same
// tensor taken from the cache (the steady state). Medians of 9 alternated rounds, with the minor
// page faults of one call (getrusage).
//
//   ./bench_fresh_buffers
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

using Clock = std::chrono::steady_clock;

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

struct Sample {
  double milliseconds;
  long faults;
};

Sample measure(const std::function<double()>& make_and_fill) {
  const long faults_before = minor_faults();
  const auto start = Clock::now();
  const double checksum = make_and_fill();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (checksum != 1.0) std::puts("wrong element");
  return {ms, minor_faults() - faults_before};
}

template <class T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  constexpr int kRounds = 9;
  std::printf("%-8s %28s %28s %28s %10s\n", "size", "tensor, fresh from the system",
              "std::vector (glibc malloc)", "tensor from the cache", "fresh/std");
  for (const std::size_t megabytes : {std::size_t{4}, std::size_t{64}, std::size_t{256}}) {
    const std::size_t n = megabytes * (std::size_t{1} << 20) / sizeof(double);
    const auto tensor = [n] {
      const tg::Tensor t = tg::fill({n}, 1.0);
      return t.view<double>()(n - 1);
    };
    const auto vector = [n] {
      const std::vector<double> v(n, 1.0);
      return v[n - 1];
    };
    std::vector<double> fresh_ms, vector_ms, cached_ms;
    std::vector<long> fresh_faults, vector_faults, cached_faults;
    for (int round = 0; round < kRounds; ++round) {
      tg::release_cached_memory();
      const Sample fresh = measure(tensor);
      const Sample cached = measure(tensor);  // the buffer the first call gave back
      const Sample baseline = measure(vector);
      fresh_ms.push_back(fresh.milliseconds);
      fresh_faults.push_back(fresh.faults);
      cached_ms.push_back(cached.milliseconds);
      cached_faults.push_back(cached.faults);
      vector_ms.push_back(baseline.milliseconds);
      vector_faults.push_back(baseline.faults);
    }
    std::printf(
        "%4zu MB  %12.2f ms %7ld faults %12.2f ms %7ld faults %12.2f ms %7ld faults %9.2fx\n",
        megabytes, median(fresh_ms), median(fresh_faults), median(vector_ms), median(vector_faults),
        median(cached_ms), median(cached_faults), median(fresh_ms) / median(vector_ms));
  }
  tg::release_cached_memory();
  return 0;
}
