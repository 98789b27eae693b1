#!/usr/bin/env python3
"""numba (@njit(parallel=True), prange) on smelt's elementwise and row workloads.

Run by `smelt-bench --peers` with Debian's python3 (python3-numba).  Each
workload is one loop nest over the same inputs as bench/peers/peers.py's,
written as a numba user writes it (float32 constants, so float32 stays
float32; numba's defaults: no fastmath, so a row's sum is not reordered).
Prints one JSON object: numba_ms (the ordinary call: a new output array, then
the kernel), numba_out_ms (the output given), numba_first_call_ms (the first
call: numba compiles the kernel then), numba_version, numba_threads (--threads:
numba.set_num_threads).  Workloads without a loop nest here (the matrix
products) print no times.
"""
import json
import math
import sys
import time

import numpy as np

from peers import B1, B2, C1, C2, EPS, LR, inputs, timeit

f32 = np.float32
H, ONE, ZERO, K, C, S2 = f32(0.5), f32(1), f32(0), f32(0.7978845608028654), f32(0.044715), f32(0.7071067811865476)
FB1, FNB1, FB2, FNB2, FLR, FC1, FC2, FEPS = (f32(B1), f32(1 - B1), f32(B2), f32(1 - B2), f32(LR), f32(C1), f32(C2),
                                             f32(EPS))
LN_EPS, RMS_EPS = f32(1e-5), f32(1e-6)


def kernels():
    from numba import njit, prange

    par = njit(parallel=True)

    @par
    def add(a, b, o):
        for i in prange(a.size):
            o[i] = a[i] + b[i]

    @par
    def chain8(a, b, c, o):
        for i in prange(a.size):
            o[i] = ((((a[i] * b[i] + c[i]) * a[i] - b[i]) * c[i] + a[i]) * b[i] - c[i])

    @par
    def gelu_tanh(x, o):
        for i in prange(x.size):
            v = x[i]
            o[i] = H * v * (ONE + math.tanh(K * (v + C * (v * v * v))))

    @par
    def gelu(x, o):
        for i in prange(x.size):
            o[i] = H * x[i] * (ONE + math.erf(x[i] * S2))

    @par
    def swish(x, o):
        for i in prange(x.size):
            o[i] = x[i] / (ONE + math.exp(-x[i]))

    @par
    def where_exp(a, b, c, o):
        for i in prange(a.size):
            o[i] = (a[i] * b[i] if a[i] > ZERO else math.exp(c[i])) + ONE

    @par
    def adam(p, g, m, v, p2, m2, v2):
        for i in prange(p.size):
            mm = FB1 * m[i] + FNB1 * g[i]
            vv = FB2 * v[i] + FNB2 * (g[i] * g[i])
            m2[i] = mm
            v2[i] = vv
            p2[i] = p[i] - FLR * ((mm / FC1) / (math.sqrt(vv / FC2) + FEPS))

    @par
    def bias_relu(m, r, o):
        for i in prange(m.shape[0]):
            for j in range(m.shape[1]):
                o[i, j] = max(m[i, j] + r[0, j], ZERO)

    @par
    def layer(x, w, b, o):
        for i in prange(x.shape[0]):
            for j in range(x.shape[1]):
                v = x[i, j]
                o[i, j] = max(v * w[0, j] + b[0, j], ZERO) * H + v * H

    @par
    def copy(x, o):
        for i in prange(x.shape[0]):
            for j in range(x.shape[1]):
                o[i, j] = x[i, j]

    @par
    def softmax(x, o):
        for i in prange(x.shape[0]):
            m = x[i, 0]
            for j in range(x.shape[1]):
                m = max(m, x[i, j])
            s = ZERO
            for j in range(x.shape[1]):
                e = math.exp(x[i, j] - m)
                o[i, j] = e
                s += e
            for j in range(x.shape[1]):
                o[i, j] = o[i, j] / s

    @par
    def layernorm(x, w, b, o):
        n = f32(x.shape[1])
        for i in prange(x.shape[0]):
            s = ZERO
            for j in range(x.shape[1]):
                s += x[i, j]
            mu = s / n
            q = ZERO
            for j in range(x.shape[1]):
                d = x[i, j] - mu
                q += d * d
            r = math.sqrt(q / n + LN_EPS)
            for j in range(x.shape[1]):
                o[i, j] = (x[i, j] - mu) / r * w[0, j] + b[0, j]

    @par
    def log_softmax(x, o):
        for i in prange(x.shape[0]):
            m = x[i, 0]
            for j in range(x.shape[1]):
                m = max(m, x[i, j])
            s = ZERO
            for j in range(x.shape[1]):
                s += math.exp(x[i, j] - m)
            ls = math.log(s)
            for j in range(x.shape[1]):
                o[i, j] = x[i, j] - m - ls

    @par
    def rmsnorm(x, w, o):
        n = f32(x.shape[1])
        for i in prange(x.shape[0]):
            q = ZERO
            for j in range(x.shape[1]):
                q += x[i, j] * x[i, j]
            r = math.sqrt(q / n + RMS_EPS)
            for j in range(x.shape[1]):
                o[i, j] = x[i, j] / r * w[j]

    @par
    def sum_rows(x, o):
        for i in prange(x.shape[0]):
            s = ZERO
            for j in range(x.shape[1]):
                s += x[i, j]
            o[i] = s

    @par
    def sum_cols(x, o):  # column blocks in parallel, the rows in order within each
        nb = (x.shape[1] + 255) // 256
        for blk in prange(nb):
            lo, hi = blk * 256, min(blk * 256 + 256, x.shape[1])
            for j in range(lo, hi):
                o[j] = ZERO
            for i in range(x.shape[0]):
                for j in range(lo, hi):
                    o[j] += x[i, j]

    @par
    def mse(a, b, o):
        s = f32(0)
        for i in prange(a.size):
            d = a[i] - b[i]
            s += d * d
        o[0] = s / f32(a.size)

    @par
    def xent(x, t, o):
        tot = f32(0)
        for i in prange(x.shape[0]):
            m = x[i, 0]
            for j in range(x.shape[1]):
                m = max(m, x[i, j])
            s = ZERO
            for j in range(x.shape[1]):
                s += math.exp(x[i, j] - m)
            tot += math.log(s) + m - x[i, t[i, 0]]
        o[0] = tot / f32(x.shape[0])

    @par
    def transpose_add(a, b, o):
        for i in prange(b.shape[0]):
            for j in range(b.shape[1]):
                o[i, j] = a[j, i] + b[i, j]

    @par
    def concat_relu(a, b, c, d, o):
        q = a.shape[1]
        for i in prange(a.shape[0]):
            for j in range(q):
                o[i, j] = max(a[i, j], ZERO)
                o[i, q + j] = max(b[i, j], ZERO)
                o[i, 2 * q + j] = max(c[i, j], ZERO)
                o[i, 3 * q + j] = max(d[i, j], ZERO)

    return locals()


