// InlineVector (src/runtime/inline_vector.hpp, header-only), what a traced op keeps its inputs
// and outputs in: the first N elements inline, then all of them on the heap, in order.
#include "support.hpp"

#include <string>
#include <vector>

#include "../src/runtime/inline_vector.hpp"

using tapegrad::detail::InlineVector;

namespace {

std::vector<std::string> contents(const InlineVector<std::string, 3>& v) {
  return std::vector<std::string>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("InlineVector: inline up to N, then every element on the heap, in order") {
  InlineVector<std::string, 3> v;
  CHECK(v.empty());
  std::vector<std::string> expected;
  // Long strings: a lost move or a stale inline copy would show as a wrong or empty element.
  for (int i = 0; i < 10; ++i) {
    const std::string s = "element number " + std::to_string(i) + " of the inline vector";
    CHECK(v.push_back(s) == s);
    expected.push_back(s);
    REQUIRE(v.size() == expected.size());
    REQUIRE(contents(v) == expected);
    CHECK(v.front() == expected.front());
    CHECK(v.back() == expected.back());
    CHECK(v[static_cast<std::size_t>(i)] == expected[static_cast<std::size_t>(i)]);
    CHECK(v.end() - v.begin() == static_cast<std::ptrdiff_t>(v.size()));
  }
  std::string& added = v.emplace_back();
  CHECK(added.empty());
  CHECK(v.size() == 11);
}

TEST_CASE("InlineVector: copies are independent, equality compares the elements") {
  for (const std::size_t count : {std::size_t{2}, std::size_t{3}, std::size_t{7}}) {
    InlineVector<std::string, 3> a;
    for (std::size_t i = 0; i < count; ++i) a.push_back("value " + std::to_string(i));
    InlineVector<std::string, 3> b = a;
    CHECK(a == b);
    b[0] = "changed";
    CHECK(a != b);
    CHECK(a[0] == "value 0");
    InlineVector<std::string, 3> moved = std::move(b);
    CHECK(moved[0] == "changed");
    CHECK(moved.size() == count);
    CHECK(b.empty());  // NOLINT(bugprone-use-after-move): a moved-from vector is empty
    CHECK(b.begin() == b.end());
    b = a;  // a moved-from vector takes a new value
    CHECK(b == a);
    InlineVector<std::string, 3> shorter;
    shorter.push_back("value 0");
    CHECK(shorter != a);
  }
}

TEST_CASE("InlineVector: reserved past N, then filled across N, keeps the elements in order") {
  InlineVector<int, 2> v;
  v.reserve(5);
  for (int i = 0; i < 5; ++i) v.push_back(10 * i);
  CHECK(std::vector<int>(v.begin(), v.end()) == std::vector<int>{0, 10, 20, 30, 40});
}
