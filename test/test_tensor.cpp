// Tensor, the factories and Variable basics.
#include "support.hpp"

#include <memory>
#include <sstream>
#include <thread>
#include <type_traits>

using namespace tapegrad;
using tapegrad::testing::message_of;
using tapegrad::testing::require_close;

TEST_CASE("a Tensor takes an xarray without copying and keeps its dtype and shape") {
  // The storage type is moved in; a default xt::xarray (another allocator) is copied once.
  storage_array<double> a = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  const double* data = a.data();
  Tensor t(std::move(a));
  CHECK(t.defined());
  CHECK(t.dtype() == DType::Float64);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.rank() == 2);
  CHECK(t.size() == 6);
  CHECK(t.array<double>().data() == data);  // moved, not copied
  CHECK(t.array<double>()(1, 2) == 6.0);
  xt::xarray<double> b = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  const Tensor u(std::move(b));
  CHECK(u.shape() == Shape{2, 3});
  CHECK(u.array<double>()(1, 2) == 6.0);
}

TEST_CASE("every element type maps to its dtype") {
  CHECK(Tensor(xt::xarray<float>{1.0f}).dtype() == DType::Float32);
  CHECK(Tensor(xt::xarray<double>{1.0}).dtype() == DType::Float64);
  CHECK(Tensor(xt::xarray<std::int32_t>{1}).dtype() == DType::Int32);
  CHECK(Tensor(xt::xarray<std::int64_t>{1}).dtype() == DType::Int64);
  CHECK(Tensor(xt::xarray<bool>{true}).dtype() == DType::Bool);
  CHECK(is_floating(DType::Float32));
  CHECK(is_floating(DType::Float64));
  CHECK_FALSE(is_floating(DType::Int32));
  CHECK_FALSE(is_floating(DType::Int64));
  CHECK_FALSE(is_floating(DType::Bool));
}

TEST_CASE("copies of a handle are the same tensor, new tensors get new ids") {
  Tensor a = constant(1.0);
  Tensor b = a;
  Tensor c = constant(1.0);
  CHECK(a.id() == b.id());
  CHECK(a.id() != c.id());
}

TEST_CASE("ids stay unique across threads") {
  std::vector<std::uint64_t> ids_a, ids_b;
  std::thread ta([&] {
    for (int i = 0; i < 1000; ++i) ids_a.push_back(constant(1.0).id());
  });
  std::thread tb([&] {
    for (int i = 0; i < 1000; ++i) ids_b.push_back(constant(1.0).id());
  });
  ta.join();
  tb.join();
  std::vector<std::uint64_t> all = ids_a;
  all.insert(all.end(), ids_b.begin(), ids_b.end());
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
}

// Only the runtime wraps storage in a handle: a user cannot build a Tensor around a header of
// their choosing (and so cannot pick its id), nor build or copy a header.
static_assert(!std::is_constructible_v<Tensor, std::shared_ptr<const detail::TensorHeader>>);
static_assert(!std::is_constructible_v<Tensor, const detail::TensorHeader*>);
static_assert(!std::is_default_constructible_v<detail::TensorHeader> &&
              !std::is_copy_constructible_v<detail::TensorHeader>);

TEST_CASE("a handle reads its storage's id and dtype, array<T> checks both ways") {
  Tensor t = Tensor(xt::xarray<float>{1.0f, 2.0f});
  Tensor u = t;
  CHECK(t.dtype() == DType::Float32);
  CHECK(u.id() == t.id());
  CHECK(&u.array<float>() == &t.array<float>());
  const std::string wrong = message_of<InvalidArgument>([&] { (void)t.array<double>(); });
  CHECK(wrong.find("Tensor::array") != std::string::npos);
  CHECK(wrong.find("float32") != std::string::npos);
  CHECK(wrong.find("float64") != std::string::npos);
  CHECK(wrong.find("shape [2]") != std::string::npos);
  Variable v(constant({1.0, 2.0}));
  const std::string handle = message_of<InvalidArgument>([&] { (void)v.handle().array<double>(); });
  CHECK(handle.find("variable handle") != std::string::npos);
  CHECK(handle.find("[2]") != std::string::npos);
  CHECK_THROWS_AS(Tensor().dtype(), InvalidArgument);
}

