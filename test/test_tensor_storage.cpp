// The pinned storage type of a Tensor (include/tapegrad/storage.hpp): its allocator does not
// follow -march or XTENSOR_USE_XSIMD, and any xt::xarray converts to it. The consumer programs
// (test/consumer/, run by scripts/test.sh under several -march) check the same from outside.
// Then the buffer cache behind the storage (include/tapegrad/memory.hpp): reuse, the figures,
// release (buffers that cross threads: test_thread_stress, which CI runs under TSan).
#include "kernels/buffer_cache.hpp"
#include "support.hpp"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <type_traits>
#include <vector>

#include <xsimd/memory/xsimd_aligned_allocator.hpp>
#include <xtensor/xbuilder.hpp>

using namespace tapegrad;
using tapegrad::testing::values;

namespace {

// Arrays of the allocators a consumer's xt::xarray<double> has under other flags.
using StdArray = xt::xarray<double, xt::layout_type::row_major, std::allocator<double>>;
using Avx2Array =
    xt::xarray<double, xt::layout_type::row_major, xsimd::aligned_allocator<double, 32>>;
using Avx512Array =
    xt::xarray<double, xt::layout_type::row_major, xsimd::aligned_allocator<double, 64>>;
using ColumnMajor = xt::xarray<double, xt::layout_type::column_major>;

}  // namespace

TEST_CASE("the storage type's allocator and layout are fixed when the library is configured") {
  using Storage = storage_array<double>;
  STATIC_REQUIRE(std::is_same_v<Storage::allocator_type, storage_allocator<double>>);
  STATIC_REQUIRE(std::is_same_v<storage_allocator<float>, buffer_allocator<float>>);
  STATIC_REQUIRE(Storage::static_layout == xt::layout_type::row_major);
  STATIC_REQUIRE(TAPEGRAD_STORAGE_ALIGNMENT == 16);
  // Every element of every dtype starts on the documented 16 bytes; a buffer of 256 bytes or
  // more on a cache line.
  const auto aligned = [](auto zero, DType dtype) {
    using T = decltype(zero);
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      const Tensor t = zeros({n}, dtype);
      const auto address = reinterpret_cast<std::uintptr_t>(t.array<T>().data());
      CHECK(address % TAPEGRAD_STORAGE_ALIGNMENT == 0);
      if (n * sizeof(T) >= 256) CHECK(address % 64 == 0);
    }
  };
  aligned(float{}, DType::Float32);
  aligned(double{}, DType::Float64);
  aligned(std::int32_t{}, DType::Int32);
  aligned(std::int64_t{}, DType::Int64);
  aligned(bool{}, DType::Bool);
}

TEST_CASE("a Tensor takes the storage type itself without copying") {
  storage_array<double> a = {{1.0, 2.0}, {3.0, 4.0}};
  const double* data = a.data();
  Tensor t(std::move(a));
  CHECK(t.array<double>().data() == data);
  CHECK(values(t) == std::vector<double>{1.0, 2.0, 3.0, 4.0});
}

TEST_CASE("a Tensor copies an xarray of another allocator into its storage") {
  // As a consumer's xt::xarray<double> is with no xsimd, -mavx2, -mavx512f.
  StdArray plain = {{1.5, -2.0, 3.0}, {0.0, 5.0, -6.5}};
  Avx2Array avx2 = plain;
  Avx512Array avx512 = plain;
  const Tensor from_plain(plain);
  const Tensor from_avx2(std::move(avx2));
  const Tensor from_avx512(avx512);
  for (const Tensor& t : {from_plain, from_avx2, from_avx512}) {
    CHECK(t.dtype() == DType::Float64);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(values(t) == std::vector<double>{1.5, -2.0, 3.0, 0.0, 5.0, -6.5});
  }
  CHECK(from_plain.array<double>().data() != plain.data());
  CHECK(values(from_plain) == std::vector<double>(plain.begin(), plain.end()));  // source intact
}

