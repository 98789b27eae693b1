#!/usr/bin/env python3
"""A new function's first call (compile included) under numba and
torch.compile, for bench/python/bench_python.py's first_call row: chain8
and softmax on 64 x 64 f32 arrays, written as each peer's user writes them,
each in a fresh process (nothing compiled before, no on-disk cache).

  first_call_peers.py numba   (Debian's python3: @njit(parallel=True))
  first_call_peers.py torch   (build/torch-venv's python: torch.compile,
                               Inductor on the CPU, its caches in a fresh
                               temporary folder)
Prints one JSON object a workload: {"row": "first_call", "peer": ...,
"workload": ..., "<peer>_first_ms": ...}.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

_NUMBA = r"""
import time, numpy as np
from numba import njit, prange
x = np.random.default_rng(2).random((64, 64), dtype=np.float32)
if %r == "chain8":
    @njit(parallel=True)
    def f(a, b, c):
        o = np.empty_like(a)
        for i in prange(a.shape[0]):
            for j in range(a.shape[1]):
                o[i, j] = ((((a[i, j] * b[i, j] + c[i, j]) * a[i, j] - b[i, j]) * c[i, j] + a[i, j]) * b[i, j]
                           - c[i, j])
        return o
    args = (x, x, x)
else:
    @njit(parallel=True)
    def f(a):
        o = np.empty_like(a)
        for i in prange(a.shape[0]):
            m = a[i, 0]
            for j in range(a.shape[1]):
                m = max(m, a[i, j])
            s = np.float32(0)
            for j in range(a.shape[1]):
                o[i, j] = np.exp(a[i, j] - m)
                s += o[i, j]
            for j in range(a.shape[1]):
                o[i, j] /= s
        return o
    args = (x,)
t = time.perf_counter(); f(*args); print((time.perf_counter() - t) * 1e3)
"""

_TORCH = r"""
import time, numpy as np, torch
x = torch.from_numpy(np.random.default_rng(2).random((64, 64), dtype=np.float32))
if %r == "chain8":
    f, args = torch.compile(lambda a, b, c: ((((a * b + c) * a - b) * c + a) * b - c)), (x, x, x)
else:
    f, args = torch.compile(lambda a: torch.softmax(a, dim=-1)), (x,)
t = time.perf_counter(); f(*args); print((time.perf_counter() - t) * 1e3)
"""


def main():
    peer = sys.argv[1]
    for name in ("chain8", "softmax"):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, NUMBA_CACHE_DIR=tmp, TORCHINDUCTOR_CACHE_DIR=tmp, TRITON_CACHE_DIR=tmp)
            src = (_NUMBA if peer == "numba" else _TORCH) % name
            r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env)
        if r.returncode:
            print("first_call_peers: %s %s failed: %s" % (peer, name, r.stderr.strip()[-300:]), file=sys.stderr)
            continue
        print(json.dumps({"row": "first_call", "peer": peer, "workload": name,
                          "%s_first_ms" % peer: float(r.stdout.split()[-1])}), flush=True)


if __name__ == "__main__":
    main()
