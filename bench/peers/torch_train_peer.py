#!/usr/bin/env python3
"""The train_mlp step under PyTorch on the CPU, for
bench/python/bench_python.py's train_mlp row (run with build/torch-venv's
python): 784 -> 1024 -> 1024 -> 10 MLP, batch 512, ReLU, softmax
cross-entropy, Adam written out as in smelt's and JAX's rows (lr 1e-3,
betas 0.9/0.999, eps 1e-8, no bias correction), f32, the same data.

Two forms, each timed after its warm-up (compiles excluded):
  compile_func   torch.compile of the whole step written with torch.func
                 (grad_and_value + the update, parameters, m and v written
                 back in place with copy_, as Inductor allows: its nearest
                 form to JAX's donation)
  compile_module the usual training loop: torch.compile(model), loss.backward(),
                 and the same update compiled apart (torch.compile of a function
                 of foreach ops on the parameters and their .grad)
  eager          the usual loop without compiling (for reference)
Threads: argv[2] (default 2).  Prints one JSON object a form:
{"row": "train_mlp", "peer": "torch_<form>", "step_ms": ..., "loss_last": ...}.
"""
import json
import statistics
import sys
import time

import numpy as np
import torch


def data():
    rng = np.random.default_rng(4)
    sizes = [784, 1024, 1024, 10]
    params = []
    for a, b in zip(sizes, sizes[1:]):
        params += [(rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32), np.zeros(b, np.float32)]
    x = rng.standard_normal((512, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 512)]
    return [torch.from_numpy(p.copy()) for p in params], torch.from_numpy(x), torch.from_numpy(y)


def loss_fn(params, x, y):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = torch.relu(h @ params[i] + params[i + 1])
    z = h @ params[-2] + params[-1]
    z = z - z.amax(dim=1, keepdim=True)
    return -torch.mean(torch.sum(y * (z - torch.log(torch.exp(z).sum(dim=1, keepdim=True))), dim=1))


def adam(ps, ms, vs, gs):
    for p, m, v, g in zip(ps, ms, vs, gs):
        m.mul_(0.9).add_(0.1 * g)
        v.mul_(0.999).add_(0.001 * (g * g))
        p.sub_(1e-3 * m / (torch.sqrt(v) + 1e-8))


def timed(step, runs):
    for _ in range(3):
        loss = step()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        loss = step()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3, float(loss)


def form_func(runs, compiled=True):
    params, x, y = data()
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    gv = torch.func.grad_and_value(loss_fn)

    def step(params, ms, vs, x, y):
        g, loss = gv(params, x, y)
        adam(params, ms, vs, g)
        return loss
    f = torch.compile(step) if compiled else step
    with torch.no_grad():
        return timed(lambda: f(params, ms, vs, x, y), runs)


def form_module(runs, compiled=True):
    params, x, y = data()
    for p in params:
        p.requires_grad_(True)
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    fwd = torch.compile(loss_fn) if compiled else loss_fn

    def upd(params, ms, vs):
        with torch.no_grad():
            adam(params, ms, vs, [p.grad for p in params])
    upd_c = torch.compile(upd) if compiled else upd

    def step():
        for p in params:
            p.grad = None
        loss = fwd(params, x, y)
        loss.backward()
        upd_c(params, ms, vs)
        return loss.detach()
    return timed(step, runs)


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    for name, fn in (("torch_compile_func", lambda: form_func(runs)),
                     ("torch_compile_module", lambda: form_module(runs)),
                     ("torch_eager", lambda: form_module(runs, compiled=False))):
        try:
            ms, loss = fn()
            print(json.dumps({"row": "train_mlp", "peer": name, "step_ms": ms, "loss_last": loss,
                              "threads": torch.get_num_threads(), "torch_version": torch.__version__}), flush=True)
        except Exception as e:  # a form this PyTorch cannot compile is reported, not fatal
            print(json.dumps({"row": "train_mlp", "peer": name, "error": "%s: %s" % (type(e).__name__, str(e)[:200])}),
                  flush=True)
