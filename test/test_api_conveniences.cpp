// The 0.3 conveniences ported programs need (issue 26, section 2): a double on either side of
// every binary op, reshape and slice taking a Shape, a tape whose recording ends for good
// (TF's `with` block), and vectorized_map over a Tensor -> Tensor function. Exact values,
// overload resolution of the calls programs write, and the errors of bad input.
#include "support.hpp"

#include "captured_stderr.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

const std::string kStillRecording = "still recording";

Tensor int32s(const std::vector<double>& v, const Shape& shape) {
  return from_values(v, shape, DType::Int32);
}

std::vector<double> gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return values(tape.gradient(y, x, UnconnectedGradients::Zero));
}

}  // namespace

// ---- 1. Scalars on either side of every binary op ----------------------------------------

TEST_CASE("binary ops take a double on either side, in the tensor's dtype", "[api][scalar]") {
  const Tensor x = constant({-2.0, 0.5, 3.0});
  CHECK(values(add(x, 1.0)) == std::vector<double>{-1.0, 1.5, 4.0});
  CHECK(values(add(1.0, x)) == std::vector<double>{-1.0, 1.5, 4.0});
  CHECK(values(subtract(x, 1.0)) == std::vector<double>{-3.0, -0.5, 2.0});
  CHECK(values(subtract(1.0, x)) == std::vector<double>{3.0, 0.5, -2.0});
  CHECK(values(multiply(x, 2.0)) == std::vector<double>{-4.0, 1.0, 6.0});
  CHECK(values(multiply(2.0, x)) == std::vector<double>{-4.0, 1.0, 6.0});
  CHECK(values(divide(x, 2.0)) == std::vector<double>{-1.0, 0.25, 1.5});
  CHECK(values(divide(3.0, x)) == std::vector<double>{-1.5, 6.0, 1.0});
  CHECK(values(maximum(x, 0.0)) == std::vector<double>{0.0, 0.5, 3.0});
  CHECK(values(maximum(0.0, x)) == std::vector<double>{0.0, 0.5, 3.0});
  CHECK(values(minimum(x, 1.0)) == std::vector<double>{-2.0, 0.5, 1.0});
  CHECK(values(minimum(1.0, x)) == std::vector<double>{-2.0, 0.5, 1.0});
  CHECK(values(pow(2.0, x)) == std::vector<double>{0.25, std::pow(2.0, 0.5), 8.0});
  CHECK(values(pow(x, 2.0)) == std::vector<double>{4.0, 0.25, 9.0});
  CHECK(values(atan2(x, 1.0)) ==
        std::vector<double>{std::atan2(-2.0, 1.0), std::atan2(0.5, 1.0), std::atan2(3.0, 1.0)});
  CHECK(values(atan2(1.0, x)) ==
        std::vector<double>{std::atan2(1.0, -2.0), std::atan2(1.0, 0.5), std::atan2(1.0, 3.0)});
  CHECK(values(floormod(x, 2.0)) == std::vector<double>{0.0, 0.5, 1.0});
  CHECK(values(floormod(7.0, x)) == std::vector<double>{-1.0, 0.0, 1.0});
  CHECK(values(squared_difference(x, 1.0)) == std::vector<double>{9.0, 0.25, 4.0});
  CHECK(values(squared_difference(1.0, x)) == std::vector<double>{9.0, 0.25, 4.0});
  CHECK(values(equal(x, 0.5)) == std::vector<double>{0, 1, 0});
  CHECK(values(equal(0.5, x)) == std::vector<double>{0, 1, 0});
  CHECK(values(not_equal(x, 0.5)) == std::vector<double>{1, 0, 1});
  CHECK(values(not_equal(0.5, x)) == std::vector<double>{1, 0, 1});
  CHECK(values(less(x, 0.5)) == std::vector<double>{1, 0, 0});
  CHECK(values(less(0.5, x)) == std::vector<double>{0, 0, 1});
  CHECK(values(less_equal(x, 0.5)) == std::vector<double>{1, 1, 0});
  CHECK(values(less_equal(0.5, x)) == std::vector<double>{0, 1, 1});
  CHECK(values(greater(x, 0.5)) == std::vector<double>{0, 0, 1});
  CHECK(values(greater(0.5, x)) == std::vector<double>{1, 0, 0});
  CHECK(values(greater_equal(x, 0.5)) == std::vector<double>{0, 1, 1});
  CHECK(values(greater_equal(0.5, x)) == std::vector<double>{1, 1, 0});
  CHECK(equal(x, 0.5).dtype() == DType::Bool);
  CHECK(maximum(x, 0.0).shape() == Shape{3});
}