def plan(k, name, args):
    """(outputs maker, run(*args, outs)) for a workload, or None"""
    E = lambda shape: np.empty(shape, np.float32)
    if name == "adam":
        return (lambda *a: [E(a[0].shape) for _ in range(3)]), (lambda p, g, m, v, B: k["adam"](p, g, m, v, *B))
    if name == "layers100":
        def layers(x, w, b, B):
            y, t = B
            cur = x
            for _ in range(100):
                k["layer"](cur, w, b, y)
                k["copy"](y, t)  # the barrier (a copy), as in smelt's workload
                cur = t
        return (lambda x, w, b: [E(x.shape), E(x.shape)]), layers
    if name in ("mse", "xent"):
        return (lambda *a: [E((1,))]), (lambda *a: k[name](*a[:-1], a[-1][0]))
    if name not in k or name in ("layer", "copy"):
        return None
    shape = {"sum_rows": lambda a: a[0].shape[:1], "sum_cols": lambda a: a[0].shape[1:],
             "transpose_add": lambda a: a[1].shape,
             "concat_relu": lambda a: (a[0].shape[0], 4 * a[0].shape[1])}.get(name, lambda a: a[0].shape)
    return (lambda *a: [E(shape(a))]), (lambda *a: k[name](*a[:-1], a[-1][0]))


def main():
    from peers import parse_args
    ap, a = parse_args(__doc__.splitlines()[0])
    out = {"workload": a.workload, "n": a.n}
    try:
        import numba
    except ImportError as e:
        out["numba_note"] = "no numba (%s): apt-get install python3-numba" % e
        print(json.dumps(out))
        return 0
    if a.threads:
        numba.set_num_threads(min(a.threads, numba.config.NUMBA_NUM_THREADS))
    out.update(numba_version=numba.__version__, numba_threads=numba.get_num_threads())
    p = plan(kernels(), a.workload, None)
    if p is None:
        print(json.dumps(out))
        return 0
    make, run = p
    args = inputs(a.workload, a.n, np.random.default_rng(1))
    bufs = make(*args)
    t0 = time.perf_counter()
    run(*args, bufs)  # numba compiles here
    out["numba_first_call_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    del bufs

    def ordinary(*x):  # a new output each call, as a user's function returns one
        b = make(*x)
        run(*x, b)
        return b

    out["numba_ms"] = round(timeit(ordinary, args, a.runs), 3)
    bufs = make(*args)
    out["numba_out_ms"] = round(timeit(lambda *x: run(*x, bufs), args, a.runs), 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
