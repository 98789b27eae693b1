#!/usr/bin/env python3
"""JAX jit on the CPU on smelt's benchmark workloads (same formulas, n and inputs).

Run by `smelt-bench --peers` (the CPU benchmark) with the python of
build/jax-venv, where scripts/bench installs JAX from PyPI; JAX brings
numpy 2 with it, so bench/peers/peers.py keeps Debian's numpy.  Prints one
JSON object:

  {"workload", "n", "runs", "jax_ms",   # median, the ordinary call (new outputs)
   "jax_out_ms",                        # median, a donated output buffer (below)
   "jax_first_call_ms",                 # the first call, compilation included
   "jax_version", "jax_threads",
   "max_rel_err",                       # against a float64 NumPy reference, small instance
   "versions": {...}, "cpu_count", "devices"}

A time is the median of --runs calls of the jitted function after warm-up,
each from the call to block_until_ready on its outputs (gpu_peers.py's
timing, on the CPU device).  Inputs are put on the device once.  float32;
constants are Python floats, weakly typed, so float32 stays float32 (as in
gpu_peers.py).  XLA's CPU backend runs with its defaults: all cores.
layers100's barrier is lax.optimization_barrier, as on the GPU.

jax_out_ms: JAX writes into no array of the caller's; its way to reuse
memory is donation: jit(lambda out, *x: f(*x), donate_argnums=0) called with
the previous call's result as `out` (keep_unused=True: jit would drop the
unused argument), so XLA aliases the new result to that
buffer (jax_out_aliased says whether the buffer's address stayed the same).
--threads is recorded only: XLA's CPU client has no setting for its thread
pool, which takes every core (jax_threads).
"""
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the CPU peer, whatever else is installed

CHECK_N = 65536  # instance for max_rel_err (as smelt-bench's)


def main():
    from peers import parse_args
    ap, a = parse_args(__doc__.splitlines()[0])
    if a.n < 1024 or a.runs < 1:
        ap.error("need --n >= 1024 and --runs >= 1")

    import numpy as np
    import jax
    import jax.numpy as jnp
    from gpu_peers import any_formula, np_like, rel_err, timeit  # the GPU peers' formulas and timing
    from peers import inputs  # the CPU peers' inputs

    cpu = jax.devices("cpu")[0]
    fn = jax.jit(any_formula(np_like(jnp, jax.lax.optimization_barrier), a.workload))

    def block(out):
        for leaf in jax.tree_util.tree_leaves(out):
            leaf.block_until_ready()

    args = [jax.device_put(x, cpu) for x in inputs(a.workload, a.n, np.random.default_rng(1))]
    block(args)
    state = {}

    def call(*x):
        state["out"] = fn(*x)

    ms, first = timeit(call, args, a.runs, lambda: block(state.get("out")))
    # donated: the previous result's buffers become the next one's
    f = any_formula(np_like(jnp, jax.lax.optimization_barrier), a.workload)
    fd = jax.jit(lambda out, *x: f(*x), donate_argnums=0, keep_unused=True)  # kept: aliased
    state["out"] = fd(state["out"], *args)
    block(state["out"])
    ptr = lambda o: [l.unsafe_buffer_pointer() for l in jax.tree_util.tree_leaves(o)]
    before = ptr(state["out"])

    def call_out(*x):
        state["out"] = fd(state["out"], *x)

    ms_out, _ = timeit(call_out, args, a.runs, lambda: block(state.get("out")))
    aliased = ptr(state["out"]) == before
    state.clear()
    del args

    small = inputs(a.workload, min(a.n, CHECK_N), np.random.default_rng(2))
    refs = any_formula(np_like(np, lambda x: x), a.workload)(
        *[x.astype(np.float64) if x.dtype == np.float32 else x for x in small])
    out = fn(*[jax.device_put(x, cpu) for x in small])
    out = [np.asarray(t) for t in out] if isinstance(out, tuple) else np.asarray(out)
    if any(np.asarray(t).dtype != np.float32 for t in (out if isinstance(out, list) else [out])):
        print("jax_peers: %s: the result is not float32" % a.workload, file=sys.stderr)
    import jaxlib
    print(json.dumps({
        "workload": a.workload, "n": a.n, "runs": a.runs, "jax_ms": round(ms, 3), "jax_out_ms": round(ms_out, 3),
        "jax_out_aliased": aliased, **({} if aliased else {"jax_note": "the donated buffer was not reused"}),
        "jax_first_call_ms": round(first, 3),
        "jax_version": jax.__version__, "jax_threads": os.cpu_count(),
        "max_rel_err": float("%.3g" % rel_err(np, out, refs)),
        "versions": {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", None),
                     "numpy": np.__version__},
        "cpu_count": os.cpu_count(), "devices": [str(d) for d in jax.devices()]}))


if __name__ == "__main__":
    sys.exit(main())
