#!/usr/bin/env python3
"""GPU peers on smelt's benchmark workloads (same formulas, n and inputs).

PyTorch eager, torch.compile, CuPy (one ElementwiseKernel per elementwise
workload; its NumPy functions for the reductions and the models) and JAX
jit, in float32 on the first GPU, as `smelt-bench --device cuda --peers`
runs them.  The formulas of the reductions, mlp, attention and the layout
workloads are bench/peers/peers.py's (the CPU peers'), over a table of
NumPy's names (np_like) or PyTorch's (torch_like).  Prints one JSON object per workload:

  {"workload", "n", "device", "runs",
   "torch_eager_ms", "torch_compile_ms", "cupy_ms", "jax_ms",   # medians
   "first_call_ms": {...},  # the first call, compilation included
   "max_rel_err": {...},    # against a float64 NumPy reference, small instance
   "versions": {...}, "notes": {...}}

A time is the median of --runs runs after warm-up, measured with the host
clock between two device synchronisations (torch.cuda.synchronize, the CuPy
stream's synchronize, block_until_ready), as smelt's times are measured
around smelt_plan_run.  Inputs are copied to the device once.  Every peer is
optional: a missing package, a framework without a GPU or a failure gives
null and a note saying why.

layers100's barrier (a non-fusible copy between layers in smelt): x.clone()
for PyTorch eager, and torch.compile compiles one layer that is called 100
times with a clone between calls; CuPy runs the layer kernel then x.copy();
JAX jits all 100 layers with lax.optimization_barrier between them (XLA keeps
the layers apart without a copy).
"""
import argparse
import json
import os
import statistics
import sys
import time

# JAX would otherwise reserve 75% of GPU memory at import, starving the others
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ELEMENTWISE = ["add", "chain8", "gelu_tanh", "gelu", "swish", "where_exp", "adam", "bias_relu", "layers100"]
ROWS = ["softmax", "layernorm", "log_softmax", "rmsnorm", "sum_rows", "sum_cols", "mse", "xent", "transpose_add"]
MODELS = ["concat_relu", "mlp", "attention"]
WORKLOADS = ELEMENTWISE + ROWS + MODELS
# the CPU benchmark's too (peers.py's model_formula; not in the GPU benchmark's list)
CPU_MODELS = ["conv_bn_relu", "conv1d_gelu", "embed_ln"]
SMALL_N = 4 << 20   # layers100 on the GPU (bench/bench.c: GPU_N_SMALL)
CHECK_N = 65536     # instance for max_rel_err
PEERS = ["torch_eager", "torch_compile", "cupy", "jax"]

LR, B1, B2, EPS, T = 1e-3, 0.9, 0.999, 1e-8, 10
C1, C2 = 1 - B1 ** T, 1 - B2 ** T


# ---- the formulas, once, over a small table of operations (o) -------------
# Constants are Python floats: weakly typed in NumPy 2, PyTorch and JAX, so
# float32 stays float32 (and the float64 reference stays float64).

def layer(o, x, w, b):
    return o.relu(x * w + b) * 0.5 + x * 0.5


def formula(o, name):
    if name == "add":
        return lambda a, b: a + b
    if name == "chain8":
        return lambda a, b, c: ((((a * b + c) * a - b) * c + a) * b - c)
    if name == "gelu_tanh":
        return lambda x: 0.5 * x * (1.0 + o.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))
    if name == "gelu":
        return lambda x: 0.5 * x * (1.0 + o.erf(x * 0.7071067811865476))
    if name == "swish":
        return lambda x: x / (1.0 + o.exp(-x))
    if name == "where_exp":
        return lambda a, b, c: o.where(a > 0, a * b, o.exp(c)) + 1.0
    if name == "adam":
        def adam(p, g, m, v):
            m2 = B1 * m + (1 - B1) * g
            v2 = B2 * v + (1 - B2) * (g * g)
            p2 = p - LR * ((m2 / C1) / (o.sqrt(v2 / C2) + EPS))
            return p2, m2, v2
        return adam
    if name == "bias_relu":
        return lambda m, r: o.relu(m + r)
    if name == "layers100":
        def layers(x, w, b):
            for _ in range(100):
                x = o.barrier(layer(o, x, w, b))
            return x
        return layers
    raise SystemExit("gpu_peers: unknown workload " + name)


class Ops:
    def __init__(self, **kw):
        self.__dict__.update(kw)


# what the formulas call, by NumPy's names: numpy, cupy and jax.numpy have them
NP_NAMES = ["tanh", "exp", "sqrt", "log", "max", "sum", "mean", "take_along_axis", "maximum", "where",
            "concatenate", "swapaxes", "transpose", "reshape"]


