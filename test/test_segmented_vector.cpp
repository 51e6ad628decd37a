// SegmentedVector (src/runtime/segmented_vector.hpp, header-only), what a trace keeps its ops
// and values in: indexed and iterated as a std::vector, grown by segments that double, its
// elements never moved.
#include "support.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/segmented_vector.hpp"

using tapegrad::detail::SegmentedVector;

namespace {

// Segments of 4, 8, 16, ...: ten elements fill the first segment and part of the second.
using Strings = SegmentedVector<std::string, 2>;

std::string element(std::size_t i) {
  // Long strings: a lost move or a stale copy would show as a wrong or empty element.
  return "element number " + std::to_string(i) + " of the segmented vector";
}

}  // namespace

TEST_CASE("SegmentedVector: indexed and iterated in order across segments") {
  Strings v;
  CHECK(v.empty());
  CHECK(v.begin() == v.end());
  for (std::size_t i = 0; i < 10; ++i) {
    v.push_back(element(i));
    REQUIRE(v.size() == i + 1);
    for (std::size_t j = 0; j <= i; ++j) REQUIRE(v[j] == element(j));
  }
  std::vector<std::string> iterated(v.begin(), v.end());
  REQUIRE(iterated.size() == 10);
  for (std::size_t i = 0; i < 10; ++i) CHECK(iterated[i] == element(i));
  v[5] = "changed";
  CHECK(v[5] == "changed");
  CHECK(v[4] == element(4));
  CHECK(v[6] == element(6));
}

TEST_CASE("SegmentedVector: elements never move, nor when the vector moves") {
  Strings v;
  std::vector<const std::string*> addresses;
  for (std::size_t i = 0; i < 40; ++i) {  // segments of 4, 8, 16 and part of one of 32
    v.push_back(element(i));
    addresses.push_back(&v[i]);
    for (std::size_t j = 0; j <= i; ++j) REQUIRE(&v[j] == addresses[j]);
  }
  Strings moved = std::move(v);
  CHECK(moved.size() == 40);
  for (std::size_t i = 0; i < 40; ++i) CHECK(&moved[i] == addresses[i]);
  CHECK(moved[39] == element(39));
  CHECK(moved[3] == element(3));
  CHECK(moved[4] == element(4));
  CHECK(moved[11] == element(11));
  CHECK(moved[12] == element(12));
}

TEST_CASE("SegmentedVector: a segment of 2 MiB or more lies on a huge-page boundary") {
  // 8-byte elements, a first segment of 2^15 (256 KiB): the fourth segment holds 2^18 (2 MiB).
  SegmentedVector<double, 15> v;
  const std::size_t first_three = (std::size_t{1} << 15) * 7;
  for (std::size_t i = 0; i < first_three + 1; ++i) v.push_back(static_cast<double>(i));
  CHECK(v[first_three - 1] == static_cast<double>(first_three - 1));
  CHECK(v[first_three] == static_cast<double>(first_three));
#if defined(__linux__)
  CHECK(reinterpret_cast<std::uintptr_t>(&v[first_three]) % (std::size_t{2} << 20) == 0);
#endif
  CHECK(&v[first_three - 1] != &v[first_three] - 1);  // another block
}
