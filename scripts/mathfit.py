#!/usr/bin/env python3
"""Where the constants of templates/common/math.h.in come from.

Prints the coefficient tables and split constants of smelt's math library,
computed with mpmath at 200+ bits: Taylor series (exp, log, sin, cos, asin,
atan, erf), Chebyshev interpolants (erfc's scaled tails; the polynomials of the
f32 functions computed in double; the f32 polynomials of exp and tanh, their coefficients rounded to f32), constants split into a high part with trailing zero
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


def f32(x):
    """x rounded to the nearest f32 (through double: exact for these values' purposes)."""
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def f32s(coef):
    return ", ".join("%sf" % f32hex(c) for c in coef)


def f32hex(x):
    """An f32 as C's hexadecimal literal with its 6 significant hex digits."""
    if not x:
        return "0x0p+0"
    m, e = mp.frexp(mp.mpf(x))
    m, e = float(m) * 2, int(e) - 1
    return "%s0x1.%06xp%+d" % ("-" if m < 0 else "", int(round((abs(m) - 1) * 2 ** 24)), e)


def chebfit_f32(f, a, b, n, weight):
    """Chebyshev interpolant of degree n - 1 on [a, b] in the variable itself, its coefficients rounded
    to f32; the largest |(p - f) weight| on 401 points."""
    coef = [f32(c) for c in reversed(mp.chebyfit(f, [a, b], n))]
    err = 0
    for i in range(401):
        t = mp.mpf(a) + (mp.mpf(b) - a) * i / 400
        p = mp.mpf(0)
        for c in reversed(coef):
            p = p * t + mp.mpf(c)
        err = max(err, abs((p - f(t)) * weight(t)))
    return coef, float(err)


def chebfit_d(f, a, b, n, weight):
    """Chebyshev interpolant of degree n - 1 on [a, b] in the variable itself (Horner's form), double
    coefficients; the largest |(p - f) weight| on 1601 points."""
    coef = [float(c) for c in reversed(mp.chebyfit(f, [a, b], n))]
    err = 0
    for i in range(1601):
        t = mp.mpf(a) + (mp.mpf(b) - a) * i / 1600
        p = mp.mpf(0)
        for c in reversed(coef):
            p = p * t + mp.mpf(c)
        err = max(err, abs((p - f(t)) * weight(t)))
    return coef, float(err)


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

    print("/* the f32 functions computed in double: one polynomial per range */")
    # (f32 erf is in f32 arithmetic: scripts/erf32fit.py)
    cz = f32(0.35)  # erfc(z) = T Q(T) e^(-z^2), T = 1 / (1 + cz z), 0 <= z <= 10.2
    zq = lambda t: (1 / t - 1) / cz
    g2 = lambda t: mp.erfc(zq(t)) * mp.exp(zq(t) ** 2) / t
    coef, w = chebfit_d(g2, 1 / (1 + cz * mp.mpf(10.2)), 1.0, 12, lambda t: 1 / g2(t))
    print("/* erfc(z) e^(z^2) / T in T = 1 / (1 + C z), 0 <= z <= 10.2: rel. error %.1e */" % w)
    print("SMELT__ERFC32_C %sf SMELT__GELU32_C %s SMELT__GELU32_CF %sf" % (f32hex(cz), h(cz / mp.sqrt(2)),
                                                                       f32hex(f32(cz / mp.sqrt(2)))))
    print(tab("smelt__erfc32_q", coef))
    ln2h = mp.log(2) / 2 * mp.mpf(1.0001)
    coef, w = chebfit_d(mp.exp, -ln2h, ln2h, 8, lambda r: 1 / mp.exp(r))
    print("/* e^r, |r| <= ln 2 / 2 (erf, erfc, gelu): rel. error %.1e */" % w)
    print(tab("smelt__exp32_e", coef))
    g3 = lambda z: 2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) if z != 0 else mp.mpf(2)
    c, coef, lo0, w = chebfit(g3, 0.0, 1.0 / 9, 8)
    print("/* softplus: log1p(t) / s = 2 atanh(s) / s in s^2 - %s, s <= 1/3: rel. error %.1e */" % (h(c), w))
    print(tab("smelt__log1p32_p", coef))
    corr = lambda f, lim: (lambda z: (f(mp.sqrt(z)) / mp.sqrt(z) - 1) / z if z != 0 else lim)
    t8 = mp.tan(mp.pi / 8)
    c, coef, lo0, w = chebfit(corr(mp.atan, -mp.mpf(1) / 3), 0.0, float(t8 ** 2) * 1.0001, 9)
    print("/* atan: (atan(u) / u - 1) / z in z - %s, z = u^2 <= tan(pi/8)^2: rel. error %.1e */" % (h(c), w))
    print(tab("smelt__atan32_p", coef))
    for name, f, lim, n in (("asin", mp.asin, mp.mpf(1) / 6, 10), ("sinh", mp.sinh, mp.mpf(1) / 6, 5),
                            ("asinh", mp.asinh, -mp.mpf(1) / 6, 9)):
        c, coef, lo0, w = chebfit(corr(f, lim), 0.0, 0.25, n)
        print("/* %s: (%s(a) / a - 1) / z in z - %s, z = a^2 <= 1/4: rel. error %.1e */" % (name, name, h(c), w))
        print(tab("smelt__%s32_p" % name, coef))
    c, coef, lo0, w = chebfit(corr(mp.sin, -mp.mpf(1) / 6), 0.0, float((mp.pi / 2 * mp.mpf(1.0001)) ** 2), 5)
    print("/* sin: (sin(r) / r - 1) / z in z - %s, z = r^2, |r| <= pi/2: rel. error %.1e */" % (h(c), w))
    print(tab("smelt__sin32_p", coef))
    zmax = ((mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)) ** 2
    gl = lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z if z != 0 else mp.mpf(2) / 3
    c, coef, lo0, w = chebfit(gl, 0.0, float(zmax) * 1.0001, 6)
    print("/* log: (log m - 2s) / (s z) in z - %s, z = s^2 <= %.4f: rel. error %.1e */" % (h(c), float(zmax), w))
    print(tab("smelt__log32_p", coef))
    # atanh(a) = k ln2 / 2 + atanh(s), |s| <= that bound (k from an f32 estimate of the quotient: a
    # little beyond), atanh(s) = s + s z P(z), P in z itself
    coef, w = chebfit_d(corr(mp.atanh, mp.mpf(1) / 3), 0.0, float(zmax) * 1.0001, 5, lambda z: z)
    print("/* atanh: (atanh(s) / s - 1) / z, z = s^2 <= %.4f: z P within %.1e */" % (float(zmax), w))
    print(tab("smelt__atanh32_p", coef))
    q2 = lambda r: (mp.mpf(2) ** r - 1) / r if r != 0 else mp.log(2)
    coef, w = chebfit_d(q2, -0.5, 0.5, 9, lambda r: abs(r) / mp.mpf(2) ** r)
    print("/* pow: 2^r = 1 + r Q(r), |r| <= 1/2: rel. error %.1e */" % w)
    print(tab("smelt__exp2_32q", coef))

    print("/* f32 (computed in f32): polynomials with f32 coefficients, Chebyshev interpolants rounded */")
    q = lambda r: (mp.expm1(r) - r) / r ** 2 if r != 0 else mp.mpf(1) / 2
    for deg, a in ((5, 0.347), (4, 0.3467)):  # smelt__expf_hl; tanh's e^r
        coef, err = chebfit_f32(q, -a, a, deg + 1, lambda r: r * r)
        print("/* (e^r - 1 - r) / r^2, degree %d on [-%g, %g]: r^2 Q within %.1e */ %s" % (deg, a, a, err, f32s(coef)))
    t = mp.mpf(0.55)
    p = lambda z: (mp.tanh(mp.sqrt(z)) / mp.sqrt(z) - 1) / z if z != 0 else -mp.mpf(1) / 3
    coef, err = chebfit_f32(p, 0, t * t, 5, lambda z: z)
    print("/* tanh: (tanh(x) / x - 1) / z, z = x^2 < 0.55^2, degree 4: x z P within %.1e x */ %s" % (err, f32s(coef)))
    l1 = f32(mp.log(2))
    print("/* f32: ln 2 = %sf + %sf, 1 / ln 2 = %sf */" % (f32hex(l1), f32hex(f32(mp.log(2) - l1)),
                                                         f32hex(f32(1 / mp.log(2)))))
    c1 = 2 * mp.sqrt(2 / mp.pi)
    for name, v in (("-2 sqrt(2/pi)", -c1), ("-2 sqrt(2/pi) 0.044715", -c1 * mp.mpf(0.044715))):
        hi = f32(v)
        print("/* f32: %s = %sf + %sf */" % (name, f32hex(hi), f32hex(f32(v - hi))))

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
    pieces = [mp.mpf(int(mp.floor(2 / mp.pi * mp.mpf(2) ** (28 * (i + 1)))) % (1 << 28)) * mp.mpf(2) ** (-28 * (i + 1))
              for i in range(7)]
    print(tab("smelt__twoopi28", pieces) + "  /* 2/pi in 28-bit pieces, f32 sin/cos/tan */")
    x, words = mp.mpf(2) / mp.pi, []
    for _ in range(44):
        x *= 2 ** 32
        w = int(mp.floor(x))
        words.append(w)
        x -= w
    print("smelt__twoopi: " + ", ".join("0x%08x" % w for w in words))


if __name__ == "__main__":
    main()
