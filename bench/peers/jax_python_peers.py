#!/usr/bin/env python3
"""JAX's figures for bench/python/bench_python.py's rows, run by the JAX
virtual environment's python (build/jax-venv, as scripts/bench --peers
makes it): dispatch of a jitted a*b+c on three 1,000-element f32 arrays,
a new function's first call (chain8, softmax), and the train_mlp step
(784-1024-1024-10, batch 512, Adam written out, parameters and state
donated).  One JSON object per line."""
import json
import statistics
import sys
import time

import numpy as np
import jax
import jax.numpy as jnp

jax.config.update("jax_platform_name", "cpu")
f32 = np.float32


def per_call_us(fn, n, reps=7):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(ts)


def dispatch():
    rng = np.random.default_rng(1)
    a, b, c = (jnp.asarray(rng.random(1000, dtype=f32)) for _ in range(3))
    f = jax.jit(lambda a, b, c: a * b + c)
    f(a, b, c).block_until_ready()
    us = per_call_us(lambda: f(a, b, c).block_until_ready(), 5000)
    print(json.dumps({"row": "dispatch", "peer": "jax", "jax_us": us}), flush=True)


def first_call():
    x = jnp.asarray(np.random.default_rng(2).random((64, 64), dtype=f32))
    fns = {"chain8": (lambda a, b, c: ((((a * b + c) * a - b) * c + a) * b - c), 3),
           "softmax": (lambda x: jnp.exp(x - x.max(axis=-1, keepdims=True)) /
                       jnp.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1, keepdims=True), 1)}
    for name, (fn, n) in fns.items():
        f = jax.jit(fn)
        t = time.perf_counter()
        f(*([x] * n)).block_until_ready()
        print(json.dumps({"row": "first_call", "peer": "jax", "workload": name,
                          "jax_first_ms": (time.perf_counter() - t) * 1e3}), flush=True)


def train_mlp(runs):
    rng = np.random.default_rng(4)
    sizes = [784, 1024, 1024, 10]
    params = []
    for a, b in zip(sizes, sizes[1:]):
        params += [jnp.asarray((rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(f32)), jnp.zeros(b, f32)]
    ms = [jnp.zeros_like(p) for p in params]
    vs = [jnp.zeros_like(p) for p in params]
    x = jnp.asarray(rng.standard_normal((512, 784)).astype(f32))
    y = jnp.asarray(np.eye(10, dtype=f32)[rng.integers(0, 10, 512)])

    def loss(params, x, y):
        h = x
        for i in range(0, len(params) - 2, 2):
            h = jnp.maximum(h @ params[i] + params[i + 1], 0)
        z = h @ params[-2] + params[-1]
        z = z - z.max(axis=1, keepdims=True)
        return -jnp.mean(jnp.sum(y * (z - jnp.log(jnp.exp(z).sum(axis=1, keepdims=True))), axis=1))

    def step(params, ms, vs, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        out_p, out_m, out_v = [], [], []
        for p, m, v, gi in zip(params, ms, vs, g):
            m = 0.9 * m + 0.1 * gi
            v = 0.999 * v + 0.001 * (gi * gi)
            out_p.append(p - 1e-3 * m / (jnp.sqrt(v) + 1e-8))
            out_m.append(m)
            out_v.append(v)
        return out_p, out_m, out_v, l
    step = jax.jit(step, donate_argnums=(0, 1, 2))
    for _ in range(2):
        params, ms, vs, l = step(params, ms, vs, x, y)
    l.block_until_ready()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        params, ms, vs, l = step(params, ms, vs, x, y)
        l.block_until_ready()
        ts.append(time.perf_counter() - t)
    print(json.dumps({"row": "train_mlp", "peer": "jax", "jax_step_ms": statistics.median(ts) * 1e3,
                      "jax_version": jax.__version__}), flush=True)


if __name__ == "__main__":
    rows = sys.argv[1].split(",") if len(sys.argv) > 1 else ["dispatch", "first_call", "train_mlp"]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    if "dispatch" in rows:
        dispatch()
    if "first_call" in rows:
        first_call()
    if "train_mlp" in rows:
        train_mlp(runs)