TEST_CASE("item reads the single element, other sizes and wrong types throw") {
  CHECK(constant(2.5).item<double>() == 2.5);
  CHECK(constant(2.5f).item<float>() == 2.5f);
  CHECK(constant(2.5f).dtype() == DType::Float32);
  const auto size_msg = message_of<InvalidArgument>([] { constant({1.0, 2.0}).item<double>(); });
  CHECK_THAT(size_msg, Catch::Contains("item") && Catch::Contains("[2] (float64)"));
  const auto type_msg = message_of<InvalidArgument>([] { constant(1.0).item<float>(); });
  CHECK_THAT(type_msg, Catch::Contains("float64") && Catch::Contains("float32"));
}

TEST_CASE("an undefined tensor says so when used") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK_FALSE(static_cast<bool>(t));
  CHECK_THROWS_AS(t.shape(), InvalidArgument);
  const auto msg = message_of<InvalidArgument>([&] { t.dtype(); });
  CHECK_THAT(msg, Catch::Contains("undefined"));
}

TEST_CASE("constant, zeros, ones, fill, zeros_like, ones_like") {
  require_close(constant({1.0, 2.0}), {2}, {1, 2});
  require_close(constant({{1.0, 2.0}, {3.0, 4.0}}), {2, 2}, {1, 2, 3, 4});
  require_close(zeros({2, 2}), {2, 2}, {0, 0, 0, 0});
  require_close(ones({3}, DType::Float32), {3}, {1, 1, 1});
  CHECK(ones({3}, DType::Float32).dtype() == DType::Float32);
  require_close(fill({2}, 7.0, DType::Int64), {2}, {7, 7});
  CHECK(fill({2}, 7.0, DType::Int64).dtype() == DType::Int64);
  Tensor x = constant({{1.0, 2.0, 3.0}});
  require_close(zeros_like(x), {1, 3}, {0, 0, 0});
  require_close(ones_like(x), {1, 3}, {1, 1, 1});
  require_close(zeros({0, 3}), {0, 3}, {});
  require_close(from_values({1, 2, 3, 4, 5, 6}, {3, 2}, DType::Int32), {3, 2}, {1, 2, 3, 4, 5, 6});
  const auto msg = message_of<InvalidArgument>([] { constant({{1.0, 2.0}, {3.0}}); });
  CHECK_THAT(msg, Catch::Contains("row 1"));
  const auto msg2 = message_of<InvalidArgument>([] { from_values({1, 2, 3}, {2, 2}); });
  CHECK_THAT(msg2, Catch::Contains("[2, 2]"));
}

TEST_CASE("printing shows shape, dtype and values") {
  std::ostringstream os;
  os << constant({1.0, 2.5});
  CHECK_THAT(os.str(),
             Catch::Contains("shape=[2]") && Catch::Contains("float64") && Catch::Contains("2.5"));
  std::ostringstream undefined;
  undefined << Tensor();
  CHECK(undefined.str() == "Tensor(undefined)");
}

TEST_CASE("Variable: shared handle, assign checks shape and dtype") {
  Variable v(constant({1.0, 2.0}), true, "weights");
  Variable alias = v;
  CHECK(alias == v);
  CHECK(v.name() == "weights");
  CHECK(v.trainable());
  v.assign(constant({3.0, 4.0}));
  require_close(alias.value(), {2}, {3, 4});
  v.assign_add(constant({1.0, 1.0}));
  require_close(v.value(), {2}, {4, 5});
  v.assign_sub(constant({0.5, 0.5}));
  require_close(v.value(), {2}, {3.5, 4.5});
  const auto shape_msg = message_of<InvalidArgument>([&] { v.assign(constant({1.0, 2.0, 3.0})); });
  CHECK_THAT(shape_msg,
             Catch::Contains("assign") && Catch::Contains("[2]") && Catch::Contains("[3]"));
  const auto dtype_msg = message_of<InvalidArgument>([&] { v.assign(ones({2}, DType::Float32)); });
  CHECK_THAT(dtype_msg, Catch::Contains("float64") && Catch::Contains("float32"));
  Variable later(constant(0.0));
  CHECK(later.id() > v.id());
}
