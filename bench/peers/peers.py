#!/usr/bin/env python3
"""numpy and numexpr on smelt's benchmark workloads (same n, same formulas).

inputs() is shared with the other peers' scripts.

Prints one JSON object: {"workload", "n", "numpy_ms", "numpy_out_ms",
"numexpr_ms", "numexpr_out_ms", versions, threads}, medians of --runs runs
after warm-up.  KEY_ms is the ordinary call (each allocates its result),
KEY_out_ms the same work written into arrays allocated once before the
timing (NumPy's out= over out_formulas.py; numexpr's evaluate(out=)).  Uses
Debian's python3-numpy and python3-numexpr; numexpr runs with --threads
threads, NumPy's ufuncs on one (its matrix products: OpenBLAS on --threads).
"""
import argparse
import os
import json
import sys

if __name__ == "__main__" and "--threads" in sys.argv:  # OpenBLAS reads it when NumPy loads it
    _t = sys.argv[sys.argv.index("--threads") + 1]
    if _t.isdigit() and int(_t) > 0:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", _t)
import math
import statistics
import time

import numpy as np


def side(n):
    c = int(math.isqrt(n))
    while n % c:
        c -= 1
    return c


def row_side(n):
    """the reductions' rows: smelt-bench's --cols (SMELT_BENCH_COLS) where it divides n, else
    the largest divisor of n up to 4096 (bench.c's row_side)"""
    cols = int(os.environ.get("SMELT_BENCH_COLS") or 0)
    if cols and n % cols == 0:
        return cols
    c = min(side(n), 4096)
    while n % c:
        c -= 1
    return c


