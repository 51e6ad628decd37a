// The tape's id map (src/runtime/id_map.hpp, header-only): lookups, overwrites, and how full
// it gets before it doubles (7/8), with consecutive ids (what one thread hands out) and with
// scattered ones.
#include "support.hpp"

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/id_map.hpp"

using tapegrad::detail::IdMap;

namespace {

// Cells of 8-byte keys and 4-byte values.
std::size_t cells(const IdMap<std::int32_t>& map) { return map.bytes_reserved() / 12; }

}  // namespace

TEST_CASE("consecutive ids: every key found with its value, others missing") {
  IdMap<std::int32_t> map;
  constexpr std::uint64_t kFirst = 65537;  // the start of a thread's second id block
  constexpr std::int32_t kCount = 100000;
  for (std::int32_t i = 0; i < kCount; ++i) {
    REQUIRE(map.try_emplace(kFirst + static_cast<std::uint64_t>(i), i).second);
  }
  CHECK(map.size() == static_cast<std::size_t>(kCount));
  CHECK(cells(map) == 131072);  // 100,000 keys fill 131,072 cells to 0.76: no doubling yet
  for (std::int32_t i = 0; i < kCount; ++i) {
    const std::int32_t* v = map.find(kFirst + static_cast<std::uint64_t>(i));
    REQUIRE(v != nullptr);
    REQUIRE(*v == i);
  }
  for (std::uint64_t k = 1; k < kFirst; k += 97) CHECK_FALSE(map.contains(k));
  for (std::uint64_t k = kFirst + kCount; k < kFirst + kCount + 1000; ++k) {
    REQUIRE_FALSE(map.contains(k));
  }
}

TEST_CASE("the map doubles when one more key would fill it past 7/8") {
  IdMap<std::int32_t> map;
  for (std::uint64_t k = 1; k <= 14; ++k) map.try_emplace(k, 0);
  CHECK(cells(map) == 16);  // 14 = 16 * 7/8
  map.try_emplace(15, 0);
  CHECK(cells(map) == 32);
  for (std::uint64_t k = 16; k <= 114688; ++k) map.try_emplace(k, 0);
  CHECK(cells(map) == 131072);  // 114,688 = 131,072 * 7/8
  map.try_emplace(114689, 0);
  CHECK(cells(map) == 262144);
  for (std::uint64_t k = 1; k <= 114689; ++k) REQUIRE(map.contains(k));
}

TEST_CASE("scattered ids at the highest load: found, missing keys not found") {
  std::mt19937_64 random(7);
  std::vector<std::uint64_t> keys(114688);
  for (auto& k : keys) k = (random() | 1);  // never 0, the empty marker
  IdMap<std::int32_t> map;
  for (std::size_t i = 0; i < keys.size(); ++i) map.assign(keys[i], static_cast<std::int32_t>(i));
  REQUIRE(cells(map) == 131072);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::int32_t* v = map.find(keys[i]);
    REQUIRE(v != nullptr);
    REQUIRE(*v == static_cast<std::int32_t>(i));
  }
  for (int i = 0; i < 1000; ++i) REQUIRE_FALSE(map.contains(random() & ~std::uint64_t{1}));
}

TEST_CASE("try_emplace keeps the first value, assign overwrites") {
  IdMap<std::int32_t> map;
  CHECK(map.try_emplace(42, -1).second);
  const auto [slot, inserted] = map.try_emplace(42, 7);
  CHECK_FALSE(inserted);
  CHECK(*slot == -1);
  map.assign(42, 7);
  CHECK(*map.find(42) == 7);
  CHECK(map.size() == 1);
  map.clear();
  CHECK_FALSE(map.contains(42));
  CHECK(map.size() == 0);
}

TEST_CASE("reset empties the map and keeps its cells, clear starts again from none") {
  IdMap<std::int32_t> map;
  for (std::int32_t i = 1; i <= 100; ++i) map.assign(static_cast<std::uint64_t>(i) * 7, i);
  const std::size_t cells_filled = cells(map);
  CHECK(cells_filled == 128);
  map.reset();
  CHECK(map.size() == 0);
  CHECK(cells(map) == cells_filled);
  for (std::int32_t i = 1; i <= 100; ++i)
    CHECK(map.find(static_cast<std::uint64_t>(i) * 7) == nullptr);
  // Filled again with other keys: only those are found, with their new values (few enough
  // that stale keys left by a reset would leave empty cells, so a lookup would end).
  for (std::int32_t i = 1; i <= 10; ++i) {
    REQUIRE(map.try_emplace(static_cast<std::uint64_t>(i) * 7 + 1, -i).second);
  }
  CHECK(map.size() == 10);
  CHECK(cells(map) == cells_filled);
  for (std::int32_t i = 1; i <= 10; ++i) {
    REQUIRE(map.find(static_cast<std::uint64_t>(i) * 7 + 1) != nullptr);
    CHECK(*map.find(static_cast<std::uint64_t>(i) * 7 + 1) == -i);
    CHECK(map.find(static_cast<std::uint64_t>(i) * 7) == nullptr);
  }
  map.clear();
  CHECK(map.size() == 0);
  map.assign(7, 1);
  CHECK(cells(map) == 16);
  CHECK(*map.find(7) == 1);
  CHECK(map.find(8) == nullptr);
}