TEST_CASE("every dtype converts from an xarray of another allocator") {
  using xt::layout_type;
  CHECK(values(Tensor(xt::xarray<float, layout_type::row_major, std::allocator<float>>{
            1.5f, 2.0f})) == std::vector<double>{1.5, 2.0});
  CHECK(
      values(Tensor(xt::xarray<std::int32_t, layout_type::row_major, std::allocator<std::int32_t>>{
          -3, 4})) == std::vector<double>{-3.0, 4.0});
  CHECK(values(Tensor(xt::xarray<std::int64_t, layout_type::row_major,
                                 xsimd::aligned_allocator<std::int64_t, 64>>{
            std::int64_t{1} << 40})) == std::vector<double>{1099511627776.0});
  const Tensor flags(xt::xarray<bool, layout_type::row_major, std::allocator<bool>>{true, false});
  CHECK(flags.dtype() == DType::Bool);
  CHECK(values(flags) == std::vector<double>{1.0, 0.0});
}

TEST_CASE("a scalar and an empty xarray of another allocator convert with their shapes") {
  StdArray scalar = xt::xarray<double>(2.5);
  const Tensor s(scalar);
  CHECK(s.rank() == 0);
  CHECK(s.item<double>() == 2.5);
  StdArray empty = StdArray::from_shape({0, 3});
  const Tensor e(empty);
  CHECK(e.shape() == Shape{0, 3});
  CHECK(e.size() == 0);
  // A rank-5 array: more dimensions than the shape's inline room.
  Avx2Array deep = xt::arange<double>(32.0);
  deep.reshape({2, 2, 2, 2, 2});
  const Tensor d(deep);
  CHECK(d.shape() == Shape{2, 2, 2, 2, 2});
  CHECK(d.array<double>()(1, 1, 1, 1, 0) == 30.0);
}

