// erfc, erf, the exact GELU and GELU's slope over xsimd batches of doubles, for
// kernels/simd/vector_math_loops.hpp. xsimd 8.1's own erfc is unusable here: 3e4 ulps off in
// GELU's tail, 1e14 near erfc's underflow.
//
// The approximation (coefficients from scripts/erfc_coefficients.py, which also measures them):
//   |x| <  0.5: erfc(x) = 1 - x P(x^2), P the Taylor series of erf(x) / x up to x^22;
//   |x| >= 0.5: erfc(|x|) = e^(-x^2) Q(t) / (1 + 2|x|), t = 1 - 2K / (|x| - 0.5 + K), K = 3,
//               where Q(t) = erfcx(x)(1 + 2x), smooth on t in [-1, 1] (x from 0.5 to infinity),
//               is a degree-22 polynomial (its Chebyshev series, in powers of t);
//   x <= -0.5:  erfc(x) = 2 - erfc(-x).
// e^(-x^2) is taken as e^(-p) (1 - e) with x^2 = p + e split exactly (Veltkamp), so that the
// rounding of x^2 (up to 740 for |x| = 27.2) does not become 100s of ulps of e^(-x^2), as
// vector_math.hpp's exp_of_minus_square, which GELU's slope shares. Within 4
// ulps of the correctly rounded erfc in double arithmetic; where the result is below the
// smallest normal double (|x| > 26.55) it is 0, as exp's subnormal results are in
// vector_math.
//
// Branch-free (both approximations for every lane, then a select), and over N batches at once
// so that their independent chains of multiply-adds overlap (every loop unrolled: the batches
// stay in registers).
#pragma once

#include <array>
#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/vector_math.hpp"

namespace tapegrad::detail {
namespace {

// erf(x) / x = sum P_k x^(2k).
constexpr double kErfcNearZero[] = {
    1.1283791670955126,      -0.37612638903183754,   0.11283791670955126,
    -0.026866170645131252,   0.005223977625442188,   -0.0008548327023450853,
    0.00012055332981789664,  -1.492565035840625e-05, 1.6462114365889248e-06,
    -1.6365844691234924e-07, 1.4807192815879218e-08, -1.2290555301717928e-09};

// Q(t) = sum Q_k t^k.
constexpr double kErfcTail[] = {
    1.2423492448711544,     -0.12000786868938904,   -0.024899113240524604,  0.05674654966876823,
    -0.03662799043760799,   0.012587446516850075,   -0.0011965769232149073, -0.000884886069467466,
    0.0002904648460476749,  6.401263391755602e-05,  -4.116718852160905e-05, -7.071173073796379e-06,
    5.783337803215547e-06,  1.2984720674425977e-06, -8.089513023659347e-07, -2.971550553460554e-07,
    9.88411614734026e-08,   6.537971640336364e-08,  -7.047535213532136e-09, -1.1321780442439423e-08,
    -5.269399511694885e-10, 1.092276837911133e-09,  1.6016206432575034e-10};

constexpr double kErfcSplit = 0.5;  // below: the Taylor series; above: the tail
constexpr double kErfcTailK = 3;
// Above this |x|, erfc(|x|) is 0 in doubles (its e^(-x^2) would meet inf - inf in the split).
constexpr double kErfcZeroAbove = 27.5;

template <class B, std::size_t N>
using Batches = std::array<B, N>;

// r[j] = sum c_k z[j]^k (Horner, the N chains interleaved).
template <class B, std::size_t N, std::size_t M>
void polynomial(const double (&c)[M], const Batches<B, N>& z, Batches<B, N>& r) {
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) r[j] = B(c[M - 1]);
#pragma GCC unroll 32
  for (std::size_t step = 1; step < M; ++step) {
#pragma GCC unroll 32
    for (std::size_t j = 0; j < N; ++j) r[j] = xsimd::fma(r[j], z[j], B(c[M - 1 - step]));
  }
}

// out = erfc(x); `gaussian`, when given, = e^(-x^2) (the split product above, 0 beyond
// kErfcZeroAbove).
template <class B, std::size_t N>
void erfc_batches(const Batches<B, N>& x, Batches<B, N>& out, Batches<B, N>* gaussian = nullptr) {
  Batches<B, N> ax, squares, near_zero, t, tail, scale;
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) {
    ax[j] = xsimd::abs(x[j]);
    squares[j] = x[j] * x[j];
    // One division for t's 1 / (ax - 0.5 + K) and the tail's 1 / (1 + 2 ax): a division costs
    // as much as ten multiply-adds.
    const B shifted = ax[j] + B(kErfcTailK - kErfcSplit);
    const B doubled = B(1.0) + B(2.0) * ax[j];
    const B reciprocal = B(1.0) / (shifted * doubled);
    t[j] = B(1.0) - B(2 * kErfcTailK) * (doubled * reciprocal);
    scale[j] = shifted * reciprocal;
  }
  polynomial(kErfcNearZero, squares, near_zero);
  polynomial(kErfcTail, t, tail);
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) {
    const B scaled = B(134217729.0) * ax[j];  // 2^27 + 1: Veltkamp's split of ax
    const B high = scaled - (scaled - ax[j]);
    const B low = ax[j] - high;
    const B p = squares[j];
    const B e = ((high * high - p) + B(2.0) * high * low) + low * low;  // ax^2 - p, exactly
    const auto beyond = ax[j] > B(kErfcZeroAbove);
    const B exponential = xsimd::select(beyond, B(0.0), xsimd::exp(-p) * (B(1.0) - e));
    if (gaussian != nullptr) (*gaussian)[j] = exponential;
    B upper = xsimd::select(beyond, B(0.0), exponential * tail[j] * scale[j]);
    upper = xsimd::select(x[j] < B(0.0), B(2.0) - upper, upper);
    out[j] = xsimd::select(ax[j] < B(kErfcSplit), B(1.0) - x[j] * near_zero[j], upper);
  }
}

