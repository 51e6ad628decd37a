// SegmentedVector (src/runtime/segmented_vector.hpp, header-only), what a trace keeps its ops
// and values in: indexed and iterated as a std::vector, grown by segments, its elements past
// the first segment never moved.
#include "support.hpp"

#include <string>
#include <vector>

#include "../src/runtime/segmented_vector.hpp"

using tapegrad::detail::SegmentedVector;

namespace {

// Segments of 4: ten elements fill two segments and part of a third.
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

TEST_CASE("SegmentedVector: elements past the first segment never move, nor when it moves") {
  Strings v;
  for (std::size_t i = 0; i < 4; ++i) v.push_back(element(i));
  const std::string* fifth = nullptr;
  std::vector<const std::string*> later;
  for (std::size_t i = 4; i < 40; ++i) {
    v.push_back(element(i));
    if (i == 4) fifth = &v[4];
    later.push_back(&v[i]);
  }
  CHECK(&v[4] == fifth);
  for (std::size_t i = 4; i < 40; ++i) CHECK(&v[i] == later[i - 4]);
  Strings moved = std::move(v);
  CHECK(moved.size() == 40);
  for (std::size_t i = 4; i < 40; ++i) CHECK(&moved[i] == later[i - 4]);
  CHECK(moved[39] == element(39));
}
