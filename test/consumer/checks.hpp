// What a consumer of tapegrad checks, compiled into each translation unit of the consumer
// programs (test/consumer/*.cpp), each with its own view of XTENSOR_USE_XSIMD and whatever
// -march the build gives: tensors of every dtype built from the unit's own xt::xarray<T>, read
// back through every spelling of array<T>(), a gradient, and xsimd expressions of the unit's
// architecture run on the library's arrays. Everything here has internal linkage, so each
// unit runs its own compilation of it (a shared inline function would be merged by the linker).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>

#include <tapegrad/tapegrad.hpp>

namespace {

namespace tg = tapegrad;
using Dims = std::vector<std::size_t>;

class Report {
 public:
  explicit Report(const char* unit) : unit_(unit) {}
  void expect(bool ok, const std::string& what) {
    if (!ok) {
      ++failures_;
      std::cout << "consumer [" << unit_ << "]: FAILED " << what << '\n';
    }
  }
  int failures() const { return failures_; }
  const char* unit() const { return unit_; }

 private:
  const char* unit_;
  int failures_ = 0;
};

// Shape and row-major values of any array or expression, compared exactly.
template <class Array, class T>
bool has_values(const Array& a, const Dims& shape, const std::vector<T>& values) {
  if (Dims(a.shape().begin(), a.shape().end()) != shape || a.size() != values.size()) return false;
  std::size_t i = 0;
  for (auto it = a.template begin<xt::layout_type::row_major>();
       it != a.template end<xt::layout_type::row_major>(); ++it) {
    if (*it != values[i++]) return false;
  }
  return true;
}

template <class T>
xt::xarray<T> make_array(const Dims& shape, const std::vector<T>& values) {
  xt::xarray<T> a = xt::empty<T>(shape);
  std::copy(values.begin(), values.end(), a.begin());
  return a;
}

// The case: a Tensor from the unit's own xt::xarray<T> (lvalue and rvalue), read back
// as `const xt::xarray<T>&`, `auto&` and `xt::xarray<T>` by value.
template <class T>
void check_round_trip(Report& r, const char* name, tg::DType dtype, const Dims& shape,
                      const std::vector<T>& values) {
  const std::string what = std::string(name) + " round trip";
  xt::xarray<T> a = make_array(shape, values);
  tg::Tensor from_lvalue(a);
  tg::Tensor from_rvalue(make_array(shape, values));
  for (const tg::Tensor& t : {from_lvalue, from_rvalue}) {
    r.expect(t.dtype() == dtype, what + ": dtype");
    r.expect(t.shape() == tg::Shape(shape.begin(), shape.end()), what + ": shape");
    const xt::xarray<T>& by_reference = t.array<T>();
    auto& by_auto = t.array<T>();
    xt::xarray<T> by_value = t.array<T>();
    r.expect(has_values(by_reference, shape, values), what + ": const xt::xarray<T>&");
    r.expect(has_values(by_auto, shape, values), what + ": auto&");
    r.expect(has_values(by_value, shape, values), what + ": xt::xarray<T> by value");
  }
  r.expect(has_values(a, shape, values), what + ": the source array is unchanged");
}

// Expressions of this unit's xsimd architecture over the library's arrays (16-byte aligned,
// whatever this unit's xt::xarray aligns to): they must use unaligned loads, not fault.
void check_simd_expressions(Report& r) {
  xt::xarray<double> ramp = 0.5 * xt::arange<double>(1001.0);
  tg::Tensor x(ramp);
  tg::Tensor squares = tg::square(x);  // built by the library
  std::vector<double> want(1001);
  for (std::size_t k = 0; k < want.size(); ++k) want[k] = 0.5 * static_cast<double>(k * k);
  const xt::xarray<double>& s = squares.array<double>();
  xt::xarray<double> twice = s + s;
  r.expect(has_values(twice, Dims{1001}, want), "xsimd sum of a library array with itself");
  const auto& pinned = squares.array<double>();
  xt::xarray<double> scaled = pinned * 2.0;
  r.expect(has_values(scaled, Dims{1001}, want), "xsimd product of a library array by 2");
  // Odd sizes and offsets: many allocations, so some land off every wider alignment.
  for (std::size_t n = 1; n < 40; ++n) {
    tg::Tensor t(xt::xarray<float>(xt::arange<float>(static_cast<float>(n))));
    xt::xarray<float> doubled = t.array<float>() + t.array<float>();
    bool ok = doubled.size() == n;
    for (std::size_t k = 0; ok && k < n; ++k) ok = doubled(k) == 2.0f * static_cast<float>(k);
    r.expect(ok, "xsimd float expression of size " + std::to_string(n));
  }
}

// d/dx sum(tanh(x) * x) = tanh(x) + x (1 - tanh(x)^2), float64; d/dx sum(x^3) = 3 x^2, float32.
void check_gradients(Report& r) {
  const Dims shape{2, 3};
  const std::vector<double> xs{0.5, -1.0, 2.0, 0.0, 1.5, -0.25};
  tg::Tensor x(make_array(shape, xs));
  tg::GradientTape tape;
  tape.watch(x);
  tg::Tensor y = tg::reduce_sum(tg::tanh(x) * x);
  tg::Tensor dx = tape.gradient(y, x);
  const xt::xarray<double>& got = dx.array<double>();
  bool ok = dx.shape() == tg::Shape{2, 3};
  for (std::size_t i = 0; ok && i < xs.size(); ++i) {
    const double t = std::tanh(xs[i]);
    ok = std::abs(got.data()[i] - (t + xs[i] * (1 - t * t))) < 1e-12;
  }
  r.expect(ok, "float64 gradient of sum(tanh(x) * x)");

  tg::Tensor xf(xt::xarray<float>{1.0f, -2.0f, 0.5f});
  tg::GradientTape tape_f;
  tape_f.watch(xf);
  tg::Tensor cube = tg::reduce_sum(xf * xf * xf);
  r.expect(has_values(tape_f.gradient(cube, xf).array<float>(), Dims{3},
                      std::vector<float>{3.0f, 12.0f, 0.75f}),
           "float32 gradient of sum(x^3)");
}

// Integer and bool tensors in and out of ops.
void check_integer_and_bool_ops(Report& r) {
  tg::Tensor i32(xt::xarray<std::int32_t>{{-3, 4}, {5, -6}});
  r.expect(has_values(tg::square(i32).array<std::int32_t>(), Dims{2, 2},
                      std::vector<std::int32_t>{9, 16, 25, 36}),
           "int32 square");
  tg::Tensor i64(xt::xarray<std::int64_t>{std::int64_t{1} << 40, -7});
  r.expect(has_values(tg::add(i64, i64).array<std::int64_t>(), Dims{2},
                      std::vector<std::int64_t>{std::int64_t{1} << 41, -14}),
           "int64 add");
  tg::Tensor mask(xt::xarray<bool>{true, false, true});
  tg::Tensor picked =
      tg::where(mask, tg::constant({1.0, 2.0, 3.0}), tg::constant({-1.0, -2.0, -3.0}));
  r.expect(has_values(picked.array<double>(), Dims{3}, std::vector<double>{1.0, -2.0, 3.0}),
           "where with a consumer bool mask");
  const tg::Tensor is_positive = tg::greater(picked, tg::constant(0.0));  // outlives the reference
  const xt::xarray<bool>& positive = is_positive.array<bool>();
  r.expect(has_values(positive, Dims{3}, std::vector<bool>{true, false, true}),
           "bool tensor from greater, read as const xt::xarray<bool>&");
  xt::xarray<double, xt::layout_type::column_major> column_major = {{1.0, 2.0}, {3.0, 4.0}};
  r.expect(has_values(tg::Tensor(column_major).array<double>(), Dims{2, 2},
                      std::vector<double>{1.0, 2.0, 3.0, 4.0}),
           "a column-major xarray keeps its logical values");
}

// Runs every check in this unit; `from_other_unit` was built by another translation unit.
int run_consumer_checks(const char* unit, const tg::Tensor& from_other_unit) {
  Report r(unit);
  check_round_trip<float>(r, "float32", tg::DType::Float32, Dims{2, 2}, {1.5f, -2.0f, 0.0f, 4.25f});
  check_round_trip<double>(r, "float64", tg::DType::Float64, Dims{3}, {1e-300, -2.5, 7.0});
  check_round_trip<std::int32_t>(r, "int32", tg::DType::Int32, Dims{2, 1}, {-7, 2147483647});
  check_round_trip<std::int64_t>(r, "int64", tg::DType::Int64, Dims{2},
                                 {std::int64_t{1} << 50, -3});
  check_round_trip<bool>(r, "bool", tg::DType::Bool, Dims{1, 3}, {true, false, true});
  check_round_trip<double>(r, "float64 scalar", tg::DType::Float64, Dims{}, {3.5});
  check_round_trip<double>(r, "float64 empty", tg::DType::Float64, Dims{0, 2}, {});
  check_simd_expressions(r);
  check_gradients(r);
  check_integer_and_bool_ops(r);
  r.expect(has_values(from_other_unit.array<double>(), Dims{2}, std::vector<double>{0.25, -8.0}),
           "a tensor built in another translation unit");
#ifdef XTENSOR_USE_XSIMD
  const int alignment = static_cast<int>(XTENSOR_DEFAULT_ALIGNMENT);
#else
  const int alignment = 0;
#endif
  std::cout << "consumer [" << unit << "]: xt::xarray alignment " << alignment
            << ", tapegrad storage alignment " << TAPEGRAD_STORAGE_ALIGNMENT
            << (std::is_same_v<xt::xarray<double>, tg::storage_array<double>>
                    ? " (same type: moved)"
                    : " (converted)")
            << ": " << (r.failures() == 0 ? "ok" : "FAILED") << '\n';
  return r.failures();
}

}  // namespace