TEST_CASE("a double operand takes float32 and int32 tensors' dtypes", "[api][scalar]") {
  const Tensor f = from_values({1.5, -2.0}, {2}, DType::Float32);
  const Tensor m = maximum(f, 0.0);
  CHECK(m.dtype() == DType::Float32);
  CHECK(values(m) == std::vector<double>{1.5, 0.0});
  CHECK(minimum(0.25, f).dtype() == DType::Float32);

  const Tensor i = int32s({-7, 7, 4}, {3});
  const Tensor r = floormod(i, 3.0);
  CHECK(r.dtype() == DType::Int32);
  CHECK(values(r) == std::vector<double>{2, 1, 1});
  CHECK(values(pow(i, 2)) == std::vector<double>{49, 49, 16});  // an int literal, as before
  CHECK(values(pow(2.0, int32s({0, 3}, {2}))) == std::vector<double>{1, 8});
  CHECK(values(maximum(i, 0)) == std::vector<double>{0, 7, 4});
  CHECK(values(less(i, 5.0)) == std::vector<double>{1, 0, 1});
  CHECK(values(squared_difference(i, 1.0)) == std::vector<double>{64, 36, 9});
}

TEST_CASE("double operands are differentiable in the tensor", "[api][scalar]") {
  const Tensor x = constant({-2.0, 0.5, 3.0});
  CHECK(gradient_of([](const Tensor& t) { return maximum(t, 0.0); }, x) ==
        std::vector<double>{0.0, 1.0, 1.0});
  CHECK(gradient_of([](const Tensor& t) { return minimum(1.0, t); }, x) ==
        std::vector<double>{1.0, 1.0, 0.0});
  CHECK(gradient_of([](const Tensor& t) { return multiply(3.0, t); }, x) ==
        std::vector<double>{3.0, 3.0, 3.0});
  CHECK(gradient_of([](const Tensor& t) { return subtract(1.0, t); }, x) ==
        std::vector<double>{-1.0, -1.0, -1.0});
  CHECK(gradient_of([](const Tensor& t) { return divide(t, 4.0); }, x) ==
        std::vector<double>{0.25, 0.25, 0.25});
  CHECK(gradient_of([](const Tensor& t) { return squared_difference(t, 1.0); }, x) ==
        std::vector<double>{-6.0, -1.0, 4.0});
  // d 2^x / dx = 2^x log 2, as pow's gradient computes it from the same operands.
  const Tensor two = constant({2.0, 2.0, 2.0});
  CHECK(gradient_of([](const Tensor& t) { return pow(2.0, t); }, x) ==
        gradient_of([&two](const Tensor& t) { return pow(two, t); }, x));
  CHECK(gradient_of([](const Tensor& t) { return atan2(t, 1.0); }, x) ==
        gradient_of([](const Tensor& t) { return atan2(t, ones({}, DType::Float64)); }, x));
}

TEST_CASE("Variables and the operators resolve alongside the double forms", "[api][scalar]") {
  Variable v(constant({-1.0, 2.0}));
  CHECK(values(maximum(v, 0.0)) == std::vector<double>{0.0, 2.0});
  CHECK(values(maximum(v, v)) == std::vector<double>{-1.0, 2.0});
  const Tensor x = constant({1.0, 2.0});
  CHECK(values(x * 2.0 + 1.0) == std::vector<double>{3.0, 5.0});
  CHECK(values(maximum(x, x)) == std::vector<double>{1.0, 2.0});
  // A pointer to the Tensor-Tensor form still names it.
  Tensor (*tensor_form)(const Tensor&, const Tensor&) = maximum;
  CHECK(values(tensor_form(x, constant({1.5, 1.5}))) == std::vector<double>{1.5, 2.0});
}

