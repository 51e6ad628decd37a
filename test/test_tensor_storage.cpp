// The pinned storage type of a Tensor (include/tapegrad/storage.hpp): its allocator does not
// follow -march or XTENSOR_USE_XSIMD, and any xt::xarray converts to it. The consumer programs
// (test/consumer/, run by scripts/test.sh under several -march) check the same from outside.
#include "support.hpp"

#include <cstdint>
#include <type_traits>

#include <xsimd/memory/xsimd_aligned_allocator.hpp>
#include <xtensor/xbuilder.hpp>

using namespace tapegrad;
using tapegrad::testing::values;

namespace {

// Arrays of the allocators a consumer's xt::xarray<double> has under other flags.
using StdArray = xt::xarray<double, xt::layout_type::row_major, std::allocator<double>>;
using Avx2Array = xt::xarray<double, xt::layout_type::row_major, xsimd::aligned_allocator<double, 32>>;
using Avx512Array = xt::xarray<double, xt::layout_type::row_major, xsimd::aligned_allocator<double, 64>>;
using ColumnMajor = xt::xarray<double, xt::layout_type::column_major>;

}  // namespace

TEST_CASE("the storage type's allocator and layout are fixed when the library is configured") {
  using Storage = storage_array<double>;
  STATIC_REQUIRE(std::is_same_v<Storage::allocator_type, storage_allocator<double>>);
  STATIC_REQUIRE(Storage::static_layout == xt::layout_type::row_major);
#if TAPEGRAD_STORAGE_XSIMD
  STATIC_REQUIRE(std::is_same_v<storage_allocator<float>,
                                xsimd::aligned_allocator<float, TAPEGRAD_STORAGE_ALIGNMENT>>);
  STATIC_REQUIRE(TAPEGRAD_STORAGE_ALIGNMENT == 16);
  // Every element of every dtype starts on that alignment.
  Tensor t = fill({7}, 1.0, DType::Float32);
  CHECK(reinterpret_cast<std::uintptr_t>(t.array<float>().data()) % TAPEGRAD_STORAGE_ALIGNMENT == 0);
#else
  STATIC_REQUIRE(std::is_same_v<storage_allocator<float>, std::allocator<float>>);
#endif
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
  CHECK(values(Tensor(xt::xarray<float, layout_type::row_major, std::allocator<float>>{1.5f, 2.0f})) ==
        std::vector<double>{1.5, 2.0});
  CHECK(values(Tensor(xt::xarray<std::int32_t, layout_type::row_major, std::allocator<std::int32_t>>{-3, 4})) ==
        std::vector<double>{-3.0, 4.0});
  CHECK(values(Tensor(xt::xarray<std::int64_t, layout_type::row_major,
                                 xsimd::aligned_allocator<std::int64_t, 64>>{std::int64_t{1} << 40})) ==
        std::vector<double>{1099511627776.0});
  const Tensor flags(xt::xarray<bool, layout_type::row_major, std::allocator<bool>>{true, false});
  CHECK(flags.dtype() == DType::Bool);
  CHECK(values(flags) == std::vector<double>{1.0, 0.0});
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
  CHECK(std::vector<double>(as_plain.begin(), as_plain.end()) == std::vector<double>{1.0, 2.0, 3.0, 4.0});
  CHECK(std::vector<double>(as_avx2.begin(), as_avx2.end()) == std::vector<double>{1.0, 2.0, 3.0, 4.0});
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
