// The misuse catalogue's harness: every case runs a body that must throw a given tapegrad
// exception whose message names the op and the offending shapes, dtypes or values; after it,
// the thread must be as it was (no tape left on the stack) and an ordinary gradient must still
// be right.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tapegrad::testing {

// How many misuse cases have run in this process (each test file prints its own count).
inline std::atomic<int>& misuse_cases_run() {
  static std::atomic<int> count{0};
  return count;
}

// After a misuse: nothing stays on this thread's tape stack, and d(x*x)/dx at 3 is 6.
inline void require_thread_is_clean(const std::string& case_name) {
  INFO("after misuse case: " << case_name);
  REQUIRE(tapes_on_this_thread() == 0);
  Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  Tensor y = multiply(x, x);
  Tensor dx = tape.gradient(y, x);
  REQUIRE(dx.defined());
  REQUIRE(dx.item<double>() == 6.0);
}

// Runs `body`; it must throw exactly-or-derived E (and no other exception) with a message
// that contains every string of `must_mention`. Then checks the thread is clean.
template <class E>
void expect_misuse(const std::string& case_name, const std::function<void()>& body,
                   const std::vector<std::string>& must_mention) {
  ++misuse_cases_run();
  INFO("misuse case: " << case_name);
  std::string message;
  bool thrown = false;
  try {
    body();
  } catch (const E& e) {
    thrown = true;
    message = e.what();
  } catch (const std::exception& e) {
    FAIL("threw " << typeid(e).name() << " instead of the expected type: " << e.what());
  } catch (...) {
    FAIL("threw something that is not a std::exception");
  }
  if (!thrown) FAIL("did not throw");
  INFO("message: " << message);
  for (const auto& needle : must_mention) {
    INFO("the message should mention: " << needle);
    CHECK(message.find(needle) != std::string::npos);
  }
  require_thread_is_clean(case_name);
}

// A case that is NOT an error (a defined result such as wrapping integer arithmetic): runs
// `body`, which checks its own values, and then checks the thread is clean.
inline void expect_defined(const std::string& case_name, const std::function<void()>& body) {
  ++misuse_cases_run();
  INFO("defined-behaviour case: " << case_name);
  body();
  require_thread_is_clean(case_name);
}

}  // namespace tapegrad::testing