def inputs(name, n, rng):
    f = lambda *s: (rng.random(s, dtype=np.float32) * 2 - 1)
    if name in ("add", "mse"):
        return [f(n), f(n)]
    if name in ("chain8", "where_exp"):
        return [f(n), f(n), f(n)]
    if name in ("gelu_tanh", "gelu", "swish"):
        return [f(n)]
    if name == "adam":
        return [f(n), f(n), f(n), rng.random(n, dtype=np.float32) + np.float32(0.01)]
    if name == "conv_bn_relu":  # x, w, the batch-norm's scale, shift, mean and variance (fixed shapes)
        return [f(8, 64, 56, 56), f(64, 64, 3, 3), f(64), f(64), f(64), rng.random(64, dtype=np.float32) + np.float32(0.01)]
    if name == "conv1d_gelu":  # x [16, 512, 256] (NCW), w [256, 256, 5] (2 groups), b [256]
        return [f(16, 512, 256), f(256, 256, 5), f(256)]
    if name == "embed_ln":  # W [30522, 384], i64 ids [n / 49152, 128], P [128, 384]
        return [f(30522, 384), rng.integers(0, 30522, (max(n // (128 * 384), 1), 128), dtype=np.int64), f(128, 384)]
    c, r = side(n), row_side(n)
    if name == "bias_relu":
        return [f(n // c, c), f(1, c)]
    if name == "layers100":
        return [f(n // c, c), f(1, c), f(1, c)]
    if name == "layernorm":
        return [f(n // r, r), f(1, r), f(1, r)]
    if name in ("softmax", "log_softmax", "sum_rows", "sum_cols"):
        return [f(n // r, r)]
    if name == "rmsnorm":
        return [f(n // r, r), f(r)]
    if name == "mlp":  # x [n / 8192, 1024], w1, b1, w2, b2, the layernorm's weight and bias
        r, d, h = max(n // 8192, 1), 1024, 4096
        return [f(r, d), f(d, h), f(h), f(h, d), f(d), f(d), f(d)]
    if name == "attention":  # q, k, v [n / 2M, 16, 512, 64]
        return [f(max(n >> 21, 1), 16, 512, 64) for _ in range(3)]
    if name == "concat_relu":  # four [rows, cols / 4]
        return [f(n // c, c // 4) for _ in range(4)]
    if name == "transpose_add":  # a [rows, cols], b [cols, rows]
        return [f(n // c, c), f(c, n // c)]
    if name == "xent":  # logits [rows, 2 cols] (2n elements), i64 targets [rows, 1]
        return [f(n // r, 2 * r), rng.integers(0, 2 * r, (n // r, 1), dtype=np.int64)]
    raise SystemExit("unknown workload " + name)


LR, B1, B2, EPS, T = 1e-3, 0.9, 0.999, 1e-8, 10
C1, C2 = 1 - B1 ** T, 1 - B2 ** T


def numpy_fn(name):
    f32 = np.float32
    if name == "add":
        return lambda a, b: a + b
    if name == "chain8":
        return lambda a, b, c: ((((a * b + c) * a - b) * c + a) * b - c)
    if name == "gelu_tanh":
        return lambda x: f32(0.5) * x * (f32(1) + np.tanh(f32(0.7978845608028654) * (x + f32(0.044715) * (x * x * x))))
    if name == "swish":
        return lambda x: x / (f32(1) + np.exp(-x))
    if name == "where_exp":
        return lambda a, b, c: np.where(a > 0, a * b, np.exp(c)) + f32(1)
    if name == "adam":
        def adam(p, g, m, v):
            m2 = f32(B1) * m + f32(1 - B1) * g
            v2 = f32(B2) * v + f32(1 - B2) * (g * g)
            p2 = p - f32(LR) * ((m2 / f32(C1)) / (np.sqrt(v2 / f32(C2)) + f32(EPS)))
            return p2, m2, v2
        return adam
    if name == "bias_relu":
        return lambda m, r: np.maximum(m + r, f32(0))
    if name == "layers100":
        def layers(x, w, b):
            for _ in range(100):
                x = np.maximum(x * w + b, f32(0)) * f32(0.5) + x * f32(0.5)
                x = x.copy()  # the barrier (a copy), as in smelt's workload
            return x
        return layers
    if name == "softmax":
        def softmax(x):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        return softmax
    if name == "layernorm":
        def layernorm(x, w, b):
            d = x - x.mean(axis=-1, keepdims=True)
            return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + f32(1e-5)) * w + b
        return layernorm
    if name == "log_softmax":
        def log_softmax(x):
            m = x.max(axis=-1, keepdims=True)
            return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
        return log_softmax
    if name == "rmsnorm":
        return lambda x, w: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + f32(1e-6)) * w
    if name == "sum_rows":
        return lambda x: x.sum(axis=-1)
    if name == "sum_cols":
        return lambda x: x.sum(axis=0)
    if name == "mse":
        return lambda a, b: ((a - b) ** 2).mean()
    if name == "xent":
        def xent(x, t):
            m = x.max(axis=-1, keepdims=True)
            lse = np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m
            return (lse - np.take_along_axis(x, t, -1)).mean()
        return xent
    if name == "transpose_add":
        return lambda a, b: a.T + b
    if name in ("mlp", "attention", "concat_relu"):
        return model_formula(np, name)
    if name == "embed_ln":
        def embed_ln(W, ids, P):
            x = W[ids] + P
            d = x - x.mean(axis=-1, keepdims=True)
            return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + f32(1e-5))
        return embed_ln
    return None  # gelu: NumPy has no erf; the convolutions: no convolution


def row_formula(o, name):
    """the rows' workloads (reductions over the last axis; sums), as smelt-bench's"""
    if name == "softmax":
        def softmax(x):
            e = o.exp(x - o.max(x, axis=-1, keepdims=True))
            return e / o.sum(e, axis=-1, keepdims=True)
        return softmax
    if name == "layernorm":
        def layernorm(x, w, b):
            d = x - o.mean(x, axis=-1, keepdims=True)
            return d / o.sqrt(o.mean(d * d, axis=-1, keepdims=True) + 1e-5) * w + b
        return layernorm
    if name == "log_softmax":
        def log_softmax(x):
            m = o.max(x, axis=-1, keepdims=True)
            return x - m - o.log(o.sum(o.exp(x - m), axis=-1, keepdims=True))
        return log_softmax
    if name == "rmsnorm":
        return lambda x, w: x / o.sqrt(o.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w
    if name == "sum_rows":
        return lambda x: o.sum(x, axis=-1)
    if name == "sum_cols":
        return lambda x: o.sum(x, axis=0)
    if name == "mse":
        return lambda a, b: o.mean((a - b) ** 2)
    if name == "transpose_add":
        return lambda a, b: a.T + b
    if name == "xent":
        def xent(x, t):
            m = o.max(x, axis=-1, keepdims=True)
            lse = o.log(o.sum(o.exp(x - m), axis=-1, keepdims=True)) + m
            return o.mean(lse - o.take_along_axis(x, t, -1))
        return xent
    return None


def model_formula(o, name):
    """mlp, attention, concat_relu and issue 44's conv_bn_relu, conv1d_gelu and embed_ln over an
    Ops table o (numpy, jax.numpy, torch: gpu_peers.py; o.conv(x, w, pads, groups), o.take(W, ids)),
    as smelt-bench's"""
    if name == "conv_bn_relu":  # relu(batchnorm(conv3x3(x, w, pad 1)))
        def conv_bn_relu(x, w, scale, shift, mean, var):
            r = lambda v: o.reshape(v, (-1, 1, 1))
            inv = r(scale) / o.sqrt(r(var) + 1e-5)
            return o.relu((o.conv(x, w, 1, 1) - r(mean)) * inv + r(shift))
        return conv_bn_relu
    if name == "conv1d_gelu":  # max over time of gelu(conv1d(x, w, pad 2, 2 groups) + b)
        def conv1d_gelu(x, w, b):
            h = o.conv(x, w, 2, 2) + o.reshape(b, (-1, 1))
            return o.max(0.5 * h * (1.0 + o.erf(h * 0.7071067811865476)), axis=-1, keepdims=True)
        return conv1d_gelu
    if name == "embed_ln":  # layernorm(W[ids] + P)
        def embed_ln(W, ids, P):
            x = o.take(W, ids) + P
            d = x - o.mean(x, axis=-1, keepdims=True)
            return d / o.sqrt(o.mean(d * d, axis=-1, keepdims=True) + 1e-5)
        return embed_ln
    if name == "concat_relu":
        return lambda a, b, c, d: o.maximum(o.concatenate((a, b, c, d), axis=1), 0.0)
    if name == "mlp":
        def mlp(x, w1, b1, w2, b2, lw, lb):
            h = x @ w1 + b1
            h = 0.5 * h * (1.0 + o.tanh(0.7978845608028654 * (h + 0.044715 * (h * h * h))))
            y = h @ w2 + b2 + x
            d = y - o.mean(y, axis=-1, keepdims=True)
            return d / o.sqrt(o.mean(d * d, axis=-1, keepdims=True) + 1e-5) * lw + lb
        return mlp
    if name == "attention":
        def attention(q, k, v):
            s = q @ o.swapaxes(k, -1, -2) / 8.0
            e = o.exp(s - o.max(s, axis=-1, keepdims=True))
            a = (e / o.sum(e, axis=-1, keepdims=True)) @ v
            b, h, t, d = q.shape
            return o.reshape(o.transpose(a, (0, 2, 1, 3)), (b, t, h * d))
        return attention
    return None


def numexpr_fn(name):
    import numexpr as ne

    e = ne.evaluate
    if name == "add":
        return lambda a, b: e("a + b")
    if name == "chain8":
        return lambda a, b, c: e("((((a * b + c) * a - b) * c + a) * b - c)")
    if name == "gelu_tanh":
        # float32 constants: numexpr's float literals are doubles, which would
        # make the whole expression (and the result) float64
        f32 = np.float32
        k = dict(H=f32(0.5), ONE=f32(1), K=f32(0.7978845608028654), C=f32(0.044715))
        return lambda x: e("H * x * (ONE + tanh(K * (x + C * (x * x * x))))", local_dict=dict(k, x=x))
    if name == "swish":
        return lambda x: e("x / (1 + exp(-x))")
    if name == "where_exp":
        return lambda a, b, c: e("where(a > 0, a * b, exp(c)) + 1")
    if name == "adam":
        def adam(p, g, m, v):
            m2 = e("B1 * m + (1 - B1) * g", local_dict=dict(B1=np.float32(B1), m=m, g=g))
            v2 = e("B2 * v + (1 - B2) * (g * g)", local_dict=dict(B2=np.float32(B2), v=v, g=g))
            p2 = e("p - LR * ((m2 / C1) / (sqrt(v2 / C2) + EPS))",
                   local_dict=dict(p=p, m2=m2, v2=v2, LR=np.float32(LR), C1=np.float32(C1),
                                   C2=np.float32(C2), EPS=np.float32(EPS)))
            return p2, m2, v2
        return adam
    if name == "bias_relu":
        return lambda m, r: e("where(m + r > 0, m + r, 0)")
    if name == "layers100":
        def layers(x, w, b):
            for _ in range(100):
                x = e("where(x * w + b > 0, x * w + b, 0) * H + x * H",
                      local_dict=dict(x=x, w=w, b=b, H=np.float32(0.5)))
            return x
        return layers
    # numexpr reduces along one axis only as the whole expression: the rows'
    # reductions in numpy, the elementwise work in numexpr, as a numexpr
    # user writes it
    if name == "softmax":
        def softmax(x):
            m = x.max(axis=-1, keepdims=True)
            t = e("exp(x - m)")
            s = t.sum(axis=-1, keepdims=True)
            return e("t / s")
        return softmax
    if name == "layernorm":
        def layernorm(x, w, b):
            mu = x.mean(axis=-1, keepdims=True)
            d = e("x - mu")
            v = e("d * d").mean(axis=-1, keepdims=True)
            return e("d / sqrt(v + EPS) * w + b", local_dict=dict(d=d, v=v, w=w, b=b, EPS=np.float32(1e-5)))
        return layernorm
    # (the log and the square root of a row's value too: once per row, not
    # once per element as inside the expression, where they cost 1.6-1.7x)
    if name == "log_softmax":
        def log_softmax(x):
            m = x.max(axis=-1, keepdims=True)
            ls = np.log(e("exp(x - m)").sum(axis=-1, keepdims=True))
            return e("x - m - ls")
        return log_softmax
    if name == "rmsnorm":
        def rmsnorm(x, w):
            r = np.sqrt(e("x * x").mean(axis=-1, keepdims=True) + np.float32(1e-6))
            return e("x / r * w")
        return rmsnorm
    if name == "xent":
        def xent(x, t):
            m = x.max(axis=-1, keepdims=True)
            ls = np.log(e("exp(x - m)").sum(axis=-1, keepdims=True))
            return e("ls + m - p", local_dict=dict(ls=ls, m=m, p=np.take_along_axis(x, t, -1))).mean()
        return xent
    if name == "concat_relu":  # numexpr cannot concatenate: numpy does, numexpr the relu
        return lambda a, b, c, d: e("where(x > 0, x, 0)", local_dict=dict(x=np.concatenate((a, b, c, d), axis=1)))
    if name == "transpose_add":  # numexpr reads the transposed view itself
        return lambda a, b: e("at + b", local_dict=dict(at=a.T, b=b))
    # a lone sum along one axis numexpr computes itself
    if name == "sum_rows":
        return lambda x: e("sum(x, axis=1)")
    if name == "sum_cols":
        return lambda x: e("sum(x, axis=0)")
    if name == "mse":  # the sum numexpr computes itself; the division by n here
        return lambda a, b: e("sum((a - b) ** 2)") / np.float32(a.size)


def numexpr_out(name):
    """(make, run) as out_formulas.py's: numexpr's evaluate(out=) into arrays allocated once"""
    import numexpr as ne

    e = ne.evaluate
    f32 = np.float32
    E = lambda shape: np.empty(shape, np.float32)
    rows = lambda x: x.shape[:-1] + (1,)
    simple = {"add": "a + b", "chain8": "((((a * b + c) * a - b) * c + a) * b - c)", "swish": "x / (1 + exp(-x))",
              "where_exp": "where(a > 0, a * b, exp(c)) + 1", "bias_relu": "where(m + r > 0, m + r, 0)",
              "transpose_add": "at + b"}
    names = {"add": "ab", "chain8": "abc", "swish": "x", "where_exp": "abc", "bias_relu": "mr", "transpose_add": "ab"}
    if name in simple:
        def run(*x):
            d = dict(zip(names[name], x[:-1]))
            if name == "transpose_add":
                d = dict(at=d["a"].T, b=d["b"])
            e(simple[name], local_dict=d, out=x[-1][0])
        return (lambda *x: [E(x[1].shape if name == "transpose_add" else x[0].shape)]), run
    if name == "gelu_tanh":
        k = dict(H=f32(0.5), ONE=f32(1), K=f32(0.7978845608028654), C=f32(0.044715))
        return (lambda x: [E(x.shape)]), (lambda x, B: e("H * x * (ONE + tanh(K * (x + C * (x * x * x))))",
                                                          local_dict=dict(k, x=x), out=B[0]))
    if name == "adam":
        def adam(p, g, m, v, B):
            p2, m2, v2 = B
            e("B1 * m + (1 - B1) * g", local_dict=dict(B1=f32(B1), m=m, g=g), out=m2)
            e("B2 * v + (1 - B2) * (g * g)", local_dict=dict(B2=f32(B2), v=v, g=g), out=v2)
            e("p - LR * ((m2 / C1) / (sqrt(v2 / C2) + EPS))",
              local_dict=dict(p=p, m2=m2, v2=v2, LR=f32(LR), C1=f32(C1), C2=f32(C2), EPS=f32(EPS)), out=p2)
        return (lambda p, g, m, v: [E(p.shape), E(p.shape), E(p.shape)]), adam
    if name == "layers100":
        def layers(x, w, b, B):  # two arrays in turn, the last layer into the output
            cur = x
            for i in range(100):
                nxt = B[(i + 1) % 2]
                e("where(x * w + b > 0, x * w + b, 0) * H + x * H", local_dict=dict(x=cur, w=w, b=b, H=f32(0.5)),
                  out=nxt)
                cur = nxt
        return (lambda x, w, b: [E(x.shape), E(x.shape)]), layers
    if name == "softmax":
        def softmax(x, B):
            y, m, s = B
            x.max(axis=-1, keepdims=True, out=m)
            e("exp(x - m)", out=y)
            y.sum(axis=-1, keepdims=True, out=s)
            e("y / s", out=y)
        return (lambda x: [E(x.shape), E(rows(x)), E(rows(x))]), softmax
    if name == "layernorm":
        def layernorm(x, w, b, B):
            y, t, mu, v = B
            x.mean(axis=-1, keepdims=True, out=mu)
            e("x - mu", out=y)
            e("y * y", out=t)
            t.mean(axis=-1, keepdims=True, out=v)
            e("y / sqrt(v + EPS) * w + b", local_dict=dict(y=y, v=v, w=w, b=b, EPS=f32(1e-5)), out=y)
        return (lambda x, w, b: [E(x.shape), E(x.shape), E(rows(x)), E(rows(x))]), layernorm
    if name == "log_softmax":
        def log_softmax(x, B):
            y, t, m, s = B
            x.max(axis=-1, keepdims=True, out=m)
            e("exp(x - m)", out=t)
            t.sum(axis=-1, keepdims=True, out=s)
            np.log(s, out=s)
            e("x - m - s", out=y)
        return (lambda x: [E(x.shape), E(x.shape), E(rows(x)), E(rows(x))]), log_softmax
    if name == "rmsnorm":
        def rmsnorm(x, w, B):
            y, t, r = B
            e("x * x", out=t)
            t.mean(axis=-1, keepdims=True, out=r)
            r += f32(1e-6)
            np.sqrt(r, out=r)
            e("x / r * w", out=y)
        return (lambda x, w: [E(x.shape), E(x.shape), E(rows(x))]), rmsnorm
    if name == "xent":
        def xent(x, tg, B):
            y, t, m, s, p = B
            x.max(axis=-1, keepdims=True, out=m)
            e("exp(x - m)", out=t)
            t.sum(axis=-1, keepdims=True, out=s)
            np.log(s, out=s)
            np.copyto(p, np.take_along_axis(x, tg, -1))
            e("s + m - p", out=s)
            np.mean(s, out=y)
        return (lambda x, tg: [E(()), E(x.shape), E(rows(x)), E(rows(x)), E(rows(x))]), xent
    if name == "concat_relu":
        def concat_relu(a, b, c, d, B):
            y = B[0]
            np.concatenate((a, b, c, d), axis=1, out=y)
            e("where(y > 0, y, 0)", out=y)
        return (lambda a, b, c, d: [E((a.shape[0], 4 * a.shape[1]))]), concat_relu
    if name == "sum_rows":
        return (lambda x: [E(x.shape[:-1])]), (lambda x, B: e("sum(x, axis=1)", out=B[0]))
    if name == "sum_cols":
        return (lambda x: [E(x.shape[1:])]), (lambda x, B: e("sum(x, axis=0)", out=B[0]))
    if name == "mse":
        def mse(a, b, B):
            e("sum((a - b) ** 2)", out=B[0])
            B[0] /= np.float32(a.size)
        return (lambda a, b: [E(())]), mse
    return None


def timeit(fn, args, runs):
    """median ms of runs calls after two untimed ones; each call's result is
    dropped inside its timing (the allocating peers free it there)"""
    for _ in range(2):
        fn(*args)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def timeit_out(make_run, args, runs):
    """the same, the outputs (and scratch) allocated once before the timing"""
    if make_run is None:
        return None
    make, run = make_run
    bufs = make(*args)
    return timeit(lambda *x: run(*x, bufs), args, runs)


def openblas():
    """(config, core name) of the OpenBLAS in this process, or None"""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({l.split()[-1] for l in f if "blas" in l and "/" in l})
    except OSError:
        return None
    for lib in libs:
        try:
            h = ctypes.CDLL(lib)
            h.openblas_get_config.restype = h.openblas_get_corename.restype = ctypes.c_char_p
            return h.openblas_get_config().decode(), h.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return None


def parse_args(description=None):
    """Every peer script's options, as smelt-bench passes them:
    --workload W --n N --runs R --threads T (0: the peer's default)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--n", type=int, default=16 << 20)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--threads", type=int, default=0)
    return ap, ap.parse_args()


def main():
    ap, a = parse_args()
    import numexpr as ne  # here: bench/peers/gpu_peers.py imports this file for inputs()
    from out_formulas import numpy_out, out_formula

    if a.threads:
        ne.set_num_threads(a.threads)
    rng = np.random.default_rng(1)
    args = inputs(a.workload, a.n, rng)
    out = {"workload": a.workload, "n": a.n, "numpy_version": np.__version__, "numexpr_version": ne.__version__,
           "numpy_threads": 1, "numexpr_threads": ne.get_num_threads()}
    pfn = numpy_fn(a.workload)  # (none where numpy cannot express it: erf)
    if pfn is not None:
        out["numpy_ms"] = round(timeit(pfn, args, a.runs), 3)
        ms = timeit_out(out_formula(numpy_out(np), a.workload), args, a.runs)
        if ms is not None:
            out["numpy_out_ms"] = round(ms, 3)
    nfn = numexpr_fn(a.workload)  # (none where numexpr cannot express it: a matrix product, erf)
    if nfn is not None:
        out["numexpr_ms"] = round(timeit(nfn, args, a.runs), 3)
        ms = timeit_out(numexpr_out(a.workload), args, a.runs)
        if ms is not None:
            out["numexpr_out_ms"] = round(ms, 3)
    blas = openblas()
    if blas and a.workload in ("mlp", "attention"):
        out["numpy_note"] = "BLAS %s, kernels %s" % blas
    print(json.dumps(out))


if __name__ == "__main__":
    main()
