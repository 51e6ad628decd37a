// What a fuzz test that runs many seeded programs keeps of their failures: how many failed and
// the first one's report, each report printed as it happens.
#pragma once

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

namespace tapegrad::fuzz {

// `check()`'s failure ("" when the program passed), or the exception it threw as one.
template <class Check>
std::string failure_of(Check check) {
  try {
    return check();
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  }
}

struct FuzzFailures {
  std::uint64_t count = 0;
  std::string first;  // the first report, for the test's assertion message

  // Counts one failed program and prints its report (which names the seed that reproduces it).
  void add(const std::string& report) {
    ++count;
    std::cerr << report;
    if (first.empty()) first = report;
  }
};

}  // namespace tapegrad::fuzz