def erf_of(mod):
    """erf where each module keeps it; NumPy has none: math.erf element by
    element (the float64 references of small instances only)"""
    if mod.__name__.startswith("jax"):
        import jax.scipy.special
        return jax.scipy.special.erf
    if mod.__name__.startswith("cupy"):
        import cupyx.scipy.special
        return cupyx.scipy.special.erf
    import math
    return mod.vectorize(math.erf, otypes=[mod.float64])


def np_like(mod, barrier):
    """an Ops table over a NumPy-like module (numpy, cupy, jax.numpy)"""
    o = Ops(**{k: getattr(mod, k) for k in NP_NAMES})
    o.relu, o.barrier = (lambda x: mod.maximum(x, 0.0)), barrier
    erf = []  # resolved at the first call: only the gelu workload needs it
    o.erf = lambda x: (erf or erf.append(erf_of(mod)) or erf)[0](x)
    o.take = lambda w, ids: mod.take(w, ids, axis=0)
    o.conv = conv_of(mod)
    return o


def conv_of(mod):
    """conv(x, w, pad, groups): ONNX Conv (NCW / NCHW, stride 1, no dilation, the same padding
    on every side) in the module's own convolution: jax.lax's, or for NumPy (the float64
    references) a product per tap"""
    if mod.__name__.startswith("jax"):
        import jax

        def conv(x, w, pad, groups):
            k = w.ndim - 2
            return jax.lax.conv_general_dilated(x, w, (1,) * k, [(pad, pad)] * k, feature_group_count=groups)
        return conv
    if mod.__name__.startswith("cupy"):
        return None

    def conv(x, w, pad, groups):
        np = mod
        k = w.ndim - 2
        xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * k)
        sp = [xp.shape[2 + i] - w.shape[2 + i] + 1 for i in range(k)]
        cin, cout = w.shape[1], w.shape[0] // groups
        out = np.zeros((x.shape[0], w.shape[0], *sp), dtype=np.result_type(x, w))
        for t in np.ndindex(*w.shape[2:]):
            xs = xp[(slice(None), slice(None)) + tuple(slice(t[i], t[i] + sp[i]) for i in range(k))]
            for g in range(groups):
                wt = w[(slice(g * cout, (g + 1) * cout), slice(None)) + t]  # [cout, cin]
                y = np.tensordot(wt, xs[:, g * cin:(g + 1) * cin], axes=([1], [1]))  # [cout, n, ...]
                out[:, g * cout:(g + 1) * cout] += np.moveaxis(y, 0, 1)
        return out
    return conv


def torch_like(torch):
    """the same table for PyTorch (its dim= and keepdim= for NumPy's axis= and keepdims=)"""
    def red(f):
        return lambda x, axis=None, keepdims=False: f(x) if axis is None else f(x, dim=axis, keepdim=keepdims)
    return Ops(tanh=torch.tanh, exp=torch.exp, sqrt=torch.sqrt, log=torch.log, relu=torch.relu, erf=torch.erf,
               max=red(torch.amax), sum=red(torch.sum), mean=red(torch.mean),
               take_along_axis=lambda x, t, axis: torch.take_along_dim(x, t, dim=axis),
               maximum=torch.clamp_min, where=torch.where, concatenate=lambda xs, axis=0: torch.cat(xs, dim=axis),
               swapaxes=torch.swapaxes, transpose=lambda x, axes: x.permute(*axes), reshape=torch.reshape,
               barrier=lambda x: x.clone(), take=lambda w, ids: torch.nn.functional.embedding(ids, w),
               conv=lambda x, w, pad, groups: (torch.nn.functional.conv2d if w.dim() == 4 else
                                               torch.nn.functional.conv1d)(x, w, padding=pad, groups=groups))


def any_formula(o, name):
    """every workload's formula over an Ops table: the elementwise ones here,
    the reductions' and the models' in peers.py (shared with the CPU peers)"""
    from peers import model_formula, row_formula
    if name in MODELS or name in CPU_MODELS:
        return model_formula(o, name)
    return row_formula(o, name) or formula(o, name)


# ---- CuPy: one ElementwiseKernel per workload ------------------------------

def _f(v):
    return repr(float(v)) + "f"