TEST_CASE("a column-major xarray keeps its logical element order") {
  ColumnMajor a = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  const Tensor t(a);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(values(t) == std::vector<double>{1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  CHECK(t.array<double>()(1, 0) == 4.0);
}

TEST_CASE("array<T>() converts to an xarray of another allocator, values intact") {
  const Tensor t = constant({{1.0, 2.0}, {3.0, 4.0}});
  const StdArray& as_plain = t.array<double>();  // a converted copy, lifetime-extended
  const Avx2Array as_avx2 = t.array<double>();
  CHECK(std::vector<double>(as_plain.begin(), as_plain.end()) ==
        std::vector<double>{1.0, 2.0, 3.0, 4.0});
  CHECK(std::vector<double>(as_avx2.begin(), as_avx2.end()) ==
        std::vector<double>{1.0, 2.0, 3.0, 4.0});
  CHECK(as_plain.shape() == t.array<double>().shape());
}

TEST_CASE("a converted tensor is differentiable like any other") {
  Avx2Array a = {0.5, -1.0, 2.0};
  const Tensor x(a);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(x * x * x);
  CHECK(values(tape.gradient(y, x)) == std::vector<double>{0.75, 3.0, 12.0});
}

// ---- The buffer cache -------------------------------------------------------------------

namespace {

// The bytes a request is rounded to, as memory.hpp documents it: up to 4 KiB, classes of 16,
// 32, 48, 64 bytes, then four per doubling; above, a multiple of 64 bytes.
std::size_t class_bytes_of(std::size_t bytes) {
  if (bytes > 4096) return (bytes + 63) / 64 * 64;
  std::size_t size = 16;
  while (size < bytes) {
    size += size < 64 ? 16 : (std::size_t{1} << (63 - __builtin_clzll(size))) / 4;
  }
  return size;
}

// Resident set size in bytes (Linux).
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

}  // namespace

TEST_CASE("the buffer cache: classes, bytes in use, peak") {
  CHECK(class_bytes_of(1) == 16);
  CHECK(class_bytes_of(49) == 64);
  CHECK(class_bytes_of(65) == 80);
  CHECK(class_bytes_of(129) == 160);
  CHECK(class_bytes_of(4000) == 4096);
  CHECK(class_bytes_of(8000) == 8000);
  CHECK(class_bytes_of(8001) == 8064);
  release_cached_memory();
  const MemoryStats before = memory_stats();
  CHECK(before.bytes_cached == 0);
  for (const std::size_t n : {std::size_t{3}, std::size_t{300}, std::size_t{1000}}) {
    INFO(n << " float64 elements");
    const std::size_t bytes = class_bytes_of(n * sizeof(double));
    {
      const Tensor t = zeros({n});
      const MemoryStats during = memory_stats();
      CHECK(during.bytes_in_use == before.bytes_in_use + bytes);
      CHECK(during.peak_bytes_in_use >= during.bytes_in_use);
    }
    const MemoryStats after = memory_stats();
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.bytes_cached >= bytes);  // kept for the next request of that size
    {
      const Tensor t = zeros({n});  // the same size: from the cache
      const MemoryStats again = memory_stats();
      CHECK(again.system_allocations == after.system_allocations);
      CHECK(again.cache_hits == after.cache_hits + 1);
      CHECK(again.bytes_cached == after.bytes_cached - bytes);
    }
  }
  CHECK(memory_stats().system_allocations == before.system_allocations + 3);

  // The peak holds until reset.
  reset_peak_memory();
  const std::size_t base = memory_stats().bytes_in_use;
  CHECK(memory_stats().peak_bytes_in_use == base);
  { const Tensor big = zeros({1 << 17}); }  // 1 MiB
  CHECK(memory_stats().bytes_in_use == base);
  CHECK(memory_stats().peak_bytes_in_use == base + (std::size_t{1} << 20));
  reset_peak_memory();
  CHECK(memory_stats().peak_bytes_in_use == base);
}

TEST_CASE("the memory figures count 10,000 small buffers of one thread exactly") {
  // A thread counts its own buffers and adds them to the shared figures in steps of 64 KiB
  // (test_thread_stress.cpp has several threads): memory_stats() still adds up to the byte,
  // and one thread's peak is exact.
  release_cached_memory();
  reset_peak_memory();
  const MemoryStats before = memory_stats();
  const std::size_t small = class_bytes_of(3 * sizeof(double));
  {
    std::vector<Tensor> many;
    for (int i = 0; i < 10000; ++i) many.push_back(zeros({3}));
    const MemoryStats during = memory_stats();
    CHECK(during.bytes_in_use == before.bytes_in_use + 10000 * small);
    CHECK(during.peak_bytes_in_use == during.bytes_in_use);
    CHECK((during.system_allocations - before.system_allocations) +
              (during.cache_hits - before.cache_hits) ==
          10000);
  }
  CHECK(memory_stats().bytes_in_use == before.bytes_in_use);
  CHECK(memory_stats().peak_bytes_in_use == before.bytes_in_use + 10000 * small);
}

TEST_CASE("a loop of the same shapes obtains nothing from the system after its first step") {
  const Tensor w = fill({32, 16}, 0.25);
  const Tensor x = fill({8, 32}, 0.5);
  const auto step = [&] {
    GradientTape tape;
    tape.watch(w);
    const Tensor loss = reduce_sum(tanh(matmul(x, w)) * 2.0);
    return tape.gradient(loss, w);
  };
  // Two warm-up steps: from the second on, the previous step's result is alive during a step.
  Tensor last = step();
  last = step();
  const MemoryStats warm = memory_stats();
  for (int i = 0; i < 100; ++i) last = step();
  const MemoryStats done = memory_stats();
  CHECK(done.system_allocations == warm.system_allocations);
  CHECK(done.cache_hits > warm.cache_hits + 100);
  // d/dw sum(2 tanh(x w)) = x^T (2 (1 - tanh^2)): every entry 8 * 0.5 * 2 (1 - tanh(4)^2).
  const double expected = 8.0 * 0.5 * 2.0 * (1.0 - std::tanh(4.0) * std::tanh(4.0));
  for (const double v : values(last)) CHECK(v == Approx(expected).epsilon(1e-12));
}

TEST_CASE("release_cached_memory hands cached buffers back to the system") {
  release_cached_memory();
  const std::size_t bytes = std::size_t{64} << 20;  // a 64 MiB class
  std::size_t resident_with = 0;
  {
    const Tensor big = fill({bytes / sizeof(double)}, 1.0);  // every page touched
    resident_with = resident_bytes();
  }
  const MemoryStats cached = memory_stats();
  CHECK(cached.bytes_cached >= bytes);
  CHECK(resident_bytes() + bytes / 2 > resident_with);  // still held by the cache
  release_cached_memory();
  const MemoryStats released = memory_stats();
  CHECK(released.bytes_cached == 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // The pages are the system's again (sanitizers keep freed memory in quarantine instead).
  CHECK(resident_bytes() + bytes / 2 < resident_with);
#endif
  // The next request of that class is the system's too.
  const Tensor again = zeros({bytes / sizeof(double)});
  CHECK(memory_stats().system_allocations == released.system_allocations + 1);
}

#if defined(__linux__)
TEST_CASE("a buffer of 2 MiB or more is a mapping of its own, on a huge-page boundary") {
  release_cached_memory();
  const std::size_t mapped_before = detail::buffer_bytes_mapped();
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t bytes = 3 * (std::size_t{1} << 20) + 40;  // 3 MiB and a little
  const std::size_t page_rounded = (class_bytes_of(bytes) + 4095) / 4096 * 4096;
  void* buffer = detail::acquire_buffer(bytes);
  CHECK(reinterpret_cast<std::uintptr_t>(buffer) % kHugePage == 0);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + page_rounded);
  static_cast<char*>(buffer)[bytes - 1] = 1;  // the last byte is the buffer's
  // Below 2 MiB, malloc's memory: nothing more mapped.
  void* smaller = detail::acquire_buffer(kHugePage - 64);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + page_rounded);
  detail::release_buffer(smaller, kHugePage - 64);
  detail::release_buffer(buffer, bytes);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + page_rounded);  // cached, still mapped
  void* again = detail::acquire_buffer(bytes);
  CHECK(again == buffer);
  detail::release_buffer(again, bytes);
  release_cached_memory();
  CHECK(detail::buffer_bytes_mapped() == mapped_before);  // unmapped
}

