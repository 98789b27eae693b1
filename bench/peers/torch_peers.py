#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the CPU on smelt's benchmark workloads.

Run by `smelt-bench --peers` with the python of build/torch-venv
(scripts/bench --peers=torch installs PyTorch there).  The same formulas and
inputs as the other peers (gpu_peers.py's torch_like table over peers.py's
formulas), float32, torch.set_num_threads(--threads).  Prints one JSON object:

  torch_eager_ms       the ordinary eager call (each operator allocates its result)
  torch_eager_out_ms   eager with out= into arrays allocated once (out_formulas.py)
  torch_compile_ms     torch.compile(f)(...) (Inductor's C++/OpenMP kernels): new outputs
  torch_compile_out_ms torch.compile of out.copy_(f(...)): Inductor writes the result
                       into the given array in place
  torch_compile_first_call_ms  the first call, compilation included
  torch_eager_version, torch_compile_version, *_threads

layers100: eager clones between layers (the barrier); torch.compile compiles
one layer, called 100 times with a clone between calls (as on the GPU).
"""
import json
import os
import sys
import time


def main():
    from peers import parse_args
    ap, a = parse_args(__doc__.splitlines()[0])
    import numpy as np
    import torch
    from gpu_peers import any_formula, layer, torch_like
    from out_formulas import out_formula, torch_out
    from peers import inputs, timeit

    if a.threads:
        torch.set_num_threads(a.threads)
    th = torch.get_num_threads()
    out = {"workload": a.workload, "n": a.n, "torch_eager_version": torch.__version__,
           "torch_compile_version": torch.__version__, "torch_eager_threads": th, "torch_compile_threads": th}
    args = [torch.from_numpy(x) for x in inputs(a.workload, a.n, np.random.default_rng(1))]
    o = torch_like(torch)
    with torch.no_grad():
        f = any_formula(o, a.workload)
        out["torch_eager_ms"] = round(timeit(f, args, a.runs), 3)
        mr = out_formula(torch_out(torch), a.workload)
        if mr is not None:
            make, run = mr
            bufs = make(*args)
            try:
                out["torch_eager_out_ms"] = round(timeit(lambda *x: run(*x, bufs), args, a.runs), 3)
            except RuntimeError as e:
                out["torch_eager_note"] = "out=: %s" % str(e).splitlines()[0][:120]
        try:
            if a.workload == "layers100":
                cl = torch.compile(lambda x, w, b: layer(o, x, w, b))
                clo = torch.compile(lambda y, x, w, b: y.copy_(layer(o, x, w, b)))

                def fc(x, w, b):
                    for _ in range(100):
                        x = cl(x, w, b).clone()
                    return x

                def fco(x, w, b, B):
                    y, t = B
                    t.copy_(x)
                    for _ in range(100):
                        clo(y, t, w, b)
                        t.copy_(y)  # the barrier (a copy)
                make = lambda x, w, b: [torch.empty_like(x), torch.empty_like(x)]
            else:
                fc = torch.compile(f)

                def copy_into(B, r):
                    for b, v in zip(B, r if isinstance(r, tuple) else (r,)):
                        b.copy_(v)
                cfo = torch.compile(lambda B, *x: copy_into(B, f(*x)))
                fco = lambda *x: cfo(x[-1], *x[:-1])
                first = f(*args)
                make = lambda *x: [torch.empty_like(r) for r in (first if isinstance(first, tuple) else (first,))]
            t0 = time.perf_counter()
            fc(*args)
            out["torch_compile_first_call_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
            out["torch_compile_ms"] = round(timeit(fc, args, a.runs), 3)
            bufs = make(*args)
            out["torch_compile_out_ms"] = round(timeit(lambda *x: fco(*x, bufs), args, a.runs), 3)
        except Exception as e:  # Inductor needs a C++ compiler; say why rather than stop
            out["torch_compile_note"] = "torch.compile failed: %s" % str(e).splitlines()[0][:150]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
