// Views of a 64 MB tensor (float64 [2048, 4096]): reshape, expand_dims, squeeze, transpose,
// slice, split, reverse and identity. For each: the median time of one call (no tape), and the
// element bytes it allocated (memory_stats().bytes_in_use while the view lives, minus before).
// Baseline in the same process: one copy of the 64 MB (what reshape cost before views).
//
//   ./bench_views
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg = tapegrad;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of one call over `rounds` rounds of `calls` calls each.
double median_call(const std::function<tg::Tensor()>& f, int rounds, int calls) {
  std::vector<double> per_call;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int c = 0; c < calls; ++c) {
      const tg::Tensor t = f();
      if (!t.defined()) std::puts("undefined");
    }
    per_call.push_back(std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  return median(per_call);
}

}  // namespace

int main() {
  const tg::Tensor x = tg::fill({2048, 4096}, 0.5);
  const tg::Tensor x1 = tg::expand_dims(x, 0);
  const std::size_t bytes = x.size() * sizeof(double);
  std::printf("views of a float64 [2048, 4096] tensor (%.0f MB)\n\n",
              static_cast<double>(bytes) / 1e6);

  // The baseline: one copy of the elements into a new tensor.
  const double copy_seconds =
      median_call([&] { return tg::Tensor(tg::storage_array<double>(x.array<double>())); }, 7, 1);
  std::printf("%-34s %12.1f us\n\n", "baseline: a copy of the 64 MB", copy_seconds * 1e6);

  const std::vector<std::pair<std::string, std::function<tg::Tensor()>>> ops = {
      {"reshape [8388608]", [&] { return tg::reshape(x, {-1}); }},
      {"expand_dims axis 0", [&] { return tg::expand_dims(x, 0); }},
      {"squeeze (a [1, 2048, 4096] view)", [&] { return tg::squeeze(x1, {0}); }},
      {"transpose", [&] { return tg::transpose(x); }},
      {"slice [512:1536, 1024:3072]",
       [&] {
         return tg::slice(x, {512, 1024}, {1024, 2048});
       }},
      {"split into 4 along axis 1 (all 4)", [&] { return tg::split(x, 4, 1)[0]; }},
      {"reverse axis 1", [&] { return tg::reverse(x, {1}); }},
      {"identity", [&] { return tg::identity(x); }},
  };
  std::printf("%-34s %12s %14s %16s\n", "op", "median/call", "element bytes", "vs the copy");
  for (const auto& [name, op] : ops) {
    const tg::MemoryStats before = tg::memory_stats();
    const tg::Tensor view = op();
    const tg::MemoryStats during = tg::memory_stats();
    const double seconds = median_call(op, 21, 2000);
    std::printf("%-34s %9.3f us %14zu %15.0fx faster\n", name.c_str(), seconds * 1e6,
                during.bytes_in_use - before.bytes_in_use, copy_seconds / seconds);
    if (!tg::shares_storage(view, x)) std::printf("  (not a view of x)\n");
  }
  return 0;
}