TEST_CASE("a bookkeeping block of 256 KiB or more is whole huge pages, kept for the next") {
  release_cached_memory();
  const std::size_t mapped_before = detail::buffer_bytes_mapped();
  REQUIRE(detail::bookkeeping_bytes_kept() == 0);
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  // Below 256 KiB: operator new's memory, nothing mapped.
  void* small = detail::acquire_bookkeeping_block((std::size_t{256} << 10) - 8);
  CHECK(detail::buffer_bytes_mapped() == mapped_before);
  detail::release_bookkeeping_block(small, (std::size_t{256} << 10) - 8);
  CHECK(detail::bookkeeping_bytes_kept() == 0);
  // 256 KiB: one whole huge page on its boundary; 2 MiB and a byte: two.
  void* block = detail::acquire_bookkeeping_block(std::size_t{256} << 10);
  CHECK(reinterpret_cast<std::uintptr_t>(block) % kHugePage == 0);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + kHugePage);
  static_cast<char*>(block)[kHugePage - 1] = 1;  // the whole page is the block's
  void* larger = detail::acquire_bookkeeping_block(kHugePage + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(larger) % kHugePage == 0);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + 3 * kHugePage);
  // Freed, both are kept; a request of another size of the same length gets the first back,
  // one of another length a mapping of its own.
  detail::release_bookkeeping_block(block, std::size_t{256} << 10);
  detail::release_bookkeeping_block(larger, kHugePage + 1);
  CHECK(detail::bookkeeping_bytes_kept() == 3 * kHugePage);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + 3 * kHugePage);
  void* again = detail::acquire_bookkeeping_block(kHugePage - 64);
  CHECK(again == block);
  CHECK(detail::bookkeeping_bytes_kept() == 2 * kHugePage);
  void* other = detail::acquire_bookkeeping_block(3 * kHugePage);
  CHECK(other != larger);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + 6 * kHugePage);
  detail::release_bookkeeping_block(other, 3 * kHugePage);
  detail::release_bookkeeping_block(again, kHugePage - 64);
  CHECK(detail::bookkeeping_bytes_kept() == 6 * kHugePage);
  // At most 32 MiB stay kept: a 40 MiB block goes back to the system when freed.
  void* huge = detail::acquire_bookkeeping_block(std::size_t{40} << 20);
  detail::release_bookkeeping_block(huge, std::size_t{40} << 20);
  CHECK(detail::bookkeeping_bytes_kept() == 6 * kHugePage);
  CHECK(detail::buffer_bytes_mapped() == mapped_before + 6 * kHugePage);
  release_cached_memory();
  CHECK(detail::bookkeeping_bytes_kept() == 0);
  CHECK(detail::buffer_bytes_mapped() == mapped_before);
}
#endif