CUPY_SRC = {
    "add": ("float32 a, float32 b", "float32 y", "y = a + b"),
    "chain8": ("float32 a, float32 b, float32 c", "float32 y",
               "y = ((((a * b + c) * a - b) * c + a) * b - c)"),
    "gelu_tanh": ("float32 x", "float32 y",
                  "y = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * (x * x * x))))"),
    "gelu": ("float32 x", "float32 y", "y = 0.5f * x * (1.0f + erff(x * 0.7071067811865476f))"),
    "swish": ("float32 x", "float32 y", "y = x / (1.0f + expf(-x))"),
    "where_exp": ("float32 a, float32 b, float32 c", "float32 y", "y = (a > 0.0f ? a * b : expf(c)) + 1.0f"),
    "adam": ("float32 p, float32 g, float32 m, float32 v", "float32 p2, float32 m2, float32 v2",
             "m2 = {b1} * m + {nb1} * g; v2 = {b2} * v + {nb2} * (g * g); "
             "p2 = p - {lr} * ((m2 / {c1}) / (sqrtf(v2 / {c2}) + {eps}));".format(
                 b1=_f(B1), nb1=_f(1 - B1), b2=_f(B2), nb2=_f(1 - B2), lr=_f(LR), c1=_f(C1),
                 c2=_f(C2), eps=_f(EPS))),
    "bias_relu": ("float32 m, float32 r", "float32 y", "y = fmaxf(m + r, 0.0f)"),
    "layers100": ("float32 x, float32 w, float32 b", "float32 y",
                  "y = fmaxf(x * w + b, 0.0f) * 0.5f + x * 0.5f"),
}


def cupy_fn(cp, name):
    ins, outs, body = CUPY_SRC[name]
    k = cp.ElementwiseKernel(ins, outs, body, "peer_" + name)
    if name == "layers100":
        def layers(x, w, b):
            for _ in range(100):
                x = k(x, w, b).copy()  # the barrier
            return x
        return layers
    return k


# ---- timing ----------------------------------------------------------------

def timeit(fn, args, runs, sync, warmup=2):
    """(median ms, first call ms): host clock between two synchronisations"""
    sync()
    t0 = time.perf_counter()
    fn(*args)
    sync()
    first = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup - 1):
        fn(*args)
    ts = []
    for _ in range(runs):
        sync()
        t0 = time.perf_counter()
        fn(*args)
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), first


def rel_err(np, outs, refs):
    """max over outputs of ||out - ref||inf / ||ref||inf"""
    if not isinstance(outs, (tuple, list)):
        outs, refs = [outs], [refs]
    worst = 0.0
    for o, r in zip(outs, refs):
        o = np.asarray(o, dtype=np.float64)
        if o.shape != r.shape or np.isnan(o).any() != np.isnan(r).any():
            return float("inf")
        den = float(np.max(np.abs(r))) or 1.0
        worst = max(worst, float(np.max(np.abs(o - r))) / den)
    return worst


def note_of(e):
    s = "%s: %s" % (type(e).__name__, e)
    return s.splitlines()[0][:300] if s.strip() else type(e).__name__


# ---- the peers ---------------------------------------------------------------
# Each returns (median ms, first call ms, max_rel_err, device name) or raises.

def run_torch(np, name, host, small, refs, runs, compiled, versions):
    import torch
    versions["torch"] = torch.__version__
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    dev = torch.device("cuda")
    o = torch_like(torch)
    if not compiled:
        fn = any_formula(o, name)
    elif name == "layers100":
        lay = torch.compile(lambda x, w, b: layer(o, x, w, b), dynamic=False)

        def fn(x, w, b):
            for _ in range(100):
                x = lay(x, w, b).clone()  # the barrier, outside the compiled layer
            return x
    else:
        fn = torch.compile(any_formula(o, name), dynamic=False)
    sync = torch.cuda.synchronize
    with torch.no_grad():
        args = [torch.from_numpy(a).to(dev) for a in host]
        ms, first = timeit(fn, args, runs, sync, warmup=3 if compiled else 2)
        del args
        sargs = [torch.from_numpy(a).to(dev) for a in small]
        out = fn(*sargs)
        out = [t.cpu().numpy() for t in out] if isinstance(out, tuple) else out.cpu().numpy()
        err = rel_err(np, out, refs)
        del sargs
    gpu = torch.cuda.get_device_name(0)
    torch.cuda.empty_cache()
    return ms, first, err, gpu


def run_cupy(np, name, host, small, refs, runs, versions):
    import cupy as cp
    versions["cupy"] = cp.__version__
    if cp.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError("cupy sees no CUDA device")
    if name in CUPY_SRC:
        fn = cupy_fn(cp, name)
    else:  # the reductions and models: CuPy's NumPy functions, a kernel (or cuBLAS call) each
        fn = any_formula(np_like(cp, lambda x: x.copy()), name)
    sync = lambda: cp.cuda.get_current_stream().synchronize()
    args = [cp.asarray(a) for a in host]
    if name in CUPY_SRC and name != "layers100":  # outputs preallocated, as smelt's are
        nout = 3 if name == "adam" else 1
        shape = args[0].shape
        args += [cp.empty(shape, dtype=cp.float32) for _ in range(nout)]
    ms, first = timeit(fn, args, runs, sync)
    del args
    out = fn(*[cp.asarray(a) for a in small])
    out = [cp.asnumpy(t) for t in out] if isinstance(out, tuple) else cp.asnumpy(out)
    err = rel_err(np, out, refs)
    props = cp.cuda.runtime.getDeviceProperties(0)
    gpu = props["name"].decode() if isinstance(props.get("name"), bytes) else props.get("name")
    cp.get_default_memory_pool().free_all_blocks()
    return ms, first, err, gpu


