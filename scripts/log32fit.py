#!/usr/bin/env python3
"""The coefficients of smelt_log_f32, smelt_log2_f32, smelt_log10_f32 and
smelt_log1p_f32 (templates/common/math.h.in), f32 logarithms in f32
arithmetic.  x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)) (the bits'
split, f exact), and

    log(1 + f)   = f + f^2 Q(f)
    log2(1 + f)  = f / ln 2 - f^2 / (2 ln 2) + f^3 R2(f)
    log10(1 + f) = f / ln 10 + f^2 Q10(f)

each Q (R2) a polynomial with f32 coefficients: a discrete minimax fit of the
error in ULP of the f32 result where k = 0 (the hardest case: there the
result is as small as f allows), by scripts/erf32fit.py's linear program
with its coefficients rounded to f32 one at a time (as Sollya's
fpminimax), over 3000 Chebyshev-spaced floats of the interval and mpmath's
logarithms at 100 bits.  Also prints the split constants: ln 2, log10 2
(with trailing zeros, k times them exact for |k| <= 255) and 1/ln 2, 1/ln 10
as hi + lo.  The fit's own error is in the output; the evaluation's (f32
Horner) is what scripts/mathcheck-f32 measures on every argument.

    /usr/bin/python3 scripts/log32fit.py     (numpy, scipy, mpmath: Debian's)
"""
import os
import struct
import sys

import mpmath as mp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from erf32fit import fpminimax, ulp  # noqa: E402  (the same linear program as erf's)
from mathfit import f32, f32hex  # noqa: E402

mp.mp.prec = 100
# 1 + f spans [sqrt(1/2), sqrt(2)) from the bits (0x3f3504f3); log1p's f = x
# where 1 + x rounds into it: a little beyond each end
LO, HI = -0.29289323, 0.41421360
DEG = int(sys.argv[1]) if len(sys.argv) > 1 else 8  # degree of Q (of R2: DEG - 1)

#   /usr/bin/python3 scripts/log32fit.py 8 log log10; /usr/bin/python3 scripts/log32fit.py 9 log2


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def split16(v):
    """v as hi + lo, hi with 16 significant bits (k hi exact for |k| < 256: 24 bits), lo an f32"""
    hi = struct.unpack("<f", struct.pack("<I", bits(f32(v)) & ~0xff))[0]
    return hi, f32(v - mp.mpf(hi))


def fit(name, logf, c, c2=None):
    """Q with f^2 Q(f) ~ logf(f) - c f; with c2 (a float pair), R with f^3 R(f) ~ logf(f) - c f - c2 f^2"""
    n = 3000
    fs = [f32(LO + (HI - LO) * (0.5 - 0.5 * np.cos(np.pi * (i + 0.5) / n))) for i in range(n)]
    fs = np.array(sorted(set(fs + [f32(LO), f32(HI), 2.0 ** -10, -(2.0 ** -10), 2.0 ** -5, -(2.0 ** -5)]) - {0.0}))
    ref = np.array([float(logf(mp.mpf(v))) for v in fs])
    lead = (lambda v: mp.mpf(v) * c) if c2 is None else (lambda v: mp.mpf(v) * c + mp.mpf(v) ** 2 * (mp.mpf(c2[0]) + c2[1]))
    rest = np.array([float(logf(mp.mpf(v)) - lead(v)) for v in fs])  # f^2 Q(f) or f^3 R(f)
    w = 1 / ulp(ref)
    s = max(-LO, HI)
    deg, p0 = (DEG, 2) if c2 is None else (DEG - 1, 3)
    basis = np.stack([fs ** p0 * (fs / s) ** j for j in range(deg + 1)], 1)
    q, e = fpminimax(basis, rest, w, [s ** j for j in range(deg + 1)])
    print("/* %s: %s of degree %d, the fit within %.4f ulp (k = 0) */" % (name, "Q" if c2 is None else "R", deg, e))
    print(("Q" if c2 is None else "R") + ": " + ", ".join(f32hex(v) + "f" for v in reversed(q)) + "  (highest degree first)")
    return q, e


def main():
    ln2, ln10 = mp.log(2), mp.log(10)
    for name, v in (("ln 2", ln2), ("log10 2", mp.log10(2))):
        hi, lo = split16(v)
        print("%s: %sf + %sf" % (name, f32hex(hi), f32hex(lo)))
    for name, v in (("1/ln 2", 1 / ln2), ("1/ln 10", 1 / ln10)):
        hi = f32(v)
        print("%s: %sf + %sf" % (name, f32hex(hi), f32hex(v - mp.mpf(hi))))
    which = sys.argv[2:] or ["log", "log2", "log10"]
    if "log" in which:
        fit("log", mp.log1p, mp.mpf(1))
    if "log2" in which:  # f^2 / (2 ln 2) as f^2 C2H + f^2 C2L, then f^3 R2(f)
        c2 = -1 / (2 * ln2)
        c2h = f32(c2)
        c2l = f32(c2 - mp.mpf(c2h))
        print("-1/(2 ln 2): %sf + %sf" % (f32hex(c2h), f32hex(c2l)))
        fit("log2", lambda t: mp.log1p(t) / ln2, 1 / ln2, (c2h, c2l))
    if "log10" in which:
        fit("log10", lambda t: mp.log1p(t) / ln10, 1 / ln10)


if __name__ == "__main__":
    main()
