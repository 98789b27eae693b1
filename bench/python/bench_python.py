#!/usr/bin/env python3
"""The Python front end's benchmark rows (scripts/bench --python).

dispatch     a cached smelt.jit call of a*b+c on three 1,000-element f32
             arrays (output allocated, as a NumPy user calls it; and out=
             given), its overhead over the same plan run by one direct C
             call, against smelt.evaluate, numexpr.evaluate and NumPy
first_call   trace + plan + compile + run of a new function (chain8,
             softmax) in a fresh process, TinyCC; beside it JAX jit's,
             numba's (@njit(parallel=True), Debian's) and torch.compile's
             (build/torch-venv) first calls of the same functions
             (bench/peers/first_call_peers.py)
large        chain8, gelu_tanh, softmax, layernorm at --n elements through
             smelt.jit with out= given, against the same plan run from C
             (smelt_plan_run_rebind called directly), medians of --runs;
             and that plan into an output on a 64-byte line (c_aligned_ms;
             NumPy's arrays start out_offset bytes past one)
train_mlp    a training step (784-1024-1024-10 MLP, batch 512, softmax
             cross-entropy, Adam) as one smelt.jit plan: time, kernels,
             memory; beside it JAX's jit(value_and_grad) step (donated) and
             PyTorch's (build/torch-venv: torch.compile of the torch.func
             step, torch.compile of the usual loop, eager;
             bench/peers/torch_train_peer.py), 2 threads each
Each row is printed as it completes; --json prints JSON objects.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import smelt  # noqa: E402  (before NumPy: it chooses OpenBLAS's kernels, docs/python.md)
import numpy as np  # noqa: E402
from smelt._lib import lib  # noqa: E402
from smelt._tracer import data_ptr  # noqa: E402

f32 = np.float32


def chain8(a, b, c):
    return ((((a * b + c) * a - b) * c + a) * b - c)


def gelu_tanh(x):
    return f32(0.5) * x * (f32(1) + np.tanh(f32(0.7978845608028654) * (x + f32(0.044715) * (x * x * x))))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + f32(1e-5)) * w + b


def per_call_us(fn, n, reps=7):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(ts)


def emit(row, as_json):
    if as_json:
        print(json.dumps(row), flush=True)
    else:
        print("  ".join("%s=%s" % (k, ("%.4g" % v) if isinstance(v, float) else v) for k, v in row.items()),
              flush=True)


def dispatch(as_json):
    rng = np.random.default_rng(1)
    a, b, c = (rng.random(1000, dtype=f32) for _ in range(3))
    o = np.empty_like(a)
    f = smelt.jit(lambda a, b, c: a * b + c)
    f(a, b, c)
    f(a, b, c)
    f.wait()
    e = f._last
    ptrs = [data_ptr(x) for x in (a, b, c, o)]
    row = {"row": "dispatch", "n": 1000, "backend": f.stats()["last"]["backend"]}
    n = 20000
    row["c_run_us"] = per_call_us(lambda: lib.smelt_plan_run_rebind(e.plan, 3, e.in_arr, 1, e.out_arr, ptrs), n)
    row["jit_us"] = per_call_us(lambda: f(a, b, c), n)
    row["jit_out_us"] = per_call_us(lambda: f(a, b, c, out=o), n)
    ns = {"a": a, "b": b, "c": c}
    row["evaluate_us"] = per_call_us(lambda: smelt.evaluate("a*b+c", ns, ns), n)
    row["jit_over_c_us"] = row["jit_us"] - row["c_run_us"]
    try:
        import numexpr
        numexpr.evaluate("a*b+c", ns, ns)
        row["numexpr_us"] = per_call_us(lambda: numexpr.evaluate("a*b+c", ns, ns), n)
        row["jit_vs_numexpr"] = row["jit_us"] / row["numexpr_us"]
    except ImportError:
        row["numexpr_us"] = None
    row["numpy_us"] = per_call_us(lambda: a * b + c, n)
    emit(row, as_json)


_FIRST = r"""
import sys, time, numpy as np
sys.path.insert(0, %r)
import smelt, smelt._lib
smelt._lib.context()
sys.path.insert(0, %r)
from bench_python import chain8, softmax
x = np.random.default_rng(2).random((64, 64), dtype=np.float32)
f = smelt.jit(%s, backend="TCC")
t = time.perf_counter(); f(*([x] * %d)); t1 = time.perf_counter()
f(*([x] * %d)); t2 = time.perf_counter()
print((t1 - t) * 1e3, (t2 - t1) * 1e3, f.stats()["last"]["kernels"])
"""


def first_call(as_json):
    for name, nargs in (("chain8", 3), ("softmax", 1)):
        env = dict(os.environ, SMELT_CACHE="0")
        ts = []
        for _ in range(5):
            out = subprocess.run([sys.executable, "-c", _FIRST % (os.path.join(HERE, "..", "..", "python"), HERE,
                                                                   name, nargs, nargs)],
                                 capture_output=True, text=True, env=env, check=True).stdout.split()
            ts.append((float(out[0]), float(out[1]), int(out[2])))
        first = statistics.median(t[0] for t in ts)
        emit({"row": "first_call", "workload": name, "backend": "TCC", "first_ms": first,
              "second_ms": statistics.median(t[1] for t in ts), "kernels": ts[0][2]}, as_json)


def peers_first_call(as_json):
    """numba's and torch.compile's first calls, each where it is installed"""
    script = os.path.join(HERE, "..", "peers", "first_call_peers.py")
    torch_py = os.path.join(HERE, "..", "..", "build", "torch-venv", "bin", "python")
    for peer, py in (("numba", "/usr/bin/python3"), ("torch", torch_py)):
        have = os.path.exists(py) and subprocess.run([py, "-c", "import " + peer], capture_output=True).returncode == 0
        if not have:
            print("bench_python: no %s peer for first_call (%s)" % (peer, "Debian's python3-numba" if peer == "numba"
                  else "build/torch-venv: scripts/bench --peers=torch installs it"), file=sys.stderr)
            continue
        r = subprocess.run([py, script, peer], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            emit(json.loads(line), as_json)
        if r.stderr.strip():
            print(r.stderr.strip()[-300:], file=sys.stderr)


def peers_train_mlp(runs, as_json):
    """PyTorch's train_mlp steps, where build/torch-venv is installed"""
    torch_py = os.path.join(HERE, "..", "..", "build", "torch-venv", "bin", "python")
    if not os.path.exists(torch_py):
        print("bench_python: no PyTorch peer for train_mlp (build/torch-venv: scripts/bench --peers=torch "
              "installs it)", file=sys.stderr)
        return
    r = subprocess.run([torch_py, os.path.join(HERE, "..", "peers", "torch_train_peer.py"), str(runs), "2"],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        emit(json.loads(line), as_json)
    if r.returncode:
        print("bench_python: the PyTorch peer failed: %s" % r.stderr.strip()[-300:], file=sys.stderr)


def large(n, runs, as_json):
    rng = np.random.default_rng(3)
    r = 4096 if n >= 4096 * 64 else 64
    cases = [("chain8", chain8, [rng.random(n, dtype=f32) * 2 - 1 for _ in range(3)]),
             ("gelu_tanh", gelu_tanh, [rng.random(n, dtype=f32) * 2 - 1]),
             ("softmax", softmax, [rng.random((n // r, r), dtype=f32) * 2 - 1]),
             ("layernorm", layernorm, [rng.random((n // r, r), dtype=f32) * 2 - 1, rng.random((1, r), dtype=f32),
                                       rng.random((1, r), dtype=f32)])]
    for name, fn, args in cases:
        f = smelt.jit(fn)
        o = f(*args)
        f(*args, out=o)
        f.wait()
        f(*args, out=o)
        e = f._last
        # o as NumPy allocates it (16 bytes past a 64-byte line here) and
        # oa on a line, as smelt allocates its own: the C plan into both
        buf = np.empty(o.nbytes + 64, np.uint8)
        skip = -buf.ctypes.data % 64
        oa = buf[skip:skip + o.nbytes].view(o.dtype).reshape(o.shape)
        ptrs = [data_ptr(x) for x in args] + [data_ptr(o)]
        ptrs_a = [data_ptr(x) for x in args] + [data_ptr(oa)]
        py, c, ca = [], [], []
        for _ in range(runs):  # interleaved, each after an untimed run of its own
            f(*args, out=o)
            t = time.perf_counter()
            f(*args, out=o)
            py.append(time.perf_counter() - t)
            for p, ts in ((ptrs, c), (ptrs_a, ca)):
                lib.smelt_plan_run_rebind(e.plan, len(args), e.in_arr, 1, e.out_arr, p)
                t = time.perf_counter()
                lib.smelt_plan_run_rebind(e.plan, len(args), e.in_arr, 1, e.out_arr, p)
                ts.append(time.perf_counter() - t)
        pm, cm, cam = (statistics.median(v) * 1e3 for v in (py, c, ca))
        emit({"row": "large", "workload": name, "n": n, "backend": f.stats()["last"]["backend"],
              "kernels": f.stats()["last"]["kernels"], "out_offset": o.ctypes.data % 64, "python_ms": pm, "c_ms": cm,
              "python_vs_c": pm / cm, "c_aligned_ms": cam, "c_vs_aligned": cm / cam}, as_json)


def train_mlp(runs, as_json):
    """784 -> 1024 -> 1024 -> 10 MLP, batch 512, ReLU, softmax
    cross-entropy, Adam, f32: one smelt.jit step (forward, backward, update)
    with parameters, m and v donated."""
    rng = np.random.default_rng(4)
    sizes = [784, 1024, 1024, 10]
    params = []
    for a, b in zip(sizes, sizes[1:]):
        params += [(rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(f32), np.zeros(b, f32)]
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]
    x = rng.standard_normal((512, 784)).astype(f32)
    y = np.eye(10, dtype=f32)[rng.integers(0, 10, 512)]

    def loss(params, x, y):
        h = x
        for i in range(0, len(params) - 2, 2):
            h = np.maximum(h @ params[i] + params[i + 1], 0)
        z = h @ params[-2] + params[-1]
        z = z - z.max(axis=1, keepdims=True)
        return -np.mean(np.sum(y * (z - np.log(np.exp(z).sum(axis=1, keepdims=True))), axis=1))

    @smelt.jit(donate_argnums=(0, 1, 2))
    def step(params, ms, vs, x, y):
        l, g = smelt.value_and_grad(loss)(params, x, y)
        out_p, out_m, out_v = [], [], []
        for p, m, v, gi in zip(params, ms, vs, g):
            m = f32(0.9) * m + f32(0.1) * gi
            v = f32(0.999) * v + f32(0.001) * (gi * gi)
            out_p.append(p - f32(1e-3) * m / (np.sqrt(v) + f32(1e-8)))
            out_m.append(m)
            out_v.append(v)
        return out_p, out_m, out_v, l

    params, ms, vs, l0 = step(params, ms, vs, x, y)
    step(params, ms, vs, x, y)
    step.wait()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        params, ms, vs, l = step(params, ms, vs, x, y)
        ts.append(time.perf_counter() - t)
    st = step.stats()["last"]
    emit({"row": "train_mlp", "backend": st["backend"], "kernels_fast": st["kernels_fast"], "step_ms":
          statistics.median(ts) * 1e3, "kernels": st["kernels"], "peak_mb": st["mem_bytes"] / 2 ** 20,
          "live_lower_mb": st["mem_lower_bytes"] / 2 ** 20, "donated_inplace": st["donated_inplace"],
          "loss_first": float(l0), "loss_last": float(l)}, as_json)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rows", default="dispatch,first_call,large,train_mlp")
    a = ap.parse_args()
    rows = a.rows.split(",")
    jax_py = os.path.join(HERE, "..", "..", "build", "jax-venv", "bin", "python")
    if os.path.exists(jax_py) and any(r in rows for r in ("dispatch", "first_call", "train_mlp")):
        # JAX's columns, in its own interpreter (build/jax-venv: scripts/bench --peers installs it)
        r = subprocess.run([jax_py, os.path.join(HERE, "..", "peers", "jax_python_peers.py"), a.rows, str(a.runs)],
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            emit(json.loads(line), a.json)
        if r.returncode:
            print("bench_python: the JAX peer failed: %s" % r.stderr.strip()[-300:], file=sys.stderr)
    else:
        print("bench_python: no JAX peer (build/jax-venv: scripts/bench --peers installs it)", file=sys.stderr)
    if "dispatch" in rows:
        dispatch(a.json)
    if "first_call" in rows:
        first_call(a.json)
        peers_first_call(a.json)
    if "large" in rows:
        large(a.n, a.runs, a.json)
    if "train_mlp" in rows:
        train_mlp(a.runs, a.json)
        peers_train_mlp(a.runs, a.json)


if __name__ == "__main__":
    main()