def run_jax(np, name, host, small, refs, runs, versions):
    import jax
    import jax.numpy as jnp
    versions["jax"] = jax.__version__
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        raise RuntimeError("JAX has no GPU backend (devices: %s)" % jax.devices())
    fn = jax.jit(any_formula(np_like(jnp, jax.lax.optimization_barrier), name))

    def block(out):
        for leaf in jax.tree_util.tree_leaves(out):
            leaf.block_until_ready()

    args = [jax.device_put(a, gpus[0]) for a in host]
    block(args)
    state = {}

    def call(*a):
        state["out"] = fn(*a)

    sync = lambda: block(state.get("out"))
    ms, first = timeit(call, args, runs, sync)
    state.clear()
    del args
    out = fn(*[jax.device_put(a, gpus[0]) for a in small])
    out = [np.asarray(t) for t in out] if isinstance(out, tuple) else np.asarray(out)
    err = rel_err(np, out, refs)
    return ms, first, err, getattr(gpus[0], "device_kind", None)


def run_workload(name, n, runs, which):
    row = {"workload": name, "n": n, "device": None, "runs": runs}
    for p in PEERS:
        row[p + "_ms"] = None
    row["first_call_ms"], row["max_rel_err"] = {}, {}
    versions, notes = {}, {}
    try:
        import numpy as np
        versions["numpy"] = np.__version__
    except Exception as e:  # no NumPy: nothing can run
        for p in PEERS:
            notes[p] = "skipped: numpy is needed for the inputs (%s)" % note_of(e)
        row["versions"], row["notes"] = versions, notes
        return row
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peers import inputs  # the CPU peers' inputs: the same data on the GPU

    rng = np.random.default_rng(1)
    host = inputs(name, n, rng)
    row["shape"] = list(host[0].shape)  # the first input's (smelt-bench's JSON rows carry it too)
    small = inputs(name, min(n, CHECK_N), np.random.default_rng(2))
    refs = any_formula(np_like(np, lambda x: x), name)(
        *[a.astype(np.float64) if a.dtype == np.float32 else a for a in small])
    runners = {
        "torch_eager": lambda: run_torch(np, name, host, small, refs, runs, False, versions),
        "torch_compile": lambda: run_torch(np, name, host, small, refs, runs, True, versions),
        "cupy": lambda: run_cupy(np, name, host, small, refs, runs, versions),
        "jax": lambda: run_jax(np, name, host, small, refs, runs, versions),
    }
    for p in PEERS:
        if p not in which:
            notes[p] = "not requested"
            continue
        try:
            ms, first, err, gpu = runners[p]()
        except ImportError as e:
            notes[p] = "skipped: %s" % note_of(e)
            continue
        except Exception as e:  # no GPU, compiler missing, out of memory, ...
            notes[p] = "failed: %s" % note_of(e)
            continue
        row[p + "_ms"] = round(ms, 3)
        row["first_call_ms"][p] = round(first, 3)
        row["max_rel_err"][p] = float("%.3g" % err)
        row["device"] = row["device"] or gpu
    if "cupy" in row["first_call_ms"]:
        notes.setdefault("cupy_first_call", "CuPy keeps compiled kernels in ~/.cupy/kernel_cache: "
                                            "its first call may not compile")
    row["versions"], row["notes"] = versions, notes
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="all", help="one of %s, several separated by commas, or all" % ", ".join(WORKLOADS))
    ap.add_argument("--n", type=int, default=64 << 20)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS))
    a = ap.parse_args()
    names = WORKLOADS if a.workload == "all" else a.workload.split(",")
    if any(w not in WORKLOADS for w in names):
        ap.error("unknown workload %s" % a.workload)
    which = set(a.peers.split(","))
    if a.n < 1024 or a.runs < 1 or not which <= set(PEERS):
        ap.error("need --n >= 1024, --runs >= 1 and peers among " + ",".join(PEERS))
    for w in names:
        # as bench/bench.c: layers100 is smaller (its unfused intermediates)
        n = min(a.n, SMALL_N) if w == "layers100" and a.workload == "all" else a.n
        print(json.dumps(run_workload(w, n, a.runs, which)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