TEST_CASE("a double an integer tensor cannot hold exactly is rejected, naming the op",
          "[api][scalar]") {
  const Tensor i = int32s({1, 2}, {2});
  const std::string m = message_of<InvalidArgument>([&] { maximum(i, 0.5); });
  CHECK(m.find("maximum") != std::string::npos);
  CHECK(m.find("[2]") != std::string::npos);
  CHECK(m.find("int32") != std::string::npos);
  CHECK(m.find("0.5") != std::string::npos);
  const std::string l = message_of<InvalidArgument>([&] { less(0.5, i); });
  CHECK(l.find("less") != std::string::npos);
  CHECK(message_of<InvalidArgument>([&] { pow(0.5, i); }).find("pow") != std::string::npos);
  CHECK(message_of<InvalidArgument>([&] { atan2(Tensor(), 1.0); }).find("atan2") !=
        std::string::npos);
  CHECK(message_of<InvalidArgument>([&] { pow(2.0, int32s({-1}, {1})); }).find("negative") !=
        std::string::npos);
}

// ---- 2. reshape and slice with a Shape ---------------------------------------------------

TEST_CASE("reshape takes a braced list or a Shape", "[api][shape]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {6});
  const Tensor y = zeros({3, 2});
  const Tensor a = reshape(x, {2, -1});
  CHECK(a.shape() == Shape{2, 3});
  CHECK(values(a) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const Tensor b = reshape(x, y.shape());
  CHECK(b.shape() == Shape{3, 2});
  CHECK(values(b) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const Shape target{1, 6};
  CHECK(reshape(x, target).shape() == Shape{1, 6});
  CHECK(reshape(x, {6}).shape() == Shape{6});
  CHECK(reshape(constant(4.0), {}).shape() == Shape{});
  CHECK(reshape(constant(4.0), Shape{}).shape() == Shape{});
  const std::vector<std::int64_t> dims{3, -1};
  CHECK(reshape(x, dims).shape() == Shape{3, 2});
  // Differentiable through the Shape form as through the other.
  CHECK(gradient_of([&y](const Tensor& t) { return reshape(t, y.shape()) * 2.0; }, x) ==
        std::vector<double>{2, 2, 2, 2, 2, 2});
}

TEST_CASE("slice takes braced lists, Shapes, or one of each", "[api][shape]") {
  const Tensor x = from_values({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3});
  const Tensor window = zeros({2, 2});
  const Tensor a = slice(x, {0, 1}, {2, 2});
  CHECK(a.shape() == Shape{2, 2});
  CHECK(values(a) == std::vector<double>{1, 2, 4, 5});
  CHECK(values(slice(x, {1, 0}, {-1, 2})) == std::vector<double>{3, 4, 6, 7});
  const Shape begin{1, 1};
  CHECK(values(slice(x, begin, window.shape())) == std::vector<double>{4, 5, 7, 8});
  CHECK(values(slice(x, {0, 1}, window.shape())) == std::vector<double>{1, 2, 4, 5});
  CHECK(values(slice(x, begin, {1, 2})) == std::vector<double>{4, 5});
  CHECK(gradient_of([&](const Tensor& t) { return slice(t, begin, window.shape()); }, x) ==
        std::vector<double>{0, 0, 0, 0, 1, 1, 0, 1, 1});
}

TEST_CASE("reshape and slice with a Shape report misuse as the int64 forms do", "[api][shape]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {6});
  const std::string bad_reshape = message_of<InvalidArgument>([&] { reshape(x, Shape{4}); });
  CHECK(bad_reshape == message_of<InvalidArgument>([&] { reshape(x, {4}); }));
  CHECK(bad_reshape.find("reshape") != std::string::npos);
  CHECK(bad_reshape.find("[6]") != std::string::npos);
  const std::string bad_slice = message_of<InvalidArgument>([&] { slice(x, Shape{5}, Shape{2}); });
  CHECK(bad_slice == message_of<InvalidArgument>([&] { slice(x, {5}, {2}); }));
  CHECK(bad_slice.find("slice") != std::string::npos);
  const std::string huge =
      message_of<InvalidArgument>([&] { reshape(x, Shape{std::size_t{1} << 63}); });
  CHECK(huge.find("reshape") != std::string::npos);
  CHECK(huge.find("9223372036854775808") != std::string::npos);
}

// ---- 3. Ending a tape's recording (TF's `with` block) ------------------------------------

TEST_CASE("end_recording: later ops are not recorded, gradients and jacobians stay exact",
          "[api][tape]") {
  const Tensor x = constant({1.0, 2.0, 3.0});
  const Tensor batch = from_values({1.0, 2.0, 3.0}, {3, 1});
  CapturedStderr captured;
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(batch);
  const Tensor y = x * x;
  const Tensor per_example = batch * batch * batch;
  tape.end_recording();
  CHECK_FALSE(tape.recording());
  const Tensor z = y * 3.0;  // after the block: not recorded
  CHECK(values(tape.gradient(y, x)) == std::vector<double>{2.0, 4.0, 6.0});
  CHECK_FALSE(tape.gradient(z, x).defined());
  const Tensor j = tape.jacobian(y, x);
  CHECK(j.shape() == Shape{3, 3});
  CHECK(values(j) == std::vector<double>{2, 0, 0, 0, 4, 0, 0, 0, 6});
  const Tensor b = tape.batch_jacobian(per_example, batch);
  CHECK(b.shape() == Shape{3, 1, 1});
  CHECK(values(b) == std::vector<double>{3.0, 12.0, 27.0});
  // Ops after the end are not recorded: a reshape then is a new, unconnected tensor (zeros).
  const Tensor late = tape.batch_jacobian(reshape(per_example, {3, 1}), batch);
  CHECK(values(late) == std::vector<double>{0.0, 0.0, 0.0});
  CHECK(values(tape.gradient(y, x)) == std::vector<double>{2.0, 4.0, 6.0});  // again
  CHECK(captured.text().find(kStillRecording) == std::string::npos);
  CHECK(captured.text().empty());
}

// The control of the capture above: without end_recording the same calls warn (once per
// process, so this comes after the cases that must not warn).
TEST_CASE("without end_recording a persistent tape's gradient warns that it still records",
          "[api][tape]") {
  const Tensor x = constant(2.0);
  CapturedStderr captured;
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;
  CHECK(tape.gradient(y, x).item<double>() == 4.0);
  CHECK(captured.text().find(kStillRecording) != std::string::npos);
}

TEST_CASE("end_recording is permanent: guards and record() do not resume it", "[api][tape]") {
  const Tensor x = constant(2.0);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;
  {
    auto paused = tape.stop_recording();
    tape.end_recording();
  }  // the guard would resume recording: the tape has ended
  CHECK_FALSE(tape.recording());
  const Tensor after_guard = x * 5.0;
  CHECK_FALSE(tape.gradient(after_guard, x).defined());
  const std::string m = message_of<TapeError>([&] { auto resumed = tape.record(); });
  CHECK(m.find("GradientTape::record") != std::string::npos);
  CHECK(m.find("end_recording") != std::string::npos);
  CHECK_THROWS_AS(tape.stop_recording(), TapeError);  // not recording
  tape.end_recording();                               // again: nothing to do
  CHECK(tape.gradient(y, x).item<double>() == 4.0);
  tape.reset();
  CHECK_FALSE(tape.recording());
  CHECK(tapes_on_this_thread() == 1);
}

TEST_CASE("end_recording on a non-persistent tape allows its one gradient", "[api][tape]") {
  const Tensor x = constant(3.0);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x * x;
  tape.end_recording();
  CHECK(tape.gradient(y, x).item<double>() == 27.0);
  CHECK_THROWS_AS(tape.gradient(y, x), TapeError);
  tape.end_recording();  // on a used tape: nothing to do
}

TEST_CASE("an outer tape still records what an ended inner tape's gradient computes",
          "[api][tape]") {
  const Tensor x = constant(3.0);
  GradientTape outer;
  outer.watch(x);
  Tensor dy_dx;
  {
    GradientTape inner(/*persistent=*/true);
    inner.watch(x);
    const Tensor y = x * x * x;
    inner.end_recording();
    dy_dx = inner.gradient(y, x);  // 3 x^2 = 27, recorded by the outer tape
  }
  CHECK(dy_dx.item<double>() == 27.0);
  CHECK(outer.gradient(dy_dx, x).item<double>() == 18.0);  // 6 x
}

TEST_CASE("end_recording on another thread throws TapeError naming it", "[api][tape]") {
  GradientTape tape;
  std::string message;
  std::thread worker([&] {
    try {
      tape.end_recording();
    } catch (const TapeError& e) {
      message = e.what();
    }
  });
  worker.join();
  CHECK(message.find("GradientTape::end_recording") != std::string::npos);
  CHECK(tape.recording());
}

// ---- 4. vectorized_map over a Tensor -> Tensor function ----------------------------------

TEST_CASE("vectorized_map takes a Tensor -> Tensor function", "[api][vectorized_map]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor sums = vectorized_map([](const Tensor& row) { return reduce_sum(row * row); }, x);
  CHECK(sums.shape() == Shape{3});
  CHECK(values(sums) == std::vector<double>{5, 25, 61});
  const Tensor scaled = vectorized_map([](const Tensor& row) { return maximum(row, 3.0); }, x,
                                       /*fallback_to_loop=*/false);
  CHECK(scaled.shape() == Shape{3, 2});
  CHECK(values(scaled) == std::vector<double>{3, 3, 3, 4, 5, 6});
  // The vector form, with a lambda, beside it: both resolve.
  const std::vector<Tensor> both = vectorized_map(
      [](const std::vector<Tensor>& rows) {
        return std::vector<Tensor>{rows[0] * 2.0, reduce_sum(rows[0])};
      },
      {x});
  CHECK(values(both[0]) == std::vector<double>{2, 4, 6, 8, 10, 12});
  CHECK(values(both[1]) == std::vector<double>{3, 7, 11});
  const std::function<Tensor(const Tensor&)> fn = [](const Tensor& row) { return row + 1.0; };
  CHECK(values(vectorized_map(fn, x)) == std::vector<double>{2, 3, 4, 5, 6, 7});
}

TEST_CASE("vectorized_map nests and is differentiable", "[api][vectorized_map]") {
  const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  // Inside fn, a map over the rows of each example: pairwise products.
  const auto outer_fn = [](const Tensor& example) {
    return vectorized_map([](const Tensor& row) { return reduce_prod(row); }, example,
                          /*fallback_to_loop=*/false);
  };
  const Tensor nested = vectorized_map(outer_fn, x, /*fallback_to_loop=*/false);
  CHECK(nested.shape() == Shape{2, 2});
  CHECK(values(nested) == std::vector<double>{2, 12, 30, 56});
  CHECK(gradient_of([&](const Tensor& t) { return vectorized_map(outer_fn, t); }, x) ==
        std::vector<double>{2, 1, 4, 3, 6, 5, 8, 7});
}

TEST_CASE("vectorized_map's Tensor form reports misuse", "[api][vectorized_map]") {
  const std::function<Tensor(const Tensor&)> empty;
  CHECK(message_of<InvalidArgument>([&] {
          vectorized_map(empty, constant({1.0}));
        }).find("vectorized_map") != std::string::npos);
  const std::string scalar_elem = message_of<InvalidArgument>(
      [] { vectorized_map([](const Tensor& t) { return t; }, constant(1.0)); });
  CHECK(scalar_elem.find("vectorized_map") != std::string::npos);
  CHECK(message_of<InvalidArgument>([] {
          vectorized_map([](const Tensor& t) { return t; }, Tensor());
        }).find("vectorized_map") != std::string::npos);
}
