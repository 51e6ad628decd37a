// Optimizers write a variable's value and their slots in place when nothing else holds them,
// and never change a tensor someone holds: a read of the variable, a view of it, a slot the
// caller kept. The numbers are the same either way.
#include "identical_support.hpp"
#include "support.hpp"

#include <cmath>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

const void* buffer_of(const Tensor& t) { return t.array<double>().data(); }

}  // namespace

TEST_CASE("Adam steps a variable and its slots in their own buffers when no one holds them",
          "[optim][adam][memory]") {
  Variable w(constant({1.0, -2.0, 3.0}), true, "w");
  Adam adam(0.1);
  const Tensor g = constant({0.5, 0.25, -1.0});
  adam.apply_gradients({{g, w}});  // creates m and v
  const void* w_buffer = buffer_of(w.peek());
  const void* m_buffer = buffer_of(adam.slot(w, "m"));
  const void* v_buffer = buffer_of(adam.slot(w, "v"));
  for (int step = 2; step <= 4; ++step) adam.apply_gradients({{g, w}});
  CHECK(buffer_of(w.peek()) == w_buffer);
  CHECK(buffer_of(adam.slot(w, "m")) == m_buffer);
  CHECK(buffer_of(adam.slot(w, "v")) == v_buffer);

  // The same four steps while the caller holds every read: copies, the same bits.
  Variable held(constant({1.0, -2.0, 3.0}), true, "held");
  Adam held_adam(0.1);
  std::vector<Tensor> reads;
  for (int step = 1; step <= 4; ++step) {
    reads.push_back(held.value());
    held_adam.apply_gradients({{g, held}});
    reads.push_back(held_adam.slot(held, "m"));
    reads.push_back(held_adam.slot(held, "v"));
  }
  CHECK(buffer_of(held.peek()) != buffer_of(reads[reads.size() - 3]));
  require_identical(w.peek(), held.peek());
  require_identical(adam.slot(w, "m"), held_adam.slot(held, "m"));
  require_identical(adam.slot(w, "v"), held_adam.slot(held, "v"));
  // Keras's rule by hand for the first element after 4 steps of g = 0.5.
  double m = 0.0, v = 0.0, x = 1.0;
  for (int t = 1; t <= 4; ++t) {
    m = 0.9 * m + 0.1 * 0.5;
    v = 0.999 * v + 0.001 * 0.25;
    const double a = 0.1 * std::sqrt(1.0 - std::pow(0.999, t)) / (1.0 - std::pow(0.9, t));
    x -= a * m / (std::sqrt(v) + 1e-7);
  }
  CHECK(values(w.peek())[0] == Approx(x).epsilon(1e-14));
}

TEST_CASE("a read of a variable, a view of it and a kept slot never change when it is stepped",
          "[optim][memory]") {
  Variable w(constant({{1.0, 2.0}, {3.0, 4.0}}), true, "w");
  SGD sgd(0.25, 0.5);
  const Tensor g = constant({{1.0, -1.0}, {2.0, 0.5}});
  sgd.apply_gradients({{g, w}});  // w = start - 0.25 g, velocity = -0.25 g
  const Tensor read = w.value();
  const Tensor column = slice(w.peek(), {0, 1}, {2, 1});  // a strided view
  const Tensor velocity = sgd.slot(w, "momentum");
  const std::vector<double> read_before = values(read), column_before = values(column),
                            velocity_before = values(velocity);
  REQUIRE(read_before == std::vector<double>{0.75, 2.25, 2.5, 3.875});
  REQUIRE(column_before == std::vector<double>{2.25, 3.875});
  REQUIRE(velocity_before == std::vector<double>{-0.25, 0.25, -0.5, -0.125});
  sgd.apply_gradients({{g, w}});  // velocity = 0.5 velocity - 0.25 g = -0.375 g
  CHECK(values(read) == read_before);
  CHECK(values(column) == column_before);
  CHECK(values(velocity) == velocity_before);
  require_close(sgd.slot(w, "momentum"), {2, 2}, {-0.375, 0.375, -0.75, -0.1875}, 1e-15);
  require_close(w.peek(), {2, 2}, {0.375, 2.625, 1.75, 3.6875}, 1e-15);
}

TEST_CASE("assign_add and assign_sub write in place only when no one holds the value",
          "[variable][memory]") {
  Variable w(constant({1.0, 2.0, 3.0}), true, "w");
  const void* buffer = buffer_of(w.peek());
  w.assign_add(constant({0.5, 0.5, 0.5}));
  w.assign_sub(constant({1.0, 0.0, -1.0}));
  CHECK(buffer_of(w.peek()) == buffer);
  require_close(w.peek(), {3}, {0.5, 2.5, 4.5}, 0.0);
  const Tensor read = w.value();
  const Tensor tail = slice(read, {1}, {2});  // a view of the read
  w.assign_add(constant({1.0, 1.0, 1.0}));
  CHECK(values(read) == std::vector<double>{0.5, 2.5, 4.5});
  CHECK(values(tail) == std::vector<double>{2.5, 4.5});
  CHECK(buffer_of(w.peek()) != buffer_of(read));
  require_close(w.peek(), {3}, {1.5, 3.5, 5.5}, 0.0);
  // The variable's own value as the delta: it is held twice, so the sum goes to a new buffer.
  w.assign_add(w.peek());
  require_close(w.peek(), {3}, {3.0, 7.0, 11.0}, 0.0);
  // Integers wrap as before.
  Variable count(from_values({2147483647.0}, {1}, DType::Int32), false, "count");
  count.assign_add(from_values({1.0}, {1}, DType::Int32));
  CHECK(count.peek().array<std::int32_t>()(0) == -2147483647 - 1);
}
