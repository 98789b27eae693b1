#!/usr/bin/env python3
"""The coefficients of smelt_erf_f32 (templates/common/math.h.in), f32 erf in
f32 arithmetic: a + a R(a^2) below 0.75, d + t Q(t) (t = a - c) on [0.75, 2)
and [2, CUT), CUT the least float whose erf rounds to 1 in f32.

Each polynomial is a discrete minimax fit (a linear program over 3000
Chebyshev-spaced floats of the interval, mpmath's erf at 100 bits as the
reference) of the error in ULP of the f32 result, its coefficients rounded to
f32 one at a time, lowest degree first, the others fitted again after each
(Brisebarre and Chevillard's heuristic, as Sollya's fpminimax).  c is a float
near the point 35 % (40 %) into its interval whose erf is within 1e-4 ulp of
a float d, so that d costs no error.  Printed as C; the fit's own error is in
the comments, the evaluation's (f32 Horner) is what scripts/mathcheck-f32
measures on every argument (0.72 ULP, 2026-11-29).

    /usr/bin/python3 scripts/erf32fit.py     (numpy, scipy, mpmath: Debian's)
"""
import os
import struct
import sys

import mpmath as mp
import numpy as np
from scipy.optimize import linprog

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mathfit import f32hex  # noqa: E402  (one f32 literal writer for both scripts)

mp.mp.prec = 100
S, M, NS, NB = 0.75, 2.0, 6, 11  # small range, split, coefficients of R, of d + t Q(t)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def nextf(x):
    return struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", x))[0] + 1))[0]


def ulp(y):
    return 2.0 ** (np.floor(np.log2(np.abs(y))) - 23)


def minimax(basis, f, w, fixed):
    """min over the free coefficients of max |w (sum_k c_k basis_k - f)|; fixed: {k: value}"""
    n = basis.shape[1]
    free = [k for k in range(n) if k not in fixed]
    r = f - sum(basis[:, k] * v for k, v in fixed.items()) if fixed else f.copy()
    B, rw, m = basis[:, free] * w[:, None], r * w, len(free)
    A = np.vstack([np.hstack([B, -np.ones((len(rw), 1))]), np.hstack([-B, -np.ones((len(rw), 1))])])
    b = np.concatenate([rw, -rw])
    for meth in ("highs-ds", "highs-ipm", "highs"):  # the dual simplex alone sometimes gives up
        res = linprog(np.r_[np.zeros(m), 1.0], A_ub=A, b_ub=b, bounds=[(None, None)] * (m + 1), method=meth)
        if res.x is not None:
            break
    c = dict(fixed)
    for i, k in enumerate(free):
        c[k] = res.x[i]
    return [c[k] for k in range(n)], res.x[-1]


def fpminimax(basis, f, w, scale):
    """coefficients of the variable scaled by scale[k], each rounded to f32 unscaled, in turn"""
    fixed = {}
    for k in range(basis.shape[1]):
        c, e = minimax(basis, f, w, fixed)
        fixed[k] = f32(c[k] / scale[k]) * scale[k]
    c, e = minimax(basis, f, w, fixed)
    return [f32(c[k] / scale[k]) for k in range(len(c))], e


def small():
    n = 3000
    a = np.array([f32(S * (0.5 + 0.5 * np.cos(np.pi * (i + 0.5) / n))) for i in range(n)] + [S, 1e-6])
    ref = np.array([float(mp.erf(v)) for v in a])
    r = np.array([float(mp.erf(v) / v - 1) for v in a])
    z = a * a
    basis = np.stack([(z / (S * S)) ** k for k in range(NS)], 1)
    return fpminimax(basis, r, a / ulp(ref), [(S * S) ** k for k in range(NS)])


def big(lo, hi, fr):
    mid = lo + fr * (hi - lo)
    best = None
    for i in range(-300, 300):
        c = f32(mid + i * 2 ** -20)
        v = mp.erf(c)
        d = f32(v)
        off = abs(v - d) / float(ulp(np.array([d]))[0])
        if best is None or off < best[0]:
            best = (off, c, d)
    off, c, d = best
    h, n = max(hi - c, c - lo), 3000
    xs = np.array([f32(lo + (hi - lo) * (0.5 - 0.5 * np.cos(np.pi * (i + 0.5) / n))) for i in range(n)] + [lo, hi, c])
    t = xs - c
    ref = np.array([float(mp.erf(v) - d) for v in xs])
    w = 1 / ulp(np.array([float(mp.erf(v)) for v in xs]))
    basis = np.stack([(t / h) ** (k + 1) for k in range(NB - 1)], 1)
    q, e = fpminimax(basis, ref, w, [h ** (k + 1) for k in range(NB - 1)])
    return c, d, off, q, e


def main():
    cut = f32(3.9)
    while mp.erfc(cut) > mp.mpf(2) ** -25:
        cut = nextf(cut)
    r, e = small()
    print("/* a < %g: R of degree %d, the fit within %.3f ulp */" % (S, NS - 1, e))
    print("R: " + ", ".join(f32hex(v) + "f" for v in reversed(r)) + "  (highest degree first)")
    for lo, hi, fr in ((S, M, 0.35), (M, cut, 0.4)):
        c, d, off, q, e = big(lo, hi, fr)
        print("/* [%g, %.7g): c %sf, d %sf (erf(c) - d: %.1e ulp), the fit within %.3f ulp */"
              % (lo, hi, f32hex(c), f32hex(d), off, e))
        print("Q: " + ", ".join(f32hex(v) + "f" for v in reversed(q)) + "  (highest degree first), then d")
    print("cut: %sf (erfc(cut) = %s 2^-25)" % (f32hex(cut), mp.nstr(mp.erfc(cut) * 2 ** 25, 8)))


if __name__ == "__main__":  # log32fit.py imports minimax and fpminimax
    main()