// 40 sizes of about 2 MiB each (the kept tensors of a one-shot tape), made and freed.
static void make_one_off_sizes(std::size_t first_elements) {
  std::vector<Tensor> once;
  for (std::size_t i = 0; i < 40; ++i) once.push_back(zeros({first_elements + 8 * i}));
}

TEST_CASE("sizes nobody asks for during a whole interval go back to the system") {
  release_cached_memory();
  const std::size_t first = std::size_t{1} << 18;  // 2 MiB of float64
  const std::size_t other = 300000;
  make_one_off_sizes(first);                // about 80 MiB
  { const Tensor again = zeros({first}); }  // the first size is asked for again: a loop's
  const MemoryStats before = memory_stats();
  CHECK(before.bytes_cached >= std::size_t{80} << 20);
  {
    // A size the cache cannot serve, once the pool has grown by 64 MiB: the pool trims, but
    // sizes first freed since the last trim have not had an interval to be asked for yet.
    const Tensor missed = zeros({other});
    const MemoryStats after = memory_stats();
    CHECK(after.system_allocations == before.system_allocations + 1);
    CHECK(after.bytes_cached == before.bytes_cached);
  }
  // The next interval: the loop's two sizes are served from the cache, 40 other one-offs grow
  // the pool by 80 MiB more, and a miss trims again.
  const MemoryStats loop = memory_stats();
  { const Tensor a = zeros({first}), b = zeros({other}); }
  CHECK(memory_stats().system_allocations == loop.system_allocations);
  CHECK(memory_stats().cache_hits == loop.cache_hits + 2);
  const std::size_t second = first + 4096;
  make_one_off_sizes(second);
  const MemoryStats grown = memory_stats();
  {
    const Tensor missed = zeros({other + 1000});
    // Gone: the first batch's 39 sizes not asked for again (i = 1..39). Kept: the loop's two,
    // and the second batch, first freed in this interval.
    std::size_t gone = 0;
    for (std::size_t i = 1; i < 40; ++i) gone += (first + 8 * i) * sizeof(double);
    CHECK(memory_stats().bytes_cached == grown.bytes_cached - gone);
  }
}

TEST_CASE("a loop whose large buffers add up to more than its peak in use keeps them all") {
  // GradBench's gmm: 264 MB of distinct buffers, at most 251 MB of them in use at once. The
  // cache may hold what makes in use + cached reach twice the peak (or 256 MiB).
  release_cached_memory();
  const std::size_t elements = (std::size_t{100} << 20) / sizeof(double);  // 100 MiB
  const auto step = [=] {
    {
      const Tensor a = zeros({elements}), b = zeros({elements + 8});  // 200 MiB at once
      CHECK(a.size() + 8 == b.size());
    }
    const Tensor c = zeros({elements + 16});  // a third size, alone
    CHECK(c.size() == elements + 16);
  };
  step();
  const MemoryStats after_first = memory_stats();
  CHECK(after_first.bytes_cached >= std::size_t{300} << 20);
  step();
  CHECK(memory_stats().system_allocations == after_first.system_allocations);
  release_cached_memory();
}

TEST_CASE("a loop's large temporaries come from the cache from its second step, after a miss") {
  // GradBench's kmeans: its step makes two 80 MB matrices, frees them, then asks for a size it
  // has not asked for before; that miss trims the pool.
  release_cached_memory();
  const auto step = [] {
    {
      const Tensor distances = zeros({std::size_t{5} << 20});  // 40 MiB of float64
      const Tensor shifted = distances + 1.0;
      CHECK(shifted.size() == distances.size());
    }
    const Tensor later = zeros({170000});
    CHECK(later.size() == 170000);
  };
  step();
  const MemoryStats after_first = memory_stats();
  CHECK(after_first.bytes_cached >= std::size_t{80} << 20);
  step();
  CHECK(memory_stats().system_allocations == after_first.system_allocations);
}