// erf(x): x P(x^2) below |x| = 0.5 (no cancellation near 0), 1 - erfc(x) above (|erf| > 0.52).
template <class B, std::size_t N>
void erf_batches(const Batches<B, N>& x, Batches<B, N>& out) {
  Batches<B, N> squares, near_zero;
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) squares[j] = x[j] * x[j];
  polynomial(kErfcNearZero, squares, near_zero);
  erfc_batches(x, out);
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) {
    out[j] = xsimd::select(xsimd::abs(x[j]) < B(kErfcSplit), x[j] * near_zero[j], B(1.0) - out[j]);
  }
}

// GELU(x) = 0.5 x erfc(-x / sqrt 2), the order of scalar_function<Gelu>'s operations.
template <class B, std::size_t N>
void gelu_batches(const Batches<B, N>& x, Batches<B, N>& out) {
  Batches<B, N> u;
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) u[j] = -x[j] * B(kSqrtHalf);
  erfc_batches(u, out);
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) out[j] = B(0.5) * x[j] * out[j];
}

// GELU'(x) = 0.5 erfc(u) + x e^(-u^2) / sqrt(2 pi), u = -x / sqrt 2, as
// scalar_function<GeluSlope> (e^(-u^2) is erfc's own).
template <class B, std::size_t N>
void gelu_slope_batches(const Batches<B, N>& x, Batches<B, N>& out) {
  Batches<B, N> u;
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) u[j] = -x[j] * B(kSqrtHalf);
  Batches<B, N> gaussian;  // e^(-u^2) = e^(-x^2 / 2)
  erfc_batches(u, out, &gaussian);
#pragma GCC unroll 32
  for (std::size_t j = 0; j < N; ++j) {
    out[j] = B(0.5) * out[j] + x[j] * B(kInvSqrt2Pi) * gaussian[j];
  }
}

}  // namespace
}  // namespace tapegrad::detail
