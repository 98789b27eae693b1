#!/usr/bin/env python3
"""Where the constants of templates/common/math.h.in come from.

Prints the coefficient tables and split constants of smelt's math library,
computed with mpmath at 200+ bits: Taylor series (exp, log, sin, cos, asin,
atan, erf), Chebyshev interpolants (erfc's scaled tails, the f32 exponential
and expm1 polynomials), constants split into a high part with trailing zero
bits and a low part (ln 2, 1/ln 2, 1/ln 10, log10 2, pi/2, atan breakpoints),
and the bits of 2/pi for the huge-argument reduction.  Chebyshev
coefficients can differ from the file's in the last bit (the interpolation's
own rounding at this precision); tests/test-math.c and scripts/mathcheck
judge a table by the accuracy it gives.

    /usr/bin/python3 -m venv build/mathfit && build/mathfit/bin/pip install mpmath
    build/mathfit/bin/python scripts/mathfit.py
"""
import struct
from math import factorial

import mpmath as mp

mp.mp.prec = 200  # (the tables were computed at this precision; 2/pi's bits below use more)


def h(x):
    return float(x).hex()


def tab(name, vals):
    return "SMELT_MTAB double %s[%d] = {%s};" % (name, len(vals), ", ".join(h(v) for v in vals))


def split(v, keep_bits):
    """v as hi + lo, hi with keep_bits significant bits (exact products with small integers)."""
    hi = float(v)
    b = struct.unpack("<Q", struct.pack("<d", hi))[0] & ~((1 << (53 - keep_bits)) - 1)
    hi = struct.unpack("<d", struct.pack("<Q", b))[0]
    return hi, float(v - mp.mpf(hi))


def chebfit(f, a, b, n):
    """Chebyshev interpolant of degree n - 1 on [a, b] as coefficients in (x - c), c the midpoint;
    the constant term also as hi + lo; the relative error of the double coefficients."""
    c = (mp.mpf(a) + b) / 2
    poly = list(reversed(mp.chebyfit(lambda t: f(t + c), [a - c, b - c], n)))
    coef = [float(p) for p in poly]
    lo0 = float(poly[0] - mp.mpf(coef[0]))
    worst = max(abs((mp.mpf(lo0) + sum(mp.mpf(coef[k]) * (t - c) ** k for k in range(n)) - f(t)) / f(t))
                for t in (mp.mpf(a) + (mp.mpf(b) - a) * i / 400 for i in range(401)))
    return float(c), coef, lo0, float(worst)


def main():
    print("/* series */")
    print(tab("smelt__expm1_q", [mp.mpf(1) / factorial(n + 2) for n in range(14)]))
    print(tab("smelt__log_r", [mp.mpf(2) / (2 * n + 1) for n in range(1, 14)]))
    print(tab("smelt__sin_s", [mp.mpf((-1) ** k) / factorial(2 * k + 1) for k in range(2, 10)]))
    print(tab("smelt__cos_c", [mp.mpf((-1) ** (k + 1)) / factorial(2 * k + 2) for k in range(1, 10)]))
    print(tab("smelt__asin_c", [mp.mpf(factorial(2 * n)) / (4 ** n * factorial(n) ** 2 * (2 * n + 1))
                                for n in range(1, 27)]))
    print(tab("smelt__atan_a", [mp.mpf((-1) ** (k + 1)) / (2 * k + 1) for k in range(1, 25)]))
    efx = 2 / mp.sqrt(mp.pi) - 1
    print(tab("smelt__erf_b", [efx] + [2 / mp.sqrt(mp.pi) * mp.mpf((-1) ** n) / (factorial(n) * (2 * n + 1))
                                       for n in range(1, 20)]))
    print("/* erf_y's constant term, low part: %s */" % h(efx - mp.mpf(float(efx))))

    print("/* erfc(x) e^(x^2), piecewise */")
    g = lambda x: mp.erfc(x) * mp.exp(x * x)
    for i, (a, b) in enumerate([(0.84375, 1.6), (1.6, 2.6), (2.6, 4.0), (4.0, 6.5)]):
        c, coef, lo0, w = chebfit(g, a, b, 22)
        print("/* [%g, %g]: rel. error %.1e */ SMELT__ERFCX%d_C %s SMELT__ERFCX%d_L %s" % (a, b, w, i, h(c), i, h(lo0)))
        print(tab("smelt__erfcx%d" % i, coef))
    hu = lambda u: mp.erfc(1 / mp.sqrt(u)) * mp.exp(1 / u) / mp.sqrt(u)
    c, coef, lo0, w = chebfit(hu, 1 / 28.0 ** 2, 1 / 6.5 ** 2, 11)
    print("/* x >= 6.5, in u = 1/x^2: rel. error %.1e */ SMELT__ERFCXU_C %s SMELT__ERFCXU_L %s" % (w, h(c), h(lo0)))
    print(tab("smelt__erfcxu", coef))

    print("/* f32: e^r and (e^r - 1 - r) / r^2 on [-0.3466, 0.3466] */")
    c, coef, _, w = chebfit(mp.exp, -0.3466, 0.3466, 7)
    print("/* exp, degree 6, rel. error %.1e: */ %s" % (w, ", ".join(h(x) for x in coef)))
    q = lambda r: (mp.expm1(r) - r) / r ** 2 if r != 0 else mp.mpf(1) / 2
    c, coef, _, w = chebfit(q, -0.3466, 0.3466, 7)
    print("/* expm1's q, degree 6, rel. error %.1e: */ %s" % (w, ", ".join(h(x) for x in coef)))

    print("/* split constants: hi (21 significant bits) + lo */")
    for name, v in [("IVLN2", 1 / mp.log(2)), ("IVLN10", 1 / mp.log(10)), ("LG102", mp.log10(2))]:
        hi, lo = split(v, 21)
        print("SMELT__%sHI %s SMELT__%sLO %s" % (name, h(hi), name, h(lo)))
    p1, r1 = split(mp.pi / 2, 33)
    p2, _ = split(mp.pi / 2 - mp.mpf(p1), 33)
    print("pi/2 in parts of 33, 33, 53 bits: %s %s %s" % (h(p1), h(p2), h(mp.pi / 2 - mp.mpf(p1) - mp.mpf(p2))))
    for t in (0.5, 1.0, 1.5):
        a = mp.atan(t)
        print("atan(%g) = %s + %s" % (t, h(a), h(a - mp.mpf(float(a)))))
    for name, v in [("-2 sqrt(2/pi)", -2 * mp.sqrt(2 / mp.pi)), ("sqrt(1/2)", 1 / mp.sqrt(2)),
                    ("ln 2", mp.log(2)), ("pi/2", mp.pi / 2)]:
        print("%s = %s + %s" % (name, h(v), h(v - mp.mpf(float(v)))))
    mp.mp.prec = 1700
    x, words = mp.mpf(2) / mp.pi, []
    for _ in range(44):
        x *= 2 ** 32
        w = int(mp.floor(x))
        words.append(w)
        x -= w
    print("smelt__twoopi: " + ", ".join("0x%08x" % w for w in words))


if __name__ == "__main__":
    main()
