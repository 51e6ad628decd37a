#!/usr/bin/env python3
"""Derives the coefficients of tapegrad's vectorised erfc (src/kernels/simd/erfc_batch.hpp)
and measures the approximation in double arithmetic against mpmath's erfc.

    |x| <  0.5: erfc(x) = 1 - x P(x^2), P the Taylor series of erf(x) / x up to x^22;
    |x| >= 0.5: erfc(|x|) = exp(-x^2) Q(t) / (1 + 2|x|), t = 1 - 2K / (|x| - 0.5 + K), K = 3,
                Q(t) = erfcx(x) (1 + 2x) as a degree-22 polynomial in t: its Chebyshev series
                on t in [-1, 1] (x from 0.5 to infinity), rewritten in powers of t;
    x <= -0.5:  erfc(x) = 2 - erfc(-x).

Needs mpmath (Debian: python3-mpmath). Not part of the build: run it to check or change the
coefficients, then paste its output into erfc_batch.hpp.
"""
import math
import random

import mpmath as mp

mp.mp.dps = 60
K, SPLIT, DEGREE, TAYLOR_TERMS = 3, mp.mpf("0.5"), 22, 12
NODES = 80


def erfcx(x):
    return mp.exp(x * x) * mp.erfc(x)


def tail_function(t):
    x = SPLIT + K * (1 + t) / (1 - t)
    return erfcx(x) * (1 + 2 * x)


def chebyshev_series(f, degree):
    nodes = [mp.cos(mp.pi * (j + mp.mpf(1) / 2) / NODES) for j in range(NODES)]
    values = [f(t) for t in nodes]
    series = [2 * mp.fsum(values[j] * mp.cos(mp.pi * k * (j + mp.mpf(1) / 2) / NODES)
                          for j in range(NODES)) / NODES for k in range(degree + 1)]
    series[0] /= 2
    return series


def in_powers_of_t(series):
    # T_0 = 1, T_1 = t, T_k = 2 t T_(k-1) - T_(k-2), as coefficient lists.
    chebyshev = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for k in range(2, len(series)):
        next_polynomial = [mp.mpf(0)] * (k + 1)
        for i, a in enumerate(chebyshev[-1]):
            next_polynomial[i + 1] += 2 * a
        for i, a in enumerate(chebyshev[-2]):
            next_polynomial[i] -= a
        chebyshev.append(next_polynomial)
    powers = [mp.mpf(0)] * len(series)
    for k, c in enumerate(series):
        for i, a in enumerate(chebyshev[k]):
            powers[i] += c * a
    return [float(c) for c in powers]


def near_zero_series():
    return [float(2 / mp.sqrt(mp.pi) * (-1) ** k / (mp.factorial(k) * (2 * k + 1)))
            for k in range(TAYLOR_TERMS)]


def horner(coefficients, z):
    r = 0.0
    for c in reversed(coefficients):
        r = r * z + c
    return r


def erfc_in_doubles(x, near, tail):
    ax = abs(x)
    if ax < SPLIT:
        return 1 - x * horner(near, x * x)
    t = 1 - 2 * K / (ax - float(SPLIT) + K)
    scaled = 134217729.0 * ax
    high = scaled - (scaled - ax)
    low = ax - high
    p = ax * ax
    e = ((high * high - p) + 2 * high * low) + low * low
    r = math.exp(-p) * (1 - e) * horner(tail, t) / (1 + 2 * ax)
    return 2 - r if x < 0 else r


def main():
    near = near_zero_series()
    tail = in_powers_of_t(chebyshev_series(tail_function, DEGREE))
    random.seed(2)
    worst = 0.0
    for i in range(40000):
        x = [random.uniform(-6, 26.5), random.uniform(-1, 1), random.uniform(0.4, 4)][i % 3]
        exact = float(mp.erfc(x))
        if exact < 2.3e-308:
            continue
        worst = max(worst, abs(erfc_in_doubles(x, near, tail) - exact) / math.ulp(exact))
    print(f"// worst {worst} ulps over 40,000 points (glibc's exp in the tail)")
    print("kErfcNearZero:", ", ".join(repr(c) for c in near))
    print("kErfcTail:", ", ".join(repr(c) for c in tail))


if __name__ == "__main__":
    main()
